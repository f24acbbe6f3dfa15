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
  constructor(code: ErrorCode, message: string, field?: string);
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
// Claim, replay and recovery. Every decision is the core's (`claims`); the
// guard and the stores do the I/O. Times are whole seconds since the Unix epoch.

/** A record's state, as stored. */
export type RecordStatus = 'in_flight' | 'done' | 'needs_reconciliation';

/** A stored response (success or error), replayed verbatim. */
export interface StoredResponse {
  /** HTTP status code (0..65535). */
  status: number;
  /** Media type of the body ('' when none). */
  contentType: string;
  /** The body, as text. */
  body: string;
}

/** One intent's record: a row of `intentkey_records` (docs/store-schema.md). */
export interface ClaimRecord {
  key: string;
  fingerprint: string;
  tenantId: string;
  actionType: string;
  status: RecordStatus;
  /** Set once done. */
  response: StoredResponse | null;
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
  | { outcome: 'done'; response: StoredResponse }
  | { outcome: 'owned' | 'in-flight' | 'payload-conflict'; response?: undefined };

/** An HTTP answer from the core: a replay, or a problem+json (RFC 9457) body. */
export interface HttpAnswer extends StoredResponse {
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
  | { action: 'record-done'; response: StoredResponse }
  | { action: 're-execute' }
  | { action: 'check-later'; lookups: number; nextLookupAt: number }
  | { action: 'reconcile'; lookups: number };

/** The core's pure claim decisions (the WIT `claims` interface). */
export interface Claims {
  /** A fresh in_flight record, as a claim inserts it. */
  newRecord(key: string, fingerprint: string, tenantId: string, actionType: string, now: number | bigint): ClaimRecord;
  /** What an attempt whose insert lost to `existing` gets. */
  decideExisting(existing: ClaimRecord, fingerprint: string): ClaimDecision;
  /** The record completed with `response`, expiring `ttlSeconds` after `now`. */
  complete(existing: ClaimRecord, response: StoredResponse, now: number | bigint, ttlSeconds: number | bigint): ClaimRecord;
  /** The HTTP answer for a decision; null when the attempt owns the effect. */
  answerFor(decision: ClaimDecision): HttpAnswer | null;
  /** The 400 problem answer when the key is missing from `header`. */
  missingKeyAnswer(header: string): HttpAnswer;
  /** What a look-up means for an in_flight record. */
  decideRecovery(existing: ClaimRecord, lookup: LookupAnswer, readYourWrites: boolean, now: number | bigint): RecoveryDecision;
  /** Whether an in_flight record is due a look-up. */
  recoveryDue(existing: ClaimRecord, now: number | bigint, staleAfterSeconds: number | bigint): boolean;
  /** Whether a record may be purged (done and expired only). */
  purgeable(existing: ClaimRecord, now: number | bigint): boolean;
  /** The default TTL of done records, in seconds. */
  defaultTtlSeconds(): number;
}

/** The core's claim decisions. */
export const claims: Claims;

type MaybePromise<T> = T | Promise<T>;

/**
 * A record store. Sync stores return plain values, async ones promises; the
 * guard awaits either. Every write is conditional: insertIfAbsent is
 * INSERT … ON CONFLICT DO NOTHING; complete and applyRecovery write only while
 * the stored record is in_flight (applyRecovery: and still as `expected`).
 */
export interface Store {
  readonly kind: string;
  /** Inserts unless the key exists; true when this call inserted (owns the effect). */
  insertIfAbsent(record: ClaimRecord): MaybePromise<boolean>;
  get(key: string): MaybePromise<ClaimRecord | null>;
  /** Writes the completed record; false when the stored one is no longer in_flight. */
  complete(key: string, record: ClaimRecord): MaybePromise<boolean>;
  /** Writes a recovery result; false when someone changed the record since `expected` was read. */
  applyRecovery(key: string, expected: ClaimRecord, next: ClaimRecord): MaybePromise<boolean>;
  /** The records with this status, oldest first. */
  list(status: RecordStatus, options?: { limit?: number }): MaybePromise<ClaimRecord[]>;
  /** Deletes the records the core says are purgeable at `now`; returns how many. */
  purge(now: number): MaybePromise<number>;
  close(): MaybePromise<void>;
}

export interface MemoryStore extends Store {
  readonly kind: 'memory';
  insertIfAbsent(record: ClaimRecord): boolean;
  get(key: string): ClaimRecord | null;
  complete(key: string, record: ClaimRecord): boolean;
  applyRecovery(key: string, expected: ClaimRecord, next: ClaimRecord): boolean;
  list(status: RecordStatus, options?: { limit?: number }): ClaimRecord[];
  purge(now: number): number;
  close(): void;
}

export interface SqliteStore extends Store {
  readonly kind: 'sqlite';
  /** The better-sqlite3 Database. */
  readonly db: any;
  insertIfAbsent(record: ClaimRecord): boolean;
  get(key: string): ClaimRecord | null;
  complete(key: string, record: ClaimRecord): boolean;
  applyRecovery(key: string, expected: ClaimRecord, next: ClaimRecord): boolean;
  list(status: RecordStatus, options?: { limit?: number }): ClaimRecord[];
  purge(now: number): number;
  /** Closes the database if the store opened it (from a path). */
  close(): void;
}

export interface PgStore extends Store {
  readonly kind: 'pg';
  /** The pg Pool or Client. */
  readonly db: any;
  insertIfAbsent(record: ClaimRecord): Promise<boolean>;
  get(key: string): Promise<ClaimRecord | null>;
  complete(key: string, record: ClaimRecord): Promise<boolean>;
  applyRecovery(key: string, expected: ClaimRecord, next: ClaimRecord): Promise<boolean>;
  list(status: RecordStatus, options?: { limit?: number }): Promise<ClaimRecord[]>;
  purge(now: number): Promise<number>;
  /** Ends the pool if the store made it (from a config). */
  close(): Promise<void>;
}

/** Records in process memory (tests, single-process tools). Node only. */
export function memoryStore(): MemoryStore;

/**
 * Records in SQLite through better-sqlite3 12.x: WAL, synchronous=FULL, a busy
 * timeout (default 10 s); schema version in PRAGMA user_version. Node only.
 */
export function sqliteStore(pathOrDb: string | object, options?: { busyTimeoutMs?: number }): SqliteStore;

/**
 * Records in PostgreSQL through pg 8.x: a Pool, a connected Client, or a Pool
 * config. Resolves once schema version 1 is in place (applied under
 * pg_advisory_xact_lock(7316502411)). Tables are found through search_path, or
 * in `schema`. Node only.
 */
export function pgStore(poolOrConfig: object, options?: { schema?: string }): Promise<PgStore>;

export interface GuardOptions {
  store: Store;
  /** Needed to derive keys from intents and to fingerprint payloads. */
  keyer?: Keyer;
  /** How long done records are kept; default the core's (86,400). */
  ttlSeconds?: number;
  /** How long a claim may run before recovery asks the destination about it. */
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
 * It returns the response to store; an error it throws with a `response` is
 * stored too (and replayed). Any other error leaves the record in_flight.
 */
export type Effect = (key: string) => MaybePromise<StoredResponse>;

export interface RunResult {
  outcome: ClaimOutcome;
  /** The effect's response (owned), the stored one (done), or the core's 409/422 problem. */
  response: StoredResponse;
  /** True when the stored response is replayed. */
  replayed: boolean;
  key: string;
  /** Owned only: whether the completed record was written (false if recovery changed it first). */
  recorded?: boolean;
  /** Owned only: the error the effect threw with its response. */
  error?: unknown;
}

export interface RecoverRequest {
  key: string;
  /** Asks the destination about the key; a throw counts as 'unknown'. */
  lookup: (key: string) => MaybePromise<LookupAnswer>;
  /** The destination documents read-your-writes (only then is 'absent' trusted). */
  readYourWrites?: boolean;
  /** Run again, with the same key, when the core says re-execute. Required with readYourWrites. */
  effect?: Effect;
  staleAfterSeconds?: number;
}

export type RecoverResult =
  | { action: 'missing'; key: string }
  | { action: 'not-due'; key: string; record: ClaimRecord }
  | { action: 'record-done'; key: string; applied: boolean; response: StoredResponse }
  | { action: 'check-later'; key: string; applied: boolean; lookups: number; nextLookupAt: number }
  | { action: 'reconcile'; key: string; applied: boolean; lookups: number }
  | { action: 're-execute'; key: string; applied: boolean; response?: StoredResponse; recorded?: boolean };

export interface Guard {
  /** Claims the key; the owner runs the effect, everyone else gets the core's answer. */
  run(input: ClaimInput, effect: Effect): Promise<RunResult>;
  /** Asks the destination about one due in_flight record and applies the core's decision. */
  recover(request: RecoverRequest): Promise<RecoverResult>;
  /** recover() for every due in_flight record (those acted on). */
  recoverAll(request: Omit<RecoverRequest, 'key'> & { limit?: number }): Promise<RecoverResult[]>;
  /** Deletes the records the core says are purgeable now. */
  purge(): Promise<number>;
  readonly store: Store;
  readonly keyer: Keyer | undefined;
  readonly ttlSeconds: number;
}

/** Node only. */
export function createGuard(options: GuardOptions): Guard;

/** { status, contentType: 'application/json', body: JSON.stringify(value) }. */
export function jsonResponse(status: number, value: unknown): StoredResponse;

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

/**
 * Middleware for node:http and Express-style handlers. It answers missing keys
 * (400), repeats in flight (409) and other payloads (422) with the core's
 * problem+json, replays stored responses with `Idempotent-Replayed: true`, and
 * otherwise calls next() with `req.idempotencyKey` set, holding back what the
 * handler writes until it is stored. Errors go to next(err). Node only.
 */
export function idempotency(options: IdempotencyOptions): (req: any, res: any, next: (err?: unknown) => void) => void;
