// A store in SQLite through better-sqlite3 (12.x; an optional peer dependency).
// WAL, synchronous=FULL and a busy timeout, so several processes can share one
// database file. The schema is the component's (the core's one SQL file), applied
// above PRAGMA user_version inside BEGIN IMMEDIATE. Every statement is the core's
// too (crates/intentkey/schema/sqlite.sql, through the component's `schema`
// export), with the parameters it makes and the rows it decodes: this file only
// prepares, binds and runs (docs/stores.md). Every operation is one statement;
// every write after the claim is fenced on the owner token.
// better-sqlite3 is synchronous, so the guard plugs this store into the
// component's `store` import. Fast completions (`completion.fast`) are written
// like any other: SQLite has no per-transaction asynchronous commit.
import { createRequire } from 'node:module';
import { CLOSING, TRUSTED, migrationFlow, sqlCounted, sqlDecodeRow, sqlParams, sqlStatements, storeError, closer } from './schema.js';
import { createWatchers } from './watchers.js';


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

/**
 * Runs the core's migration flow (PRAGMA user_version, each missing migration,
 * the new version) in one IMMEDIATE transaction: one writer at a time.
 */
function migrate(db) {
  const flow = migrationFlow('sqlite');
  try {
    const apply = db.transaction(() => {
      let step = flow.step();
      while (step.done === undefined) {
        const statement = db.prepare(step.text);
        const args = step.params.length === 0 ? [] : [bind(step.params)];
        const row = step.query ? statement.raw(true).get(...args) : (statement.run(...args), undefined);
        step = flow.step(row === undefined ? undefined : row[0]);
      }
    });
    apply.immediate();
  } finally {
    flow.drop();
  }
}

/** better-sqlite3's error as a store error: busy or locked is retryable. */
function failure(e) {
  const code = typeof e?.code === 'string' ? e.code : '';
  const message = `sqlite: ${code === '' ? '' : `${code}: `}${e instanceof Error ? e.message : String(e)}`;
  const busy = code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED');
  return storeError(busy ? 'unavailable' : 'failed', message, e);
}

/** The core's parameters as better-sqlite3 binds numbered ones: { 1: …, 2: … }. */
function bind(values) {
  const out = {};
  values.forEach((v, i) => {
    out[i + 1] = v.tag === 'null' ? null : v.tag === 'bytes' ? Buffer.from(v.val.buffer, v.val.byteOffset, v.val.byteLength) : v.val;
  });
  return out;
}

/** A raw row (safe integers) as the core's values. */
function rowValues(row) {
  return row.map((v) => {
    if (v === null || v === undefined) return { tag: 'null' };
    if (typeof v === 'bigint') return { tag: 'integer', val: v };
    if (typeof v === 'number') return Number.isInteger(v) ? { tag: 'integer', val: BigInt(v) } : { tag: 'text', val: String(v) };
    if (typeof v === 'string') return { tag: 'text', val: v };
    return { tag: 'bytes', val: new Uint8Array(v) };
  });
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

  // The core's statements, prepared once; rows come back as arrays of typed values.
  const core = sqlStatements('sqlite');
  const prepared = Object.fromEntries(
    Object.values(core).map((st) => {
      const statement = db.prepare(st.text);
      if (statement.reader) statement.raw(true).safeIntegers(true);
      return [st.name, statement];
    }),
  );
  /** Runs the core's statement `name` for `op`: the rows changed. */
  const run = (name, op, ...args) => {
    const values = bind(sqlParams(op, ...args));
    try {
      return prepared[name].run(values).changes;
    } catch (e) {
      throw failure(e);
    }
  };
  /** Runs the core's query `name` for `op`: the records. */
  const all = (name, op, ...args) => {
    const values = bind(sqlParams(op, ...args));
    let rows;
    try {
      rows = prepared[name].all(values);
    } catch (e) {
      throw failure(e);
    }
    return rows.map((row) => sqlDecodeRow(rowValues(row)));
  };

  // Retries waiting for the first attempt (op `watch`) are woken by this
  // store's own writes that changed their record; other processes' writes
  // are seen at the end of each of the core's intervals.
  const watchers = createWatchers();
  const closing = closer();
  /** A fenced write's answer, waking the waiters of `key` when it changed the record. */
  const woke = (key, changed) => {
    if (changed) watchers.changed(key);
    return changed;
  };

  return {
    kind: 'sqlite',
    synchronous: true,
    [TRUSTED]: true,
    /** The better-sqlite3 Database. */
    db,

    insert: (record) => run('insert', 'insert', record) === 1,
    get: (key) => all('get', 'get', key)[0],
    complete: (c) => woke(c.key, run('complete', 'complete', c) === 1),
    replace: (r) => woke(r.record.key, run('replace', 'replace', r) === 1),
    release: (r) => woke(r.key, run('release', 'release', r) === 1),
    list: (status, limit) => all('list', 'list', status, limit),
    purge: (now) => Number(run('purge', 'purge', now)),
    /**
     * How many records have `status` (WIT spelling), and the oldest claim
     * among them: { count, oldest } (the core's `count` statement, which
     * reads the status index only).
     */
    count(status) {
      const values = bind(sqlParams('count', status));
      let rows;
      try {
        rows = prepared.count.all(values);
      } catch (e) {
        throw failure(e);
      }
      return sqlCounted(rows.map(rowValues));
    },
    /** Closed when close() is called (a guard's background work on this store stops). */
    [CLOSING]: closing,
    /** Resolves when this store's write changed the record of `key`, after `ms`, or when `signal` aborts. */
    watch: watchers.watch,

    /** Closes the database if this store opened it; wakes every waiter. */
    close() {
      closing.close();
      watchers.wakeAll();
      if (owned && db.open) db.close();
    },
  };
}
