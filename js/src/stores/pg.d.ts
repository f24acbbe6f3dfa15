// intentkey/stores/pg: records in PostgreSQL through pg 8.x. Node only.
import type { PgStore } from './types.js';

export type { PgStore, Store, WitRecord, WitResponse, WitCompletion, WitReplacement } from './types.js';

/**
 * Records in PostgreSQL through pg 8.x: a Pool, a connected Client, or a Pool
 * config. Resolves once the component's schema (version 3) is in place (applied
 * under pg_advisory_xact_lock). Tables are found through search_path, or in
 * `schema`.
 */
export function pgStore(poolOrConfig: object, options?: { schema?: string }): Promise<PgStore>;

/** Compiles the component ahead of the first request (the main entry's init). */
export function init(): Promise<void>;
