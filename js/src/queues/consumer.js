// Queue consumers: one job, one intent, one effect, whatever the queue
// redelivers. The queue-agnostic part, shared by intentkey/bullmq and
// intentkey/pg-boss; those adapters only turn its answer into the queue's own
// verbs (complete, retry later, fail for good).
//
// Nothing here decides a claim, a replay or a recovery: every one of those is
// the core's, reached through the guard (`guard.run` to claim, replay or run
// the effect; `guard.recover` when a delivery finds the intent in flight). This
// file converts: the job into a claim input (its intent, never its job id),
// the effect's JSON result into the stored response and back, the user's
// destination look-up into the guard's look-up answer, and the guard's outcome
// into what the queue should do with the delivery.
import { DELIVERY, IntentkeyRefused, PIPELINE, RUN, WAIT_OPTION } from '../guard.js';
import { WAITING } from '../stores/trusted.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** How long after the instant the core named a delayed delivery comes back (the core's times are whole seconds). */
const MARGIN_MS = 250;

/**
 * A delivery that cannot finish now, or ever: `code` says which.
 *  - 'payload-conflict': the intent's key was claimed with another payload
 *    (fingerprint). Permanent: nothing ran and nothing will.
 *  - 'needs-reconciliation': the destination could not tell, look-up after
 *    look-up, whether the effect happened; the core moved the record to
 *    needs_reconciliation for a person to settle. Permanent.
 *  - 'in-flight': another delivery of the intent is running, or recovery has not
 *    decided yet; retry at `retryAt` (whole seconds). Thrown to the queue
 *    (pg-boss) so that it retries by its own policy.
 *  - 'refused': the effect declared that nothing happened (IntentkeyRefused) and
 *    the claim was released; a retry runs it again.
 */
export class IntentkeyQueueError extends Error {
  /**
   * @param {'payload-conflict' | 'needs-reconciliation' | 'in-flight' | 'refused'} code
   * @param {string} message
   * @param {{ key?: string, jobId?: string, retryAt?: number, cause?: unknown }} [details]
   */
  constructor(code, message, details = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'IntentkeyQueueError';
    this.code = code;
    this.key = details.key;
    this.jobId = details.jobId;
    if (details.retryAt !== undefined) this.retryAt = details.retryAt;
  }
}

/** An effect's own throw, carried through the guard unchanged (never read as an answered response). */
class EffectFailure {
  constructor(error) {
    this.error = error;
  }
}

const isObject = (v) => v !== null && typeof v === 'object';

/** The stored response of an effect's JSON result. */
function resultResponse(value, what) {
  let body;
  try {
    body = JSON.stringify(value === undefined ? null : value);
  } catch (e) {
    throw new TypeError(`${what} must be JSON (JSON.stringify failed: ${e instanceof Error ? e.message : e})`);
  }
  if (body === undefined) throw new TypeError(`${what} must be JSON (a ${typeof value} is not)`);
  return { status: 200, contentType: 'application/json', headers: [], body: encoder.encode(body) };
}

/** The JSON result a stored response holds. */
function resultOf(response, key) {
  const text = decoder.decode(response.body);
  try {
    return JSON.parse(text);
  } catch {
    throw new TypeError(
      `the record under key ${key} does not hold a queue result (JSON): was the key used by something other ` +
        'than a queue consumer? Give the queue its own actionType or tenant',
    );
  }
}

function label(job) {
  return isObject(job) && job.id !== undefined && job.id !== null ? `job ${job.id}` : 'the job';
}

function checkOptions(options, who) {
  if (!isObject(options)) {
    throw new TypeError(`${who} takes { guard, intent, effect, lookup?, readYourWrites?, onOutcome?, wait? }`);
  }
  const { guard, intent, effect, lookup, readYourWrites = false, onOutcome } = options;
  if (!isObject(guard) || typeof guard.run !== 'function' || typeof guard.recover !== 'function' || guard[PIPELINE] === undefined) {
    throw new TypeError(`${who}: guard must be one createGuard({ store, keyer, staleAfterSeconds? }) made`);
  }
  if (guard.keyer === undefined || guard.keyer === null) {
    throw new TypeError(`${who}: the guard needs a keyer to key intents: createGuard({ store, keyer: createKeyer(...) })`);
  }
  if (typeof intent !== 'function') {
    throw new TypeError(
      `${who}: intent must be a function (job) => { tenantId, intentId, actionType, payload } (intent-hmac) ` +
        'or { tenantId, actionType, payload, intentEpoch } (fields); never the job id, which changes when a producer re-enqueues',
    );
  }
  if (typeof effect !== 'function') throw new TypeError(`${who}: effect must be a function (key, job) => JSON result`);
  if (lookup !== undefined && typeof lookup !== 'function') {
    throw new TypeError(`${who}: lookup must be a function (key, job) => { found: result } | 'absent' | 'unknown'`);
  }
  if (typeof readYourWrites !== 'boolean') throw new TypeError(`${who}: readYourWrites must be a boolean`);
  if (readYourWrites && lookup === undefined) {
    throw new TypeError(`${who}: readYourWrites needs the lookup that reads the destination: lookup: (key, job) => …`);
  }
  if (onOutcome !== undefined && typeof onOutcome !== 'function') {
    throw new TypeError(`${who}: onOutcome must be a function ({ job, key, outcome, … }) => void`);
  }
  // A delivery that finds its intent in flight (another delivery runs it)
  // waits up to wait.maxMs for its result; default the guard's wait.
  const waitMaxMs = options.wait === undefined ? undefined : guard[WAIT_OPTION](options.wait, who);
  if (waitMaxMs > 0) guard.store?.[WAITING]?.();
  return { guard, intent, effect, lookup, readYourWrites, onOutcome, waitMaxMs };
}

