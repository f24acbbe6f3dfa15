// intentkey/express: idempotency middleware for Express and node:http. Node only.
// Structural types only (no node:http import): they compile with or without
// @types/node and @types/express.
import type { AdapterParts, IdempotencyContext, IdempotencyOptions } from './options.js';

export type { ErrorContext, IdempotencyContext } from './options.js';

/** A request as the middleware reads it: node:http's IncomingMessage, or Express's Request. */
export interface ExpressRequest {
  method?: string;
  url?: string;
  headers: Record<string, string | string[] | undefined>;
  rawHeaders?: string[];
  /** Set for the owner's handler: the storage key and the tenant. */
  idempotency?: IdempotencyContext;
  /** A body parser's raw bytes (express.json({ verify })), used when the middleware runs after it. */
  rawBody?: Uint8Array | string;
  /** A parsed body, used when nothing else is left. */
  body?: unknown;
  /** Express: the matched route (its path is the template). */
  route?: { path?: unknown };
  baseUrl?: string;
  originalUrl?: string;
}

export type ExpressIdempotencyOptions = IdempotencyOptions<[req: any]>;

/** The middleware, with an Express error middleware for handlers that throw. */
export interface IdempotencyMiddleware extends AdapterParts {
  (req: any, res: any, next: (err?: unknown) => unknown): void;
  /**
   * app.use(mw.onError) after the routes: a route that throws leaves its record
   * in flight and gets the core's 500 (no stack trace) instead of having
   * Express's error page stored as its answer.
   */
  onError(err: unknown, req: any, res: any, next: (err?: unknown) => void): void;
}

/**
 * Idempotency middleware for Express (mounted before the body parsers, or after
 * one that keeps req.rawBody) and for node:http `(req, res, next)`, where next
 * is the handler. The owner's handler finds req.idempotency. Throws
 * IntentkeyError at once for a missing secret or store.
 */
export function idempotency(options: ExpressIdempotencyOptions): IdempotencyMiddleware;
export default idempotency;

/** Compiles the component ahead of the first request. */
export function init(): Promise<void>;

declare global {
  // Express's own extension point (@types/express merges into it).
  namespace Express {
    interface Request {
      /** Set by intentkey for the owner's handler: the storage key and the tenant. */
      idempotency?: IdempotencyContext;
    }
  }
}
