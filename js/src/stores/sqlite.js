// A store in SQLite through better-sqlite3 (12.x; an optional peer dependency).
// WAL, synchronous=FULL and a busy timeout, so several processes can share one
// database file. The schema is the component's (the core's one SQL file), applied
// above PRAGMA user_version inside BEGIN IMMEDIATE. Every operation is one
// statement; every write after the claim is fenced on the owner token.
// better-sqlite3 is synchronous, so the guard plugs this store into the
// component's `store` import. Fast completions (`completion.fast`) are written
// like any other: SQLite has no per-transaction asynchronous commit.
import { createRequire } from 'node:module';
import {
  COLUMNS,
  TRUSTED,
  bodyToColumn,
  coreSchema,
  headersToColumn,
  newerSchema,
  recordParams,
  rowToRecord,
  storeError,
  storedStatus,
} from './schema.js';


/** Compiles the component ahead of the first request (see the main entry's init). */
export { init } from '../node-core.js';

const require = createRequire(import.meta.url);

function loadDriver() {
  try {
    return require('better-sqlite3');
  } catch (e) {
    throw new Error(
      'intentkey: sqliteStore(path) needs better-sqlite3 12.x: npm install better-sqlite3@12 ' +
        '(or pass an open better-sqlite3 Database)',
      { cause: e },
    );
  }
}

function isDatabase(value) {
  return (
    value !== null &&
    typeof value === 'object' &&
    typeof value.prepare === 'function' &&
    typeof value.pragma === 'function' &&
    typeof value.transaction === 'function'
  );
}

/** Applies the component's migrations above PRAGMA user_version, in one IMMEDIATE transaction. */
function migrate(db) {
  const { migrations, schemaVersion } = coreSchema();
  const check = (version) => {
    if (version > schemaVersion) throw newerSchema('SQLite database', version, schemaVersion);
  };
  const current = db.pragma('user_version', { simple: true });
  check(current);
  if (current === schemaVersion) return;
  const apply = db.transaction(() => {
    // Read again under the write lock: another process may have migrated meanwhile.
    const version = db.pragma('user_version', { simple: true });
    check(version);
    if (version === schemaVersion) return;
    for (const m of migrations) {
      if (m.version <= version) continue;
      for (const statement of m.statements) db.exec(statement);
    }
    // SQLite keeps the version in PRAGMA user_version (as the Rust host does), not
    // in intentkey_schema_migrations.
    db.pragma(`user_version = ${schemaVersion}`);
  });
  apply.immediate();
}

/** better-sqlite3's error as a store error: busy or locked is retryable. */
function failure(e) {
  const code = typeof e?.code === 'string' ? e.code : '';
  const message = `sqlite: ${code === '' ? '' : `${code}: `}${e instanceof Error ? e.message : String(e)}`;
  const busy = code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED');
  return storeError(busy ? 'unavailable' : 'failed', message, e);
}

/**
 * A record store in SQLite.
 * @param {string | object} pathOrDb a file path (opened here, closed by close())
 *   or an open better-sqlite3 Database (the caller keeps it)
 * @param {{ busyTimeoutMs?: number }} [options]
 */
export function sqliteStore(pathOrDb, options = {}) {
  const busyTimeoutMs = options.busyTimeoutMs ?? 10_000;
  if (!Number.isSafeInteger(busyTimeoutMs) || busyTimeoutMs < 0) {
    throw new TypeError('busyTimeoutMs must be a whole number of milliseconds');
  }
  let db;
  let owned = false;
  if (typeof pathOrDb === 'string') {
    const Database = loadDriver();
    db = new Database(pathOrDb);
    owned = true;
  } else if (isDatabase(pathOrDb)) {
    db = pathOrDb;
  } else {
    throw new TypeError('sqliteStore takes a file path or an open better-sqlite3 Database');
  }

  try {
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    migrate(db);
  } catch (e) {
    if (owned) db.close();
    throw e;
  }

  const cols = COLUMNS.join(', ');
  const sql = {
    insert: db.prepare(
      `INSERT INTO intentkey_records (${cols}) VALUES (${COLUMNS.map(() => '?').join(', ')}) ON CONFLICT (key) DO NOTHING`,
    ),
    get: db.prepare(`SELECT ${cols} FROM intentkey_records WHERE key = ?`),
    complete: db.prepare(
      "UPDATE intentkey_records SET status = 'done', response_status = ?, response_content_type = ?, " +
        'response_headers = ?, response_body = NULL, response_body_bytes = ?, expires_at = ?, next_lookup_at = NULL ' +
        "WHERE key = ? AND status = 'in_flight' AND owner_token = ?",
    ),
    replace: db.prepare(
      'UPDATE intentkey_records SET status = ?, owner_token = ?, response_status = ?, response_content_type = ?, ' +
        'response_headers = ?, response_body = ?, response_body_bytes = ?, created_at = ?, expires_at = ?, lookups = ?, ' +
        'next_lookup_at = ? ' +
        "WHERE key = ? AND status = 'in_flight' AND owner_token = ? AND lookups = ?",
    ),
    release: db.prepare("DELETE FROM intentkey_records WHERE key = ? AND status = 'in_flight' AND owner_token = ?"),
    list: db.prepare(`SELECT ${cols} FROM intentkey_records WHERE status = ? ORDER BY created_at, key LIMIT ?`),
    purge: db.prepare("DELETE FROM intentkey_records WHERE status = 'done' AND expires_at <= ?"),
  };

  return {
    kind: 'sqlite',
    synchronous: true,
    [TRUSTED]: true,
    /** The better-sqlite3 Database. */
    db,

    insert(record) {
      try {
        return sql.insert.run(recordParams(record)).changes === 1;
      } catch (e) {
        throw failure(e);
      }
    },

    get(key) {
      let row;
      try {
        row = sql.get.get(key);
      } catch (e) {
        throw failure(e);
      }
      return row === undefined ? undefined : rowToRecord(row);
    },

    complete(c) {
      const x = c.response;
      try {
        return (
          sql.complete.run(
            x.status,
            x.contentType,
            headersToColumn(x.headers),
            bodyToColumn(x.body),
            c.expiresAt,
            c.key,
            c.ownerToken,
          ).changes === 1
        );
      } catch (e) {
        throw failure(e);
      }
    },

    replace(r) {
      const v = recordParams(r.record);
      try {
        return (
          sql.replace.run(...v.slice(4), v[0], r.expectedToken, r.expectedLookups).changes === 1
        );
      } catch (e) {
        throw failure(e);
      }
    },

    release(r) {
      try {
        return sql.release.run(r.key, r.ownerToken).changes === 1;
      } catch (e) {
        throw failure(e);
      }
    },

    list(status, limit) {
      const stored = storedStatus(status);
      let rows;
      try {
        rows = sql.list.all(stored, limit);
      } catch (e) {
        throw failure(e);
      }
      return rows.map(rowToRecord);
    },

    purge(now) {
      try {
        return sql.purge.run(now).changes;
      } catch (e) {
        throw failure(e);
      }
    },

    /** Closes the database if this store opened it. */
    close() {
      if (owned && db.open) db.close();
    },
  };
}
