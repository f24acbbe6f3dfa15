// The `keys` interface's other calls: uuid keys, and answerLines (the JSON-lines
// batch contract of `intentkey derive --jsonl`, one answer per request line; a
// line that cannot cross into the component gets the core's answer for an
// unreadable line).
import { inBatches } from './batches.js';
import { isWellFormed, policyText } from './values.js';

/**
 * The uuid-key and answer-line calls over one API's instance (see instance.js).
 * @param {{ instance: Function, call: Function }} host
 */
export function linesFactory({ instance, call }) {
  function newUuidKey() {
    const inst = instance();
    return call(inst, (keys) => keys.newUuidKey());
  }

  function uuidKey(randomBytes) {
    if (!(randomBytes instanceof Uint8Array)) {
      throw new TypeError('uuidKey takes a Uint8Array of 16 random bytes');
    }
    const inst = instance();
    return call(inst, (keys) => keys.uuidKey(randomBytes));
  }

  function answerLines(lines, options = {}) {
    if (!Array.isArray(lines)) throw new TypeError('answerLines takes an array of strings');
    if (options === null || typeof options !== 'object') {
      throw new TypeError('answerLines options are an object: { policy }');
    }
    const policyJson = policyText(options.policy);
    let bad = null;
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      if (typeof line !== 'string') throw new TypeError(`answerLines: line ${i} is not a string`);
      if (!isWellFormed(line)) (bad ??= []).push(i);
    }
    const inst = instance();
    const answer = (list) =>
      inBatches(list, (line) => line.length, (batch) =>
        call(inst, (keys) =>
          policyJson === undefined ? keys.answerLines(batch) : keys.answerLinesWithPolicy(policyJson, batch),
        ),
      );
    if (bad === null) return answer(lines);
    const skip = new Set(bad);
    const answers = answer(lines.filter((_, i) => !skip.has(i)));
    const out = new Array(lines.length);
    for (let i = 0, j = 0; i < lines.length; i++) {
      out[i] = skip.has(i) ? unreadableLineAnswer() : answers[j++];
    }
    return out;
  }

  let unreadable = null;
  /**
   * The core's answer for a line that is not UTF-8 text (or, one level up, a
   * JavaScript string with a lone surrogate): such a line cannot cross into
   * answerLines, so it gets this answer instead.
   */
  function unreadableLineAnswer() {
    if (unreadable === null) unreadable = call(instance(), (keys) => keys.unreadableLineAnswer());
    return unreadable;
  }

  return { newUuidKey, uuidKey, answerLines, unreadableLineAnswer };
}
