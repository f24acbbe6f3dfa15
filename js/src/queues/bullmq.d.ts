// intentkey/bullmq: a BullMQ processor that runs each job's effect once per intent.
import type { JsonValue, QueueConsumerOptions } from './consumer.js';

export type { JsonValue, QueueConsumerOptions, QueueIntent, QueueLookupAnswer, QueueOutcome, QueueOutcomeEvent } from './consumer.js';
export { IntentkeyQueueError } from './consumer.js';

/** What the processor uses of a BullMQ Job (structural, so that these types need no BullMQ types). */
export interface BullJob<Data = any> {
  id?: string;
  data: Data;
  moveToDelayed(timestamp: number, token?: string): Promise<void>;
}

/** What the processor reads of the Worker's options, when given them. */
export interface BullWorkerOptions {
  /** The Worker's connection: a Redis Cluster (ioredis Cluster, `isCluster: true`) needs a hash-tagged prefix. */
  connection?: unknown;
  /** BullMQ's key prefix (its default is `bull`). */
  prefix?: string;
}

/**
 * `new Worker(name, idempotentProcessor({ guard, intent, effect, lookup, readYourWrites }, opts), opts)`.
 * Returns the result (the effect's, or the stored one). A delivery that meets its
 * intent in flight is moved to delayed until recovery is due (burning no attempt);
 * a payload conflict, an intent that cannot be keyed or a record needing
 * reconciliation fails with UnrecoverableError (its `code` and `cause` say which);
 * a refusal, the effect's throw or the store being unreachable is thrown for
 * BullMQ to retry by the job's attempts and backoff. Given the Worker's options
 * (`opts`), a Redis Cluster connection with a prefix that is not hash-tagged
 * (e.g. BullMQ's default `bull`; use `{bull}`) is an IntentkeyError
 * `invalid-argument` whose `field` is `prefix`.
 */
export function idempotentProcessor<Data = any>(
  options: QueueConsumerOptions<BullJob<Data>>,
  workerOptions?: BullWorkerOptions,
): (job: BullJob<Data>, token?: string) => Promise<JsonValue>;
