// A store in MySQL 8 or MariaDB through mysql2 3.x (an optional peer
// dependency). The schema is the component's (the core's one SQL file,
// translated for MySQL by the core: backquoted identifiers, a VARBINARY(1020)
// key compared byte for byte, LONGBLOB bodies, utf8mb4_bin text). MySQL commits
// every DDL statement by itself, so the core's migration flow runs with
// autocommit on one dedicated connection, under a named lock (GET_LOCK) that
// the flow takes first and gives back last; on any error that connection is
// destroyed, which frees the lock. Every statement is the core's
// (crates/intentkey/schema/mysql.sql, through the component's `schema`
// export), with the parameters it makes, the order in which they bind to the
// positional `?` (`binds`) and the rows it decodes: this file only prepares,
// binds and runs (docs/stores.md). The claim is a plain INSERT: an existing
// key is the server's error 1062 (the core's `sql-duplicate-key-error`),
// answered as "not inserted"; the core's flow then reads the record (MySQL has
// no one-round-trip claim). Every write after the claim is fenced on the owner
// token, and connections use CLIENT_FOUND_ROWS so an UPDATE counts the rows it
// matched. The operations are asynchronous, so the guard drives the core's
// claim flow through the `flows` resource (no sequencing here).
import { IntentkeyError } from '../errors.js';
import { checkOptionNames } from '../endpoint.js';
import { ABORTED_FLAG, CLOSING, TRUSTED, migrationFlow, sqlCounted, sqlDecodeRow, sqlDuplicateKeyError, sqlErrorClass, sqlParams, sqlStatements, storeError, closer } from './schema.js';

/** Compiles the component ahead of the first request (see the main entry's init). */
export { init } from '../node-core.js';

/** The options mysqlStore takes. */
const OPTIONS = Object.freeze(['url', 'pool', 'schema']);

/** The longest key the store holds, in characters: the core's MySQL key column holds 255 (ddl::MYSQL_KEY_CHARS). */
const KEY_CHARS = 255;

/** CLIENT_FOUND_ROWS: UPDATE reports the rows it matched, not only those it changed. */
const CLIENT_FOUND_ROWS = 0x2;

// Integer column types in mysql2's result metadata (MYSQL_TYPE_TINY, SHORT,
// LONG, LONGLONG, INT24, YEAR). mysql2 reads a column of the binary character
// set (LONGBLOB) as a Buffer and every other text column as a string.
const INTEGERS = new Set([1, 2, 3, 8, 9, 13]);

/**
 * A cast that reads every column as mysql2 does by default: a caller's pool may
 * have a typeCast of its own (TINYINT as boolean, BLOB as text), which would
 * otherwise apply to the core's rows too.
 */
const readAsIs = (field, next) => next();

// Per query: rows as arrays in the core's column order, BIGINT columns as
// decimal text (exact past 2^53, whatever the pool's options), no caller cast.
const ROWS = Object.freeze({ rowsAsArray: true, supportBigNumbers: true, bigNumberStrings: true, typeCast: readAsIs });

async function loadDriver() {
  try {
    const m = await import('mysql2/promise');
    return m.default ?? m;
  } catch (e) {
    throw new Error('intentkey: mysqlStore({ url }) needs mysql2 3.x: npm install mysql2@3 (or pass a mysql2/promise pool as { pool })', {
      cause: e,
    });
  }
}

function optionError(option, message) {
  return new IntentkeyError('invalid-argument', `mysqlStore: \`${option}\` ${message}`, option);
}

/**
 * The core's parameters as mysql2 binds them. Integers are BigInts: mysql2 3.x
 * sends a JS number as a DOUBLE, which MySQL 8 refuses for `LIMIT ?` ("Incorrect
 * arguments to mysqld_stmt_execute", 1210) and which holds no integer past
 * 2^53 exactly; a BigInt it sends as a LONGLONG where the server declares an
 * integer parameter (MySQL 8), else as its decimal text (MariaDB declares no
 * parameter types), which both servers convert exactly, in LIMIT as in
 * comparisons. Bytes go as a Buffer (sent as a BLOB, never converted by the
 * connection's character set).
 */
function bindValue(v) {
  switch (v.tag) {
    case 'null':
      return null;
    case 'integer':
      return BigInt(v.val);
    case 'bytes':
      return Buffer.from(v.val.buffer, v.val.byteOffset, v.val.byteLength);
    default:
      return v.val;
  }
}

/** The values for each placeholder of `text`, in text order. */
const bound = (values, binds) => binds.map((i) => bindValue(values[i]));

/** A row (rowsAsArray) as the core's values, by each column's type. */
function rowValues(row, fields) {
  return row.map((v, i) => {
    if (v === null || v === undefined) return { tag: 'null' };
    if (INTEGERS.has(fields[i].columnType)) return { tag: 'integer', val: BigInt(v) };
    if (v instanceof Uint8Array) return { tag: 'bytes', val: new Uint8Array(v) };
    return { tag: 'text', val: String(v) };
  });
}

