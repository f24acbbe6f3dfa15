// A store in SQLite through better-sqlite3 (12.x; an optional peer dependency).
// WAL, synchronous=FULL and a busy timeout, so several processes can share one
// database file; the schema is version 1 of docs/store-schema.md, tracked with
// PRAGMA user_version. The unique key decides every claim
// (INSERT … ON CONFLICT DO NOTHING); completions and recovery writes are
// conditional on status = 'in_flight'; what may be purged is the core's
// `purgeable`. better-sqlite3 is synchronous, so the methods return plain values.
import { createRequire } from 'node:module';
import { claims } from '../node-core.js';
import {
  COLUMNS,
  PURGE_BATCH,
  SCHEMA_VERSION,
  checkNow,
  checkStatus,
  recordToRow,
  rowToRecord,
  schemaV1,
} from './schema.js';

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

/** Applies version 1 once, in an IMMEDIATE transaction (one writer at a time). */
function migrate(db) {
  const apply = db.transaction(() => {
    const version = db.pragma('user_version', { simple: true });
    if (version === SCHEMA_VERSION) return;
    if (version !== 0) {
      throw new Error(
        `intentkey: this SQLite database is at schema version ${version}; ` +
          `this package knows version ${SCHEMA_VERSION} (upgrade intentkey)`,
      );
    }
    // SQLite keeps the version in PRAGMA user_version (as the Rust host does), not
    // in intentkey_schema_migrations.
    for (const sql of schemaV1()) db.exec(sql);
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
  });
  if (db.pragma('user_version', { simple: true }) !== SCHEMA_VERSION) apply.immediate();
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
  const insert = db.prepare(
    `INSERT INTO intentkey_records (${cols}) VALUES (${COLUMNS.map(() => '?').join(', ')}) ` +
      'ON CONFLICT (key) DO NOTHING',
  );
  const select = db.prepare(`SELECT ${cols} FROM intentkey_records WHERE key = ?`);
  const complete = db.prepare(
    'UPDATE intentkey_records SET status = ?, response_status = ?, response_content_type = ?, ' +
      'response_body = ?, expires_at = ?, lookups = ?, next_lookup_at = ? ' +
      "WHERE key = ? AND status = 'in_flight'",
  );
  const recover = db.prepare(
    'UPDATE intentkey_records SET status = ?, response_status = ?, response_content_type = ?, ' +
      'response_body = ?, created_at = ?, expires_at = ?, lookups = ?, next_lookup_at = ? ' +
      "WHERE key = ? AND status = 'in_flight' AND created_at = ? AND lookups = ? AND next_lookup_at IS ?",
  );
  const list = db.prepare(
    `SELECT ${cols} FROM intentkey_records WHERE status = ? ORDER BY created_at, key LIMIT ?`,
  );
  const purgeCandidates = db.prepare(
    `SELECT ${cols} FROM intentkey_records ` +
      "WHERE status = 'done' AND expires_at <= ? AND key > ? ORDER BY key LIMIT ?",
  );
  const purgeOne = db.prepare(
    "DELETE FROM intentkey_records WHERE key = ? AND status = 'done' AND expires_at <= ?",
  );
  const purgeBatch = db.transaction((keys, now) => {
    let n = 0;
    for (const key of keys) n += purgeOne.run(key, now).changes;
    return n;
  });

  return {
    kind: 'sqlite',
    /** The better-sqlite3 Database. */
    db,

    insertIfAbsent(record) {
      return insert.run(...recordToRow(record)).changes === 1;
    },

    get(key) {
      const row = select.get(key);
      return row === undefined ? null : rowToRecord(row);
    },

    complete(key, record) {
      const v = recordToRow(record);
      return complete.run(v[4], v[5], v[6], v[7], v[9], v[10], v[11], key).changes === 1;
    },

    applyRecovery(key, expected, next) {
      const e = recordToRow(expected);
      const v = recordToRow(next);
      return (
        recover.run(v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], key, e[8], e[10], e[11]).changes === 1
      );
    },

    list(status, { limit = -1 } = {}) {
      return list.all(checkStatus(status), limit).map(rowToRecord);
    },

    purge(now) {
      checkNow(now);
      let deleted = 0;
      let after = '';
      for (;;) {
        const rows = purgeCandidates.all(now, after, PURGE_BATCH);
        if (rows.length === 0) return deleted;
        after = rows[rows.length - 1].key;
        const keys = rows.map(rowToRecord).filter((r) => claims.purgeable(r, now)).map((r) => r.key);
        deleted += purgeBatch(keys, now);
      }
    },

    /** Closes the database if this store opened it. */
    close() {
      if (owned && db.open) db.close();
    },
  };
}
