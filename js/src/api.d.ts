// Types shared by every entry of the intentkey package: the Node entry
// (src/index.js, typed by index.d.ts), the browser and workerd entries
// (browser.d.ts): the key API, the claim decisions (`claims`), the HTTP endpoint
// (`createEndpoint`) and `init`. The guard and the SQL stores are Node only
// (index.d.ts); the HTTP adapters are subpath exports (adapters/*.d.ts).

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
  | 'component-failed'
  | 'invalid-keyring'
  | 'secret-retired'
  | 'invalid-step-name'
  | 'invalid-step-output'
  | 'step-output-too-large'
  | 'step-in-flight'
  | 'step-input-changed';

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

/** A policy document (see docs/keys.md, "Policies"), as an object or JSON text. */
export type Policy = string | { readonly [member: string]: unknown };

/** A secret's bytes: at least 32 random bytes, as bytes or hex. */
export type SecretBytes = Uint8Array | ArrayBuffer | string;

/**
 * Secrets with ids and activation epochs, to rotate without a duplicate window:
 * `fields` and `intent-hmac` keys use the secret active at the intent's own
 * epoch; client keys (HTTP) use the one active now and, for `windowSeconds`
 * after an activation (at least the TTL of done records; default 24 h), also
 * look up the request under the previous secret. Add a secret with a future
 * `activeFrom` everywhere first; drop the previous one after the window.
 */
export interface Keyring {
  secrets: readonly {
    /** The secret's id (1 to 64 printable ASCII characters; not secret, it may be logged). */
    id: string;
    /** Seconds since the Unix epoch from which this secret is active. */
    activeFrom: number | bigint;
    secret: SecretBytes;
  }[];
  windowSeconds?: number | bigint;
}

/** One secret (`secret`) or a keyring (`keyring`): exactly one of the two. */
export type SecretOption = { secret: SecretBytes; keyring?: undefined } | { keyring: Keyring; secret?: undefined };

export type KeyerOptions = SecretOption & {
  /** The policy; undefined or null for the built-in payments policy. */
  policy?: Policy | null;
};

/** A validated policy keyed with one secret. All methods are synchronous. */
export interface Keyer {
  /** The `fields`-mode key (64 hex, or the policy's keyHexLength). */
  derive(intent: Intent): string;
  /** Keys for many intents, a component call per 1,000 of them; answers in the same order. */
  deriveMany(intents: readonly Intent[]): DeriveResult[];
  /** The canonical material the `fields` key is the HMAC of (UTF-8 JSON text). */
  material(intent: Intent): string;
  /**
   * The `intent-hmac`-mode key for a recorded intent id; keyHexLength 32..=64,
   * default 64. A keyer of several secrets throws `invalid-keyring`: use intentKeyAt.
   */
  intentKey(tenantId: string, intentId: string, keyHexLength?: number): string;
  /** The `intent-hmac`-mode key under the secret active at the intent's epoch. */
  intentKeyAt(tenantId: string, intentId: string, intentEpoch: number | bigint, keyHexLength?: number): string;
  /** The payload fingerprint (64 hex) stored beside the key (one secret only: else fingerprintAt). */
  fingerprint(tenantId: string, actionType: string, payload: Payload): string;
  /** The payload fingerprint under the secret active at the intent's epoch. */
  fingerprintAt(tenantId: string, actionType: string, payload: Payload, intentEpoch: number | bigint): string;
  /** The fingerprint's canonical material (UTF-8 JSON text). */
  fingerprintMaterial(tenantId: string, actionType: string, payload: Payload): string;
  /** Compares the payload's fingerprint with a stored one in constant time. */
  fingerprintMatches(tenantId: string, actionType: string, payload: Payload, stored: string): boolean;
  /**
   * The claim attempt of step `step` of `run` (the journal's): keyed by the run and
   * the name; the fingerprint also covers `input` (any JSON value).
   */
  stepAttempt(run: Run, step: string, input?: unknown): Attempt;
  /**
   * The claim attempt of a validated tool call of `run`: keyed by the run, the tool
   * (the action type) and the arguments' key fields under the policy. The model's
   * text (ignored fields) and its tool_call_id never enter.
   */
  toolCallAttempt(run: Run, tool: string, args: Payload): Attempt;
  /** Frees the keyer and its copy of the secret now (otherwise when garbage-collected). */
  dispose(): void;
}

