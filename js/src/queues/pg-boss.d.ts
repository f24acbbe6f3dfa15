// intentkey/pg-boss: a pg-boss 10 work handler that runs each job's effect once per intent.
import type { JsonValue, QueueConsumerOptions } from './consumer.js';

export type { JsonValue, QueueConsumerOptions, QueueIntent, QueueLookupAnswer, QueueOutcome, QueueOutcomeEvent } from './consumer.js';
export { IntentkeyQueueError } from './consumer.js';

/** What the handler uses of a pg-boss job (structural, so that these types need no pg-boss types). */
export interface BossJob<Data = any> {
  id: string;
  name: string;
  data: Data;
}

/**
 * `await boss.work(name, idempotentHandler({ guard, intent, effect, lookup, readYourWrites }))`.
 * Returns the result (the effect's, or the stored one; pg-boss keeps it as the
 * job's output). Everything else is thrown, and pg-boss retries the job by its
 * retryLimit / retryDelay / retryBackoff: a delivery that meets its intent in
 * flight (IntentkeyQueueError 'in-flight', with retryAt), a refusal, the effect's
 * throw, the store being unreachable; and the permanent ones (payload conflict,
 * needs reconciliation, an intent that cannot be keyed), which pg-boss 10 cannot
 * fail without retry: each retry meets the same answer and runs nothing.
 */
export function idempotentHandler<Data = any>(
  options: QueueConsumerOptions<BossJob<Data>>,
): (jobs: BossJob<Data>[]) => Promise<JsonValue | (JsonValue | undefined)[]>;
