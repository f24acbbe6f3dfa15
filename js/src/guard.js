// The guard: claim, run once, replay; and recovery of abandoned claims.
//
// The guard does the I/O (the store, the effect, the destination look-up) and
// asks the core's `claims` exports what everything means: what an attempt whose
// insert lost gets, the HTTP answers, when a done record expires, what a
// look-up means and when to ask again. The store's unique key decides who owns
// an effect (insert … on conflict do nothing; never check-then-insert). An
// in_flight record is never released by age: it leaves in_flight only by
// completion or by recovery, and an `unknown` look-up never runs the effect.
import { claims } from './node-core.js';
import { responseIn } from './claims.js';

/** Whole seconds now, the default clock. */
const systemNow = () => Math.floor(Date.now() / 1000);

/** A JSON response for an effect to return or to attach to a thrown error. */
export function jsonResponse(status, value) {
  return { status, contentType: 'application/json', body: JSON.stringify(value) };
}

function nonEmpty(value, what) {
  if (typeof value !== 'string' || value.length === 0) throw new TypeError(`${what} must be a non-empty string`);
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
 * @param {{
 *   store: object,
 *   keyer?: object,
 *   ttlSeconds?: number,
 *   staleAfterSeconds?: number,
 *   now?: () => number,
 * }} options
 */
export function createGuard(options = {}) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError('createGuard takes { store, keyer?, ttlSeconds?, staleAfterSeconds?, now? }');
  }
  const { store, keyer } = options;
  for (const method of ['insertIfAbsent', 'get', 'complete', 'applyRecovery', 'list', 'purge']) {
    if (store === null || typeof store !== 'object' || typeof store[method] !== 'function') {
      throw new TypeError(`createGuard: the store must have ${method}() (memoryStore, sqliteStore, pgStore)`);
    }
  }
  const clock = options.now ?? systemNow;
  if (typeof clock !== 'function') throw new TypeError('now must be a function returning whole seconds');
  const now = () => seconds(clock(), 'now()');
  const ttlSeconds =
    options.ttlSeconds === undefined ? claims.defaultTtlSeconds() : seconds(options.ttlSeconds, 'ttlSeconds');
  const defaultStaleAfter =
    options.staleAfterSeconds === undefined ? undefined : seconds(options.staleAfterSeconds, 'staleAfterSeconds');

  function needKeyer(what) {
    if (keyer === undefined || keyer === null) {
      throw new TypeError(`createGuard needs a keyer to ${what}: createGuard({ store, keyer: createKeyer(...) })`);
    }
    return keyer;
  }

  /** The key, fingerprint, tenant and action of a run() input. */
  function identify(input) {
    if (input === null || typeof input !== 'object') {
      throw new TypeError('run() takes { intent } or { key, tenantId, actionType, fingerprint | payload }');
    }
    if (input.intent !== undefined) {
      const k = needKeyer('derive keys from intents');
      const { intent } = input;
      return {
        key: k.derive(intent),
        fingerprint: k.fingerprint(intent.tenantId, intent.actionType, intent.payload),
        tenantId: intent.tenantId,
        actionType: intent.actionType,
      };
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
   * Runs the effect for an owned record and completes it. A thrown error with a
   * `response` is an answer like any other: stored, so it is replayed. Any other
   * throw leaves the record in_flight (the effect may have happened) and is
   * rethrown; recovery asks the destination later.
   */
  async function execute(record, effect) {
    let response;
    let error;
    try {
      response = await effect(record.key);
    } catch (e) {
      const carried = errorResponse(e);
      if (carried === null) throw e;
      response = carried;
      error = e;
    }
    response = responseIn(response, 'the effect’s response');
    const completed = claims.complete(record, response, now(), ttlSeconds);
    const recorded = await store.complete(record.key, completed);
    const result = { outcome: 'owned', response, replayed: false, key: record.key, recorded };
    if (error !== undefined) result.error = error;
    return result;
  }

  async function run(input, effect) {
    if (typeof effect !== 'function') throw new TypeError('run(input, effect): effect must be a function (key) => response');
    const { key, fingerprint, tenantId, actionType } = identify(input);
    // The insert decides. If it lost and the winner is gone by the time we read it
    // (purged after expiring), claim again: a few tries, then give up loudly.
    for (let attempt = 0; attempt < 3; attempt++) {
      const record = claims.newRecord(key, fingerprint, tenantId, actionType, now());
      if (await store.insertIfAbsent(record)) return execute(record, effect);
      const existing = await store.get(key);
      if (existing === null) continue;
      const decision = claims.decideExisting(existing, fingerprint);
      const answer = claims.answerFor(decision);
      if (answer === null) {
        throw new Error(`intentkey: the core let a lost claim own key ${key}; this is a bug, please report it`);
      }
      return {
        outcome: decision.outcome,
        response: { status: answer.status, contentType: answer.contentType, body: answer.body },
        replayed: answer.replayed,
        key,
      };
    }
    throw new Error(`intentkey: the record of key ${key} kept vanishing between claim and read; is a purge racing?`);
  }

  function staleAfter(value) {
    const s = value === undefined ? defaultStaleAfter : seconds(value, 'staleAfterSeconds');
    if (s === undefined) {
      throw new TypeError(
        'recovery needs staleAfterSeconds: how long a claim may run before the destination is asked ' +
          '(createGuard({ staleAfterSeconds }) or recover({ staleAfterSeconds }))',
      );
    }
    return s;
  }

  /**
   * Asks the destination about one in_flight record and applies the core's
   * decision. Re-executes only when the core says so (a read-your-writes
   * destination answered absent), with the same key.
   */
  async function recover(request) {
    if (request === null || typeof request !== 'object') {
      throw new TypeError('recover() takes { key, lookup, readYourWrites?, effect?, staleAfterSeconds? }');
    }
    const { key, lookup, effect } = request;
    const readYourWrites = request.readYourWrites ?? false;
    nonEmpty(key, 'key');
    if (typeof lookup !== 'function') throw new TypeError('recover(): lookup must be a function (key) => answer');
    if (typeof readYourWrites !== 'boolean') throw new TypeError('readYourWrites must be a boolean');
    if (readYourWrites && typeof effect !== 'function') {
      throw new TypeError('recover(): a read-your-writes destination can answer absent; pass the effect to run again');
    }
    const stale = staleAfter(request.staleAfterSeconds);

    const record = await store.get(key);
    if (record === null) return { action: 'missing', key };
    const t = now();
    if (!claims.recoveryDue(record, t, stale)) return { action: 'not-due', key, record };

    let answer;
    try {
      answer = await lookup(key);
    } catch (e) {
      // A look-up that fails (timeout, 5xx, network) could not tell.
      answer = 'unknown';
    }
    const decision = claims.decideRecovery(record, answer, readYourWrites, t);
    switch (decision.action) {
      case 'record-done': {
        const next = claims.complete(record, decision.response, t, ttlSeconds);
        const applied = await store.applyRecovery(key, record, next);
        return { action: 'record-done', key, applied, response: decision.response };
      }
      case 'check-later': {
        const next = { ...record, lookups: decision.lookups, nextLookupAt: decision.nextLookupAt };
        const applied = await store.applyRecovery(key, record, next);
        return { action: 'check-later', key, applied, lookups: decision.lookups, nextLookupAt: decision.nextLookupAt };
      }
      case 'reconcile': {
        const next = { ...record, status: 'needs_reconciliation', lookups: decision.lookups };
        const applied = await store.applyRecovery(key, record, next);
        return { action: 'reconcile', key, applied, lookups: decision.lookups };
      }
      case 're-execute': {
        // Claim the re-execution first: the core's fresh in_flight record replaces
        // the one read, only if nobody changed it meanwhile. One recoverer wins.
        const next = claims.newRecord(key, record.fingerprint, record.tenantId, record.actionType, t);
        const applied = await store.applyRecovery(key, record, next);
        if (!applied) return { action: 're-execute', key, applied };
        const result = await execute(next, effect);
        return { action: 're-execute', key, applied, response: result.response, recorded: result.recorded };
      }
      default:
        throw new Error(`intentkey: unknown recovery action ${decision.action}`);
    }
  }

  /** Recovers every in_flight record that the core says is due (oldest first). */
  async function recoverAll(request = {}) {
    const stale = staleAfter(request.staleAfterSeconds);
    const records = await store.list('in_flight', request.limit === undefined ? {} : { limit: request.limit });
    const results = [];
    for (const record of records) {
      const result = await recover({ ...request, key: record.key, staleAfterSeconds: stale });
      if (result.action !== 'not-due' && result.action !== 'missing') results.push(result);
    }
    return results;
  }

  /** Deletes the records the core says are purgeable now; returns how many. */
  async function purge() {
    return store.purge(now());
  }

  return Object.freeze({ run, recover, recoverAll, purge, store, keyer, ttlSeconds });
}
