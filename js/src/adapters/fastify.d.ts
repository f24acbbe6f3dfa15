// intentkey/fastify: idempotency as a Fastify plugin. Node only.
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { Endpoint } from '../api.js';
import type { Guard } from '../index.js';
import type { IdempotencyContext, IdempotencyOptions } from './options.js';

export type { ErrorContext, IdempotencyContext } from './options.js';

export type FastifyIdempotencyOptions = IdempotencyOptions<[request: FastifyRequest]>;

/**
 * The plugin: `await app.register(intentkey, { secret, store, … })`. Its hooks
 * apply to the routes of the scope it is registered in; a route opts out with
 * `config: { idempotency: false }`.
 */
export const intentkey: FastifyPluginAsync<FastifyIdempotencyOptions>;
export default intentkey;

/** Compiles the component ahead of the first request. */
export function init(): Promise<void>;

declare module 'fastify' {
  interface FastifyRequest {
    /** The storage key and the tenant, for the owner's handler; null elsewhere. */
    idempotency: IdempotencyContext | null;
  }
  interface FastifyInstance {
    /** The endpoint and the guard of the registered plugin. */
    intentkey: { readonly endpoint: Endpoint; readonly guard: Guard };
  }
  interface FastifyContextConfig {
    /** false: this route is not guarded. */
    idempotency?: boolean;
  }
}
