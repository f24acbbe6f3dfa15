// The errors every entry throws: the core's (a stable WIT error code and the field
// at fault) and a trap (a bug in intentkey). No module here imports anything, so
// every entry (Node, browsers, workerd) can share them.

/** An error the intentkey core reported: a stable WIT error code and the field at fault. */
export class IntentkeyError extends Error {
  /**
   * @param {string} code kebab-case WIT error code, e.g. "unclassified-fields"
   * @param {string} message what was wrong and what to do (never a secret)
   * @param {string | undefined} [field] the field or policy path at fault
   * @param {{ cause?: unknown }} [options] e.g. the driver error behind a store error
   */
  constructor(code, message, field, options) {
    super(message, options);
    this.name = 'IntentkeyError';
    this.code = code;
    this.field = field;
  }
}

/** The component trapped: a bug in intentkey. The instance it ran in is discarded. */
export class IntentkeyTrapError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'IntentkeyTrapError';
  }
}
