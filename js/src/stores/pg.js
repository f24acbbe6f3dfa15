// A store in PostgreSQL through node-postgres (`pg` 8.x; an optional peer
// dependency). Schema version 1 of docs/store-schema.md is applied inside a
// transaction holding pg_advisory_xact_lock(7316502411) and recorded in
// intentkey_schema_migrations, so concurrent processes (and the Rust host) can
// start against one database. The unique key decides every claim
// (INSERT … ON CONFLICT DO NOTHING); completions and recovery writes are
// conditional on status = 'in_flight'; what may be purged is the core's
// `purgeable`.
import { claims } from '../node-core.js';
import {
  COLUMNS,
  PURGE_BATCH,
  SCHEMA_VERSION,
  checkNow,
  checkStatus,
  migrationsTable,
  recordToRow,
  rowToRecord,
  schemaV1,
} from './schema.js';

/** The advisory lock every intentkey migration takes (the Rust host's too). */
export const MIGRATION_LOCK = 7316502411n;

async function loadDriver() {
  try {
    const pg = await import('pg');
    return pg.default ?? pg;
  } catch (e) {
    throw new Error(
      'intentkey: pgStore(config) needs pg 8.x: npm install pg@8 (or pass a pg Pool or connected Client)',
      { cause: e },
    );
  }
}

function quoteIdent(name) {
  if (typeof name !== 'string' || name.length === 0) throw new TypeError('schema must be a non-empty string');
  return `"${name.replaceAll('"', '""')}"`;
}

const isPool = (x) => typeof x.connect === 'function' && 'totalCount' in x && 'idleCount' in x;

/** Applies version 1 once, under the advisory lock, in one transaction. */
async function migrate(client, table) {
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK.toString()]);
    const { rows } = await client.query('SELECT to_regclass($1) IS NOT NULL AS present', [
      table('intentkey_schema_migrations'),
    ]);
    let version = 0;
    if (rows[0].present) {
      const r = await client.query(
        `SELECT coalesce(max(version), 0) AS version FROM ${table('intentkey_schema_migrations')}`,
      );
      version = Number(r.rows[0].version);
    } else {
      await client.query(migrationsTable(table));
    }
    if (version > SCHEMA_VERSION) {
      throw new Error(
        `intentkey: this PostgreSQL schema is at version ${version}; ` +
          `this package knows version ${SCHEMA_VERSION} (upgrade intentkey)`,
      );
    }
    if (version < SCHEMA_VERSION) {
      for (const sql of schemaV1(table)) await client.query(sql);
      await client.query(
        `INSERT INTO ${table('intentkey_schema_migrations')} (version, applied_at) VALUES ($1, $2)`,
        [SCHEMA_VERSION, Math.floor(Date.now() / 1000)],
      );
    }
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  }
}

/**
 * A record store in PostgreSQL; resolves once the schema is in place.
 * @param {object} poolOrConfig a pg Pool, a connected pg Client (the caller
 *   keeps either), or a Pool config (the store makes the pool; close() ends it)
 * @param {{ schema?: string }} [options] qualify the tables with this schema
 *   instead of relying on search_path
 */
export async function pgStore(poolOrConfig, options = {}) {
  if (poolOrConfig === null || typeof poolOrConfig !== 'object') {
    throw new TypeError('pgStore takes a pg Pool, a connected pg Client or a Pool config object');
  }
  const prefix = options.schema === undefined ? '' : `${quoteIdent(options.schema)}.`;
  const table = (name) => prefix + name;

  let db;
  let owned = false;
  if (typeof poolOrConfig.query === 'function') {
    db = poolOrConfig;
  } else {
    const pg = await loadDriver();
    db = new pg.Pool(poolOrConfig);
    owned = true;
  }

  try {
    if (isPool(db)) {
      const client = await db.connect();
      try {
        await migrate(client, table);
      } finally {
        client.release();
      }
    } else {
      await migrate(db, table);
    }
  } catch (e) {
    if (owned) await db.end();
    throw e;
  }

  const T = table('intentkey_records');
  const cols = COLUMNS.join(', ');
  const sql = {
    insert:
      `INSERT INTO ${T} (${cols}) VALUES (${COLUMNS.map((_, i) => `$${i + 1}`).join(', ')}) ` +
      'ON CONFLICT (key) DO NOTHING',
    get: `SELECT ${cols} FROM ${T} WHERE key = $1`,
    complete:
      `UPDATE ${T} SET status = $2, response_status = $3, response_content_type = $4, ` +
      'response_body = $5, expires_at = $6, lookups = $7, next_lookup_at = $8 ' +
      "WHERE key = $1 AND status = 'in_flight'",
    recover:
      `UPDATE ${T} SET status = $2, response_status = $3, response_content_type = $4, ` +
      'response_body = $5, created_at = $6, expires_at = $7, lookups = $8, next_lookup_at = $9 ' +
      "WHERE key = $1 AND status = 'in_flight' AND created_at = $10 AND lookups = $11 " +
      'AND next_lookup_at IS NOT DISTINCT FROM $12::bigint',
    list: `SELECT ${cols} FROM ${T} WHERE status = $1 ORDER BY created_at, key LIMIT $2`,
    purgeCandidates:
      `SELECT ${cols} FROM ${T} WHERE status = 'done' AND expires_at <= $1 AND key > $2 ` +
      'ORDER BY key LIMIT $3',
    purge: `DELETE FROM ${T} WHERE key = ANY($1::text[]) AND status = 'done' AND expires_at <= $2`,
  };

  return {
    kind: 'pg',
    /** The pg Pool or Client. */
    db,

    async insertIfAbsent(record) {
      const r = await db.query(sql.insert, recordToRow(record));
      return r.rowCount === 1;
    },

    async get(key) {
      const r = await db.query(sql.get, [key]);
      return r.rows.length === 0 ? null : rowToRecord(r.rows[0]);
    },

    async complete(key, record) {
      const v = recordToRow(record);
      const r = await db.query(sql.complete, [key, v[4], v[5], v[6], v[7], v[9], v[10], v[11]]);
      return r.rowCount === 1;
    },

    async applyRecovery(key, expected, next) {
      const e = recordToRow(expected);
      const v = recordToRow(next);
      const r = await db.query(sql.recover, [
        key, v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], e[8], e[10], e[11],
      ]);
      return r.rowCount === 1;
    },

    async list(status, { limit = null } = {}) {
      const r = await db.query(sql.list, [checkStatus(status), limit]);
      return r.rows.map(rowToRecord);
    },

    async purge(now) {
      checkNow(now);
      let deleted = 0;
      let after = '';
      for (;;) {
        const { rows } = await db.query(sql.purgeCandidates, [now, after, PURGE_BATCH]);
        if (rows.length === 0) return deleted;
        after = rows[rows.length - 1].key;
        const keys = rows.map(rowToRecord).filter((r) => claims.purgeable(r, now)).map((r) => r.key);
        if (keys.length > 0) deleted += (await db.query(sql.purge, [keys, now])).rowCount;
      }
    },

    /** Ends the pool if this store made it. */
    async close() {
      if (owned) await db.end();
    },
  };
}