/**
 * One run of an agent or workflow: the recorded intent every attempt of it resumes.
 * The intent id and epoch come from where the run was recorded, never from the attempt.
 */
export interface Run {
  tenantId: string;
  intentId: string;
  /** When the run's intent was recorded (seconds): it picks the secret. */
  intentEpoch: number | bigint;
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

/**
 * A body given to the package: bytes (a Uint8Array, a Buffer, any ArrayBuffer
 * view or an ArrayBuffer), or text, sent as UTF-8. What the package gives back
 * is always a plain Uint8Array.
 */
export type BodyInput = Uint8Array | ArrayBuffer | ArrayBufferView | string;

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
  /** The body: bytes, or text (stored as its UTF-8 bytes). Replayed byte for byte. */
  body: BodyInput;
}

/** A response as the package hands it back: headers always present, the body bytes. */
export interface Response extends StoredResponse {
  headers: Array<[string, string]>;
  body: Uint8Array;
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
  /** What an attempt whose insert lost to `existing` gets (its HTTP answer: Endpoint.answer). */
  decideExisting(existing: ClaimRecord, fingerprint: string): ClaimDecision;
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
  /** Checks a journaled step's output (JSON text, at most maxBytes, default 1 MiB): the response it is recorded as. */
  stepOutput(step: string, outputJson: string, maxBytes?: number): StoredResponse;
  /**
   * What a claim outcome means for a step or tool call: undefined when this attempt
   * owns it, the recorded output (JSON text) when done; throws step-in-flight or
   * step-input-changed otherwise.
   */
  stepAnswer(name: string, outcome: { tag: 'owned' | 'in-flight' | 'payload-conflict' } | { tag: 'done'; val: StoredResponse }): string | undefined;
}

/** The core's claim decisions. */
export const claims: Claims;

// ---------------------------------------------------------------------------
// The HTTP rules (the core's `intentkey::http`, the WIT `http` interface): which
// header carries the key and how it is parsed, the body limit, the tenant-scoped
// storage key, the request fingerprint, and every answer. Adapters only read the
// request and write the reply.

/** An idempotency convention: `ietf` (the default), `stripe` or `ofb` (Open Finance Brasil). */
export type Profile = 'ietf' | 'stripe' | 'ofb';

export type EndpointOptions = SecretOption & EndpointSettings;

export interface EndpointSettings {
  /** Default 'ietf'. */
  profile?: Profile;
  /** `ietf` only: accept only a quoted key (RFC 8941 sf-string) and answer 400 to a bare one. Default false: both are taken. */
  strictKeySyntax?: boolean;
  /** The Retry-After of a 409 or 503, in seconds. Default 1. */
  retryAfterSeconds?: number;
  /** Stored headers a replay restores, besides the defaults Location and Content-Type. */
  replayHeaders?: string[];
  /** Whether a request without a key gets 400 (true, the default) or runs unguarded. */
  keyRequired?: boolean;
  /** The largest body admitted, in bytes (default 1 MiB); a larger one gets 413. */
  maxBodyBytes?: number | bigint;
  /** The largest answer body kept for replays, in bytes (default 1 MiB); past it the core stores "answer not kept". */
  maxStoredBytes?: number | bigint;
  /** Route policies by `METHOD route` (e.g. 'POST /orders'): objects or JSON text. */
  policies?: Record<string, object | string> | Map<string, object | string>;
}

