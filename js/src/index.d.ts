// Types for the intentkey package. The Node entry (src/index.js) and the browser
// entry (src/browser.js) export the same key API and `claims`; the guard, the
// stores and the HTTP middleware are Node only.

/**
 * The stable error codes: the same kebab-case strings as the WIT, the vectors and the CLI
 * (crates/intentkey/tests/error_vocabulary.rs checks this union against the WIT and the core).
 */
export type ErrorCode =
  | 'secret-too-short'
  | 'invalid-secret'
  | 'invalid-tenant-id'
  | 'invalid-action-type'
  | 'unknown-action-type'
  | 'invalid-epoch'
  | 'invalid-payload'
  | 'unclassified-fields'
  | 'invalid-field-type'
  | 'invalid-decimal'
  | 'decimal-out-of-range'
  | 'invalid-integer'
  | 'invalid-currency'
  | 'invalid-pix-key'
  | 'invalid-intent-id'
  | 'invalid-policy'
  | 'invalid-json'
  | 'invalid-key-length'
  | 'invalid-random'
  | 'store-unavailable'
  | 'store-failed'
  | 'record-vanished'
  | 'flow-misuse'
  | 'io-failed'
  | 'invalid-argument'
  | 'component-failed';

/** An error the intentkey core reported. The message never holds a secret. */
export class IntentkeyError extends Error {
  constructor(code: ErrorCode, message: string, field?: string, options?: { cause?: unknown });
  readonly name: 'IntentkeyError';
  /** The stable code, e.g. "unclassified-fields". */
  readonly code: ErrorCode;
  /** The field (e.g. "amount", "tenant_id") or policy path (e.g. "fields.amount.scale") at fault. */
  readonly field: string | undefined;
}

/**
 * The component trapped (a bug in intentkey). Its instance is discarded: later
 * calls get a fresh one, and keyers created on the old one throw this error.
 */
export class IntentkeyTrapError extends Error {
  readonly name: 'IntentkeyTrapError';
}

/**
 * A JSON object payload: either the request body as JSON text, passed to the core
 * untouched (number literals such as 1.0050 or 30-digit integers keep their exact
 * text), or a value that is written with JSON.stringify first. A JS number has
 * already lost digits beyond double precision: pass big or exact numbers as strings
 * ("10.50") or pass the whole payload as text.
 */
export type Payload = string | { readonly [field: string]: unknown };

/** One intent for the `fields` key mode. */
export interface Intent {
  /** The tenant (non-empty). */
  tenantId: string;
  /** The action type, e.g. "pix.send" (non-empty). */
  actionType: string;
  /** The request body. */
  payload: Payload;
  /**
   * When the intent was recorded, in seconds since the Unix epoch: a safe-integer
   * number or a bigint within the signed 64-bit range.
   */
  intentEpoch: number | bigint;
}

/** One answer of deriveMany: a key or the error for that intent. */
export type DeriveResult = { key: string; error?: undefined } | { key?: undefined; error: IntentkeyError };

/** A policy document (see the project README), as an object or JSON text. */
export type Policy = string | { readonly [member: string]: unknown };

export interface KeyerOptions {
  /** The server secret: at least 32 random bytes, as bytes or hex. The keyer keeps it inside the component. */
  secret: Uint8Array | ArrayBuffer | string;
  /** The policy; undefined or null for the built-in payments policy. */
  policy?: Policy | null;
}

/** A validated policy keyed with one secret. All methods are synchronous. */
export interface Keyer {
  /** The `fields`-mode key (64 hex, or the policy's keyHexLength). */
  derive(intent: Intent): string;
  /** Keys for many intents in one component call; answers in the same order. */
  deriveMany(intents: readonly Intent[]): DeriveResult[];
  /** The canonical material the `fields` key is the HMAC of (UTF-8 JSON text). */
  material(intent: Intent): string;
  /** The `intent-hmac`-mode key for a recorded intent id; keyHexLength 32..=64, default 64. */
  intentKey(tenantId: string, intentId: string, keyHexLength?: number): string;
  /** The payload fingerprint (64 hex) stored beside the key. */
  fingerprint(tenantId: string, actionType: string, payload: Payload): string;
  /** The fingerprint's canonical material (UTF-8 JSON text). */
  fingerprintMaterial(tenantId: string, actionType: string, payload: Payload): string;
  /** Compares the payload's fingerprint with a stored one in constant time. */
  fingerprintMatches(tenantId: string, actionType: string, payload: Payload, stored: string): boolean;
  /** Frees the keyer and its copy of the secret now (otherwise when garbage-collected). */
  dispose(): void;
}

