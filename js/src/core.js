// The intentkey API over a transpiled component, shared by the Node and the
// browser entries. Every rule (normalization, canonical JSON, HMAC, error codes and
// messages, every claim decision and the order of every store operation) lives in
// the Rust core inside the component; this file only converts JavaScript values to
// the WIT types and back, supplies the component's imports (secrets, randomness,
// and in world `intentkey` the store and the destination) and turns the
// component's errors into IntentkeyError.
import { createClaims } from './claims.js';
import { endpointFactory, oneOf } from './endpoint.js';
import { IntentkeyError, IntentkeyTrapError } from './errors.js';

export { IntentkeyError, IntentkeyTrapError };

const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;
const U32_MAX = 2 ** 32 - 1;

// deriveMany and answerLines hand their lists to the component in batches of at
// most 1,000 items and about 4 Mi characters (a longer item goes alone): the
// guest's memory then holds one batch at a time and reuses it. With a whole list
// in one call, the guest's memory grew in many small steps and, past a few
// hundred thousand items, V8 ran one full garbage collection after another
// while it grew (118 at 160,000 lines, against 2 at 100,000): the time grew
// with the square of the list (1,000,000 lines in one answerLines call: 691 s;
// in batches: about 10 s; bench/RESOURCES.md). Each item is answered on its
// own, so batches change no answer.
const BATCH_ITEMS = 1000;
const BATCH_CHARS = 4 << 20;

/** [start, end) index ranges cutting `items` into batches; one empty range for an empty list. */
function batchRanges(items, chars) {
  const ranges = [];
  let start = 0;
  let size = 0;
  for (let i = 0; i < items.length; i++) {
    size += chars(items[i]);
    if (i + 1 - start >= BATCH_ITEMS || size >= BATCH_CHARS) {
      ranges.push([start, i + 1]);
      start = i + 1;
      size = 0;
    }
  }
  if (start < items.length || items.length === 0) ranges.push([start, items.length]);
  return ranges;
}

/** `answer` applied batch by batch (see BATCH_ITEMS), its answers concatenated in order. */
function inBatches(items, chars, answer) {
  const ranges = batchRanges(items, chars);
  if (ranges.length === 1) return answer(items);
  const out = [];
  for (const [start, end] of ranges) {
    for (const a of answer(items.slice(start, end))) out.push(a);
  }
  return out;
}

const isWellFormed =
  typeof String.prototype.isWellFormed === 'function'
    ? (s) => s.isWellFormed()
    : (s) => !/\p{Surrogate}/u.test(s.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g, ''));

/**
 * Builds the API over one transpiled component.
 * @param {{
 *   instantiate: Function,
 *   getCoreModule: (name: string) => WebAssembly.Module,
 *   world: 'intentkey' | 'pure',
 *   prepare?: (options?: object) => Promise<void>,
 * }} component jco's `instantiate` (sync mode); a synchronous way to get each
 *   compiled core module (cached by the caller); the component's world: `intentkey`
 *   imports a store and a destination and exports `guard`, `pure` does neither;
 *   `prepare`, when the entry can compile the core modules ahead of use: it
 *   compiles them asynchronously (what `init()` awaits)
 */