/** A request as an adapter reads it. */
export interface HttpRequest {
  /** The tenant the server assigns the request to (non-empty). */
  tenantId: string;
  method: string;
  /** The route: a template (`/orders/:id`) or the path. */
  route: string;
  /** The values of the profile's key header (Endpoint.headerName), one per header line; [] when absent. */
  keyValues: string[];
  contentType?: string;
  /** The body as received (text is taken as UTF-8). */
  body: BodyInput;
}

/** An HTTP answer from the core: status, headers (Content-Type among them), body. */
export interface Reply {
  status: number;
  headers: Array<[string, string]>;
  body: Uint8Array;
}

/** What a claim needs: the storage key, the request fingerprint, the tenant and the action (`METHOD route`). */
export interface Attempt {
  key: string;
  fingerprint: string;
  tenantId: string;
  actionType: string;
}

/** What the endpoint does with a request. */
export type Admission =
  /** Claim this attempt; run the handler only if the claim is owned. */
  | { tag: 'guarded'; attempt: Attempt }
  /** No key, and keys are optional: run the handler unguarded. */
  | { tag: 'unguarded' }
  /** Answer this and run nothing; nothing is stored. */
  | { tag: 'refused'; reply: Reply };

/** A claim outcome as Endpoint.answer takes it: a decision, its bare outcome, or the WIT form. */
export type OutcomeInput =
  | ClaimDecision
  | { outcome: 'done'; response: StoredResponse }
  | 'owned'
  | 'in-flight'
  | 'payload-conflict'
  | { tag: 'owned' | 'in-flight' | 'payload-conflict' }
  | { tag: 'done'; val: StoredResponse };

/** Whole seconds since the Unix epoch; default now. */
export type Now = number | bigint;

/** One server's HTTP rules. Every method is synchronous. */
export interface Endpoint {
  /** The profile's key header name ('Idempotency-Key', or 'x-idempotency-key' for ofb). */
  readonly headerName: string;
  readonly profile: Profile;
  /** The largest body admitted, in bytes. */
  readonly maxBodyBytes: number;
  readonly keyRequired: boolean;
  /** The stored headers a replay restores. */
  readonly replayHeaders: readonly string[];
  /**
   * Parses the key, checks the body, derives the storage key and the
   * fingerprint. Throws IntentkeyError only for what the server got wrong (an
   * empty tenant or route); a client's mistakes are `refused` answers.
   */
  admit(request: HttpRequest, now?: Now): Admission;
  /** The answer to a claim outcome (the replay, 409 with Retry-After, the payload conflict); null when owned. */
  answer(outcome: OutcomeInput, now?: Now): Reply | null;
  /** 413: the body is larger than maxBodyBytes. */
  tooLarge(now?: Now): Reply;
  /** 503 with Retry-After: the store could not be reached; nothing was done. */
  unavailable(now?: Now): Reply;
  /** 500: the handler failed and its outcome is unknown (the record stays in flight). No stack trace. */
  failed(now?: Now): Reply;
  /**
   * The core's class of an error raised instead of an answer, from the HTTP
   * status it carries: 'released' for a 4xx (refused before anything happened:
   * the claim is released, the framework's answer sent unstored), 'ambiguous'
   * otherwise (the record stays in flight; answer failed()).
   */
  classifyErrorStatus(status: number): 'released' | 'ambiguous' | 'terminal';
  /** Frees the endpoint and its copy of the secret now (otherwise when garbage-collected). */
  dispose(): void;
}

/**
 * One server's HTTP rules: its secret, profile, options and route policies.
 * Throws IntentkeyError at once for a missing or short secret, a bad option or
 * a bad policy.
 */
export function createEndpoint(options: EndpointOptions): Endpoint;

/**
 * Compiles the component's core modules asynchronously and instantiates it, so
 * that the first call does not block the event loop. Idempotent. Without it,
 * the first call compiles synchronously.
 */
export function init(): Promise<void>;