/** Validates the policy and keys it with the secret. Throws IntentkeyError. */
export function createKeyer(options: KeyerOptions): Keyer;

/** A `uuid`-mode key: UUID v4 as 32 lowercase hex, from crypto.getRandomValues. */
export function newUuidKey(): string;

/** A `uuid`-mode key from 16 given random bytes (for tests and replays). */
export function uuidKey(randomBytes: Uint8Array): string;

/**
 * The JSON-lines batch contract of `intentkey derive --jsonl`: one answer line per
 * request line, in order (secret inline as secret_hex). Without `policy`, the
 * built-in payments policy; a malformed policy throws IntentkeyError
 * `invalid-policy`.
 */
export function answerLines(
  lines: readonly string[],
  options?: { policy?: object | string },
): string[];

/**
 * The core's answer line for an input line that is not UTF-8 text (or a string
 * with a lone surrogate), which cannot cross into answerLines.
 */
export function unreadableLineAnswer(): string;

// ---------------------------------------------------------------------------
// Claim, replay and recovery. The order of every store operation and every
// decision is the core's (the guard drives its one claim flow); the guard and the
// stores do the I/O. Times are whole seconds since the Unix epoch.

/** A record's state, as stored. */
export type RecordStatus = 'in_flight' | 'done' | 'needs_reconciliation';

/** Replayable response headers, in order, as [name, value]. */
export type Headers = ReadonlyArray<readonly [string, string]>;

/** A response (success or error): what an effect answers, and what is stored and replayed. */
export interface StoredResponse {
  /** HTTP status code (0..65535). */
  status: number;
  /** Media type of the body ('' when none). */
  contentType: string;
  /** Replayable headers (e.g. Location); optional in what an effect answers. */
  headers?: Headers;
  /** The body, as text. */
  body: string;
}

/** A response as the package hands it back: headers always present. */
export interface Response extends StoredResponse {
  headers: Array<[string, string]>;
}

/** One intent's record: a row of `intentkey_records` (the schema file), in camelCase. */
export interface ClaimRecord {
  key: string;
  fingerprint: string;
  tenantId: string;
  actionType: string;
  status: RecordStatus;
  /** The owner's token: every write after the claim compares and sets it. */
  ownerToken: string;
  /** Set once done. */
  response: Response | null;
  /** When the record was claimed, or taken over by a recovery. */
  createdAt: number;
  /** When a done record may be purged; null while not done. */
  expiresAt: number | null;
  /** Destination look-ups made during recovery. */
  lookups: number;
  /** When the next recovery look-up is due. */
  nextLookupAt: number | null;
}

/** What an attempt gets from its claim. */
export type ClaimOutcome = 'owned' | 'in-flight' | 'done' | 'payload-conflict';

/** The core's decision for a claim: the stored response when done. */
export type ClaimDecision =
  | { outcome: 'done'; response: Response }
  | { outcome: 'owned' | 'in-flight' | 'payload-conflict'; response?: undefined };

/** An HTTP answer from the core: a replay, or a problem+json (RFC 9457) body. */
export interface HttpAnswer extends Response {
  /** Whether this replays a stored response. */
  replayed: boolean;
}

/**
 * What the destination says, asked with the same key: it has the outcome, it
 * has no record of the key, or it could not tell (timeout, 5xx, lagging replica).
 */
export type LookupAnswer = { found: StoredResponse } | 'absent' | 'unknown';

/** What recovery does after a look-up (the core's decide-recovery). */
export type RecoveryDecision =
  | { action: 'record-done'; response: Response }
  | { action: 're-execute' }
  | { action: 'check-later'; lookups: number; nextLookupAt: number }
  | { action: 'reconcile'; lookups: number };

/** What an effect reported, as the core classifies it. */
export type EffectResult = { answered: StoredResponse } | { refused: StoredResponse | null } | 'failed';

/** The outcome classes of an owned attempt. */
export type OutcomeClass = 'terminal' | 'released' | 'ambiguous';

