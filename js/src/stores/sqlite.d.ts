// intentkey/stores/sqlite: records in SQLite through better-sqlite3 12.x. Node only.
import type { SqliteStore } from './types.js';

export type { SqliteStore, Store, WitRecord, WitResponse, WitCompletion, WitReplacement } from './types.js';

/**
 * Records in SQLite through better-sqlite3 12.x: WAL, synchronous=FULL, a busy
 * timeout (default 10 s); the component's schema (version 3) applied above
 * PRAGMA user_version.
 */
export function sqliteStore(pathOrDb: string | object, options?: { busyTimeoutMs?: number }): SqliteStore;

/** Compiles the component ahead of the first request (the main entry's init). */
export function init(): Promise<void>;
