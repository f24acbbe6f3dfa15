// The options every HTTP adapter takes (intentkey/express, intentkey/fastify,
// intentkey/fetch). `Req` is what the adapter's tenant and route functions get.
import type { Endpoint, EndpointOptions, Profile, SecretOption, WaitOptions } from '../api.js';
import type { Store } from '../stores/types.js';

type MaybePromise<T> = T | Promise<T>;

/** What the handler of an owned request finds (req.idempotency, request.idempotency, idempotencyOf(request)). */
export interface IdempotencyContext {
  /** The storage key: HMAC(secret, tenant, client key), 64 hex. The store's primary key. */
  readonly key: string;
  /** The tenant the request was assigned to. */
  readonly tenantId: string;
}

/** Where an error the client does not see happened. */
export interface ErrorContext {
  /**
   * 'handler': the owner's handler threw; 'complete': finishing the record
   * failed; 'claim': the store could not be reached; 'capture': the handler's
   * answer could not be stored; 'release': a claim whose insert failed (its
   * handler never ran) could not be released in the background (the store
   * never answered, or was closed): it stays in flight for recovery.
   */
  phase: 'handler' | 'complete' | 'claim' | 'capture' | 'release';
  /** The storage key. */
  key: string;
}

/**
 * The adapters' options. The secret is required: `secret` (at least 32 random
 * bytes, as bytes or hex), or `keyring` (secrets with ids and activation epochs,
 * to rotate the secret without a duplicate window), not both.
 */
export type IdempotencyOptions<Req extends unknown[]> = SecretOption & IdempotencySettings<Req>;

export interface IdempotencySettings<Req extends unknown[]> {
  /** The record store: memoryStore(), sqliteStore(path), await pgStore(pool). Required. */
  store: Store;
  /** Default 'ietf'. */
  profile?: Profile;
  /** The tenant of a request: a constant, or a function of it (default 'default'). */
  tenant?: string | ((...request: Req) => MaybePromise<string>);
  /** The route a request is fingerprinted under; default the framework's route template, else the URL path. */
  route?: (...request: Req) => MaybePromise<string>;
  /** Whether a request without a key gets 400 (default true) or runs unguarded. */
  keyRequired?: boolean;
  /** The largest body read, in bytes (default 1 MiB): past it, reading stops and the client gets 413. */
  maxBodyBytes?: number;
  /** The largest answer body kept for replays, in bytes (default 1 MiB): a larger answer is sent once and stored as "answer not kept" (the status kept, a problem body, `Idempotent-Answer-Kept: false`); the request never runs again. */
  maxStoredBytes?: number;
  /** Stored headers a replay restores, besides Location and Content-Type. */
  replayHeaders?: string[];
  /** Answered statuses that release the claim (a retry runs the handler again); default [429, 503]. */
  releaseStatuses?: number[];
  /** Route policies by `METHOD route`, e.g. { 'POST /orders': { version: 1, … } }. */
  policies?: EndpointOptions['policies'];
  /** `ietf` only: accept only a quoted key (RFC 8941 sf-string) and answer 400 to a bare one. Default false: both are taken. */
  strictKeySyntax?: boolean;
  /** The Retry-After of a 409 or 503, in seconds (default 1). */
  retryAfterSeconds?: number;
  /** How long answers are kept and replayed, in seconds; default the core's (86,400). */
  ttlSeconds?: number;
  /** PostgreSQL completions that do not wait for the disk; default false. */
  fastCompletion?: boolean;
  /** Whole seconds now; default Math.floor(Date.now() / 1000). */
  now?: () => number;
  /** The methods guarded; default ['POST', 'PATCH']. Others pass through untouched. */
  methods?: string[];
  /**
   * A retry that finds its key in flight (same payload) waits up to `maxMs`
   * (at most 60000) for the first attempt's answer and gets its replay,
   * instead of 409 at once; the store wakes it (see the README's table). A
   * client that disconnects ends its wait. Default: no wait.
   */
  wait?: WaitOptions;
  /**
   * The deadline of one call of an asynchronous store, in milliseconds (1 to
   * 2147483647; default the core's 2000): past it the call is
   * store-unavailable, never a hang (before the claim decided: the profile's
   * 503 with Retry-After at once; while finishing: tried again on the core's
   * schedule).
   */
  storeDeadlineMs?: number;
  /** The OpenTelemetry Tracer of the requests' spans (default the global @opentelemetry/api's). */
  tracer?: import('../index.js').TelemetryTracer;
  /** The OpenTelemetry Meter of the metrics (default the global @opentelemetry/api's). */
  meter?: import('../index.js').TelemetryMeter;
  /** Errors the client does not see (a handler's throw, a failed completion); default console.error (Fastify: request.log). */
  onError?: (error: unknown, context: ErrorContext) => void;
}

/** What an adapter keeps of its configuration (read-only). */
export interface AdapterParts {
  /** The endpoint the adapter answers with. */
  readonly endpoint: Endpoint;
  /** The guard over the store. */
  readonly guard: import('../index.js').Guard;
}
