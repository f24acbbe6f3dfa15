// The intentkey API over the transpiled component, shared by the Node and the
// browser entries. Every rule (normalization, canonical JSON, HMAC, error codes and
// messages) lives in the Rust core inside the component; this file only converts
// JavaScript values to the WIT types and back, supplies the component's imports
// (secrets and randomness) and turns the component's errors into IntentkeyError.
import { instantiate } from '../vendor/intentkey.js';
import { createClaims } from './claims.js';

/** An error the intentkey core reported: a stable WIT error code and the field at fault. */
export class IntentkeyError extends Error {
  /**
   * @param {string} code kebab-case WIT error code, e.g. "unclassified-fields"
   * @param {string} message what was wrong and what to do (never a secret)
   * @param {string | undefined} [field] the field or policy path at fault
   */
  constructor(code, message, field) {
    super(message);
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


const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;
const U32_MAX = 2 ** 32 - 1;

const isWellFormed =
  typeof String.prototype.isWellFormed === 'function'
    ? (s) => s.isWellFormed()
    : (s) => !/\p{Surrogate}/u.test(s.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g, ''));

/**
 * Builds the API over a way of getting the compiled core modules.
 * @param {(name: string) => WebAssembly.Module} getCoreModule synchronous; called
 *   once per core module name, the result is cached by the caller
 */
export function createApi(getCoreModule) {
  let current = null;
  let secretSeq = 0;

  /** A fresh component instance with its own imports. */
  function newInstance() {
    const secretStore = new Map();
    const secrets = {
      getSecret(secretId) {
        const bytes = secretStore.get(secretId);
        if (bytes === undefined) {
          // A WIT `err` payload: jco lowers an exception's own `payload` property.
          throw hostError('invalid-secret', 'secret', 'the secret is unknown to the host');
        }
        return bytes;
      },
    };
    const random = {
      randomBytes(len) {
        const bytes = new Uint8Array(len);
        globalThis.crypto.getRandomValues(bytes);
        return bytes;
      },
    };
    // jco's sync mode reads the unversioned keys; its .d.ts names the versioned ones.
    const imports = {
      'intentkey:core/secrets': secrets,
      'intentkey:core/random': random,
      'intentkey:core/types': {},
      'intentkey:core/secrets@0.1.0': secrets,
      'intentkey:core/random@0.1.0': random,
      'intentkey:core/types@0.1.0': {},
      'intentkey:core/store': noStore,
      'intentkey:core/gateway': noGateway,
      'intentkey:core/store@0.1.0': noStore,
      'intentkey:core/gateway@0.1.0': noGateway,
    };
    const root = instantiate(getCoreModule, imports);
    return { keys: root.keys, claims: root.claims, secretStore, poisoned: false };
  }

  function instance() {
    if (current === null) current = newInstance();
    return current;
  }

  /** Runs one component call, translating its errors. */
  function call(inst, fn) {
    if (inst.poisoned) {
      throw new IntentkeyTrapError(
        'intentkey: this keyer ran in a component instance that trapped earlier; create a new keyer',
      );
    }
    try {
      return fn(inst.keys);
    } catch (e) {
      throw translate(e, inst);
    }
  }

  function translate(e, inst) {
    const payload = e !== null && typeof e === 'object' ? e.payload : undefined;
    if (payload && typeof payload.code === 'string') {
      return new IntentkeyError(payload.code, payload.message, payload.field ?? undefined);
    }
    if (e instanceof IntentkeyError) return e;
    // Anything else escaped the guest mid-call (a trap, or an exception thrown through
    // it): its state can no longer be trusted. Later calls get a fresh instance.
    inst.poisoned = true;
    if (current === inst) current = null;
    const what = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    return new IntentkeyTrapError(
      `intentkey: the component trapped (${what}); this is a bug in intentkey, please report it`,
      { cause: e },
    );
  }

  class Keyer {
    #inst;
    #resource;

    constructor(inst, resource) {
      this.#inst = inst;
      this.#resource = resource;
    }

    /** The component resource, or a clear error once disposed. */
    #live() {
      if (this.#resource === null) throw new TypeError('this keyer was disposed; create a new one');
      return this.#resource;
    }

    derive(intent) {
      const wit = toIntent(intent);
      const r = this.#live();
      return call(this.#inst, () => r.derive(wit));
    }

    deriveMany(intents) {
      if (!Array.isArray(intents)) throw new TypeError('deriveMany takes an array of intents');
      const out = new Array(intents.length);
      const wit = [];
      const where = [];
      for (let i = 0; i < intents.length; i++) {
        try {
          wit.push(toIntent(intents[i]));
          where.push(i);
        } catch (e) {
          if (!(e instanceof IntentkeyError)) throw e;
          out[i] = { error: e };
        }
      }
      const r = this.#live();
      const results = call(this.#inst, () => r.deriveMany(wit));
      for (let j = 0; j < results.length; j++) {
        const { tag, val } = results[j];
        out[where[j]] =
          tag === 'ok' ? { key: val } : { error: new IntentkeyError(val.code, val.message, val.field ?? undefined) };
      }
      return out;
    }

    material(intent) {
      const wit = toIntent(intent);
      const r = this.#live();
      return call(this.#inst, () => r.material(wit));
    }

    intentKey(tenantId, intentId, keyHexLength) {
      const tenant = witString(tenantId, 'invalid-tenant-id', 'tenant_id');
      const id = witString(intentId, 'invalid-intent-id', 'intent_id');
      let length;
      if (keyHexLength !== undefined && keyHexLength !== null) {
        if (!Number.isInteger(keyHexLength) || keyHexLength < 0 || keyHexLength > U32_MAX) {
          throw new IntentkeyError(
            'invalid-key-length',
            'the key length must be a whole number of hex characters, 32 to 64',
            'keyHexLength',
          );
        }
        length = keyHexLength;
      }
      const r = this.#live();
      return call(this.#inst, () => r.intentKey(tenant, id, length));
    }

    fingerprint(tenantId, actionType, payload) {
      const [t, a, p] = fingerprintArgs(tenantId, actionType, payload);
      const r = this.#live();
      return call(this.#inst, () => r.fingerprint(t, a, p));
    }

    fingerprintMaterial(tenantId, actionType, payload) {
      const [t, a, p] = fingerprintArgs(tenantId, actionType, payload);
      const r = this.#live();
      return call(this.#inst, () => r.fingerprintMaterial(t, a, p));
    }

    fingerprintMatches(tenantId, actionType, payload, stored) {
      const [t, a, p] = fingerprintArgs(tenantId, actionType, payload);
      if (typeof stored !== 'string') throw new TypeError('the stored fingerprint must be a string');
      const r = this.#live();
      return call(this.#inst, () => r.fingerprintMatches(t, a, p, stored));
    }

    /** Frees the keyer (and the secret it holds) inside the component now. */
    dispose() {
      const resource = this.#resource;
      if (resource === null) return;
      this.#resource = null;
      const drop = resource[Symbol.dispose] ?? resource[Symbol.for('dispose')];
      if (typeof drop === 'function' && !this.#inst.poisoned) drop.call(resource);
    }

    get [Symbol.toStringTag]() {
      return 'Keyer';
    }
  }

  function createKeyer(options = {}) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError('createKeyer takes an options object: { secret, policy }');
    }
    const secret = secretBytes(options.secret);
    const policyJson = policyText(options.policy);
    const inst = instance();
    const secretId = `secret-${++secretSeq}`;
    inst.secretStore.set(secretId, secret);
    try {
      const resource = call(inst, (keys) => keys.Keyer.create(policyJson, secretId));
      return new Keyer(inst, resource);
    } finally {
      // The guest copied the bytes into the keyer resource; keep no copy here.
      inst.secretStore.delete(secretId);
      secret.fill(0);
    }
  }

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
    const answer = (batch) =>
      call(inst, (keys) =>
        policyJson === undefined ? keys.answerLines(batch) : keys.answerLinesWithPolicy(policyJson, batch),
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

  // The claim, replay and recovery decisions (pure functions of the core's
  // `claims` interface), on the current instance.
  const claims = createClaims((fn) => {
    const inst = instance();
    return call(inst, () => fn(inst.claims));
  });

  return { createKeyer, newUuidKey, uuidKey, answerLines, unreadableLineAnswer, claims };
}

// The component's `guard` drives a store and a destination imported from the
// host. This package drives its stores itself (async ones too) through the core's
// `claims` decisions (src/guard.js), so it supplies none: the guard answers with
// this store error, never a trap, and a look-up is unknown (never re-executes).
const NO_STORE = 'no store: the npm package drives its stores through the claims decisions (createGuard)';
function storeError() {
  const e = new Error(NO_STORE);
  e.payload = NO_STORE;
  throw e;
}
const noStore = { insertIfAbsent: storeError, get: storeError, replaceInFlight: storeError };
const noGateway = { ask: () => ({ tag: 'unknown' }), readYourWrites: () => false };

function hostError(code, field, message) {
  const e = new Error(message);
  e.payload = { code, field, message };
  return e;
}

function witString(value, code, field) {
  if (typeof value !== 'string') {
    throw new IntentkeyError(code, `\`${field}\` must be a string`, field);
  }
  if (!isWellFormed(value)) {
    throw new IntentkeyError(code, `\`${field}\` is not well-formed Unicode (a lone surrogate)`, field);
  }
  return value;
}

function payloadText(payload) {
  let text = payload;
  if (typeof payload !== 'string') {
    try {
      text = JSON.stringify(payload);
    } catch (e) {
      throw new IntentkeyError(
        'invalid-payload',
        `the payload cannot be written as JSON (${e instanceof Error ? e.message : e}); ` +
          'pass BigInt or exact numbers as strings, or pass the payload as JSON text',
        'payload',
      );
    }
    if (typeof text !== 'string') {
      throw new IntentkeyError('invalid-payload', 'the payload must be a JSON object', 'payload');
    }
  }
  if (!isWellFormed(text)) {
    // What the core says for a lone surrogate escape (\ud800) in payload text.
    throw new IntentkeyError(
      'invalid-payload',
      '`payload` is not well-formed Unicode (a lone surrogate); send a JSON object',
      'payload',
    );
  }
  return text;
}

function toEpoch(epoch) {
  let value;
  if (typeof epoch === 'bigint') value = epoch;
  else if (typeof epoch === 'number' && Number.isSafeInteger(epoch)) value = BigInt(epoch);
  if (value === undefined || value < I64_MIN || value > I64_MAX) {
    throw new IntentkeyError(
      'invalid-epoch',
      '`intent_epoch` must be an integer count of seconds within the signed 64-bit range ' +
        '(a safe-integer number or a bigint)',
      'intent_epoch',
    );
  }
  return value;
}

function toIntent(intent) {
  if (intent === null || typeof intent !== 'object') {
    throw new TypeError('an intent is an object: { tenantId, actionType, payload, intentEpoch }');
  }
  return {
    tenantId: witString(intent.tenantId, 'invalid-tenant-id', 'tenant_id'),
    actionType: witString(intent.actionType, 'invalid-action-type', 'action_type'),
    payloadJson: payloadText(intent.payload),
    intentEpoch: toEpoch(intent.intentEpoch),
  };
}

function fingerprintArgs(tenantId, actionType, payload) {
  return [
    witString(tenantId, 'invalid-tenant-id', 'tenant_id'),
    witString(actionType, 'invalid-action-type', 'action_type'),
    payloadText(payload),
  ];
}

function policyText(policy) {
  if (policy === undefined || policy === null) return undefined;
  if (typeof policy === 'string') {
    if (!isWellFormed(policy)) {
      throw new IntentkeyError('invalid-policy', 'the policy is not well-formed Unicode', '');
    }
    return policy;
  }
  let text;
  try {
    text = JSON.stringify(policy);
  } catch (e) {
    throw new IntentkeyError(
      'invalid-policy',
      `the policy cannot be written as JSON (${e instanceof Error ? e.message : e})`,
      '',
    );
  }
  if (typeof text !== 'string') {
    throw new IntentkeyError('invalid-policy', 'the policy must be a JSON object', '');
  }
  return text;
}

const HEX = /^(?:[0-9a-fA-F]{2})*$/;

/** A private copy of the secret's bytes (zeroed once the guest has taken them). */
function secretBytes(secret) {
  if (typeof secret === 'string') {
    if (!HEX.test(secret)) {
      throw new IntentkeyError(
        'invalid-secret',
        'the secret is not hex: give an even number of 0-9/a-f digits with no spaces',
        'secret',
      );
    }
    const bytes = new Uint8Array(secret.length / 2);
    for (let i = 0; i < bytes.length; i++) {
      bytes[i] = Number.parseInt(secret.slice(2 * i, 2 * i + 2), 16);
    }
    return bytes;
  }
  if (secret instanceof Uint8Array) return new Uint8Array(secret);
  if (secret instanceof ArrayBuffer) return new Uint8Array(secret.slice(0));
  throw new IntentkeyError(
    'invalid-secret',
    'the secret is missing: give at least 32 random bytes as a Uint8Array or a hex string',
    'secret',
  );
}
