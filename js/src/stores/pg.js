// A store in PostgreSQL through node-postgres (`pg` 8.x; an optional peer
// dependency). The schema is the component's (the core's one SQL file): one
// transaction holding pg_advisory_xact_lock(migrationLock) creates the migrations
// table, reads the highest version applied, applies each missing migration and
// records it, so concurrent processes (and the Rust host) can start against one
// database. Every operation is one statement; every write after the claim is
// fenced on the owner token. The operations are asynchronous, so the guard drives
// the core's claim flow through the `flows` resource (no sequencing here).
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

/** Applies every missing migration, under the advisory lock, in one transaction. */
async function migrate(client, schema) {
  const { migrations, migrationsTable, schemaVersion, migrationLock } = coreSchema();
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1)', [migrationLock.toString()]);
    // The DDL stays verbatim: a `schema` option puts it there through search_path.
    if (schema !== undefined) await client.query(`SET LOCAL search_path TO ${quoteIdent(schema)}`);
    await client.query(migrationsTable);
    const { rows } = await client.query('SELECT coalesce(max(version), 0) AS version FROM intentkey_schema_migrations');
    const version = Number(rows[0].version);
    if (version > schemaVersion) throw newerSchema('PostgreSQL schema', version, schemaVersion);
    for (const m of migrations) {
      if (m.version <= version) continue;
      for (const statement of m.statements) await client.query(statement);
      await client.query(
        'INSERT INTO intentkey_schema_migrations (version, applied_at) VALUES ($1, extract(epoch from now())::bigint)',
        [m.version],
      );
    }
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  }
}

/**
 * node-postgres's error as a store error: a lost connection (no SQLSTATE), a
 * connection exception (08…), an operator intervention (57P…), too many
 * connections (53300) or a serialization failure or deadlock (40001, 40P01) is
 * retryable; anything else failed.
 */
function failure(e) {
  const code = typeof e?.code === 'string' ? e.code : '';
  const sqlstate = /^[0-9A-Z]{5}$/.test(code);
  const message = e instanceof Error ? e.message : String(e);
  const unavailable =
    !sqlstate || code.startsWith('08') || code.startsWith('57P') || code === '53300' || code === '40001' || code === '40P01';
  return storeError(unavailable ? 'unavailable' : 'failed', sqlstate ? `postgres: ${code}: ${message}` : `postgres: ${message}`, e);
}

/**
 * A record store in PostgreSQL; resolves once the schema is in place.
 * @param {object} poolOrConfig a pg Pool, a connected pg Client (the caller
 *   keeps either), or a Pool config (the store makes the pool; close() ends it)
 * @param {{ schema?: string }} [options] the tables live in this schema (created
 *   there, used qualified) instead of being found through search_path
 */
