// intentkey/stores/pg: records in PostgreSQL through pg 8.x. Node only.
import type { PgStore } from './types.js';

export type { PgStore, Store, WitRecord, WitResponse, WitCompletion, WitReplacement } from './types.js';

/**
 * Records in PostgreSQL through pg 8.x: a Pool, a connected Client, or a Pool
 * config. Resolves once the component's schema (version 3) is in place (applied
 * under pg_advisory_xact_lock). Tables are found through search_path, or in
 * `schema`. An unknown option is an IntentkeyError `invalid-argument` naming it.
 */
export function pgStore(poolOrConfig: object, options?: PgStoreOptions): Promise<PgStore>;

export interface PgStoreOptions {
  /** The schema the tables live in (created there, used qualified); default: found through search_path. */
  schema?: string;
  /**
   * Whether writes that change a record (completion, release, recovery
   * write) wake waiters in other processes with the core's `pg_notify`
   * statement (one more statement after each, not awaited). Default: on once a
   * guard or an adapter with `wait` uses this store, or once it waited; true:
   * always (a process that only writes); false: never (waiters elsewhere
   * re-check on their own, at most 1 s late).
   */
  notify?: boolean;
}

/** The application_name of a PostgreSQL store's listening connection (LISTEN), as in pg_stat_activity. */
export const LISTENER_APPLICATION_NAME: 'intentkey-listener';

/** Compiles the component ahead of the first request (the main entry's init). */
export function init(): Promise<void>;
