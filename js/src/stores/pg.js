// A store in PostgreSQL through node-postgres (`pg` 8.x; an optional peer
// dependency). The schema is the component's (the core's one SQL file): one
// transaction holding pg_advisory_xact_lock(migrationLock) creates the migrations
// table, reads the highest version applied, applies each missing migration and
// records it, so concurrent processes (and the Rust host) can start against one
// database. Every statement is the core's (crates/intentkey/schema/postgres.sql,
// through the component's `schema` export, the statements the Rust stores
// prepare), with the parameters it makes and the rows it decodes: this file only
// prepares, binds and runs (docs/stores.md). Every operation is one statement;
// every write after the claim is fenced on the owner token. The operations are asynchronous, so the guard drives
// the core's claim flow through the `flows` resource (no sequencing here).
import { TRUSTED, migrationFlow, sqlDecodeRow, sqlParams, sqlStatements, storeError } from './schema.js';


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

function checkSchema(name) {
  if (typeof name !== 'string' || name.length === 0) throw new TypeError('schema must be a non-empty string');
}

/** The core's parameters as node-postgres binds them (integers as decimal text). */
function bind(values) {
  return values.map((v) => {
    switch (v.tag) {
      case 'null':
        return null;
      case 'integer':
        return v.val.toString();
      case 'bytes':
        return Buffer.from(v.val.buffer, v.val.byteOffset, v.val.byteLength);
      default:
        return v.val;
    }
  });
}

// PostgreSQL type OIDs of the columns the core's statements return.
const BOOL = 16;
const BYTEA = 17;
const INTEGERS = new Set([20, 21, 23]);

/** A row (rowMode 'array') as the core's values, by each column's type. */
function rowValues(row, fields) {
  return row.map((v, i) => {
    if (v === null || v === undefined) return { tag: 'null' };
    const type = fields[i].dataTypeID;
    if (INTEGERS.has(type)) return { tag: 'integer', val: BigInt(v) };
    if (type === BOOL) return { tag: 'integer', val: v ? 1n : 0n };
    if (type === BYTEA) return { tag: 'bytes', val: new Uint8Array(v) };
    return { tag: 'text', val: String(v) };
  });
}

const isPool = (x) => typeof x.connect === 'function' && 'totalCount' in x && 'idleCount' in x;

/** Runs the core's migration flow (lock, search path, migrations table, each missing migration) in one transaction. */
async function migrate(client, schema) {
  const flow = migrationFlow('postgres', schema);
  await client.query('BEGIN');
  try {
    let step = flow.step();
    while (step.done === undefined) {
      const { rows } = await client.query({ text: step.text, values: bind(step.params), rowMode: 'array' });
      step = flow.step(step.query && rows.length > 0 ? rows[0][0] : undefined);
    }
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    flow.drop();
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
  if (schema !== undefined) checkSchema(schema);
  // The core's statements, on the table in `schema` (quoted and qualified by the
  // core) or the one search_path finds; each has a short prepared-statement name,
  // unique per statement and table, so stores on many schemas share a connection.
  const sql = sqlStatements('postgres', schema);

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

  /** Runs the core's statement `name` for `op` (prepared once per connection). */
  const query = async (name, op, ...args) => {
    const st = sql[name];
    try {
      return await db.query({ name: st.preparedName, text: st.text, values: bind(sqlParams(op, ...args)), rowMode: 'array' });
    } catch (e) {
      throw failure(e);
    }
  };
  const changed = async (name, op, ...args) => (await query(name, op, ...args)).rowCount;
  const records = async (name, op, ...args) => {
    const { rows, fields } = await query(name, op, ...args);
    return rows.map((row) => sqlDecodeRow(rowValues(row, fields)));
  };

  return {
    kind: 'pg',
    synchronous: false,
    [TRUSTED]: true,
    /** The pg Pool or Client. */
    db,

    insert: async (record) => (await changed('insert', 'insert', record)) === 1,
    get: async (key) => (await records('get', 'get', key))[0],
    // A fast completion's statement sets synchronous_commit = off for its own
    // transaction only (set_config(…, true)), so it needs no session of its own.
    complete: async (c) => (await changed(c.fast ? 'complete-fast' : 'complete', 'complete', c)) === 1,
    replace: async (r) => (await changed('replace', 'replace', r)) === 1,
    release: async (r) => (await changed('release', 'release', r)) === 1,
    list: (status, limit) => records('list', 'list', status, limit),
    purge: (now) => changed('purge', 'purge', now),

    /** Ends the pool if this store made it. */
    async close() {
      if (owned) await db.end();
    },
  };
}