/**
 * mysql2's error as a store error: no server error (a refused, lost or timed-out
 * connection, a closed pool) is retryable, and a server error is what the core's
 * table says of its code (sqlErrorClass: a lost connection, a deadlock, a lock
 * wait timeout, too many connections are retryable); anything else failed. The message is
 * the driver's (the server's text, which names the user, never the password).
 */
function failure(e) {
  if (e instanceof IntentkeyError) return e; // the core's own (a parameter it refused): as it is
  const state = typeof e?.sqlState === 'string' && /^[0-9A-Z]{5}$/.test(e.sqlState) ? e.sqlState : '';
  const message = e instanceof Error ? e.message || String(e.code ?? e.name) : String(e);
  const unavailable = state === '' || ['connection-lost', 'retryable'].includes(sqlErrorClass('mysql', e.errno));
  return storeError(unavailable ? 'unavailable' : 'failed', state ? `mysql: ${e.errno} (${state}): ${message}` : `mysql: ${message}`, e);
}

/** A store error as what mysqlStore rejects with: the core's store-unavailable or store-failed. */
function startupError(e) {
  if (e instanceof IntentkeyError) return e;
  const s = failure(e);
  return new IntentkeyError(s.payload.tag === 'unavailable' ? 'store-unavailable' : 'store-failed', s.message, undefined, { cause: e });
}

/** Refuses a key longer than the 255 characters (code points) the key column holds. */
function checkKey(key) {
  if (typeof key !== 'string' || key.length <= KEY_CHARS) return;
  const chars = [...key].length;
  if (chars > KEY_CHARS) {
    throw new IntentkeyError(
      'invalid-argument',
      `mysqlStore: \`key\` is ${chars} characters long; a MySQL store holds keys of at most ${KEY_CHARS} (the column is VARCHAR(${KEY_CHARS}))`,
      'key',
    );
  }
}

/** The URL checked (never echoed: it may hold a password). */
function checkUrl(url, schema) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    // Not rethrown as the cause: Node's error carries the input, password and all.
    throw optionError('url', 'is not a URL: mysql://user:password@host:port/database');
  }
  if (parsed.protocol !== 'mysql:' && parsed.protocol !== 'mariadb:') {
    throw optionError('url', `must start with mysql:// (it starts with ${parsed.protocol}//)`);
  }
  if (schema === undefined && parsed.pathname.replace(/^\//, '') === '') {
    throw optionError('url', 'names no database: add /database to the URL, or pass the schema option');
  }
}

/** A mysql2/promise pool (a callback pool is wrapped); refused if it connects without CLIENT_FOUND_ROWS. */
function promisePool(pool) {
  if (pool === null || typeof pool !== 'object') throw optionError('pool', 'must be a mysql2 pool (mysql2/promise createPool)');
  const p = typeof pool.promise === 'function' ? pool.promise() : pool;
  if (typeof p.getConnection !== 'function' || typeof p.execute !== 'function') {
    throw optionError('pool', 'must be a mysql2 pool (mysql2/promise createPool)');
  }
  const flags = p.pool?.config?.connectionConfig?.clientFlags;
  if (typeof flags === 'number' && (flags & CLIENT_FOUND_ROWS) === 0) {
    throw optionError(
      'pool',
      'connects without CLIENT_FOUND_ROWS (flags: -FOUND_ROWS): its fenced UPDATEs would count changed rows, not matched ones; drop -FOUND_ROWS from its flags',
    );
  }
  return p;
}

/**
 * Runs one statement of the migration flow on `conn`: with parameters as a
 * prepared statement (execute), without as a plain query, so one-off DDL is
 * not kept among the connection's prepared statements. Answers the rows.
 */
async function migrationStep(conn, text, params) {
  const values = params.map(bindValue);
  const [rows] = values.length > 0 ? await conn.execute({ sql: text, values, ...ROWS }) : await conn.query({ sql: text, ...ROWS });
  return Array.isArray(rows) ? rows : [];
}

/**
 * Runs the core's migration flow (named lock, migrations table, version, the
 * latest table, version records, unlock) on one dedicated connection, with
 * autocommit and no transaction. On any error the connection is destroyed:
 * that frees the named lock with it.
 */
async function migrate(pool, schema) {
  const flow = migrationFlow('mysql', schema);
  try {
    let conn;
    try {
      conn = await pool.getConnection();
    } catch (e) {
      throw startupError(e);
    }
    try {
      let step = flow.step();
      while (step.done === undefined) {
        const rows = await migrationStep(conn, step.text, step.params);
        step = flow.step(step.query && rows.length > 0 ? rows[0][0] : undefined);
      }
    } catch (e) {
      conn.destroy();
      throw startupError(e);
    }
    conn.release();
  } finally {
    flow.drop();
  }
}