export function createApi({ instantiate, getCoreModule, world, prepare }) {
  if (world !== 'intentkey' && world !== 'pure') throw new TypeError(`unknown component world ${world}`);
  let current = null;
  let secretSeq = 0;

  // What the component's `guard` export drives (world `intentkey`): the synchronous
  // store and look-up of the one guard call in progress. Set right before each
  // component call and cleared right after it; JavaScript runs one call at a time,
  // so there is never more than one.
  const host = { store: null, ask: null, cause: null };

  function activeStore(op) {
    const store = host.store;
    if (store === null) {
      // Thrown through the guest on purpose: the call fails as a trap (a bug here).
      throw new Error(
        `intentkey: the component called store.${op} while no store was active; ` +
          'this is a bug in the intentkey package, please report it',
      );
    }
    return store;
  }

  /** A store's throw as the WIT `store-error` jco lowers (`payload`); the original is kept as the cause. */
  function storeFailure(e) {
    host.cause = e;
    const payload = e !== null && typeof e === 'object' ? e.payload : undefined;
    if (
      payload !== null &&
      typeof payload === 'object' &&
      (payload.tag === 'unavailable' || payload.tag === 'failed') &&
      typeof payload.val === 'string'
    ) {
      return e;
    }
    const message = e instanceof Error ? e.message : String(e);
    const failure = new Error(message);
    failure.payload = { tag: 'failed', val: `the store failed: ${message}` };
    return failure;
  }

  // The WIT `store` import: each operation goes to the store the guard is driving.
  const storeImport = {
    insert(record) {
      const s = activeStore('insert');
      try {
        return s.insert(record);
      } catch (e) {
        throw storeFailure(e);
      }
    },
    get(key) {
      const s = activeStore('get');
      try {
        return s.get(key);
      } catch (e) {
        throw storeFailure(e);
      }
    },
    complete(completion) {
      const s = activeStore('complete');
      try {
        return s.complete(completion);
      } catch (e) {
        throw storeFailure(e);
      }
    },
    replace(replacement) {
      const s = activeStore('replace');
      try {
        return s.replace(replacement);
      } catch (e) {
        throw storeFailure(e);
      }
    },
    release(request) {
      const s = activeStore('release');
      try {
        return s.release(request);
      } catch (e) {
        throw storeFailure(e);
      }
    },
    list(status, limit) {
      const s = activeStore('list');
      try {
        return s.list(status, limit);
      } catch (e) {
        throw storeFailure(e);
      }
    },
    purge(now) {
      const s = activeStore('purge');
      try {
        return s.purge(now);
      } catch (e) {
        throw storeFailure(e);
      }
    },
  };

  // The WIT `gateway` import: the synchronous look-up of the recovery in progress.
  // With none active it never answers on its own (not even `unknown`): it fails.
  const gatewayImport = {
    ask(key) {
      const ask = host.ask;
      if (ask === null) {
        throw new Error(
          'intentkey: the component asked the destination (gateway.ask) while no synchronous look-up ' +
            'was active; this is a bug in the intentkey package, please report it',
        );
      }
      return ask(key);
    },
  };

  // Randomness for the `random` import and owner tokens: crypto.getRandomValues,
  // drawn in blocks (one call per 4 KiB, as Node's own randomUUID caches its
  // entropy): a call costs microseconds, and every claim needs 16 bytes.
  const POOL = 4096;
  let pool = new Uint8Array(0);
  let at = 0;
  function randomBytes(len) {
    if (len > POOL) {
      const bytes = new Uint8Array(len);
      for (let i = 0; i < len; i += 65536) globalThis.crypto.getRandomValues(bytes.subarray(i, Math.min(len, i + 65536)));
      return bytes;
    }
    if (at + len > pool.length) {
      const next = new Uint8Array(POOL);
      globalThis.crypto.getRandomValues(next);
      pool = next;
      at = 0;
    }
    // A copy: a view would keep the whole block reachable from the caller.
    const bytes = pool.slice(at, at + len);
    pool.fill(0, at, at + len);
    at += len;
    return bytes;
  }

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
    const random = { randomBytes };
    // jco's sync mode reads the unversioned keys; its .d.ts names the versioned ones.
    const interfaces = { secrets, random, types: {} };
    if (world === 'intentkey') {
      interfaces.store = storeImport;
      interfaces.gateway = gatewayImport;
    }
    const imports = {};
    for (const [name, value] of Object.entries(interfaces)) {
      imports[`intentkey:core/${name}`] = value;
      imports[`intentkey:core/${name}@0.5.0`] = value;
    }
    const root = instantiate(getCoreModule, imports);
    return {
      keys: root.keys,
      claims: root.claims,
      schema: root.schema,
      flows: root.flows,
      guard: root.guard,
      http: root.http,
      secretStore,
      poisoned: false,
      answers: null,
    };
  }

  function instance() {
    if (current === null) current = newInstance();
    return current;
  }

  /** Runs one component call on `inst`, translating its errors. */
  function callOn(inst, fn) {
    if (inst.poisoned) {
      throw new IntentkeyTrapError(
        'intentkey: this object lives in a component instance that trapped earlier; create a new one',
      );
    }
    try {
      return fn(inst);
    } catch (e) {
      throw translate(e, inst);
    }
  }

  /** The key API's calls: fn gets the instance's `keys` exports. */
  function call(inst, fn) {
    return callOn(inst, (i) => fn(i.keys));
  }

  function translate(e, inst, cause) {
    const payload = e !== null && typeof e === 'object' ? e.payload : undefined;
    if (payload && typeof payload.code === 'string') {
      const options = cause === undefined || cause === null ? undefined : { cause };
      return new IntentkeyError(payload.code, payload.message, payload.field ?? undefined, options);
    }
    if (e instanceof IntentkeyError || e instanceof IntentkeyTrapError) return e;
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

  /**
   * One call of the `guard` export (world `intentkey`) driving `store` (and, for a
   * recovery, the synchronous look-up `ask`, which answers a WIT lookup and never
   * throws). The store is active for exactly this call.
   */
  function driving(store, ask, fn) {
    const inst = instance();
    if (inst.guard === undefined) throw new TypeError('this component has no guard export (world `pure`)');
    host.store = store;
    host.ask = ask;
    host.cause = null;
    try {
      return fn(inst.guard);
    } catch (e) {
      throw translate(e, inst, host.cause);
    } finally {
      host.store = null;
      host.ask = null;
      host.cause = null;
    }
  }

  /**
   * A flow of the `flows` resource (the sans-I/O claim flow), for hosts that do
   * their own I/O: `create(Flow)` makes it; start, resume and drop it through the
   * returned handle. Every call translates errors; drop() is idempotent.
   */
  function flow(create) {
    const inst = instance();
    let resource = callOn(inst, (i) => create(i.flows.Flow));
    return {
      start: () => callOn(inst, () => resource.start()),
      resume: (result) => callOn(inst, () => resource.resume(result)),
      /** The owner token a run flow's effect runs under (the last one written after). */
      ownerToken: () => callOn(inst, () => resource.ownerToken()),
      /**
       * Advances the flow over a synchronous `store` inside the component (its
       * `guard` export, world `intentkey`): store operations run through the
       * `store` import until the flow needs the effect or a look-up, or is done.
       */
      advance: (store, done) => driving(store, null, (g) => g.advance(resource, done)),
      drop() {
        const r = resource;
        if (r === null) return;
        resource = null;
        const dispose = r[Symbol.dispose] ?? r[Symbol.for('dispose')];
        if (typeof dispose === 'function' && !inst.poisoned) dispose.call(r);
      },
    };
  }

  /** A call of the raw `claims` exports (WIT values in and out). */
  function rawClaims(fn) {
    const inst = instance();
    return callOn(inst, (i) => fn(i.claims));
  }

  /** A call of the raw `schema` exports. */
  function rawSchema(fn) {
    const inst = instance();
    return callOn(inst, (i) => fn(i.schema));
  }

  /**
   * Runs fn with `secret` known to the instance's `secrets` import under a fresh
   * id, for a resource that copies it (a keyer, an endpoint); the package keeps no
   * copy: the id is forgotten and the bytes zeroed afterwards.
   */
  function withSecret(inst, secret, fn) {
    const secretId = `secret-${++secretSeq}`;
    inst.secretStore.set(secretId, secret);
    try {
      return fn(secretId);
    } finally {
      inst.secretStore.delete(secretId);
      secret.fill(0);
    }
  }

  /**
   * Runs fn with each secret of `keyring` known to the instance's `secrets`
   * import, passing the WIT keyring entries and window; as withSecret, the
   * ids are forgotten and the bytes zeroed afterwards. The core validates
   * the keyring (ids, activations); this only converts its shape.
   */
  function withKeyring(inst, keyring, fn) {
    const { entries, windowSeconds } = keyringIn(keyring);
    const ids = [];
    try {
      const wit = entries.map((e) => {
        const secretId = `secret-${++secretSeq}`;
        inst.secretStore.set(secretId, e.secret);
        ids.push(secretId);
        return { id: e.id, activeFrom: e.activeFrom, secretId };
      });
      return fn(wit, windowSeconds);
    } finally {
      for (const id of ids) inst.secretStore.delete(id);
      for (const e of entries) e.secret.fill(0);
    }
  }

  const createEndpoint = endpointFactory({ instance, callOn, withSecret, withKeyring, secretBytes, driving });

  /**
   * The endpoint whose answers the guard gives when no endpoint is configured:
   * the `ietf` profile's defaults, one per instance. Its secret is random and
   * never used (answers need none; keys and fingerprints come from elsewhere).
   */
  function defaultAnswers() {
    const inst = instance();
    inst.answers ??= createEndpoint({ secret: randomBytes(32) });
    return inst.answers;
  }

  /** A fresh owner token (32 hex): 16 random bytes through the core's owner-token. */
  function ownerToken() {
    const bytes = randomBytes(16);
    return rawClaims((c) => c.ownerToken(bytes));
  }

  /** A run flow's seed: 16 random bytes, from which the core derives its owner tokens. */
  const seed = () => randomBytes(16);

  const internal = Object.freeze({ driving, flow, rawClaims, rawSchema, defaultAnswers, ownerToken, seed, world });

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
      const results = inBatches(wit, (w) => w.payloadJson.length, (batch) => call(this.#inst, () => r.deriveMany(batch)));
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
      const length = keyLengthIn(keyHexLength);
      const r = this.#live();
      return call(this.#inst, () => r.intentKey(tenant, id, length));
    }

    /** The intent-hmac key under the keyring's secret active at the intent's epoch. */
    intentKeyAt(tenantId, intentId, intentEpoch, keyHexLength) {
      const tenant = witString(tenantId, 'invalid-tenant-id', 'tenant_id');
      const id = witString(intentId, 'invalid-intent-id', 'intent_id');
      const epoch = toEpoch(intentEpoch);
      const length = keyLengthIn(keyHexLength);
      const r = this.#live();
      return call(this.#inst, () => r.intentKeyAt(tenant, id, epoch, length));
    }

    fingerprint(tenantId, actionType, payload) {
      const [t, a, p] = fingerprintArgs(tenantId, actionType, payload);
      const r = this.#live();
      return call(this.#inst, () => r.fingerprint(t, a, p));
    }

    /** The fingerprint under the keyring's secret active at the intent's epoch. */
    fingerprintAt(tenantId, actionType, payload, intentEpoch) {
      const [t, a, p] = fingerprintArgs(tenantId, actionType, payload);
      const epoch = toEpoch(intentEpoch);
      const r = this.#live();
      return call(this.#inst, () => r.fingerprintAt(t, a, p, epoch));
    }

    /**
     * The claim attempt of an intent, under the keyring's secret active at its
     * epoch: `{ tenantId, actionType, payload, intentEpoch, intentId?, keyHexLength? }`.
     * With `intentId`, the intent-hmac key of the recorded intent; without it, the
     * fields key of the payload. The fingerprint is the payload's either way.
     */
    intentAttempt(intent) {
      const wit = toIntent(intent);
      const id = intent.intentId === undefined ? undefined : witString(intent.intentId, 'invalid-intent-id', 'intent_id');
      const length = keyLengthIn(intent.keyHexLength);
      const r = this.#live();
      return attemptOut(call(this.#inst, () => r.intentAttempt(wit, id, length)));
    }

    /**
     * The claim attempt of step `step` of `run` (the journal's): keyed by the run
     * and the name; its fingerprint also covers `input` (any JSON value).
     */
    stepAttempt(run, step, input) {
      const wit = toRun(run);
      const name = witString(step, 'invalid-step-name', 'step');
      const inputJson = input === undefined ? undefined : jsonText(input, 'input');
      const r = this.#live();
      return attemptOut(call(this.#inst, () => r.stepAttempt(wit, name, inputJson)));
    }

    /**
     * The claim attempt of a validated tool call of `run`: keyed by the run, the
     * tool (the action type) and the arguments' key fields under the policy.
     */
    toolCallAttempt(run, tool, args) {
      const wit = toRun(run);
      const name = witString(tool, 'invalid-action-type', 'action_type');
      const json = payloadText(args);
      const r = this.#live();
      return attemptOut(call(this.#inst, () => r.toolCallAttempt(wit, name, json)));
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
      throw new TypeError('createKeyer takes an options object: { secret, policy } or { keyring, policy }');
    }
    const policyJson = policyText(options.policy);
    const inst = instance();
    if (options.keyring !== undefined) {
      oneOf(options);
      const resource = withKeyring(inst, options.keyring, (entries) =>
        call(inst, (keys) => keys.Keyer.createKeyring(policyJson, entries)),
      );
      return new Keyer(inst, resource);
    }
    const secret = secretBytes(options.secret);
    // The guest copies the bytes into the keyer resource; no copy stays here.
    const resource = withSecret(inst, secret, (secretId) => call(inst, (keys) => keys.Keyer.create(policyJson, secretId)));
    return new Keyer(inst, resource);
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

  // The claim, replay and recovery decisions (pure functions of the core's
  // `claims` interface), on the current instance.
  const claims = createClaims(rawClaims);

  let ready = null;
  /**
   * Compiles the component's core modules asynchronously (where the entry can)
   * and instantiates the component, so that the first call does not block the
   * event loop compiling. Idempotent. Without it, the first call compiles
   * synchronously.
   * @param {object} [options] passed to the entry's compiler
   */
  function init(options) {
    ready ??= (async () => {
      if (prepare !== undefined) await prepare(options);
      instance();
    })().catch((e) => {
      ready = null; // a failed init (a missing file, say) may be retried
      throw e;
    });
    return ready;
  }

  return {
    createKeyer,
    createEndpoint,
    newUuidKey,
    uuidKey,
    answerLines,
    unreadableLineAnswer,
    claims,
    init,
    internal,
  };
}

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

/** A journal run { tenantId, intentId, intentEpoch } as the WIT record. */
function toRun(run) {
  if (run === null || typeof run !== 'object') {
    throw new TypeError('a run is { tenantId, intentId, intentEpoch }: the recorded intent every attempt of the run resumes');
  }
  return {
    tenantId: witString(run.tenantId, 'invalid-tenant-id', 'tenant_id'),
    intentId: witString(run.intentId, 'invalid-intent-id', 'intent_id'),
    intentEpoch: toEpoch(run.intentEpoch),
  };
}

/** Any JSON value as JSON text, or a typed error naming `field`. */
function jsonText(value, field) {
  let text;
  try {
    text = JSON.stringify(value);
  } catch (e) {
    throw new IntentkeyError('invalid-json', `\`${field}\` cannot be written as JSON (${e instanceof Error ? e.message : e})`, field);
  }
  if (typeof text !== 'string') {
    throw new IntentkeyError('invalid-json', `\`${field}\` cannot be written as JSON (it is ${typeof value})`, field);
  }
  return text;
}

/** A WIT attempt as the guard's input (no prior key: journal attempts keep their run's secret). */
function attemptOut(a) {
  return { key: a.key, fingerprint: a.fingerprint, tenantId: a.tenantId, actionType: a.actionType };
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

function keyLengthIn(keyHexLength) {
  if (keyHexLength === undefined || keyHexLength === null) return undefined;
  if (!Number.isInteger(keyHexLength) || keyHexLength < 0 || keyHexLength > U32_MAX) {
    throw new IntentkeyError(
      'invalid-key-length',
      'the key length must be a whole number of hex characters, 32 to 64',
      'keyHexLength',
    );
  }
  return keyHexLength;
}

/**
 * The shape of a keyring option, `{ secrets: [{ id, activeFrom, secret }], windowSeconds? }`,
 * converted: private copies of the secrets' bytes, activations as bigints.
 */
function keyringIn(keyring) {
  const bad = (message) => new IntentkeyError('invalid-keyring', message, 'keyring');
  if (keyring === null || typeof keyring !== 'object' || !Array.isArray(keyring.secrets)) {
    throw bad('the keyring is { secrets: [{ id, activeFrom, secret }, …], windowSeconds? }');
  }
  const entries = [];
  try {
    keyring.secrets.forEach((entry, i) => {
      if (entry === null || typeof entry !== 'object') throw bad(`secret ${i} of the keyring is not an object`);
      if (typeof entry.id !== 'string') throw bad(`secret ${i} of the keyring has no string \`id\``);
      const from = entry.activeFrom;
      if (!(typeof from === 'bigint' || (typeof from === 'number' && Number.isSafeInteger(from)))) {
        throw bad(`secret ${i} of the keyring (\`${entry.id.slice(0, 64)}\`) has no whole-seconds \`activeFrom\``);
      }
      entries.push({ id: entry.id, activeFrom: BigInt(from), secret: secretBytes(entry.secret) });
    });
  } catch (e) {
    for (const e2 of entries) e2.secret.fill(0);
    throw e;
  }
  let windowSeconds;
  if (keyring.windowSeconds !== undefined && keyring.windowSeconds !== null) {
    const w = keyring.windowSeconds;
    if (!(typeof w === 'bigint' || (typeof w === 'number' && Number.isSafeInteger(w)))) {
      for (const e of entries) e.secret.fill(0);
      throw bad('the keyring\'s `windowSeconds` must be whole seconds');
    }
    windowSeconds = BigInt(w);
  }
  return { entries, windowSeconds };
}

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
