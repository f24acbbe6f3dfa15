// Types for the Node entry of the intentkey package (src/index.js): everything
// every entry has (api.d.ts: keys, claims, the HTTP endpoint, init), plus the
// guard and the stores. The HTTP adapters are subpath exports: intentkey/express,
// intentkey/fastify, intentkey/fetch (adapters/*.d.ts).
import type {
  ClaimOutcome,
  ClaimRecord,
  Endpoint,
  HttpRequest,
  Intent,
  Keyer,
  LookupAnswer,
  Payload,
  Reply,
  RecordStatus,
  Response,
  Rules,
  Run,
  StoredResponse,
  WaitOptions,
} from './api.js';
import type { MaybePromise, Store } from './stores/types.js';

export * from './api.js';
export type * from './stores/types.js';
export { memoryStore } from './stores/memory.js';
export { sqliteStore } from './stores/sqlite.js';
export { pgStore } from './stores/pg.js';
export { redisStore } from './stores/redis.js';
export { mysqlStore } from './stores/mysql.js';
export { dynamoStore } from './stores/dynamodb.js';

export interface GuardOptions {
  store: Store;
  /** Needed to derive keys from intents and to fingerprint payloads. */
  keyer?: Keyer;
  /** Whose answers (409, 422) an attempt that does not own the effect gets; default the ietf profile's. */
  endpoint?: Endpoint;
  /** How long done records are kept; default the core's (86,400). */
  ttlSeconds?: number;
  /** Answered statuses that release the claim instead of storing it; default the core's (429, 503). */
  releaseStatuses?: number[];
  /** Completions that do not wait for the disk (PostgreSQL); default false. */
  fastCompletion?: boolean;
  /** How long a claim may run before recovery asks the destination; default the core's (300). */
  staleAfterSeconds?: number;
  /** Whole seconds now; default Math.floor(Date.now() / 1000). */
  now?: () => number;
  /**
   * A run that finds its record in flight (not yet due a recovery; same
   * fingerprint) waits up to `maxMs` for the first attempt and gets its
   * answer, instead of 'in-flight' at once. guard.serve() waits by its
   * endpoint's `wait`. Default: no wait.
   */
  wait?: WaitOptions;
  /**
   * The deadline of one call of an asynchronous store, in milliseconds
   * (1 to 2147483647; default the core's, claims.storeDeadlineMs(): 2000).
   * Past it the call is store-unavailable, never a hang: before the claim
   * decided, the profile's 503 at once; while finishing, tried again on the
   * core's schedule; a run rejects (retryable).
   */
  storeDeadlineMs?: number;
  /** The OpenTelemetry Tracer of the spans (default the global API's `intentkey` tracer). */
  tracer?: TelemetryTracer;
  /** The OpenTelemetry Meter of the metrics (default the global API's `intentkey` meter). */
  meter?: TelemetryMeter;
  /**
   * Hears of what guard.serve() does not send: store failures, a handler's
   * error, and ('release') a claim whose insert failed that could not be
   * released in the background (the store never answered, or was closed):
   * it stays in flight for recovery.
   */
  onError?: (error: unknown, context: { phase: 'claim' | 'handler' | 'capture' | 'complete' | 'release'; key: string | null; retryInMs?: number }) => void;
}

/** An OpenTelemetry Tracer (@opentelemetry/api). */
export type TelemetryTracer = import('@opentelemetry/api').Tracer;

/** An OpenTelemetry Meter (@opentelemetry/api). */
export type TelemetryMeter = import('@opentelemetry/api').Meter;

/** A handler's answer to guard.serve(): sent as it is, stored by the core's capture rule. */
export interface HandlerAnswer {
  status: number;
  headers: [string, string][];
  body: Uint8Array;
}

/** How guard.serve() ended. */
export interface ServeResult {
  /** The path the core's serve flow took. */
  path: 'refused' | 'unguarded' | 'replay' | 'in-flight' | 'payload-conflict' | 'unavailable' | 'handler' | 'released' | 'failed';
  /** Whether the handler ran. */
  ran: boolean;
  /** The core's answer to send; null for 'handler' and 'unguarded' (send `answer`) and 'released' (answer the error). */
  reply: Reply | null;
  /** What finishing the record did; null when nothing was owned or the store failed every try. */
  finished: 'stored' | 'released' | 'left-in-flight' | 'superseded' | null;
  /** How many times finishing was tried again after the store could not be reached. */
  finishRetries: number;
  /** The handler's answer, when it answered. */
  answer?: HandlerAnswer;
  /** The handler's throw, when it threw. */
  error?: unknown;
  /** A request that did not run the handler: how long it waited for the first attempt, in ms (0: no wait). */
  waitedMs?: number;
}

