// Imports for the jco candidates that jco-candidates.mjs compares (benchmark only).
export const secretStore = new Map();
export const secrets = {
  getSecret(id) {
    const bytes = secretStore.get(id);
    if (bytes === undefined) {
      const e = new Error('unknown secret');
      e.payload = { code: 'invalid-secret', field: 'secret', message: 'unknown secret' };
      throw e;
    }
    return bytes;
  },
};
export const random = {
  randomBytes(len) {
    return globalThis.crypto.getRandomValues(new Uint8Array(len));
  },
};