export async function pgStore(poolOrConfig, options = {}) {
  if (poolOrConfig === null || typeof poolOrConfig !== 'object') {
    throw new TypeError('pgStore takes a pg Pool, a connected pg Client or a Pool config object');
  }
  const schema = options.schema;
  if (schema !== undefined) quoteIdent(schema);

  let db;
  let owned = false;
  if (typeof poolOrConfig.query === 'function') {
    db = poolOrConfig;
  } else {
    const pg = await loadDriver();
    db = new pg.Pool(poolOrConfig);
    owned = true;
  }
  const pool = isPool(db);

  try {
    if (pool) {
      const client = await db.connect();
      try {
        await migrate(client, schema);
      } finally {
        client.release();
      }
    } else {
      await migrate(db, schema);
    }
  } catch (e) {
    if (owned) await db.end();
    throw e;
  }

  const T = schema === undefined ? 'intentkey_records' : `${quoteIdent(schema)}.intentkey_records`;
  const cols = COLUMNS.join(', ');
  const completeSet =
    "SET status = 'done', response_status = $3, response_content_type = $4, response_headers = $5, " +
    'response_body = NULL, response_body_bytes = $6, expires_at = $7, next_lookup_at = NULL';
  const fence = "key = $1 AND status = 'in_flight' AND owner_token = $2";
  // Named statements are prepared once per connection.
  const sql = {
    insert: {
      name: `ik-insert-${T}`,
      text: `INSERT INTO ${T} (${cols}) VALUES (${COLUMNS.map((_, i) => `$${i + 1}`).join(', ')}) ON CONFLICT (key) DO NOTHING`,
    },
    get: { name: `ik-get-${T}`, text: `SELECT ${cols} FROM ${T} WHERE key = $1` },
    complete: { name: `ik-complete-${T}`, text: `UPDATE ${T} ${completeSet} WHERE ${fence}` },
    // A Client is shared with whatever else the caller runs on it, so a fast
    // completion cannot open a transaction there (other queries would join it):
    // set_config(…, true) is SET LOCAL for the statement's own transaction.
    completeFastOneStatement: {
      name: `ik-complete-fast-${T}`,
      text:
        `UPDATE ${T} ${completeSet} FROM (SELECT set_config('synchronous_commit', 'off', true)) AS fast ` +
        `WHERE ${T}.key = $1 AND ${T}.status = 'in_flight' AND ${T}.owner_token = $2`,
    },
    replace: {
      name: `ik-replace-${T}`,
      text:
        `UPDATE ${T} SET status = $4, owner_token = $5, response_status = $6, response_content_type = $7, ` +
        'response_headers = $8, response_body = $9, response_body_bytes = $10, created_at = $11, expires_at = $12, ' +
        "lookups = $13, next_lookup_at = $14 WHERE key = $1 AND status = 'in_flight' AND owner_token = $2 AND lookups = $3",
    },
    release: { name: `ik-release-${T}`, text: `DELETE FROM ${T} WHERE ${fence}` },
    list: { name: `ik-list-${T}`, text: `SELECT ${cols} FROM ${T} WHERE status = $1 ORDER BY created_at, key LIMIT $2` },
    purge: { name: `ik-purge-${T}`, text: `DELETE FROM ${T} WHERE status = 'done' AND expires_at <= $1` },
  };
  const query = async (statement, values) => {
    try {
      return await db.query({ ...statement, values });
    } catch (e) {
      throw failure(e);
    }
  };
  const completionValues = (c) => {
    const x = c.response;
    return [c.key, c.ownerToken, x.status, x.contentType, headersToColumn(x.headers), bodyToColumn(x.body), c.expiresAt];
  };

  /** BEGIN; SET LOCAL synchronous_commit = off; UPDATE …; COMMIT on one pooled connection. */
  async function completeFast(c) {
    let client;
    try {
      client = await db.connect();
    } catch (e) {
      throw failure(e);
    }
    let broken;
    try {
      await client.query('BEGIN');
      await client.query('SET LOCAL synchronous_commit = off');
      const r = await client.query({ ...sql.complete, values: completionValues(c) });
      await client.query('COMMIT');
      return r.rowCount === 1;
    } catch (e) {
      broken = e;
      await client.query('ROLLBACK').catch(() => {});
      throw failure(e);
    } finally {
      client.release(broken);
    }
  }

  return {
    kind: 'pg',
    synchronous: false,
    [TRUSTED]: true,
    /** The pg Pool or Client. */
    db,

    async insert(record) {
      return (await query(sql.insert, recordParams(record))).rowCount === 1;
    },

    async get(key) {
      const { rows } = await query(sql.get, [key]);
      return rows.length === 0 ? undefined : rowToRecord(rows[0]);
    },

    async complete(c) {
      if (c.fast) {
        if (pool) return completeFast(c);
        return (await query(sql.completeFastOneStatement, completionValues(c))).rowCount === 1;
      }
      return (await query(sql.complete, completionValues(c))).rowCount === 1;
    },

    async replace(r) {
      const v = recordParams(r.record);
      const values = [v[0], r.expectedToken, r.expectedLookups, ...v.slice(4)];
      return (await query(sql.replace, values)).rowCount === 1;
    },

    async release(r) {
      return (await query(sql.release, [r.key, r.ownerToken])).rowCount === 1;
    },

    async list(status, limit) {
      const { rows } = await query(sql.list, [storedStatus(status), limit]);
      return rows.map(rowToRecord);
    },

    async purge(now) {
      return (await query(sql.purge, [now])).rowCount;
    },

    /** Ends the pool if this store made it. */
    async close() {
      if (owned) await db.end();
    },
  };
}
