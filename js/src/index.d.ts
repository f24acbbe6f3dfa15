// Types for the intentkey package (Node entry src/index.js and browser entry
// src/browser.js export the same API).

/** The stable error codes: the same kebab-case strings as the WIT, the vectors and the CLI. */
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
  | 'invalid-random';

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
