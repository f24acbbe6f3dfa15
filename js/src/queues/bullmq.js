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
import { DelayedError, UnrecoverableError } from 'bullmq';
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

/**
 * A BullMQ processor `(job, token) => result`: `new Worker(name, idempotentProcessor({ … }), opts)`.
 * @param {object} options { guard, intent, effect, lookup?, readYourWrites?, onOutcome? }
 */
export function idempotentProcessor(options) {
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
