// Types shared by intentkey/bullmq and intentkey/pg-boss: the queue consumer's options.
import type { Guard } from '../index.js';
import type { Payload, WaitOptions } from '../api.js';

/** A JSON value: what an effect returns, what is stored, and what a duplicate delivery gets back. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [member: string]: JsonValue };

/**
 * The intent a job carries, which does not change across redeliveries. Never the
 * queue's job id: BullMQ and pg-boss give a re-enqueued job a new id.
 *  - intent-hmac: a recorded intent id (e.g. the payment's id in your database);
 *    the key is keyer.intentKey(tenantId, intentId) (intentKeyAt with intentEpoch),
 *    and the payload is fingerprinted, so a job reusing the id with other fields
 *    fails with 'payload-conflict'.
 *  - fields: no recorded id; the key is keyer.derive(...) of the payload under the
 *    keyer's policy (key fields normalized, ignored fields such as request_id or
 *    attempt dropped), so a producer that re-enqueues the same intent with
 *    reformatted fields gets the same key.
 */
export type QueueIntent =
  | { tenantId: string; intentId: string; actionType: string; payload: Payload; intentEpoch?: number | bigint; keyHexLength?: number }
  | { tenantId: string; actionType: string; payload: Payload; intentEpoch: number | bigint; intentId?: undefined };

/** What the destination says about a key: it has the effect's result, it has no record of the key, or it cannot tell. */
export type QueueLookupAnswer = { found: JsonValue } | 'absent' | 'unknown';

/** What happened to one delivery (for logs and metrics). */
export type QueueOutcome =
  | 'ran' // owned: the effect ran and its result was stored
  | 'replayed' // the intent was done: the stored result, the effect not run
  | 'recovered' // a stale in-flight claim, completed from the destination's answer (found)
  | 're-executed' // a stale in-flight claim the destination never saw (absent, read-your-writes): run again, once
  | 'waiting' // in flight elsewhere, or recovery not due / could not tell: the queue retries later
  | 'refused' // the effect refused (nothing happened): released, the queue retries
  | 'failed' // the effect threw: the record stays in flight for recovery; the queue retries
  | 'payload-conflict' // permanent
  | 'needs-reconciliation' // permanent
  | 'invalid-intent' // permanent: intent(job) threw or returned something that cannot be keyed
  | 'invalid-lookup'; // permanent: lookup answered something that is not a look-up answer

export interface QueueOutcomeEvent<J> {
  job: J;
  /** Undefined when the intent could not be keyed. */
  key: string | undefined;
  outcome: QueueOutcome;
  /** ran, replayed, recovered, re-executed: the job's result. */
  value?: JsonValue;
  /** waiting: why, and when (whole seconds) the queue should bring the job back. */
  reason?: string;
  retryAt?: number;
  error?: unknown;
}

export interface QueueConsumerOptions<J> {
  /** createGuard({ store, keyer, staleAfterSeconds? }): its store holds the records, its keyer makes the keys. */
  guard: Guard;
  /** The job's intent: a recorded intent id (intent-hmac) or the payload under the policy (fields). */
  intent: (job: J) => QueueIntent | Promise<QueueIntent>;
  /**
   * The side effect, run once per intent, given the key to send to the destination.
   * Its JSON result is stored; a duplicate delivery gets it back. Throw
   * refused() when nothing happened (released: the queue retries); any other
   * throw leaves the intent in flight until recovery asks the destination.
   */
  effect: (key: string, job: J) => JsonValue | undefined | Promise<JsonValue | undefined>;
  /**
   * Asks the destination about a key whose claim went stale (its worker died):
   * a throw counts as 'unknown'. Without it every stale claim is 'unknown'
   * (never run again; after the core's look-ups, needs_reconciliation).
   */
  lookup?: (key: string, job: J) => QueueLookupAnswer | Promise<QueueLookupAnswer>;
  /** The destination reads its own writes: only then does 'absent' run the effect again (once). Default false. */
  readYourWrites?: boolean;
  /** Awaited after each delivery's outcome; a throw fails the delivery (the queue retries; the retry replays). */
  onOutcome?: (event: QueueOutcomeEvent<J>) => void | Promise<void>;
  /**
   * A delivery that finds its intent in flight (another delivery is running
   * it) waits up to `maxMs` for its result and completes with it, instead of
   * going back to the queue at once; default the guard's `wait`.
   */
  wait?: WaitOptions;
}

/** A delivery that cannot finish now ('in-flight', 'refused') or ever ('payload-conflict', 'needs-reconciliation'). */
export class IntentkeyQueueError extends Error {
  readonly name: 'IntentkeyQueueError';
  readonly code: 'payload-conflict' | 'needs-reconciliation' | 'in-flight' | 'refused';
  readonly key: string | undefined;
  readonly jobId: string | undefined;
  /** in-flight: when (whole seconds) the delivery may finish. */
  readonly retryAt?: number;
}
