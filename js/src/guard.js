// The guard: claim, run once, replay; and recovery of abandoned claims.
//
// The guard does not sequence anything. The order of every store operation
// (insert, read, decide, complete, release, recover) is the core's one claim flow:
//   - synchronous stores (memoryStore, sqliteStore) plug into the component's
//     `store` import and the component's `guard` export drives them: a run is one
//     component call to claim, the effect (awaited here), one call to finish;
//   - asynchronous stores (pgStore) are driven through the `flows` resource: the
//     core returns each operation, the guard performs it (awaited) and resumes the
//     flow with the result, until it is done.
// Recovery always uses the `flows` resource, so the destination look-up may be
// asynchronous; `recoverSync` drives the `guard` export instead, with a
// synchronous look-up served through the component's `gateway` import. Over the
// pure component (browsers, workerd), which has no `guard` export, every store is
// driven through the flows.
//
// The answers an attempt that does not own the effect gets (409 in flight, 422
// another payload) are the core's HTTP answers: the configured endpoint's
// (`createGuard({ endpoint })`) or the `ietf` profile's defaults.
//
// What the guard decides itself is only what the effect reported: a returned
// response is `answered`; a thrown error with a well-formed `response` is
// `answered` too (stored like a success); a thrown IntentkeyRefused is `refused`
// (nothing happened: released); any other throw is `failed` (ambiguous: the
// record stays in flight). The core classifies that result under the rules
// (429 and 503 answers release by default) and finishes the record.
import { IntentkeyError } from './errors.js';
import {
  STATUS_FROM_WIT,
  statusIn,
  isWellFormed,
  lookupIn,
  recordOut,
  recoveryOut,
  responseIn,
  rulesIn,
  secondsOut,
  u32,
} from './claims.js';
import { ABORTED_FLAG, CLOSING, TRUSTED, WAITING } from './stores/trusted.js';
import { SERVE, checkDeadline } from './endpoint.js';

export { checkDeadline };
import { servingFor } from './http/serving.js';
import { WaitAborted, performWatch } from './watching.js';

/**
 * What the HTTP pipeline (http/pipeline.js) uses of a guard: the claim and the
 * finish of the one flow, without an effect in between. Not public API.
 */
export const PIPELINE = Symbol('intentkey.pipeline');

/**
 * What the journal and the queue consumer use of a guard: a run of the core's
 * run flow of a kind ('effect', 'step', 'tool-call') for a WIT attempt, with an
 * optional recovery ({ lookup, readYourWrites?, staleAfterSeconds? }). Not public API.
 */
export const RUN = Symbol('intentkey.run');

/**
 * What the journal and the queue consumer use to check a `wait` option
 * ({ maxMs }) the way the guard does (the core's limit): its wait-max-ms, or
 * the typed error naming `wait.maxMs` (or the unknown key). Not public API.
 */
export const WAIT_OPTION = Symbol('intentkey.wait-option');

/**
 * What the queue consumer does with a run found in flight: the core's
 * `in-flight-delivery` of its recovery (or none) at `now`, as { retryAt,
 * reason } or { needsReconciliation: true }. Not public API.
 */
export const DELIVERY = Symbol('intentkey.delivery');

/** The WIT `recovered` a recovery result was made of (kept for the core's delivery decision). */
const RECOVERED = Symbol('intentkey.recovered');

/** Whole seconds now, the default clock. */
const systemNow = () => Math.floor(Date.now() / 1000);

const U32_MAX = 2 ** 32 - 1;
const FAILED = Object.freeze({ tag: 'failed' });
const UNKNOWN = Object.freeze({ tag: 'unknown' });
const OPS = ['insert', 'get', 'complete', 'replace', 'release', 'list', 'purge'];
const WAITED = Object.freeze({ tag: 'waited' });

/**
 * The `tracer` and `meter` options, checked by what they must do (an
 * OpenTelemetry Tracer, a Meter), else an IntentkeyError `invalid-argument`
 * naming the option.
 * @param {{ tracer?: unknown, meter?: unknown }} options
 * @param {string} who the function given them, for messages
 */
export function checkTelemetry({ tracer, meter }, who) {
  if (tracer !== undefined && tracer !== null && (typeof tracer !== 'object' || typeof tracer.startSpan !== 'function')) {
    throw new IntentkeyError('invalid-argument', `${who}: \`tracer\` must be an OpenTelemetry Tracer (trace.getTracer(…))`, 'tracer');
  }
  if (meter !== undefined && meter !== null && (typeof meter !== 'object' || typeof meter.createCounter !== 'function')) {
    throw new IntentkeyError('invalid-argument', `${who}: \`meter\` must be an OpenTelemetry Meter (metrics.getMeter(…))`, 'meter');
  }
}

const clockMs = () => globalThis.performance.now();

/** Resolves after `ms`, or as soon as the store closes (`closing`); its timer does not keep the process alive. */
function pause(ms, closing) {
  return new Promise((resolve) => {
    let forget = () => {};
    const done = () => {
      clearTimeout(timer);
      forget();
      resolve();
    };
    const timer = setTimeout(done, ms);
    timer.unref?.();
    if (closing !== undefined) forget = closing.onClose(done);
  });
}

/**
 * The deadline's abort of one call to a store marked ABORTED_FLAG: `signal`
 * is a plain `{ aborted }` the store reads, set by `abort()`.
 */
function abortedFlag() {
  const signal = { aborted: false };
  return {
    signal,
    abort() {
      signal.aborted = true;
    },
  };
}

/** The storage key a store operation of a flow is about (for telemetry's key digest). */
function opKey(op) {
  switch (op.tag) {
    case 'insert':
    case 'complete':
    case 'release':
      return op.val.key;
    case 'replace':
      return op.val.record.key;
    case 'get':
      return op.val;
    default:
      return undefined;
  }
}

const encoder = new TextEncoder();

/** A JSON response (its body UTF-8 bytes) for an effect to return or to attach to a thrown error. */
export function jsonResponse(status, value, headers) {
  return { status, contentType: 'application/json', headers: headers ?? [], body: encoder.encode(JSON.stringify(value)) };
}

