// intentkey/stores/mysql: records in MySQL 8 or MariaDB through mysql2 3.x. Node only.
import type { MysqlStore } from './types.js';

export type { MysqlStore, Store, WitRecord, WitResponse, WitCompletion, WitReplacement } from './types.js';

/** What mysqlStore takes: a URL (the store makes and ends the pool) or a pool the caller keeps. */
export type MysqlStoreOptions =
  | {
      /** mysql://user:password@host:port/database */
      url: string;
      pool?: undefined;
      /** The database that holds the tables (named qualified); default: the URL's. */
      schema?: string;
    }
  | {
      /** A mysql2/promise pool (or a mysql2 callback pool), with FOUND_ROWS in its flags (mysql2's default). */
      pool: object;
      url?: undefined;
      /** The database that holds the tables (named qualified); default: the connection's. */
      schema?: string;
    };

/**
 * Records in MySQL 8 or MariaDB through mysql2 3.x. Resolves once the
 * component's schema (version 3, translated for MySQL by the core) is in place,
 * created with autocommit on one connection under the named lock
 * GET_LOCK('intentkey-migration-…'). Connections use CLIENT_FOUND_ROWS. The claim
 * is a plain INSERT (a duplicate key, error 1062, is "not inserted"). Keys are at
 * most 255 characters (a VARBINARY(1020) column, compared byte for byte). An unknown option is an IntentkeyError
 * `invalid-argument` naming it; failures are `store-unavailable` (retryable) or
 * `store-failed`.
 */
export function mysqlStore(options: MysqlStoreOptions): Promise<MysqlStore>;

/** Compiles the component ahead of the first request (the main entry's init). */
export function init(): Promise<void>;