/** The options of guard.run(). */
export interface RunOptions {
  /** Recovers a record left in flight once stale: asks the destination with the same key. */
  lookup?: (key: string) => MaybePromise<LookupAnswer>;
  /** The destination documents read-your-writes (only then is 'absent' trusted). */
  readYourWrites?: boolean;
  /** Default the guard's. */
  staleAfterSeconds?: number;
  /** This run's wait for a first attempt in flight; default the guard's `wait`. */
  wait?: WaitOptions;
  /** Aborts a wait for the first attempt: the run rejects with the signal's reason (the waiter owned nothing). */
  signal?: AbortSignal;
}

/** What to claim: an intent (key and fingerprint derived), or a key with a fingerprint or the payload. */
export type ClaimInput =
  | { intent: Intent }
  | { key: string; tenantId: string; actionType: string; fingerprint: string }
  | { key: string; tenantId: string; actionType: string; payload: Payload };

/**
 * The effect, run only by the owner, given the key to send to the destination.
 * It returns the response (answered); an error it throws with a `response` is
 * answered too (stored and replayed); a thrown IntentkeyRefused is refused
 * (released: a retry runs); any other throw is ambiguous (the record stays in
 * flight and the error is rethrown).
 */
export type Effect = (key: string) => MaybePromise<StoredResponse>;

/**
 * What finishing an owned attempt did: stored (replayed from now on), released
 * (deleted: a 429/503 answer or a refusal; a retry runs), left-in-flight (never
 * returned: the error is rethrown), or superseded (a recovery took the record
 * over or settled it first; this answer was not stored).
 */
export type Finished = 'stored' | 'released' | 'left-in-flight' | 'superseded';

export interface RunResult {
  outcome: ClaimOutcome;
  /** The effect's response (owned), the stored one (done), or the endpoint's 409 / payload-conflict answer. */
  response: Response;
  /** True when the stored response is replayed. */
  replayed: boolean;
  key: string;
  /** Owned only: what finishing the record did. */
  finished?: Finished;
  /** Owned only: the error the effect threw with its response. */
  error?: unknown;
}

/** Thrown by an effect that refused before any side effect: the claim is released. */
export class IntentkeyRefused extends Error {
  constructor(response?: StoredResponse | null, message?: string, options?: { cause?: unknown });
  readonly name: 'IntentkeyRefused';
  /** The answer for the caller, not stored. */
  readonly response: StoredResponse | null;
}

/** `throw refused(response?)` from an effect. */
export function refused(response?: StoredResponse | null, message?: string): IntentkeyRefused;

export interface RecoverRequest {
  key: string;
  /** Asks the destination about the key; a throw counts as 'unknown'. */
  lookup: (key: string) => MaybePromise<LookupAnswer>;
  /** The destination documents read-your-writes (only then is 'absent' trusted). */
  readYourWrites?: boolean;
  /** Run again, with the same key, when the core says re-execute. Required with readYourWrites. */
  effect?: Effect;
  /** Default the guard's. */
  staleAfterSeconds?: number;
}

export type RecoverResult =
  | { outcome: 'missing'; key: string }
  | { outcome: 'not-in-flight'; key: string; status: RecordStatus }
  | { outcome: 'not-due'; key: string; dueAt: number }
  | ({ outcome: 'applied' | 'lost'; key: string } & (
      | { action: 'record-done'; response: Response }
      | { action: 'check-later'; lookups: number; nextLookupAt: number }
      | { action: 'reconcile'; lookups: number }
      | { action: 're-execute'; response?: Response; finished?: Finished; error?: unknown }
    ));

export interface Guard {
  /** Claims the key; the owner runs the effect, everyone else gets the core's answer. */
  run(input: ClaimInput, effect: Effect, options?: RunOptions): Promise<RunResult>;
  /**
   * One HTTP request through the core's serve flow (needs `endpoint`): admit,
   * claim, the handler (when the request owns the effect), capture, finish, answer.
   */
  serve(
    request: HttpRequest,
    handler: (idempotency: { key: string; tenantId: string } | null) => MaybePromise<HandlerAnswer>,
    /** `signal`: aborts a wait for the first attempt (the client went away); serve then rejects with its reason. */
    options?: { signal?: AbortSignal },
  ): Promise<ServeResult>;
  /** Asks the destination about one stale in_flight record and applies the core's decision. */
  recover(request: RecoverRequest): Promise<RecoverResult>;
  /** recover() with a synchronous look-up and effect, through the component's guard export (sync stores only). */
  recoverSync(request: Omit<RecoverRequest, 'lookup' | 'effect'> & {
    lookup: (key: string) => LookupAnswer;
    effect?: (key: string) => StoredResponse;
  }): RecoverResult;
  /** The keys of the in_flight records due a look-up now (at most `limit`, default 1000, read). */
  due(request?: { staleAfterSeconds?: number; limit?: number }): Promise<string[]>;
  /** recover() for every due in_flight record; a failed one is { outcome: 'error', key, error }. */
  recoverAll(
    request: Omit<RecoverRequest, 'key'> & { limit?: number },
  ): Promise<Array<RecoverResult | { outcome: 'error'; key: string; error: unknown }>>;
  /** Deletes the done records expired now; how many. */
  purge(): Promise<number>;
  /** The record under `key`, or null. */
  inspect(key: string): Promise<ClaimRecord | null>;
  /**
   * The records with `status` (the stored spelling, see RecordStatus), oldest
   * first. Any other value, `'in-flight'` included, is an IntentkeyError
   * `invalid-argument` with field `status`.
   */
  list(status: RecordStatus, options?: { limit?: number }): Promise<ClaimRecord[]>;
  readonly store: Store;
  readonly keyer: Keyer | undefined;
  readonly rules: Readonly<Rules>;
  readonly staleAfterSeconds: number;
  /** The deadline of one call of an asynchronous store, in milliseconds. */
  readonly storeDeadlineMs: number;
  /** How long a run that finds its record in flight waits for the first attempt, in ms (0: no wait). */
  readonly waitMaxMs: number;
}