/** How a guard treats outcomes. */
export interface Rules {
  /** How long done records are kept (seconds). */
  ttlSeconds: number;
  /** Answered statuses that release the claim (default 429 and 503). */
  releaseStatuses: number[];
  /** Completion commits that do not wait for the disk (PostgreSQL); recovery covers their loss. */
  fastCompletion: boolean;
}

/** The core's pure claim decisions (the WIT `claims` interface). */
export interface Claims {
  /** What an attempt whose insert lost to `existing` gets. */
  decideExisting(existing: ClaimRecord, fingerprint: string): ClaimDecision;
  /** The HTTP answer for a decision; null when the attempt owns the effect. */
  answerFor(decision: ClaimDecision): HttpAnswer | null;
  /** The 400 problem answer when the key is missing from `header`. */
  missingKeyAnswer(header: string): HttpAnswer;
  /** The outcome class of an effect's result under `rules` (default: the core's defaults). */
  classify(effect: EffectResult, rules?: Rules): OutcomeClass;
  /** What a look-up means for an in_flight record. */
  decideRecovery(existing: ClaimRecord, lookup: LookupAnswer, readYourWrites: boolean, now: number | bigint): RecoveryDecision;
  /** Whether an in_flight record is due a look-up. */
  recoveryDue(existing: ClaimRecord, now: number | bigint, staleAfterSeconds: number | bigint): boolean;
  /** Whether a record may be purged (done and expired only). */
  purgeable(existing: ClaimRecord, now: number | bigint): boolean;
  /** The documented default rules: a 24 h TTL, release on 429 and 503, durable completion. */
  defaultRules(): Rules;
  /** The default TTL of done records, in seconds (86,400). */
  defaultTtlSeconds(): number;
  /** The default stale-after of recovery, in seconds (300). */
  defaultStaleAfterSeconds(): number;
  /** An owner token (32 hex) from 16 random bytes. */
  ownerToken(randomBytes: Uint8Array): string;
}

/** The core's claim decisions. */
export const claims: Claims;

type MaybePromise<T> = T | Promise<T>;

/** A record as the WIT carries it (and the stores hold it): WIT status spelling, bigint times. */
export interface WitRecord {
  key: string;
  fingerprint: string;
  tenantId: string;
  actionType: string;
  status: 'in-flight' | 'done' | 'needs-reconciliation';
  ownerToken: string;
  response: { status: number; contentType: string; headers: Array<[string, string]>; body: string } | undefined;
  createdAt: bigint;
  expiresAt: bigint | undefined;
  lookups: number;
  nextLookupAt: bigint | undefined;
}

/** A fenced completion (WIT `completion`). */
export interface WitCompletion {
  key: string;
  ownerToken: string;
  response: { status: number; contentType: string; headers: Array<[string, string]>; body: string };
  expiresAt: bigint;
  fast: boolean;
}

/** A fenced recovery write (WIT `replacement`). */
export interface WitReplacement {
  expectedToken: string;
  expectedLookups: number;
  record: WitRecord;
}

/**
 * A record store: the seven operations of the WIT `store` interface, each one
 * atomic statement, every write after the claim fenced on the owner token.
 * Synchronous stores (`synchronous: true`) answer plain values and plug into the
 * component's store import; asynchronous ones answer promises and the guard
 * drives the core's flow over them. A failure is thrown with
 * `payload: { tag: 'unavailable' | 'failed', val: message }`.
 */
export interface Store {
  readonly kind: string;
  readonly synchronous: boolean;
  /** INSERT … ON CONFLICT (key) DO NOTHING: true when this call inserted. */
  insert(record: WitRecord): MaybePromise<boolean>;
  get(key: string): MaybePromise<WitRecord | undefined>;
  /** UPDATE … SET status = 'done', … WHERE key AND status = 'in_flight' AND owner_token. */
  complete(completion: WitCompletion): MaybePromise<boolean>;
  /** Every mutable column, WHERE key AND status = 'in_flight' AND owner_token AND lookups. */
  replace(replacement: WitReplacement): MaybePromise<boolean>;
  /** DELETE … WHERE key AND status = 'in_flight' AND owner_token. */
  release(request: { key: string; ownerToken: string }): MaybePromise<boolean>;
  /** Records with `status`, oldest first (created_at, key), at most `limit`. */
  list(status: WitRecord['status'], limit: number): MaybePromise<WitRecord[]>;
  /** DELETE … WHERE status = 'done' AND expires_at <= now: how many. */
  purge(now: bigint): MaybePromise<number | bigint>;
  close?(): MaybePromise<void>;
}