function need(shape, name, what, where) {
  if (shape[name] === undefined) {
    throw new TypeError(`${where}: intent(job) returned no ${name} (${what})`);
  }
  return shape[name];
}

/**
 * The guard's claim input for the intent a job carries.
 *  - { tenantId, intentId, actionType, payload, intentEpoch?, keyHexLength? }:
 *    `intent-hmac` mode, the key from the recorded intent id, the payload
 *    fingerprinted (under the secret active at intentEpoch when given);
 *  - { tenantId, actionType, payload, intentEpoch }: `fields` mode, the key
 *    derived from the payload under the keyer's policy.
 */
function claimInput(shape, keyer, where) {
  if (!isObject(shape)) {
    throw new TypeError(
      `${where}: intent(job) must return { tenantId, intentId, actionType, payload } (intent-hmac) or ` +
        `{ tenantId, actionType, payload, intentEpoch } (fields), not ${shape === null ? 'null' : typeof shape}`,
    );
  }
  const tenantId = need(shape, 'tenantId', 'the tenant the intent belongs to', where);
  const actionType = need(shape, 'actionType', 'what the intent does, e.g. "pix.send"', where);
  const payload = need(shape, 'payload', 'the business fields, fingerprinted so that a reused intent with other fields fails', where);
  if ('intentId' in shape) {
    const { intentId, intentEpoch, keyHexLength } = shape;
    if (typeof intentId !== 'string') {
      throw new TypeError(`${where}: intentId must be the recorded intent's id, a string (got ${typeof intentId})`);
    }
    if (intentEpoch === undefined) {
      // No epoch: the keyer's one secret (a keyring asks for the epoch, by name).
      return {
        key: keyer.intentKey(tenantId, intentId, keyHexLength),
        fingerprint: keyer.fingerprint(tenantId, actionType, payload),
        tenantId,
        actionType,
      };
    }
    return keyer.intentAttempt({ tenantId, actionType, payload, intentEpoch, intentId, keyHexLength });
  }
  const intentEpoch = need(
    shape,
    'intentEpoch',
    'when the intent was recorded, whole seconds; or give intentId for the intent-hmac mode',
    where,
  );
  // The core's: key and fingerprint under the secret active at the intent's epoch.
  return keyer.intentAttempt({ tenantId, actionType, payload, intentEpoch });
}

/**
 * The queue-agnostic consumer.
 * @param {object} options see checkOptions
 * @param {string} who the adapter function, for error messages
 * @returns {{ consume(job: any): Promise<Step> }} where Step is
 *   { action: 'complete', value, key, outcome } | { action: 'wait', delayMs, error, key }
 *   | { action: 'fail', error, key? }; a retryable failure (the store unreachable,
 *   the effect's own throw, a refusal) is thrown.
 */