/** Node only. */
export function createGuard(options: GuardOptions): Guard;

/** { status, contentType: 'application/json', headers, body: the UTF-8 bytes of JSON.stringify(value) }. */
export function jsonResponse(status: number, value: unknown, headers?: Array<[string, string]>): Response;

export interface JournalOptions {
  store: Store;
  /** Keys the steps and tool calls; its policy classifies every tool argument (and closes the tools allowed). */
  keyer: Keyer;
  /** The largest output recorded, in bytes of JSON (default 1 MiB): larger gives step-output-too-large. */
  maxOutputBytes?: number;
  /** After how long a step or tool call left in flight may be recovered (default 300): longer than the slowest step. */
  staleAfterSeconds?: number;
  /** How long recorded outputs are kept (default 86,400 s). */
  ttlSeconds?: number;
  /** Whole seconds now; default the system clock. */
  now?: () => number;
  /** Told of every step and tool call: ran, replayed, recovered (a step taken over, a tool call found), re-executed. */
  observe?: (event: JournalEvent) => void;
  /** A step or tool call another attempt of the run is at waits up to `maxMs` for its output instead of step-in-flight. */
  wait?: WaitOptions;
  /** The deadline of one store call, in milliseconds (default the core's 2000): see GuardOptions. */
  storeDeadlineMs?: number;
  /** The Tracer of the steps' and tool calls' spans (default the global API's). */
  tracer?: TelemetryTracer;
  /** The Meter of their metrics (default the global API's). */
  meter?: TelemetryMeter;
}

export interface JournalEvent {
  kind: 'step' | 'tool-call';
  name: string;
  key: string;
  outcome: 'ran' | 'replayed' | 'recovered' | 're-executed';
}

/** A validated tool call: the tool's action type and its arguments (classified by the keyer's policy). */
export interface ToolCall {
  tool: string;
  arguments: Payload;
}

export interface Journal {
  /**
   * Runs `fn` once per run and step name and records its output (JSON); every later
   * attempt gets the recorded output. A throw records nothing (released). Rejects
   * with IntentkeyError step-in-flight (err.dueAt: when a crashed attempt may be
   * taken over), step-input-changed, step-output-too-large or invalid-step-output.
   */
  step<T = unknown>(run: Run, name: string, fn: () => T | Promise<T>, options?: { input?: unknown }): Promise<T>;
  /**
   * Runs a validated tool call at most once per run: `effect(key)` sends the key to
   * the destination and returns the tool's result (JSON), recorded and replayed. A
   * call left in flight is settled by `lookup(key)` once stale: found is recorded,
   * unknown never re-runs, absent re-runs only with readYourWrites.
   */
  toolCall<T = unknown>(
    run: Run,
    call: ToolCall,
    effect: (key: string) => T | Promise<T>,
    options?: { lookup?: (key: string) => MaybePromise<{ found: unknown } | 'absent' | 'unknown'>; readYourWrites?: boolean },
  ): Promise<T>;
  /** The guard underneath (recoverAll, purge, inspect). */
  readonly guard: Guard;
}

/** Node only: a journal of steps and tool calls over a store. */
export function createJournal(options: JournalOptions): Journal;

/**
 * Registers the observable gauge `intentkey.records` of `store` (attributes
 * `intentkey.status`: `in_flight`, `needs_reconciliation`, and
 * `intentkey.store`), read with the store's cheap count(status) only when a
 * metric reader collects; on the global API's `intentkey` meter (register
 * the SDK first) or `options.meter`. A store without count() (DynamoDB) is a
 * TypeError. Answers a function that unregisters it.
 */
export function observeRecords(store: Store, options?: { meter?: TelemetryMeter }): () => void;