/** A core reply ({ status, headers, body }) as a response: Content-Type apart, the other headers in order. */
function replyResponse(reply) {
  let contentType = '';
  const headers = [];
  for (const [name, value] of reply.headers) {
    if (contentType === '' && name.toLowerCase() === 'content-type') contentType = value;
    else headers.push([name, value]);
  }
  return { status: reply.status, contentType, headers, body: reply.body };
}

/**
 * Thrown by an effect that refused before any side effect: nothing happened, so
 * the claim is released (the record deleted under its owner token) and a retry
 * runs the effect. Its `response` (optional) goes to the caller, unstored.
 */
export class IntentkeyRefused extends Error {
  /**
   * @param {object | null} [response] the answer for the caller, not stored
   * @param {string} [message]
   * @param {{ cause?: unknown }} [options]
   */
  constructor(response = null, message = 'the effect refused before any side effect', options) {
    super(message, options);
    this.name = 'IntentkeyRefused';
    this.response = response;
  }
}

/** `throw refused(response?)` from an effect: see IntentkeyRefused. */
export function refused(response, message) {
  return new IntentkeyRefused(response ?? null, message);
}

function nonEmpty(value, what) {
  if (typeof value !== 'string' || value.length === 0) throw new TypeError(`${what} must be a non-empty string`);
  if (!isWellFormed(value)) throw new TypeError(`${what} is not well-formed Unicode (a lone surrogate)`);
  return value;
}

function seconds(value, what) {
  if (!Number.isSafeInteger(value)) throw new TypeError(`${what} must be whole seconds (a safe integer)`);
  return value;
}

/** The response an effect's error carries, when it carries a well-formed one. */
function errorResponse(error) {
  if (error === null || (typeof error !== 'object' && typeof error !== 'function')) return null;
  const response = error.response;
  if (response === null || typeof response !== 'object') return null;
  try {
    return responseIn(response, 'the error response');
  } catch {
    return null; // not ours (an HTTP client's error object, say): the effect's outcome is unknown
  }
}

/**
 * What an effect reported, for the core: { wit: effect-result, response, error }.
 * `response` is what goes back to the caller (null when there is none).
 */
function thrown(e) {
  if (e instanceof IntentkeyRefused) {
    const response = errorResponse(e);
    return { wit: { tag: 'refused', val: response ?? undefined }, response, error: e };
  }
  const response = errorResponse(e);
  if (response !== null) return { wit: { tag: 'answered', val: response }, response, error: e };
  return { wit: FAILED, response: null, error: e };
}

function returned(value) {
  let response;
  try {
    response = responseIn(value, 'the effect’s response');
  } catch (e) {
    // Not a response: nobody can tell what the effect did. Ambiguous.
    return { wit: FAILED, response: null, error: e };
  }
  return { wit: { tag: 'answered', val: response }, response, error: undefined };
}

async function runEffect(effect, key) {
  let value;
  try {
    value = await effect(key);
  } catch (e) {
    return thrown(e);
  }
  return returned(value);
}

/** A store failure reported by an asynchronous store, as the core would report it. */
function storeFailure(e) {
  if (e instanceof IntentkeyError) return e;
  const p = e !== null && typeof e === 'object' ? e.payload : undefined;
  if (p !== null && typeof p === 'object' && (p.tag === 'unavailable' || p.tag === 'failed') && typeof p.val === 'string') {
    return new IntentkeyError(p.tag === 'unavailable' ? 'store-unavailable' : 'store-failed', p.val, undefined, { cause: e });
  }
  const message = e instanceof Error ? e.message : String(e);
  return new IntentkeyError('store-failed', `the store failed: ${message}`, undefined, { cause: e });
}

/**
 * A store that is not the package's own: every answer is checked before it
 * reaches the component (jco would otherwise coerce a promise to `true`, or
 * trap on a malformed record).
 */
function checkedStore(store) {
  const sync = store.synchronous === true;
  const bool = (op) => (v) => {
    if (v === true || v === false) return v;
    throw new TypeError(
      `store.${op} answered ${typeof v === 'object' && v !== null && typeof v.then === 'function' ? 'a promise' : typeof v}, not a boolean` +
        (sync ? ' (a synchronous store answers plain values)' : ''),
    );
  };
  const record = (op) => (r) => {
    if (r === null || r === undefined) return undefined;
    if (typeof r !== 'object' || typeof r.key !== 'string' || !STATUS_FROM_WIT.has(r.status) || typeof r.createdAt !== 'bigint') {
      throw new TypeError(`store.${op} answered something that is not a WIT record (WIT status spelling, bigint times)`);
    }
    return r;
  };
  const checks = {
    insert: bool('insert'),
    get: record('get'),
    complete: bool('complete'),
    replace: bool('replace'),
    release: bool('release'),
    list: (rs) => {
      if (!Array.isArray(rs)) throw new TypeError('store.list answered something that is not a list of records');
      return rs.map(record('list'));
    },
    purge: (n) => {
      if (typeof n === 'bigint' || (Number.isSafeInteger(n) && n >= 0)) return n;
      throw new TypeError('store.purge answered something that is not a count');
    },
  };
  const wrapped = { kind: store.kind, synchronous: sync, [TRUSTED]: true, close: () => store.close?.() };
  // A store that wakes waiters early (op `watch`); without one the host polls.
  if (typeof store.watch === 'function') wrapped.watch = (key, ms, signal) => store.watch(key, ms, signal);
  if (typeof store[WAITING] === 'function') wrapped[WAITING] = () => store[WAITING]();
  for (const op of OPS) {
    const check = checks[op];
    wrapped[op] = sync
      ? (...args) => {
          const v = store[op](...args);
          try {
            return check(v);
          } catch (e) {
            // A store-error payload: the core reports it as store-failed, not as a trap.
            e.payload = { tag: 'failed', val: e.message };
            throw e;
          }
        }
      : async (...args) => check(await store[op](...args));
  }
  return wrapped;
}