/**
 * A record store in MySQL 8 or MariaDB; resolves once the schema is in place.
 * @param {{ url?: string, pool?: object, schema?: string }} options `url`
 *   (mysql://user:password@host:port/database; the store makes a pool with
 *   CLIENT_FOUND_ROWS and close() ends it) or `pool` (a mysql2/promise pool the
 *   caller keeps; it must not drop FOUND_ROWS from its flags); `schema`: the
 *   database whose tables the store creates and names qualified, instead of
 *   the connection's default database
 */
export async function mysqlStore(options = {}) {
  if (options === null || typeof options !== 'object') {
    throw optionError('options', 'mysqlStore takes { url } (mysql://user:password@host:port/database) or { pool } (a mysql2 pool)');
  }
  checkOptionNames(options, OPTIONS, 'mysqlStore');
  const { url, schema } = options;
  if (schema !== undefined && (typeof schema !== 'string' || schema.length === 0)) {
    throw optionError('schema', 'must be a non-empty string: the database that holds the tables');
  }
  if ((url === undefined) === (options.pool === undefined)) {
    throw optionError(url === undefined ? 'url' : 'pool', 'mysqlStore takes either { url } or { pool }, not both and not neither');
  }
  if (url !== undefined) {
    if (typeof url !== 'string') throw optionError('url', 'must be a string: mysql://user:password@host:port/database');
    checkUrl(url, schema);
  }
  // The core's statements, on the table in `schema` (backquoted and qualified
  // by the core) or in the connection's database.
  const sql = sqlStatements('mysql', schema);
  const duplicate = sqlDuplicateKeyError('mysql');

  let db;
  let owned = false;
  if (url === undefined) {
    db = promisePool(options.pool);
  } else {
    const mysql = await loadDriver();
    db = mysql.createPool({ uri: url, flags: ['FOUND_ROWS'], supportBigNumbers: true, bigNumberStrings: false });
    owned = true;
  }

  try {
    await migrate(db, schema);
  } catch (e) {
    if (owned) await db.end().catch(() => {});
    throw e;
  }

  /** Runs the core's statement `name` for `op`; answers the result (rows, or the OK packet). */
  const execute = async (name, op, ...args) => {
    const st = sql[name];
    const [result, fields] = await db.execute({ sql: st.text, values: bound(sqlParams(op, ...args), st.binds), ...ROWS });
    return { result, fields };
  };
  const changed = async (name, op, ...args) => {
    try {
      return (await execute(name, op, ...args)).result.affectedRows;
    } catch (e) {
      throw failure(e);
    }
  };
  const records = async (name, op, ...args) => {
    let out;
    try {
      out = await execute(name, op, ...args);
    } catch (e) {
      throw failure(e);
    }
    return out.result.map((row) => sqlDecodeRow(rowValues(row, out.fields)));
  };

  const closing = closer();

  return {
    kind: 'mysql',
    synchronous: false,
    [TRUSTED]: true,
    // Its operations read their signal only as signal.aborted (or not at all).
    [ABORTED_FLAG]: true,
    /** The mysql2/promise pool. */
    db,

    // A plain INSERT: an existing key is the server's duplicate-key error, "not
    // inserted"; every other error stays an error.
    async insert(record) {
      checkKey(record.key);
      try {
        await execute('insert', 'insert', record);
        return true;
      } catch (e) {
        if (duplicate !== undefined && e?.errno === duplicate && typeof e.sqlState === 'string') return false;
        throw failure(e);
      }
    },
    async get(key) {
      checkKey(key);
      return (await records('get', 'get', key))[0];
    },
    // MySQL has no fast completion statement: a fast completion is an ordinary one.
    async complete(c) {
      checkKey(c.key);
      return (await changed('complete', 'complete', c)) === 1;
    },
    async replace(r) {
      checkKey(r.record.key);
      return (await changed('replace', 'replace', r)) === 1;
    },
    async release(r) {
      checkKey(r.key);
      return (await changed('release', 'release', r)) === 1;
    },
    list: (status, limit) => records('list', 'list', status, limit),
    purge: (now) => changed('purge', 'purge', now),
    /**
     * How many records have `status` (WIT spelling), and the oldest claim
     * among them: { count, oldest } (the core's `count` statement, which
     * reads the status index only).
     */
    async count(status) {
      let out;
      try {
        out = await execute('count', 'count', status);
      } catch (e) {
        throw failure(e);
      }
      return sqlCounted(out.result.map((row) => rowValues(row, out.fields)));
    },
    /** Closed when close() is called (a guard's background work on this store stops). */
    [CLOSING]: closing,

    /** Ends the pool if this store made it (from a URL). */
    async close() {
      closing.close();
      if (owned) await db.end();
    },
  };
}
