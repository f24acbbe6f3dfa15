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
//
// Retries that wait for the first attempt (op `watch`) are woken by this
// store's own writes that changed their record, and by other processes'
// through LISTEN/NOTIFY: the first wait starts ONE listening connection per
// store (a pg.Client of its own, application_name `intentkey-listener`,
// reconnected with back-off when it drops) running the core's `listen`
// statement; writes that changed a record send the core's `notify` statement
// (not awaited: the write's answer does not wait for it) when notifying is
// on: `notify: true`, or by itself once a guard or an adapter with waiting on
// uses the store, or once it waited. Lost notifications are covered by the
// core's periodic re-check.
import { IntentkeyError } from '../errors.js';
import { checkOptionNames } from '../endpoint.js';
import { ABORTED_FLAG, CLOSING, TRUSTED, WAITING, migrationFlow, sqlCounted, sqlDecodeClaim, sqlDecodeRow, sqlParams, sqlStatements, storeError, closer } from './schema.js';
import { createWatchers } from './watchers.js';


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

/** The options pgStore takes. */
const OPTIONS = Object.freeze(['schema', 'notify']);

/** The application_name of the listening connection (the Rust store's too). */
export const LISTENER_APPLICATION_NAME = 'intentkey-listener';

/** The listener's reconnect back-off: 100 ms doubling to 5 s. */
const BACKOFF_FIRST_MS = 100;
const BACKOFF_LONGEST_MS = 5000;

