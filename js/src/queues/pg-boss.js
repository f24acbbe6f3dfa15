// intentkey/pg-boss: a pg-boss 10 work handler that runs each job's effect once
// per intent, across redeliveries (an expired job whose worker died, a producer
// that re-enqueued). The consumer (consumer.js) claims through the guard; this
// file only turns its answer into pg-boss's verbs:
//  - complete: the handler returns the result (the effect's, or the stored one);
//  - wait (the intent is in flight elsewhere, or recovery has not decided yet):
//    throws IntentkeyQueueError 'in-flight' (with retryAt), so pg-boss retries the
//    job by its retryLimit / retryDelay / retryBackoff;
//  - fail for good (payload conflict, needs reconciliation, an intent that cannot
//    be keyed): throws the typed error. pg-boss 10 has no failure without retry:
//    a job with retries left is retried, meets the same answer (nothing runs), and
//    fails when its retryLimit is spent (then its deadLetter queue, if any, gets it);
//  - anything retryable (the store unreachable, the effect's own throw, a
//    refusal) is thrown as it is.
import { createConsumer, IntentkeyQueueError } from './consumer.js';

export { IntentkeyQueueError };

/**
 * A pg-boss work handler `(jobs) => result`: `await boss.work(name, idempotentHandler({ … }))`.
 * Jobs of a batch (`batchSize` > 1) run one after the other; if any throws, the
 * first error is thrown once all have run, pg-boss retries the whole batch, and
 * the jobs already done replay their stored results.
 * @param {object} options { guard, intent, effect, lookup?, readYourWrites?, onOutcome? }
 */
export function idempotentHandler(options) {
  const consumer = createConsumer(options, 'idempotentHandler');
  async function one(job) {
    const step = await consumer.consume(job);
    if (step.action === 'complete') return step.value;
    throw step.error;
  }
  return async function intentkeyHandler(jobs) {
    if (!Array.isArray(jobs)) {
      throw new TypeError('idempotentHandler: called without pg-boss jobs; pass the handler to boss.work(name, handler)');
    }
    if (jobs.length === 1) return one(jobs[0]);
    const results = [];
    let failure = null;
    for (const job of jobs) {
      try {
        results.push(await one(job));
      } catch (e) {
        failure ??= e;
        results.push(undefined);
      }
    }
    if (failure !== null) throw failure;
    return results;
  };
}