/**
 * Makes `createGuard` over one API (see core.js): the Node entry's (the full
 * component) or a pure one's.
 * @param {{ internal: any, claims: any }} api
 */
export function guardFactory({ internal, claims }, host = {}) {
  /** Telemetry (the Node entry's, over @opentelemetry/api); none in browsers and workerd. */
  const telemetryFor = host.telemetry ?? null;
  /**
   * @param {{
   *   store: object,
   *   keyer?: object,
   *   endpoint?: object,
   *   ttlSeconds?: number,
   *   releaseStatuses?: number[],
   *   fastCompletion?: boolean,
   *   staleAfterSeconds?: number,
   *   now?: () => number,
   *   wait?: { maxMs?: number },
   *   storeDeadlineMs?: number,
   *   tracer?: object,
   *   meter?: object,
   *   onError?: (error: unknown, context: object) => void,
   * }} options
   */
  return function createGuard(options = {}) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError(
        'createGuard takes { store, keyer?, endpoint?, ttlSeconds?, releaseStatuses?, fastCompletion?, staleAfterSeconds?, now?, wait? }',
      );
    }
    const { keyer } = options;
    const endpoint = options.endpoint ?? null;
    if (endpoint !== null && (typeof endpoint !== 'object' || typeof endpoint.answer !== 'function')) {
      throw new TypeError('createGuard: endpoint must be one createEndpoint() made');
    }
    const given = options.store;
    for (const op of OPS) {
      if (given === null || typeof given !== 'object' || typeof given[op] !== 'function') {
        throw new TypeError(
          `createGuard: the store must have ${op}() (memoryStore, sqliteStore, pgStore, or the seven WIT store operations)`,
        );
      }
    }
    const store = given[TRUSTED] === true ? given : checkedStore(given);
    // The component's guard export drives synchronous stores; the pure component has none.
    const sync = store.synchronous === true && internal.world === 'intentkey';
    const clock = options.now ?? systemNow;
    if (typeof clock !== 'function') throw new TypeError('now must be a function returning whole seconds');
    const now = () => seconds(clock(), 'now()');
    const defaults = claims.defaultRules();
    const ruleValues = {
      ttlSeconds: options.ttlSeconds === undefined ? defaults.ttlSeconds : seconds(options.ttlSeconds, 'ttlSeconds'),
      releaseStatuses: options.releaseStatuses ?? defaults.releaseStatuses,
      fastCompletion: options.fastCompletion ?? defaults.fastCompletion,
    };
    const rules = rulesIn(ruleValues, 'the guard options');
    const staleAfterSeconds =
      options.staleAfterSeconds === undefined
        ? claims.defaultStaleAfterSeconds()
        : seconds(options.staleAfterSeconds, 'staleAfterSeconds');
    // How long a run that finds its record in flight (not yet due a recovery)
    // waits for the first attempt (op `watch`); 0: answered in flight at once.
    const waitMaxMs = internal.waitMaxMs(options.wait, 'createGuard');
    // The deadline of one store call of an asynchronous store (the core's
    // default, 2 s): past it the call is store-unavailable, never a hang.
    const deadlineMs = checkDeadline(options.storeDeadlineMs, 'createGuard') ?? endpoint?.storeDeadlineMs ?? claims.storeDeadlineMs();
    // Telemetry: spans and metrics in the core's vocabulary (Node only).
    checkTelemetry(options, 'createGuard');
    if ((options.tracer ?? options.meter ?? null) !== null && telemetryFor === null) {
      throw new IntentkeyError('invalid-argument', 'createGuard: `tracer` and `meter` are taken by the Node entry only (telemetry is reported there)', 'tracer');
    }
    const tel = telemetryFor === null ? null : telemetryFor({ tracer: options.tracer, meter: options.meter, store: given });
    /** The store's closing (the package's own stores): background releases stop at close(). */
    const closing = typeof given[CLOSING]?.onClose === 'function' ? given[CLOSING] : undefined;
    if (waitMaxMs > 0 || (endpoint?.waitMaxMs ?? 0) > 0) given[WAITING]?.();

    /** Performs op `watch` on the store (woken early by a store that notifies, else a sleep). */
    const watch = (request, signal) => performWatch(store, request, signal, now);

    function needKeyer(what) {
      if (keyer === undefined || keyer === null) {
        throw new TypeError(`createGuard needs a keyer to ${what}: createGuard({ store, keyer: createKeyer(...) })`);
      }
      return keyer;
    }

    /** The WIT attempt of a run() input. */
    function attemptOf(input) {
      if (input === null || typeof input !== 'object') {
        throw new TypeError('run() takes { intent } or { key, tenantId, actionType, fingerprint | payload }');
      }
      if (input.intent !== undefined) {
        // The core's: key and fingerprint under the secret active at the intent's epoch.
        return needKeyer('derive keys from intents').intentAttempt(input.intent);
      }
      const key = nonEmpty(input.key, 'key');
      const tenantId = nonEmpty(input.tenantId, 'tenantId');
      const actionType = nonEmpty(input.actionType, 'actionType');
      let { fingerprint } = input;
      if (fingerprint === undefined) {
        if (input.payload === undefined) throw new TypeError('run() needs a fingerprint or the payload to take it of');
        fingerprint = needKeyer('fingerprint payloads').fingerprint(tenantId, actionType, input.payload);
      }
      return { key, fingerprint: nonEmpty(fingerprint, 'fingerprint'), tenantId, actionType };
    }

    /**
     * `call` (a store operation's answer, or its promise) within the store
     * deadline: past it, an IntentkeyError store-unavailable (the flow then
     * decides what that means; a late answer is dropped). `background`: the
     * timer does not keep the process alive.
     */
    function bounded(call, what, background, controller) {
      if (call === null || typeof call !== 'object' || typeof call.then !== 'function') return call;
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          // The store may drop the call if it was not sent yet (pgStore: still waiting for a connection).
          controller?.abort();
          reject(new IntentkeyError('store-unavailable', `the store did not answer the ${what} within ${deadlineMs} ms (the store deadline)`));
        }, deadlineMs);
        if (background) timer.unref?.();
        call.then(
          (value) => {
            clearTimeout(timer);
            resolve(value);
          },
          (e) => {
            clearTimeout(timer);
            reject(e);
          },
        );
      });
    }

    /**
     * Starts one store operation of a flow: its answer or the promise of it.
     * An asynchronous store gets an AbortSignal after the operation's
     * arguments, aborted when the deadline passed (it may then drop a call it
     * has not sent yet).
     */
    function send(op, signal) {
      switch (op.tag) {
        case 'insert':
          // A store with a `claim` answers the record its insert lost to in the same round trip.
          return tracked(op.val.key, typeof store.claim === 'function' ? store.claim(op.val, signal) : store.insert(op.val, signal));
        case 'get':
          return store.get(op.val, signal);
        case 'complete':
          return store.complete(op.val, signal);
        case 'replace':
          return store.replace(op.val, signal);
        case 'release':
          return store.release(op.val, signal);
        case 'list':
          return store.list(op.val.status, op.val.limit, signal);
        case 'purge':
          return store.purge(op.val, signal);
        default:
          throw new Error(`intentkey: the core asked for an unknown store operation ${op.tag} (a bug)`);
      }
    }

    /**
     * Inserts still running, by key: a deadline may abandon one whose
     * statement the store still sends or commits later. A background release
     * of that key waits for them to end first (releaseClaim), so that no
     * insert lands after its own release and leaves the key in flight.
     */
    const inserting = new Map();

    function tracked(key, call) {
      if (call === null || typeof call !== 'object' || typeof call.then !== 'function') return call;
      const ended = call.then(
        () => {},
        () => {},
      );
      let running = inserting.get(key);
      if (running === undefined) inserting.set(key, (running = new Set()));
      running.add(ended);
      ended.then(() => {
        running.delete(ended);
        if (running.size === 0 && inserting.get(key) === running) inserting.delete(key);
      });
      return call;
    }

    /** Resolves when every insert of `key` running now has ended, or after `ms` (a timer that does not keep the process alive). */
    function insertsEnded(key, ms) {
      const running = inserting.get(key);
      if (running === undefined) return null;
      return new Promise((resolve) => {
        const timer = setTimeout(resolve, ms);
        timer.unref?.();
        Promise.all([...running]).then(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }

    /** The WIT op-result of a store operation's answer. */
    function answered(op, value) {
      switch (op.tag) {
        case 'insert':
          return value !== null && typeof value === 'object' ? { tag: 'existing', val: value } : { tag: 'inserted', val: value };
        case 'get':
          return { tag: 'got', val: value ?? undefined };
        case 'list':
          return { tag: 'listed', val: value };
        case 'purge':
          return { tag: 'purged', val: value };
        default:
          return { tag: 'written', val: value };
      }
    }

    /**
     * Performs one operation of a flow on the store (awaited, within the store
     * deadline), or asks the destination. `probe`: the telemetry of the
     * request or run (the call's time, the storage key), or null;
     * `background`: a call of the background release (its deadline timer does
     * not keep the process alive; its time goes to the store histogram).
     */
    async function perform(op, ask, probe = null, background = false) {
      if (op.tag === 'ask') {
        if (ask === undefined) throw new Error('intentkey: the core asked the destination outside a recovery (a bug)');
        return { tag: 'answered', val: await ask(op.val) };
      }
      if (probe !== null) probe.sawKey(opKey(op), op.tag === 'insert');
      const timed = probe !== null || (background && tel !== null);
      const start = timed ? clockMs() : 0;
      try {
        const controller = store.synchronous === true ? undefined : store[ABORTED_FLAG] === true ? abortedFlag() : new AbortController();
        return answered(op, await bounded(send(op, controller?.signal), op.tag, background, controller));
      } catch (e) {
        throw storeFailure(e);
      } finally {
        if (probe !== null) probe.storeCall(clockMs() - start);
        else if (timed) tel.storeCall(clockMs() - start);
      }
    }

    // A synchronous store's operations run inside the component (`advance`);
    // while a request or run is measured, they go through this store, which
    // times each call and notes the storage key for the active probe.
    let activeProbe = null;
    let timedStore = null;
    function timed() {
      if (timedStore !== null) return timedStore;
      const t = { kind: store.kind, synchronous: true, [TRUSTED]: true };
      const time = (op, keyOf) =>
        function timedOp(...args) {
          const probe = activeProbe;
          const start = clockMs();
          try {
            return store[op](...args);
          } finally {
            if (probe !== null) {
              probe.storeCall(clockMs() - start);
              if (keyOf !== undefined) probe.sawKey(keyOf(args[0]), op === 'insert');
            }
          }
        };
      t.insert = time('insert', (r) => r.key);
      t.get = time('get', (k) => k);
      t.complete = time('complete', (c) => c.key);
      t.replace = time('replace', (r) => r.record.key);
      t.release = time('release', (r) => r.key);
      t.list = time('list');
      t.purge = time('purge');
      timedStore = t;
      return t;
    }

    /** Advances `flow` over the synchronous store inside the component; measured for `probe` when there is one. */
    function advance(flow, done, probe) {
      if (probe === null) return flow.advance(store, done);
      activeProbe = probe;
      try {
        return flow.advance(timed(), done);
      } finally {
        activeProbe = null;
      }
    }

    /**
     * Performs one store operation; a failure becomes the WIT op-result
     * `failed` (for a flow that decides what it means) and the error to report.
     */
    async function performOrFail(op, probe = null, background = false) {
      try {
        return { result: await perform(op, undefined, probe, background), error: null };
      } catch (e) {
        const error = storeFailure(e);
        const tag = error.code === 'store-unavailable' ? 'unavailable' : 'failed';
        return { result: { tag: 'failed', val: { tag, val: error.message } }, error };
      }
    }

    /** Drives one flow of the `flows` resource to its end: the core sequences, this performs. */
    async function drive(create, ask) {
      const flow = internal.flow(create);
      try {
        let step = flow.start();
        while (step.tag === 'io') step = flow.resume(await perform(step.val, ask));
        return step.val;
      } finally {
        flow.drop();
      }
    }

    /** The owner's answer after finishing; rethrows when there is no response to give. */
    function ownedResult(key, result, finished) {
      if (result.response === null) throw result.error;
      const out = { outcome: 'owned', response: result.response, replayed: false, key, finished };
      if (result.error !== undefined) out.error = result.error;
      return out;
    }

    /** What an attempt that does not own the effect gets at `t`: the stored response, or the core's answer. */
    function notOwned(outcome, key, t) {
      if (outcome.tag === 'done') return { outcome: 'done', response: outcome.val, replayed: true, key };
      const answers = endpoint ?? internal.defaultAnswers();
      return { outcome: outcome.tag, response: replyResponse(answers.answer(outcome, t)), replayed: false, key };
    }

    /**
     * Drives one run flow of the core (claim, replay or answer, effect, finish,
     * recovery of a stale record, bounded claim-again): this performs each store
     * operation, asks the destination (`ask`) and runs the effect when the core
     * says so. Answers the WIT run-outcome and the effect's last result.
     * `create()`: the flow (internal.runFlow or internal.flow).
     */
    async function driveRun(create, effect, ask, signal, probe = null) {
      const flow = create();
      // A synchronous store is driven inside the component, through its `store`
      // import; an asynchronous one here, one awaited operation at a time.
      const next = sync ? (done) => advance(flow, done, probe) : (done) => (done === undefined ? flow.start() : flow.resume(done));
      let ran;
      let waitedMs = 0;
      try {
        let step = next(undefined);
        while (step.tag === 'io') {
          const op = step.val;
          if (op.tag === 'effect') {
            ran = await runEffect(effect, op.val);
            step = next({ tag: 'effected', val: { result: ran.wit, now: BigInt(now()) } });
          } else if (op.tag === 'watch') {
            // A run that found its record in flight waits for the first
            // attempt; the core claims again after each watch.
            const watched = await watch(op.val, signal);
            waitedMs += watched.val.elapsedMs;
            step = next(watched);
          } else {
            step = next(await perform(op, ask, probe));
          }
        }
        return { out: step.val.val, ran, waitedMs };
      } finally {
        flow.drop();
      }
    }

    /** The look-up of a recovery, as the core asks it: a throw counts as unknown. */
    function askWith(lookup) {
      return async (k) => {
        let answer;
        try {
          answer = await lookup(k);
        } catch {
          return UNKNOWN; // a look-up that fails (timeout, 5xx, network) could not tell
        }
        return lookupIn(answer);
      };
    }

    const RUN_OPTIONS = new Set(['lookup', 'readYourWrites', 'staleAfterSeconds', 'wait', 'signal']);

    /** The WIT run-spec of an attempt; `recovery`: run options with a look-up, or undefined. */
    function runSpec(attempt, kind, recovery, wait) {
      return {
        attempt,
        kind,
        rules,
        recovery: recovery === undefined ? undefined : recoveryRules({ effect: () => {}, ...recovery }),
        now: BigInt(now()),
        waitMaxMs: wait,
      };
    }

    /**
     * What a run answers, from the core's run-outcome: the owner's result, the
     * stored response, or the core's 409/422.
     */
    function runResult(key, out, ran, t) {
      switch (out.tag) {
        case 'ran': {
          const result = ownedResult(key, ran, out.val.finished);
          if (out.val.recovered) result.recovered = true;
          return result;
        }
        case 'replayed': {
          const result = notOwned({ tag: 'done', val: out.val.response }, key, t);
          if (out.val.recovered) result.recovered = true;
          return result;
        }
        case 'conflict':
          return notOwned({ tag: 'payload-conflict' }, key, t);
        case 'in-flight': {
          const result = notOwned({ tag: 'in-flight' }, key, t);
          if (out.val !== undefined) result.recovery = recoveredOut(key, out.val);
          return result;
        }
        default:
          throw new Error(`intentkey: the core answered an unknown run outcome ${out.tag} (a bug)`);
      }
    }

    /**
     * Claims the key; the owner runs the effect and finishes the record; every
     * other attempt gets the stored response or the core's 409/422. With
     * `{ lookup, readYourWrites? }`, a record left in flight is recovered once
     * stale: found is replayed, a trusted absent re-runs the effect, unknown never.
     */
    async function run(input, effect, runOptions) {
      if (typeof effect !== 'function') throw new TypeError('run(input, effect): effect must be a function (key) => response');
      if (runOptions !== undefined) {
        if (runOptions === null || typeof runOptions !== 'object') {
          throw new TypeError('run(input, effect, options): options is { lookup?, readYourWrites?, staleAfterSeconds?, wait?, signal? }');
        }
        for (const name of Object.keys(runOptions)) {
          if (!RUN_OPTIONS.has(name)) {
            throw new TypeError(`run(): unknown option ${name}; the options are ${[...RUN_OPTIONS].join(', ')}`);
          }
        }
      }
      const signal = runOptions?.signal;
      if (signal !== undefined && (signal === null || typeof signal !== 'object' || typeof signal.aborted !== 'boolean')) {
        throw new TypeError('run(): signal must be an AbortSignal');
      }
      const wait = runOptions?.wait === undefined ? undefined : internal.waitMaxMs(runOptions.wait, 'run()');
      const attempt = attemptOf(input);
      let recovery;
      if (runOptions?.lookup !== undefined) {
        const { wait: _w, signal: _s, ...rest } = runOptions;
        recovery = rest;
      }
      return runAs('effect', attempt, effect, recovery, { waitMaxMs: wait, signal });
    }

    /**
     * A run of `kind` ('effect', 'step', 'tool-call'): see run(). `waiting`:
     * { waitMaxMs? (default the guard's), signal? (aborts a wait: the run
     * rejects with the signal's reason) }.
     */
    async function runAs(kind, attempt, effect, recovery, waiting) {
      const spec = runSpec(attempt, kind, recovery, waiting?.waitMaxMs ?? waitMaxMs);
      const ask = recovery === undefined ? undefined : askWith(recovery.lookup);
      const probe = tel === null ? null : tel.begin(kind);
      probe?.sawKey(attempt.key, true);
      let driven;
      try {
        driven = await driveRun(() => internal.runFlow(spec, internal.seed()), effect, ask, waiting?.signal, probe);
      } catch (e) {
        // A wait aborted: the waiter owned nothing; the caller gets the signal's reason.
        if (e instanceof WaitAborted) {
          probe?.abandoned();
          throw e.reason ?? e;
        }
        probe?.failed(e);
        throw e;
      }
      const { out, ran } = driven;
      probe?.ran(out, driven.waitedMs);
      return runResult(attempt.key, out, ran, Number(spec.now));
    }

    function recoveryRules(request) {
      if (request === null || typeof request !== 'object') {
        throw new TypeError('recover() takes { key, lookup, readYourWrites?, effect?, staleAfterSeconds? }');
      }
      const readYourWrites = request.readYourWrites ?? false;
      if (typeof request.lookup !== 'function') throw new TypeError('recover(): lookup must be a function (key) => answer');
      if (typeof readYourWrites !== 'boolean') throw new TypeError('readYourWrites must be a boolean');
      if (readYourWrites && typeof request.effect !== 'function') {
        throw new TypeError('recover(): a read-your-writes destination can answer absent; pass the effect to run again');
      }
      const stale =
        request.staleAfterSeconds === undefined ? staleAfterSeconds : seconds(request.staleAfterSeconds, 'staleAfterSeconds');
      return { staleAfter: BigInt(stale), readYourWrites, ttlSeconds: rules.ttlSeconds };
    }

    /** The JavaScript result of a WIT `recovered`. */
    function recoveredOut(key, rec) {
      return Object.defineProperty(recoveredShape(key, rec), RECOVERED, { value: rec });
    }

    function recoveredShape(key, rec) {
      switch (rec.tag) {
        case 'missing':
          return { outcome: 'missing', key };
        case 'not-in-flight':
          return { outcome: 'not-in-flight', key, status: STATUS_FROM_WIT.get(rec.val) };
        case 'not-due':
          return { outcome: 'not-due', key, dueAt: secondsOut(rec.val, 'dueAt') };
        case 'applied':
        case 'lost':
          return { outcome: rec.tag, key, ...recoveryOut(rec.val) };
        default:
          throw new Error(`intentkey: the core answered an unknown recovery outcome ${rec.tag} (a bug)`);
      }
    }

    /**
     * Asks the destination about one in-flight record that has been stale for
     * staleAfterSeconds and applies the core's decision; re-executes (with the same
     * key, under the recovery's new owner token) only when the core says so.
     */
    /** The recovery-only run spec of `key`. */
    function recoverySpec(key, rrules) {
      return {
        attempt: { key, fingerprint: '', tenantId: '', actionType: '' },
        kind: 'effect',
        rules,
        recovery: rrules,
        now: BigInt(now()),
        waitMaxMs: 0,
      };
    }

    /** What a recovery run came to, for the caller; rethrows an effect's error that left no response. */
    function recoveryResult(key, out, ran) {
      switch (out.tag) {
        case 'ran': {
          // Re-executed with the same key under the recovery's new owner token.
          const result = { outcome: 'applied', key, action: 're-execute', finished: out.val.finished };
          if (ran.response === null) throw ran.error;
          result.response = ran.response;
          if (ran.error !== undefined) result.error = ran.error;
          return result;
        }
        case 'replayed':
          return { outcome: 'applied', key, action: 'record-done', response: out.val.response };
        case 'recovery':
          return recoveredOut(key, out.val);
        case 'in-flight':
          return out.val === undefined ? { outcome: 'missing', key } : recoveredOut(key, out.val);
        default:
          throw new Error(`intentkey: the core answered an unknown recovery run ${out.tag} (a bug)`);
      }
    }

    async function recover(request) {
      const rrules = recoveryRules(request);
      const key = nonEmpty(request.key, 'key');
      const { lookup, effect } = request;
      const reRun = typeof effect === 'function';
      const probe = tel === null ? null : tel.begin('effect');
      probe?.sawKey(key, true);
      let driven;
      try {
        driven = await driveRun(
          () => internal.flow((Flow) => Flow.recoverRun(recoverySpec(key, rrules), internal.seed(), reRun)),
          effect,
          askWith(lookup),
          undefined,
          probe,
        );
      } catch (e) {
        probe?.failed(e);
        throw e;
      }
      probe?.ran(driven.out, driven.waitedMs, true);
      return recoveryResult(key, driven.out, driven.ran);
    }

    /**
     * recover() with a synchronous look-up (and, for a read-your-writes
     * destination, a synchronous effect), for synchronous stores: the same
     * recovery run of the core, advanced inside the component over the store.
     * Returns the result itself, not a promise.
     */
    function recoverSync(request) {
      if (!sync) throw new TypeError('recoverSync needs a synchronous store (memoryStore, sqliteStore); use recover()');
      const rrules = recoveryRules(request);
      const key = nonEmpty(request.key, 'key');
      const { lookup, effect } = request;
      let misuse = null;
      const ask = (k) => {
        let answer;
        try {
          answer = lookup(k);
        } catch {
          return UNKNOWN;
        }
        if (answer !== null && typeof answer === 'object' && typeof answer.then === 'function') {
          answer.then(undefined, () => {});
          misuse = new TypeError(
            'recoverSync: the look-up returned a promise; it was counted as unknown. ' +
              'Use recover() for asynchronous look-ups',
          );
          return UNKNOWN;
        }
        try {
          return lookupIn(answer);
        } catch (e) {
          misuse = e;
          return UNKNOWN;
        }
      };
      /** The effect run synchronously: what it reported (a promise is an unknown outcome). */
      const runNow = (k) => {
        try {
          const value = effect(k);
          if (value !== null && typeof value === 'object' && typeof value.then === 'function') {
            value.then(undefined, () => {});
            return {
              wit: FAILED,
              response: null,
              error: new TypeError(
                'recoverSync: the effect returned a promise, so its outcome is unknown here and the record stays ' +
                  'in flight; use recover() for asynchronous effects',
              ),
            };
          }
          return returned(value);
        } catch (e) {
          return thrown(e);
        }
      };
      // The same recovery run as recover(), advanced inside the component over
      // the synchronous store; the look-up and the effect are answered here.
      const flow = internal.flow((Flow) =>
        Flow.recoverRun(recoverySpec(key, rrules), internal.seed(), typeof effect === 'function'),
      );
      let ran;
      const probe = tel === null ? null : tel.begin('effect');
      probe?.sawKey(key, true);
      try {
        let step = advance(flow, undefined, probe);
        while (step.tag === 'io') {
          const op = step.val;
          if (op.tag === 'ask') {
            step = advance(flow, { tag: 'answered', val: ask(op.val) }, probe);
          } else if (op.tag === 'effect') {
            ran = runNow(op.val);
            step = advance(flow, { tag: 'effected', val: { result: ran.wit, now: BigInt(now()) } }, probe);
          } else {
            throw new Error(`intentkey: the core asked for ${op.tag} during a recovery (a bug)`);
          }
        }
        probe?.ran(step.val.val, 0, true);
        if (misuse !== null) throw misuse;
        return recoveryResult(key, step.val.val, ran);
      } catch (e) {
        probe?.failed(e);
        throw e;
      } finally {
        flow.drop();
      }
    }

    /** The keys of the in-flight records due a look-up now (at most `limit` read, oldest first). */
    async function due(request = {}) {
      const stale =
        request.staleAfterSeconds === undefined ? staleAfterSeconds : seconds(request.staleAfterSeconds, 'staleAfterSeconds');
      const limit = u32(request.limit ?? 1000, 'limit');
      const t = now();
      const out = await drive((Flow) => Flow.due(t, stale, limit));
      return out.val;
    }

    /**
     * recover() for every due in-flight record, oldest first. A record whose
     * recovery throws is reported as { outcome: 'error', key, error } and the
     * others go on.
     */
    async function recoverAll(request = {}) {
      const keys = await due(request);
      const results = [];
      for (const key of keys) {
        try {
          results.push(await recover({ ...request, key }));
        } catch (error) {
          results.push({ outcome: 'error', key, error });
        }
      }
      return results;
    }

    /** Deletes the done records expired now; returns how many. */
    async function purge() {
      const t = now();
      if (sync) return Number(internal.driving(store, null, (g) => g.purge(t)));
      const out = await drive((Flow) => Flow.purge(t));
      return Number(out.val);
    }

    /** The record under `key` (stored spelling, numbers), or null. */
    async function inspect(key) {
      nonEmpty(key, 'key');
      let r;
      try {
        r = await store.get(key);
      } catch (e) {
        throw storeFailure(e);
      }
      return r === undefined || r === null ? null : recordOut(r);
    }

    /** The records with `status` (stored spelling), oldest first. */
    async function list(status, { limit = U32_MAX } = {}) {
      const wit = statusIn(status, 'status');
      let rs;
      try {
        rs = await store.list(wit, u32(limit, 'limit'));
      } catch (e) {
        throw storeFailure(e);
      }
      return rs.map(recordOut);
    }

    /** A driver of the core's serve flow for `request` on the guard's endpoint (see http/serving.js). */
    function serveFlow(request, probe = null) {
      if (endpoint === null || typeof endpoint[SERVE] !== 'function') {
        throw new TypeError('createGuard: serving requests needs an endpoint (createGuard({ store, endpoint }))');
      }
      const flow = endpoint[SERVE](request, rules, internal.seed(), now());
      const next = sync ? (done) => advance(flow, done, probe) : (done) => (done === undefined ? flow.start() : flow.resume(done));
      return Object.freeze({ next, perform: (op) => performOrFail(op, probe), drop: () => flow.drop() });
    }

    /** The background releases in progress (see releaseInBackground). */
    const releasing = new Set();

    /**
     * Releases, in the background, a claim whose insert failed (the serve
     * flow's `served.unreleased`: its answer may have been lost, its handler
     * never ran), so that a retry runs instead of getting 409 until recovery:
     * the core's release flow (`flow.release-claim`), each store call within
     * the deadline, its pauses slept here (op `wait`) with timers that do not
     * keep the process alive, until it answers released, superseded or
     * left-in-flight (the store answered an error, or never came back in
     * 300 s). It stops when the store is closed. A claim left in flight is
     * reported (`report`, phase 'release'): recovery settles it.
     */
    function releaseInBackground(request, report) {
      const task = releaseClaim(request, report);
      releasing.add(task);
      task.finally(() => releasing.delete(task));
      return task;
    }

    async function releaseClaim(request, report) {
      let finished = null;
      let lastError = null;
      let closed = closing?.closed === true;
      // An abandoned insert of this claim may still land: release after it ends
      // (at most the release flow's own limit, 300 s).
      const ended = closed ? null : insertsEnded(request.key, claims.releaseGiveUpMs());
      if (ended !== null) {
        await ended;
        closed = closing?.closed === true;
      }
      if (!closed) {
        let flow = null;
        try {
          flow = internal.flow((Flow) => Flow.releaseClaim(request));
          let step = sync ? advance(flow, undefined, null) : flow.start();
          while (step.tag === 'io') {
            const op = step.val;
            if (op.tag === 'wait') {
              await pause(op.val, closing);
              if (closing?.closed) {
                closed = true;
                break;
              }
              step = sync ? advance(flow, WAITED, null) : flow.resume(WAITED);
            } else if (sync) {
              throw new Error(`intentkey: the core asked for ${op.tag} while releasing a claim (a bug)`);
            } else {
              const { result, error } = await performOrFail(op, null, true);
              if (error !== null) lastError = error;
              step = flow.resume(result);
            }
          }
          if (!closed) finished = step.val.val;
        } catch (e) {
          lastError = e;
        } finally {
          flow?.drop();
        }
      }
      finished ??= 'left-in-flight';
      if (tel !== null) {
        try {
          tel.count(tel.releaseDecision(finished));
        } catch {
          // telemetry never breaks a release
        }
      }
      if (finished === 'left-in-flight') {
        const code = lastError instanceof IntentkeyError && lastError.code === 'store-failed' ? 'store-failed' : 'store-unavailable';
        const why = closed ? 'the store was closed before it could be released' : 'the store did not take its release';
        report(
          new IntentkeyError(
            code,
            `a claim whose insert failed (its handler never ran) is left in flight: ${why}; recovery settles it`,
            undefined,
            lastError === null ? undefined : { cause: lastError },
          ),
          { phase: 'release', key: request.key },
        );
      }
      return finished;
    }

    const onError = options.onError ?? null;
    if (onError !== null && typeof onError !== 'function') throw new TypeError('createGuard: onError must be a function (error, context)');
    /** Hands what guard.serve() does not send (store failures, a handler's error) to onError, or logs it. */
    function report(error, context, log) {
      try {
        if (onError !== null) onError(error, context);
        else (log ?? console.error)(`intentkey: ${context.phase}:`, error);
      } catch {
        // an onError that throws must not break the request
      }
    }
    const serving =
      endpoint === null
        ? null
        : servingFor({
            start: serveFlow,
            endpoint,
            now,
            report,
            watch,
            release: (request) => releaseInBackground(request, report),
            telemetry: tel,
          });

    /**
     * Serves one request through the core's serve flow (admit, claim, the
     * handler, capture, finish by outcome class, the answer): what an HTTP
     * adapter does, for a host with no framework. `request`: { tenantId,
     * method, route, keyValues, contentType?, body }. `handler(idempotency)`
     * runs when the request owns the effect (or runs unguarded, with null):
     * it answers { status, headers: [name, value][], body }, or throws (an
     * error with a 4xx `status`/`statusCode` releases the claim; anything
     * else leaves the record in flight). Resolves with { path, ran, reply,
     * finished, finishRetries }: `reply` is the core's answer to send (null
     * for 'handler' and 'unguarded': send the handler's own; for 'released':
     * answer the error), `error` the handler's throw.
     */
    async function serve(request, handler, serveOptions) {
      if (serving === null) throw new TypeError('guard.serve needs an endpoint: createGuard({ store, endpoint: createEndpoint(…) })');
      if (typeof handler !== 'function') throw new TypeError('guard.serve(request, handler): handler must be a function');
      if (serveOptions !== undefined) {
        if (serveOptions === null || typeof serveOptions !== 'object') throw new TypeError('guard.serve(request, handler, options): options is { signal? }');
        for (const name of Object.keys(serveOptions)) {
          if (name !== 'signal') throw new TypeError(`guard.serve(): unknown option ${name}; the options are signal`);
        }
      }
      const signal = serveOptions?.signal;
      const served = await serving.serve(request, signal);
      // The client went away while this request waited for the first attempt.
      if (served.tag === 'aborted') throw signal?.reason ?? new WaitAborted();
      if (served.tag === 'reply') {
        return { path: served.path, ran: false, reply: served.reply, finished: null, finishRetries: 0, waitedMs: served.waitedMs };
      }
      if (served.tag === 'unguarded') {
        return { path: 'unguarded', ran: true, reply: null, finished: null, finishRetries: 0, answer: await handler(null) };
      }
      const { ticket } = served;
      let answer;
      try {
        answer = await handler(ticket.idempotency);
      } catch (error) {
        return { ...(await ticket.raise(error)), ran: true, error };
      }
      return { ...(await ticket.answer(answer)), ran: true, answer };
    }

    return Object.freeze({
      serve,
      [PIPELINE]: Object.freeze({
        /**
         * Serves one request through the core's serve flow on the guard's
         * endpoint: { next(done) (the next step; a synchronous store's
         * operations run inside the component), perform(op) (an asynchronous
         * store's operation: { result, error }, a failure as the WIT op-result
         * `failed` for the flow to decide on), drop() }.
         */
        serve: serveFlow,
        /** Performs op `watch` ({ key, ms }, signal): the WIT `watched`, or throws WaitAborted. */
        watch,
        now,
        /** Releases a claim whose insert failed, in the background (see releaseInBackground): a promise of its finished. */
        release: releaseInBackground,
        /** Resolves once every background release in progress now has ended. */
        releases: () => Promise.allSettled([...releasing]).then(() => {}),
        /** The guard's telemetry (null in browsers and workerd). */
        telemetry: tel,
        /** The deadline of one store call, in milliseconds. */
        storeDeadlineMs: deadlineMs,
      }),
      [RUN]: runAs,
      [WAIT_OPTION]: (wait, who) => internal.waitMaxMs(wait, who),
      [DELIVERY](recovery, t) {
        const d = internal.rawClaims((c) => c.inFlightDelivery(recovery?.[RECOVERED], BigInt(t)));
        return d.tag === 'retry' ? { retryAt: Number(d.val.at), reason: d.val.reason } : { needsReconciliation: true };
      },
      run,
      recover,
      recoverSync,
      /** The deadline of one store call of an asynchronous store, in milliseconds (the core's 2000 unless storeDeadlineMs). */
      storeDeadlineMs: deadlineMs,
      /** How long a run that finds its record in flight waits for the first attempt, in ms (0: no wait). */
      waitMaxMs,
      recoverAll,
      due,
      purge,
      inspect,
      list,
      store: given,
      keyer,
      rules: Object.freeze({ ...ruleValues, releaseStatuses: Object.freeze([...ruleValues.releaseStatuses]) }),
      staleAfterSeconds,
    });
  };
}
