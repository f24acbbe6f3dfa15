// intentkey/bullmq: a BullMQ processor that runs each job's effect once per
// intent, across redeliveries (a stalled job whose worker died, a producer that
// re-enqueued). The consumer (consumer.js) claims through the guard; this file
// only turns its answer into BullMQ's verbs:
//  - complete: the processor returns the result (the effect's, or the stored one);
//  - wait (the intent is in flight elsewhere, or recovery has not decided yet):
//    job.moveToDelayed(the instant the core named, token) and DelayedError, so the
//    job comes back exactly when recovery is due and waiting burns no attempt;
//  - fail for good (payload conflict, needs reconciliation, an intent that cannot
//    be keyed): UnrecoverableError, whatever `attempts` is left;
//  - anything retryable (the store unreachable, the effect's own throw, a
//    refusal) is thrown as it is: BullMQ retries by the job's attempts/backoff.
// Given the Worker's options, it refuses a Redis Cluster connection with a
// prefix that is not hash-tagged (BullMQ's scripts would be CROSSSLOT).
import { DelayedError, UnrecoverableError } from 'bullmq';
import { IntentkeyError } from '../errors.js';
import { createConsumer, IntentkeyQueueError } from './consumer.js';

export { IntentkeyQueueError };

/** BullMQ's permanent failure, carrying the typed error (code, key) it stands for. */
function unrecoverable(error) {
  const message = error instanceof Error ? error.message : String(error);
  const u = new UnrecoverableError(message);
  if (error !== null && typeof error === 'object') {
    if (error.code !== undefined) u.code = error.code;
    if (error.key !== undefined) u.key = error.key;
    if (error.field !== undefined) u.field = error.field;
  }
  u.cause = error;
  return u;
}

/** BullMQ's key prefix when a Worker or Queue names none. */
const BULLMQ_PREFIX = 'bull';

/** Whether every key under `prefix` hashes by a tag in it: `{`, then `}` after at least one character (Redis's rule). */
function hashTagged(prefix) {
  const open = prefix.indexOf('{');
  return open >= 0 && prefix.indexOf('}', open + 1) > open + 1;
}

/**
 * Refuses Worker options a Redis Cluster cannot serve: a Cluster `connection`
 * with a `prefix` (default `bull`) that is not hash-tagged, whose queue keys
 * spread over slots, so that every BullMQ script is CROSSSLOT.
 */
function checkWorkerOptions(workerOptions) {
  if (workerOptions === undefined) return;
  if (workerOptions === null || typeof workerOptions !== 'object') {
    throw new TypeError('idempotentProcessor: the second argument is the Worker’s options ({ connection, prefix }), if given');
  }
  const { connection, prefix = BULLMQ_PREFIX } = workerOptions;
  if (connection?.isCluster !== true || (typeof prefix === 'string' && hashTagged(prefix))) return;
  throw new IntentkeyError(
    'invalid-argument',
    `idempotentProcessor: \`prefix\` ${typeof prefix === 'string' ? JSON.stringify(prefix) : `(a ${typeof prefix})`} is not ` +
      'hash-tagged and the connection is a Redis Cluster: BullMQ’s scripts touch several keys of a queue, which a cluster ' +
      "refuses (CROSSSLOT) unless they share one slot. Give the Worker and every Queue a prefix with a hash tag, e.g. prefix: '{bull}'",
    'prefix',
  );
}

/**
 * A BullMQ processor `(job, token) => result`: `new Worker(name, idempotentProcessor({ … }, opts), opts)`.
 * @param {object} options { guard, intent, effect, lookup?, readYourWrites?, onOutcome? }
 * @param {{ connection?: unknown, prefix?: string }} [workerOptions] the Worker's
 *   options: a Redis Cluster connection needs a hash-tagged prefix (`{bull}`),
 *   else an IntentkeyError `invalid-argument` (field `prefix`)
 */
export function idempotentProcessor(options, workerOptions) {
  checkWorkerOptions(workerOptions);
  const consumer = createConsumer(options, 'idempotentProcessor');
  return async function intentkeyProcessor(job, token) {
    if (job === null || typeof job !== 'object' || typeof job.moveToDelayed !== 'function') {
      throw new TypeError('idempotentProcessor: called without a BullMQ job; pass the processor to new Worker(name, processor)');
    }
    const step = await consumer.consume(job);
    switch (step.action) {
      case 'complete':
        return step.value;
      case 'wait':
        if (typeof token !== 'string') {
          // Without the worker's lock token the job cannot be moved to delayed: retry it by its attempts.
          throw step.error;
        }
        await job.moveToDelayed(Date.now() + step.delayMs, token);
        throw new DelayedError(step.error.message);
      default:
        throw unrecoverable(step.error);
    }
  };
}