export function createConsumer(options, who) {
  const { guard, intent, effect, lookup, readYourWrites, onOutcome, waitMaxMs } = checkOptions(options, who);
  const now = guard[PIPELINE].now;

  async function report(event) {
    if (onOutcome !== undefined) await onOutcome(event);
  }

  function effectFor(job) {
    return async (key) => {
      let value;
      try {
        value = await effect(key, job);
      } catch (e) {
        if (e instanceof IntentkeyRefused) throw e; // nothing happened: released
        throw new EffectFailure(e); // ambiguous: stays in flight; the throw goes back to the queue as it was
      }
      try {
        return resultResponse(value, 'the effect’s result');
      } catch (e) {
        throw new EffectFailure(e); // the effect ran: its outcome is now the destination's to tell
      }
    };
  }

  function lookupFor(job, misuse) {
    return async (key) => {
      const answer = await lookup(key, job); // a throw: the guard counts it as unknown
      if (answer === 'absent' || answer === 'unknown') return answer;
      if (isObject(answer) && 'found' in answer) {
        try {
          return { found: resultResponse(answer.found, 'lookup’s { found } result') };
        } catch (e) {
          misuse.error = e;
          return 'unknown';
        }
      }
      misuse.error = new TypeError(
        `lookup(key, job) must answer { found: result } (the destination has it), 'absent' or 'unknown'; ` +
          `it answered ${answer === null ? 'null' : typeof answer}`,
      );
      return 'unknown';
    };
  }

  /** Unwraps what a guard call threw: the effect's own error, a refusal, or a store failure. */
  async function rethrow(e, job, key) {
    if (e instanceof EffectFailure) {
      await report({ job, key, outcome: 'failed', error: e.error });
      throw e.error;
    }
    if (e instanceof IntentkeyRefused) {
      await report({ job, key, outcome: 'refused', error: e });
      throw e;
    }
    throw e;
  }

  async function complete(job, key, outcome, response) {
    const value = resultOf(response, key);
    await report({ job, key, outcome, value });
    return { action: 'complete', value, key, outcome };
  }

  async function wait(job, key, reason, until) {
    const t = now();
    const retryAt = Math.max(until, t);
    const error = new IntentkeyQueueError(
      'in-flight',
      `intentkey: ${label(job)}: in-flight: its intent (key ${key}) is ${reason}; retry at ${new Date(retryAt * 1000).toISOString()}`,
      { key, jobId: job?.id ?? undefined, retryAt },
    );
    await report({ job, key, outcome: 'waiting', reason, retryAt });
    return { action: 'wait', delayMs: (retryAt - t) * 1000 + MARGIN_MS, error, key };
  }

  async function fail(job, key, error, outcome = error.code) {
    await report({ job, key, outcome, error });
    return { action: 'fail', error, key };
  }

  function permanent(job, key, code, message) {
    return new IntentkeyQueueError(code, `intentkey: ${label(job)}: ${code}: ${message}`, { key, jobId: job?.id ?? undefined });
  }

  async function released(job, key, r) {
    const error = r.error ?? permanent(job, key, 'refused', 'the effect refused: nothing happened; the queue retries it');
    await report({ job, key, outcome: 'refused', error });
    throw error;
  }

  /** The delivery met its intent in flight: the core says when to retry, or that it needs reconciliation. */
  function inFlight(job, key, rec) {
    const d = guard[DELIVERY](rec, now());
    if (d.needsReconciliation) {
      return fail(job, key, permanent(job, key, 'needs-reconciliation', needsReconciliation(key)));
    }
    return wait(job, key, d.reason, d.retryAt);
  }

  function needsReconciliation(key) {
    return (
      `the destination could not tell whether the effect of key ${key} happened, look-up after look-up; ` +
      'the record is needs_reconciliation (intentkey inspect --status needs_reconciliation): settle it by hand, ' +
      'then re-enqueue'
    );
  }

  async function consume(job) {
    const where = `${who}: ${label(job)}`;
    let input;
    try {
      input = claimInput(await intent(job), guard.keyer, where);
    } catch (e) {
      // A job whose intent cannot be keyed never can be: fail it for good.
      return fail(job, undefined, e, 'invalid-intent');
    }
    // The core's run flow: claim, replay, the effect, finish, recovery of a stale
    // record with the destination's look-up, and a bounded claim-again.
    const misuse = { error: null };
    const recovery = { lookup: lookup === undefined ? () => 'unknown' : lookupFor(job, misuse), readYourWrites };
    let r;
    try {
      r = await guard[RUN]('effect', input, effectFor(job), recovery, { waitMaxMs });
    } catch (e) {
      return rethrow(e, job, input.key); // a store failure is thrown as it is: the queue retries
    }
    const { key } = r;
    if (misuse.error !== null) return fail(job, key, misuse.error, 'invalid-lookup');
    switch (r.outcome) {
      case 'owned':
        if (r.finished === 'released') return released(job, key, r);
        return complete(job, key, r.recovered ? 're-executed' : 'ran', r.response);
      case 'done':
        return complete(job, key, r.recovered ? 'recovered' : 'replayed', r.response);
      case 'payload-conflict':
        return fail(
          job,
          key,
          permanent(
            job,
            key,
            'payload-conflict',
            `its intent's key ${key} was claimed with another payload (the fingerprint differs), so it is not run. ` +
              'Two jobs with one intent id must carry the same payload: fix the producer, or record a new intent',
          ),
        );
      case 'in-flight':
        return inFlight(job, key, r.recovery);
      default:
        throw new Error(`intentkey: unknown claim outcome ${r.outcome} (a bug)`);
    }
  }

  return { consume };
}