/** The connection settings of a Client, as a Client config. */
function clientConfig(client) {
  const p = client.connectionParameters ?? {};
  const config = {};
  for (const name of ['user', 'password', 'host', 'port', 'database', 'ssl', 'options', 'client_encoding', 'connectionTimeoutMillis']) {
    if (p[name] !== undefined && p[name] !== null) config[name] = p[name];
  }
  return config;
}

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
  if (options === null || typeof options !== 'object') throw new TypeError('pgStore(poolOrConfig, options): options is { schema?, notify? }');
  checkOptionNames(options, OPTIONS, 'pgStore');
  const schema = options.schema;
  if (schema !== undefined) checkSchema(schema);
  const notifyOption = options.notify;
  if (notifyOption !== undefined && typeof notifyOption !== 'boolean') {
    throw new IntentkeyError('invalid-argument', 'pgStore: `notify` must be true or false (default: on once this process waits)', 'notify');
  }
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

  if (owned) {
    // An idle connection of the pool that drops (the server restarted, the
    // network reset it) is only removed: the next call connects again. Without
    // a listener node-postgres would throw the error out of the process.
    db.on('error', () => {});
  }

  /**
   * Runs `config` on the pool or client. `signal` (the guard's, aborted when
   * it gave up on the call: the store deadline passed): a call still waiting
   * for a connection of the pool then is never sent, so that no statement
   * runs long after its caller moved on.
   */
  function send(config, signal) {
    if (signal === undefined || !pool) return db.query(config);
    const givenUp = (when) => storeError('unavailable', `postgres: the call was given up ${when}`);
    return new Promise((resolve, reject) => {
      if (signal.aborted) {
        reject(givenUp('before it was sent'));
        return;
      }
      // pool.query's own steps, with a look at the signal once a connection is free.
      db.connect((err, client) => {
        if (err) {
          reject(err);
          return;
        }
        if (signal.aborted) {
          client.release();
          reject(givenUp('before a connection was free'));
          return;
        }
        let released = false;
        const onError = (e) => {
          if (released) return;
          released = true;
          client.release(e);
          reject(e);
        };
        client.once('error', onError);
        client.query(config, (e, result) => {
          client.removeListener('error', onError);
          if (released) return;
          released = true;
          client.release(e);
          if (e) reject(e);
          else resolve(result);
        });
      });
    });
  }

  /** Runs the core's statement `name` for `op` (prepared once per connection). */
  const query = async (name, op, args, signal) => {
    const st = sql[name];
    try {
      return await send({ name: st.preparedName, text: st.text, values: bind(sqlParams(op, ...args)), rowMode: 'array' }, signal);
    } catch (e) {
      throw failure(e);
    }
  };
  const count = async (name, op, args, signal) => (await query(name, op, args, signal)).rowCount;
  const records = async (name, op, args, signal) => {
    const { rows, fields } = await query(name, op, args, signal);
    return rows.map((row) => sqlDecodeRow(rowValues(row, fields)));
  };

  // Wake-ups (op `watch`): this store's own writes, and the listener's notifications.
  const watchers = createWatchers();
  /** Whether changed records are announced with the core's `notify` statement. */
  let notifying = notifyOption === true;
  const notifyAuto = notifyOption === undefined;
  /** Notifications sent and not answered yet (close() waits for them). */
  const sending = new Set();
  let closed = false;
  const closing = closer();

  /** After a fenced write: wakes this process's waiters of `key`, and other processes' when notifying. */
  function changed(key, written) {
    if (!written) return written;
    watchers.changed(key);
    if (notifying && !closed) {
      const st = sql.notify;
      // Not awaited: the write's answer does not wait for it. A lost one is
      // covered by the waiters' periodic re-check.
      const sent = db.query({ name: st.preparedName, text: st.text, values: [key] }).then(
        () => {},
        () => {},
      );
      sending.add(sent);
      sent.then(() => sending.delete(sent));
    }
    return written;
  }

  // The listening connection: one per store, started by the first wait.
  const listener = { client: null, started: false, timer: null, backoffMs: BACKOFF_FIRST_MS, drops: 0 };
  function listenerClient() {
    const Client = pool ? db.Client : db.constructor;
    const config = pool ? { ...db.options } : clientConfig(db);
    for (const name of ['max', 'min', 'idleTimeoutMillis', 'maxUses', 'allowExitOnIdle', 'Client', 'Promise', 'log']) delete config[name];
    return new Client({ ...config, application_name: LISTENER_APPLICATION_NAME });
  }
  function listen() {
    if (listener.started || closed) return;
    listener.started = true;
    connectListener();
  }
  async function connectListener() {
    listener.timer = null;
    if (closed) return;
    let client;
    try {
      client = listenerClient();
    } catch {
      reconnectLater();
      return;
    }
    listener.client = client;
    let dropped = false;
    const drop = () => {
      if (dropped) return;
      dropped = true;
      if (listener.client === client) listener.client = null;
      client.end().catch(() => {});
      reconnectLater();
    };
    client.on('error', drop);
    client.on('end', drop);
    client.on('notification', (msg) => {
      if (typeof msg.payload === 'string' && msg.payload !== '') watchers.changed(msg.payload);
    });
    try {
      await client.connect();
      await client.query(sql.listen.text);
    } catch {
      drop();
      return;
    }
    if (dropped) return;
    listener.backoffMs = BACKOFF_FIRST_MS;
    // Back after a drop: notifications may have been lost meanwhile; every
    // waiter claims again now rather than at the end of its interval.
    if (listener.drops > 0) watchers.wakeAll();
  }
  function reconnectLater() {
    if (closed) return;
    listener.drops++;
    const ms = listener.backoffMs;
    listener.backoffMs = Math.min(ms * 2, BACKOFF_LONGEST_MS);
    listener.timer = setTimeout(connectListener, ms);
  }

  return {
    kind: 'pg',
    synchronous: false,
    [TRUSTED]: true,
    // Its operations read their signal only as signal.aborted (or not at all).
    [ABORTED_FLAG]: true,
    /** The pg Pool or Client. */
    db,

    // Each operation takes an optional AbortSignal: see send().
    insert: async (record, signal) => (await count('insert', 'insert', [record], signal)) === 1,
    // The claim in one statement (the core's `claim`): the insert, and the
    // record it lost to read in the same statement, so a repeat is one round trip.
    claim: async (record, signal) => {
      const { rows, fields } = await query('claim', 'insert', [record], signal);
      return sqlDecodeClaim(rowValues(rows[0] ?? [], fields));
    },
    get: async (key, signal) => (await records('get', 'get', [key], signal))[0],
    // A fast completion's statement sets synchronous_commit = off for its own
    // transaction only (set_config(…, true)), so it needs no session of its own.
    complete: async (c, signal) => changed(c.key, (await count(c.fast ? 'complete-fast' : 'complete', 'complete', [c], signal)) === 1),
    replace: async (r, signal) => changed(r.record.key, (await count('replace', 'replace', [r], signal)) === 1),
    release: async (r, signal) => changed(r.key, (await count('release', 'release', [r], signal)) === 1),
    list: (status, limit, signal) => records('list', 'list', [status, limit], signal),
    purge: (now, signal) => count('purge', 'purge', [now], signal),
    /**
     * How many records have `status` (WIT spelling), and the oldest claim
     * among them: { count, oldest } (the core's `count` statement, which
     * reads the status index only).
     */
    async count(status) {
      const { rows, fields } = await query('count', 'count', [status]);
      return sqlCounted(rows.map((row) => rowValues(row, fields)));
    },
    /** Closed when close() is called (a guard's background work on this store stops). */
    [CLOSING]: closing,

    /**
     * Resolves when the record of `key` changed (this store's write, or a
     * notification on the listening connection, which the first call starts),
     * after `ms`, or when `signal` aborts.
     */
    watch(key, ms, signal) {
      listen();
      if (notifyAuto) notifying = true;
      return watchers.watch(key, ms, signal);
    },
    /** A guard or adapter with waiting on uses this store: notify (unless `notify: false`). */
    [WAITING]() {
      if (notifyAuto) notifying = true;
    },
    /** Whether this store's writes that change a record send the core's `notify` statement. */
    get notifying() {
      return notifying;
    },

    /** Ends the listening connection, wakes every waiter, and ends the pool if this store made it. */
    async close() {
      closed = true;
      closing.close();
      if (listener.timer !== null) clearTimeout(listener.timer);
      listener.timer = null;
      const client = listener.client;
      listener.client = null;
      if (client !== null) await client.end().catch(() => {});
      watchers.wakeAll();
      await Promise.all([...sending]);
      if (owned) await db.end();
    },
  };
}
