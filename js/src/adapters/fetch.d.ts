// intentkey/fetch: idempotency for web-standard handlers (Hono, Bun, Deno,
// Cloudflare Workers). No Node imports on its browser and workerd builds.
import type { IdempotencyContext, IdempotencyOptions } from './options.js';

export type { ErrorContext, IdempotencyContext } from './options.js';

type FetchHandler<Rest extends unknown[]> = (request: Request, ...rest: Rest) => Response | Promise<Response>;

/**
 * Wraps a fetch handler (Hono's app.fetch, a Bun or Deno server's, a Worker's).
 * The owner's handler finds its context with idempotencyOf(request). Throws
 * IntentkeyError at once for a missing secret or store.
 */
export function withIdempotency<Rest extends unknown[]>(
  handler: FetchHandler<Rest>,
  options: IdempotencyOptions<[request: Request, ...rest: Rest]>,
): (request: Request, ...rest: Rest) => Promise<Response>;

/** A Hono context, as far as the middleware uses it. */
export interface HonoContextLike {
  req: { raw: Request; matchedRoutes?: ReadonlyArray<{ path: string }>; arrayBuffer(): Promise<ArrayBuffer> };
  res: Response | undefined;
  error?: unknown;
  set(key: 'idempotency', value: IdempotencyContext): void;
}

/**
 * A Hono middleware: app.post('/orders', idempotency(options), handler). The
 * owner's handler finds c.get('idempotency') (and idempotencyOf(c.req.raw)).
 */
export function idempotency<C extends HonoContextLike = HonoContextLike>(
  options: IdempotencyOptions<[c: C]>,
): (c: C, next: () => Promise<void>) => Promise<Response | void>;

/** { key, tenantId } while the owner's handler runs for `request`; undefined otherwise. */
export function idempotencyOf(request: Request): IdempotencyContext | undefined;

/** Compiles the component ahead of the first request. */
export function init(): Promise<void>;