export interface MemoryStore extends Store {
  readonly kind: 'memory';
  readonly synchronous: true;
  close(): void;
}

export interface SqliteStore extends Store {
  readonly kind: 'sqlite';
  readonly synchronous: true;
  /** The better-sqlite3 Database. */
  readonly db: any;
  /** Closes the database if the store opened it (from a path). */
  close(): void;
}

export interface PgStore extends Store {
  readonly kind: 'pg';
  readonly synchronous: false;
  /** The pg Pool or Client. */
  readonly db: any;
  /** Ends the pool if the store made it (from a config). */
  close(): Promise<void>;
}

/** Records in process memory, as the WIT records themselves (tests, single-process tools). Node only. */
export function memoryStore(): MemoryStore;

/**
 * Records in SQLite through better-sqlite3 12.x: WAL, synchronous=FULL, a busy
 * timeout (default 10 s); the component's schema applied above PRAGMA user_version.
 * Node only.
 */
export function sqliteStore(pathOrDb: string | object, options?: { busyTimeoutMs?: number }): SqliteStore;

/**
 * Records in PostgreSQL through pg 8.x: a Pool, a connected Client, or a Pool
 * config. Resolves once the component's schema is in place (applied under
 * pg_advisory_xact_lock). Tables are found through search_path, or in `schema`.
 * Node only.
 */
export function pgStore(poolOrConfig: object, options?: { schema?: string }): Promise<PgStore>;

export interface GuardOptions {
  store: Store;
  /** Needed to derive keys from intents and to fingerprint payloads. */
  keyer?: Keyer;
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
  /** The effect's response (owned), the stored one (done), or the core's 409/422 problem. */
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
  run(input: ClaimInput, effect: Effect): Promise<RunResult>;
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
  /** The records with `status`, oldest first. */
  list(status: RecordStatus, options?: { limit?: number }): Promise<ClaimRecord[]>;
  readonly store: Store;
  readonly keyer: Keyer | undefined;
  readonly rules: Readonly<Rules>;
  readonly staleAfterSeconds: number;
}

/** Node only. */
export function createGuard(options: GuardOptions): Guard;

/** { status, contentType: 'application/json', headers, body: JSON.stringify(value) }. */
export function jsonResponse(status: number, value: unknown, headers?: Array<[string, string]>): Response;

export interface IdempotencyOptions {
  /** A guard with a keyer, or store and keyer to make one. */
  guard?: Guard;
  store?: Store;
  keyer?: Keyer;
  /** The tenant the fingerprint is taken under. */
  tenantId: string | ((req: any) => MaybePromise<string>);
  /** Default `${req.method} ${pathname}`. */
  actionType?: string | ((req: any) => MaybePromise<string>);
  /** Default 'Idempotency-Key'. */
  header?: string;
  /** Default true: a request without the header gets the core's 400. */
  required?: boolean;
  /** Largest body read, in bytes (default 1 MiB); larger goes to next(err) with status 413. */
  limit?: number;
  /** What to fingerprint; default the body (raw text when available). */
  payload?: (req: any, body: unknown) => MaybePromise<Payload>;
}

/** The middleware, with an Express error middleware for handlers that throw. */
export interface IdempotencyMiddleware {
  (req: any, res: any, next: (err?: unknown) => unknown): void;
  /** app.use(mw.onError) after the routes: a throwing handler leaves its record in flight. */
  onError(err: unknown, req: any, res: any, next: (err?: unknown) => void): void;
}

/**
 * Middleware for node:http and Express-style handlers. It answers missing keys
 * (400), repeats in flight (409) and other payloads (422) with the core's
 * problem+json, replays stored responses (status, Content-Type, Location, body)
 * with `Idempotent-Replayed: true`, and otherwise calls next() with
 * `req.idempotencyKey` set, holding back what the handler writes until the record
 * is finished. A 429 or 503 answer releases the claim (a retry runs the handler);
 * a handler that throws leaves the record in flight. Errors go to next(err).
 * Node only.
 */
export function idempotency(options: IdempotencyOptions): IdempotencyMiddleware;
