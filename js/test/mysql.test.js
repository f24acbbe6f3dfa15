// The guard on MySQL / MariaDB (the real server, see support/mysql.js) through
// mysql2, driven through the core's `flows` resource: the shared store suite,
// the schema (version 3, from the component's DDL only) under its named lock,
// the options, the plain INSERT whose duplicate key is "not inserted", keys of
// at most 255 characters, connection failures, the HTTP adapters, and the
// races: 16 contenders on 16 pools × 1000 keys, and 16 recoverers on 16 pools
// over stale records, and kill trials (an owner killed between its effect and
// its completion, then recovery). Every test has its own database and drops it.
// Unreachable server: fails with CI=true, skipped (with a SKIPPED: line) otherwise.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import mysql from 'mysql2/promise';
import { IntentkeyError, createGuard, jsonResponse, mysqlStore } from '../src/index.js';
import { mysqlStore as mysqlOnly } from '../src/stores/mysql.js';
import { coreSchema, migrationFlow, sqlDuplicateKeyError, sqlErrorClass, sqlStatements } from '../src/stores/schema.js';
import { MYSQL_URL, adminConnection, freshDatabase, mysqlAvailability, urlOf } from './support/mysql.js';
import { freshStore, storeSuite, witRecord } from './support/store-suite.js';
import { CONTENDERS, ownerRace, recoveryRace } from './support/race.js';
import { lineChild } from './support/line-child.js';
import { killTrials } from './support/kill-trials.js';
import { httpRoundTrip } from './support/store-http.js';

const { skip } = await mysqlAvailability('mysql.test.js');
const run = promisify(execFile);

/** Runs fn with a fresh database and a pool on it (the test's own), then drops both. */
async function withDatabase(fn, poolOptions = {}) {
  const db = await freshDatabase();
  const pool = mysql.createPool({ uri: db.url, connectionLimit: 4, ...poolOptions });
  try {
    return await fn({ db, pool });
  } finally {
    await pool.end();
    await db.drop();
  }
}

/** The rows of a query on `pool`. */
const rows = async (pool, text, values) => (await pool.query(text, values))[0];

/** Whether the migration lock is free (no session holds it). */
async function lockFree(pool) {
  const [[row]] = await pool.query("SELECT IS_FREE_LOCK(CONCAT('intentkey-migration-', ?)) AS free", [String(coreSchema().migrationLock)]);
  return Number(row.free) === 1;
}

/**
 * Whether the named lock is free within `ms`: a lock held by a connection the
 * store destroyed is freed when the server has seen the connection close,
 * which it does on its own time.
 */
async function lockFreed(pool, ms = 2000) {
  const until = Date.now() + ms;
  for (;;) {
    if (await lockFree(pool)) return true;
    if (Date.now() > until) return false;
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Records the text of every statement run on the connections `pool` hands out. */
function recordStatements(pool) {
  const seen = [];
  const getConnection = pool.getConnection.bind(pool);
  pool.getConnection = async () => {
    const c = await getConnection();
    for (const method of ['query', 'execute']) {
      const f = c[method].bind(c);
      c[method] = (o, ...rest) => {
        seen.push(typeof o === 'string' ? o : o.sql);
        return f(o, ...rest);
      };
    }
    return c;
  };
  return seen;
}

/** The shape of a database: columns, indexes and table options, as information_schema tells them. */
async function shape(pool, database) {
  const columns = await rows(
    pool,
    `SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, COLLATION_NAME FROM information_schema.COLUMNS
     WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME, ORDINAL_POSITION`,
    [database],
  );
  const indexes = await rows(
    pool,
    `SELECT TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, NON_UNIQUE FROM information_schema.STATISTICS
     WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX`,
    [database],
  );
  const tables = await rows(
    pool,
    'SELECT TABLE_NAME, ENGINE, TABLE_COLLATION FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME',
    [database],
  );
  return { columns, indexes, tables };
}

/** A local port nothing listens on. */
async function closedPort() {
  const server = net.createServer();
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address();
  await new Promise((r) => server.close(r));
  return port;
}

/** A TCP proxy to the server; kill() drops every connection through it and stops listening. */
async function proxyToServer() {
  const target = new URL(MYSQL_URL);
  const sockets = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 3306), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => sockets.delete(s));
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: server.address().port,
    async kill() {
      const closed = new Promise((r) => server.close(r));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}

/** `url` with another host:port (and optionally a password). */
function via(url, port, password) {
  const u = new URL(url);
  u.hostname = '127.0.0.1';
  u.port = String(port);
  if (password !== undefined) u.password = password;
  return u.toString();
}

/** A store from the URL of a fresh database (the store owns its pool): { store, place: the database, close }. */
const openStore = freshStore(freshDatabase, (db) => mysqlStore({ url: db.url }));

/** Runs fn with a store from openStore() and its database, then closes the store and drops the database. */
async function withStore(fn) {
  const { store, place: db, close } = await openStore();
  try {
    return await fn({ db, store });
  } finally {
    await close();
  }
}

storeSuite('MySQL (mysql2)', { skip, open: openStore });

describe('MySQL store', { skip }, () => {
  test('the core’s MySQL dialect: positional binds, 1062 for a duplicate key, no one-round-trip claim and no fast completion', () => {
    const sql = sqlStatements('mysql');
    assert.equal(sqlDuplicateKeyError('mysql'), 1062);
    assert.equal(sqlDuplicateKeyError('postgres'), undefined);
    // One table of server error codes, the core's, for every host.
    assert.deepEqual(
      [1062, 1213, 2013, 1927, 1406, undefined, -111].map((c) => sqlErrorClass('mysql', c)),
      ['duplicate-key', 'retryable', 'connection-lost', 'connection-lost', 'failed', 'failed', 'failed'],
    );
    assert.equal(sqlErrorClass('postgres', 1213), 'failed');
    assert.equal(sql.claim, undefined);
    assert.equal(sql['complete-fast'], undefined);
    for (const st of Object.values(sql)) {
      assert.equal((st.text.match(/\?/g) ?? []).length, st.binds.length, st.name);
      assert.ok(Array.isArray(st.binds) && st.binds.every((i) => i < st.params.length), st.name);
    }
    assert.deepEqual(sql.list.binds, [0, 0, 1]);
    assert.deepEqual(sql.complete.binds, [2, 3, 4, 5, 6, 0, 1]);
    assert.deepEqual(sqlStatements('postgres').complete.binds, [0, 1, 2, 3, 4, 5, 6]);
  });

  test('schema version 3, only from the component’s DDL: applied once by 8 concurrent stores under the named lock', async () => {
    const { schemaVersion } = coreSchema();
    assert.equal(schemaVersion, 3);
    await withDatabase(async ({ db, pool }) => {
      const stores = await Promise.all(Array.from({ length: 8 }, () => mysqlStore({ url: db.url })));
      await Promise.all(stores.map((s) => s.close()));
      assert.deepEqual(await rows(pool, 'SELECT version FROM intentkey_schema_migrations ORDER BY version'), [
        { version: 1 },
        { version: 2 },
        { version: 3 },
      ]);
      assert.equal(await lockFree(pool), true, 'the named lock is given back');
      const got = await shape(pool, db.name);
      assert.deepEqual(
        // (MariaDB writes int(11) and bigint(20), MySQL 8 int and bigint.)
        got.columns
          .filter((c) => c.TABLE_NAME === 'intentkey_records')
          .map((c) => [c.COLUMN_NAME, c.COLUMN_TYPE.replace(/^(int|bigint)\(\d+\)$/, '$1'), c.IS_NULLABLE]),
        [
          ['key', 'varbinary(1020)', 'NO'],
          ['fingerprint', 'text', 'NO'],
          ['tenant_id', 'text', 'NO'],
          ['action_type', 'text', 'NO'],
          ['status', 'varchar(32)', 'NO'],
          ['response_status', 'int', 'YES'],
          ['response_content_type', 'text', 'YES'],
          ['response_body', 'longtext', 'YES'],
          ['created_at', 'bigint', 'NO'],
          ['expires_at', 'bigint', 'YES'],
          ['lookups', 'int', 'NO'],
          ['next_lookup_at', 'bigint', 'YES'],
          ['owner_token', 'varchar(64)', 'NO'],
          ['response_headers', 'longtext', 'YES'],
          ['response_body_bytes', 'longblob', 'YES'],
        ],
      );
      for (const c of got.columns.filter((c) => c.COLLATION_NAME !== null)) assert.equal(c.COLLATION_NAME, 'utf8mb4_bin', c.COLUMN_NAME);
      assert.deepEqual(
        got.tables.map((t) => [t.TABLE_NAME, t.ENGINE, t.TABLE_COLLATION]),
        [
          ['intentkey_records', 'InnoDB', 'utf8mb4_bin'],
          ['intentkey_schema_migrations', 'InnoDB', 'utf8mb4_bin'],
        ],
      );
      assert.deepEqual([...new Set(got.indexes.map((i) => `${i.TABLE_NAME}.${i.INDEX_NAME}`))], [
        'intentkey_records.intentkey_records_expiry',
        'intentkey_records.intentkey_records_status',
        'intentkey_records.PRIMARY',
        'intentkey_schema_migrations.PRIMARY',
      ]);
      // Exactly what the component's migration flow makes, run by hand elsewhere.
      const reference = await freshDatabase();
      const c = await mysql.createConnection({ uri: reference.url });
      try {
        const flow = migrationFlow('mysql');
        let step = flow.step();
        while (step.done === undefined) {
          const values = step.params.map((p) => (p.tag === 'integer' ? String(p.val) : p.val));
          const [result] = await c.execute(step.text, values);
          step = flow.step(step.query && result.length > 0 ? Object.values(result[0])[0] : undefined);
        }
        flow.drop();
        assert.deepEqual(step.done, { fromVersion: 0, toVersion: 3 });
        assert.deepEqual(await shape(c, reference.name), got);
      } finally {
        await c.end();
        await reference.drop();
      }
    });
  });

  test('a second store on a migrated database runs no DDL again: the lock, the migrations table (IF NOT EXISTS), the version, the unlock', async () => {
    await withDatabase(async ({ db, pool }) => {
      await (await mysqlStore({ pool })).close();
      const before = await rows(pool, 'SELECT version, applied_at FROM intentkey_schema_migrations ORDER BY version');
      const seen = recordStatements(pool);
      const again = await mysqlStore({ pool });
      const sql = sqlStatements('mysql');
      assert.equal(seen.length, 4, seen.join('\n'));
      assert.equal(seen[0], sql['migration-lock'].text);
      assert.match(seen[1], /^CREATE TABLE IF NOT EXISTS `intentkey_schema_migrations`/);
      assert.equal(seen[2], sql['migrated-version'].text);
      assert.equal(seen[3], sql['migration-unlock'].text);
      assert.ok(!seen.some((s) => /intentkey_records/.test(s)), 'the records table is not touched');
      assert.deepEqual(await rows(pool, 'SELECT version, applied_at FROM intentkey_schema_migrations ORDER BY version'), before);
      assert.equal(await again.insert(witRecord('after', 'a'.repeat(32), 1)), true);
      assert.equal(await lockFree(pool), true);
      assert.equal(db.name.startsWith('ik_js_'), true);
    });
  });

  test('two stores migrating at once both succeed: the second waits for the named lock', async () => {
    await withDatabase(async ({ db, pool }) => {
      // Another session holds the lock: a store starting now waits for it.
      const holder = await adminConnection();
      try {
        const [[held]] = await holder.query("SELECT GET_LOCK(CONCAT('intentkey-migration-', ?), 0) AS got", [String(coreSchema().migrationLock)]);
        assert.equal(Number(held.got), 1);
        let done = 0;
        const starting = [mysqlStore({ url: db.url }), mysqlStore({ pool })].map((p) => p.then((s) => (done++, s)));
        await new Promise((r) => setTimeout(r, 500));
        assert.equal(done, 0, 'no store migrated while another session held the lock');
        assert.equal((await rows(pool, 'SHOW TABLES')).length, 0);
        await holder.query("DO RELEASE_LOCK(CONCAT('intentkey-migration-', ?))", [String(coreSchema().migrationLock)]);
        const [a, b] = await Promise.all(starting);
        assert.equal(await a.insert(witRecord('from-a', 'a'.repeat(32), 1)), true);
        assert.equal((await b.get('from-a')).key, 'from-a');
        await a.close();
        await b.close();
      } finally {
        await holder.end();
      }
      assert.equal((await rows(pool, 'SELECT count(*) AS n FROM intentkey_schema_migrations'))[0].n, 3);
    });
  });

  test('a newer schema version is refused (store-failed); the migration connection is destroyed and the lock given back', async () => {
    await withDatabase(async ({ pool }) => {
      await mysqlStore({ pool });
      await pool.query('INSERT INTO intentkey_schema_migrations (version, applied_at) VALUES (4, 0)');
      await assert.rejects(mysqlStore({ pool }), (e) => e instanceof IntentkeyError && e.code === 'store-failed' && /schema version 4; this package knows version 3/.test(e.message));
      assert.equal(await lockFreed(pool), true, 'the destroyed connection gave the named lock back');
      assert.equal((await rows(pool, 'SELECT 1 AS one'))[0].one, 1, 'the caller’s pool still serves');
    });
  });

  test('on a pool the caller keeps (close() leaves it open), and with `schema` naming the database instead of the URL’s', async () => {
    await withDatabase(async ({ db, pool }) => {
      const store = await mysqlStore({ pool });
      const guard = createGuard({ store });
      const r = await guard.run({ key: 'pooled', fingerprint: 'f', tenantId: 't', actionType: 'a' }, async () => jsonResponse(200, {}));
      assert.equal(r.outcome, 'owned');
      await store.close();
      assert.equal((await rows(pool, 'SELECT count(*) AS n FROM intentkey_records'))[0].n, 1);
      // A callback pool is taken too (through its promise()).
      const callbackPool = (await import('mysql2')).default.createPool({ uri: db.url, connectionLimit: 1 });
      try {
        const viaCallback = await mysqlOnly({ pool: callbackPool });
        assert.equal((await viaCallback.get('pooled')).key, 'pooled');
      } finally {
        await new Promise((r) => callbackPool.end(r));
      }
    });
    // The tables must land in `schema`, never in the URL's database (a decoy of
    // this test's own, so the test sees only what it made).
    const target = await freshDatabase();
    const decoy = await freshDatabase();
    const plain = mysql.createPool({ uri: decoy.url, connectionLimit: 2 });
    try {
      const store = await mysqlStore({ url: decoy.url, schema: target.name });
      assert.equal(await store.insert(witRecord('qualified', 'a'.repeat(32), 1)), true);
      assert.deepEqual(await rows(plain, `SELECT CAST(\`key\` AS CHAR) AS \`key\` FROM ${target.name}.intentkey_records`), [{ key: 'qualified' }]);
      assert.equal((await store.get('qualified')).key, 'qualified');
      assert.equal((await rows(plain, `SELECT count(*) AS n FROM ${target.name}.intentkey_schema_migrations`))[0].n, 3);
      assert.deepEqual(await rows(plain, 'SHOW TABLES'), [], 'nothing created in the URL’s database');
      await store.close();
      // With `schema`, the URL needs no database.
      const bare = new URL(decoy.url);
      bare.pathname = '/';
      const noDb = await mysqlStore({ url: bare.toString(), schema: target.name });
      assert.equal((await noDb.get('qualified')).key, 'qualified');
      await noDb.close();
    } finally {
      await plain.end();
      await target.drop();
      await decoy.drop();
    }
  });

  test('options: an unknown or misspelled option is refused by name; url, pool and schema are checked; no password in any message', async () => {
    const refusedAs = (field, pattern) => (e) => {
      assert.ok(e instanceof IntentkeyError, String(e));
      assert.deepEqual([e.code, e.field], ['invalid-argument', field]);
      if (pattern) assert.match(e.message, pattern);
      return true;
    };
    const url = urlOf('test');
    await assert.rejects(mysqlStore({ url, shema: 'x' }), refusedAs('shema', /mysqlStore: `shema` is not an option; the options are url, pool, schema/));
    await assert.rejects(mysqlStore({ url, prefix: 'x' }), refusedAs('prefix'));
    await assert.rejects(mysqlStore({}), refusedAs('url', /either \{ url \} or \{ pool \}/));
    await assert.rejects(mysqlStore(), refusedAs('url'));
    await assert.rejects(mysqlStore(null), refusedAs('options'));
    await assert.rejects(mysqlStore({ url, pool: {} }), refusedAs('pool', /not both/));
    await assert.rejects(mysqlStore({ url, schema: '' }), refusedAs('schema'));
    await assert.rejects(mysqlStore({ url, schema: 7 }), refusedAs('schema'));
    await assert.rejects(mysqlStore({ url: 42 }), refusedAs('url'));
    await assert.rejects(mysqlStore({ url: 'postgres://u:hunter2-secret@h/db' }), (e) => refusedAs('url', /mysql:\/\//)(e) && !e.message.includes('hunter2'));
    await assert.rejects(mysqlStore({ url: 'mysql://u:hunter2-secret@[bad/db' }), (e) => {
      refusedAs('url', /is not a URL/)(e);
      assert.equal(e.cause, undefined, 'Node’s URL error (which holds the input) is not kept');
      assert.ok(!JSON.stringify({ m: e.message, s: e.stack }).includes('hunter2'));
      return true;
    });
    await assert.rejects(mysqlStore({ url: 'mysql://root@127.0.0.1:3306' }), refusedAs('url', /names no database/));
    await assert.rejects(mysqlStore({ pool: 'mysql://x' }), refusedAs('pool'));
    await assert.rejects(mysqlStore({ pool: { query() {} } }), refusedAs('pool'));
    const noFoundRows = mysql.createPool({ uri: url, flags: ['-FOUND_ROWS'] });
    try {
      await assert.rejects(mysqlStore({ pool: noFoundRows }), refusedAs('pool', /CLIENT_FOUND_ROWS/));
    } finally {
      await noFoundRows.end();
    }
  });

  test('a duplicate key is never an error: insert answers false, and 16 concurrent runs of one key give one owner', async () => {
    await withStore(async ({ db, store }) => {
      assert.equal(await store.insert(witRecord('dup', 'a'.repeat(32), 1)), true);
      assert.equal(await store.insert(witRecord('dup', 'b'.repeat(32), 2)), false);
      assert.equal((await store.get('dup')).ownerToken, 'a'.repeat(32));
      // Keys compare byte for byte (a VARBINARY column): case, accents and trailing spaces make other keys, not 'dup' again.
      for (const key of ['Dup', 'DUP', 'düp', 'dup ', 'dup  ']) assert.equal(await store.insert(witRecord(key, 'c'.repeat(32), 3)), true, key);
      const stores = await Promise.all(Array.from({ length: 16 }, () => mysqlStore({ url: db.url })));
      try {
        let runs = 0;
        const results = await Promise.all(
          stores.map((s) =>
            createGuard({ store: s }).run({ key: 'one', fingerprint: 'f', tenantId: 't', actionType: 'a' }, async () => {
              runs++;
              await new Promise((r) => setTimeout(r, 50));
              return jsonResponse(201, {});
            }),
          ),
        );
        assert.equal(runs, 1);
        assert.equal(results.filter((r) => r.outcome === 'owned').length, 1);
        assert.ok(results.every((r) => ['owned', 'in-flight', 'done'].includes(r.outcome)), JSON.stringify(results.map((r) => r.outcome)));
      } finally {
        await Promise.all(stores.map((s) => s.close()));
      }
    });
  });

  test('a key longer than 255 characters is an error naming `key`; 255 characters (4-byte ones too) are stored', async () => {
    await withStore(async ({ store }) => {
      const long = 'k'.repeat(256);
      const namesKey = (e) => e instanceof IntentkeyError && e.code === 'invalid-argument' && e.field === 'key' && /at most 255/.test(e.message);
      await assert.rejects(store.insert(witRecord(long, 'a'.repeat(32), 1)), namesKey);
      await assert.rejects(store.get(long), namesKey);
      const guard = createGuard({ store });
      let ran = 0;
      await assert.rejects(
        guard.run({ key: '🙂'.repeat(256), fingerprint: 'f', tenantId: 't', actionType: 'a' }, async () => {
          ran++;
          return jsonResponse(200, {});
        }),
        namesKey,
      );
      assert.equal(ran, 0);
      const widest = '🙂'.repeat(255); // 255 characters, 1020 bytes, 510 UTF-16 units
      const r = await guard.run({ key: widest, fingerprint: 'f', tenantId: 't', actionType: 'a' }, async () => jsonResponse(201, {}));
      assert.deepEqual([r.outcome, r.finished], ['owned', 'stored']);
      assert.equal((await guard.inspect(widest)).key, widest);
    });
  });

  test('an unreachable server is store-unavailable (retryable), a lost connection too; a bad password is store-failed; no password in messages', async () => {
    const secret = 'hunter2-secret';
    const clean = (e) => !JSON.stringify({ m: e.message, s: e.stack, c: String(e.cause?.message), p: e.payload }).includes(secret);
    // Nothing listens.
    const port = await closedPort();
    await assert.rejects(mysqlStore({ url: via(urlOf('test'), port, secret) }), (e) => {
      assert.ok(e instanceof IntentkeyError, String(e));
      assert.equal(e.code, 'store-unavailable');
      assert.ok(e.cause !== undefined && clean(e));
      return true;
    });
    // The wrong password: the server refuses (1045), which no retry fixes.
    await assert.rejects(mysqlStore({ url: via(urlOf('test'), new URL(MYSQL_URL).port || 3306, secret) }), (e) => {
      assert.equal(e.code, 'store-failed', e.message);
      assert.match(e.message, /1045/);
      assert.ok(clean(e));
      return true;
    });
    // Connected, then the connection is lost (through a proxy that dies).
    await withDatabase(async ({ db }) => {
      const proxy = await proxyToServer();
      const store = await mysqlStore({ url: via(db.url, proxy.port) });
      try {
        const guard = createGuard({ store });
        const ok = await guard.run({ key: 'before', fingerprint: 'f', tenantId: 't', actionType: 'a' }, async () => jsonResponse(200, {}));
        assert.equal(ok.outcome, 'owned');
        await proxy.kill();
        await assert.rejects(
          guard.run({ key: 'gone', fingerprint: 'f', tenantId: 't', actionType: 'a' }, async () => jsonResponse(200, {})),
          (e) => e.code === 'store-unavailable' && e.cause !== undefined,
        );
      } finally {
        await store.close().catch(() => {});
      }
    });
  });

  test('HTTP on MySQL (intentkey/express on node:http): owned, replayed byte for byte, 409, the core’s 422 and 400, 503 released', async () => {
    await withDatabase(async ({ pool }) => {
      await httpRoundTrip({ store: await mysqlStore({ pool }), rows: (sql) => rows(pool, sql) });
    });
  });

  test('the README’s MySQL example runs as written and prints what it says', async () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const heading = '### MySQL and MariaDB';
    assert.ok(readme.includes(heading), `the README has no section ${heading}`);
    const code = /```js\n([\s\S]*?)```/.exec(readme.slice(readme.indexOf(heading)))[1];
    const expected = /\/\/ -> (.*)/.exec(code)[1];
    const db = await freshDatabase();
    try {
      const { stdout } = await run(process.execPath, ['--input-type=module', '-e', code], {
        cwd: fileURLToPath(new URL('..', import.meta.url)),
        env: { ...process.env, MYSQL_URL: db.url },
      });
      assert.equal(stdout.trim(), expected);
    } finally {
      await db.drop();
    }
  });

  test('the Node side of the Rust/Node interop (support/mysql-interop.mjs): owned, then replayed', async () => {
    const db = await freshDatabase();
    try {
      const script = fileURLToPath(new URL('./support/mysql-interop.mjs', import.meta.url));
      const once = async (body) => JSON.parse((await run(process.execPath, [script, db.url, 'interop-1', body])).stdout);
      assert.deepEqual(await once('from node'), { outcome: 'owned', replayed: false, status: 201, body: 'from node' });
      assert.deepEqual(await once('again'), { outcome: 'done', replayed: true, status: 201, body: 'from node' });
    } finally {
      await db.drop();
    }
  });
});

/** Runs fn with a fresh database holding ik_effects, a pool on it, and the race's rig: a pool of one connection per contender. */
async function withRace(fn) {
  await withDatabase(async ({ db, pool }) => {
    await pool.query('CREATE TABLE ik_effects (`key` VARCHAR(255) NOT NULL, contender INTEGER NOT NULL) ENGINE=InnoDB');
    const rig = {
      connect: () => mysql.createPool({ uri: db.url, connectionLimit: 1 }),
      storeOn: (p) => mysqlStore({ pool: p }),
      recordEffect: (p, key, who) => p.execute('INSERT INTO ik_effects (`key`, contender) VALUES (?, ?)', [key, who]),
      tables: async () => ({
        rows: await rows(pool, 'SELECT CAST(`key` AS CHAR) AS `key`, status, response_body, response_body_bytes FROM intentkey_records'),
        effects: await rows(pool, 'SELECT `key`, contender FROM ik_effects'),
      }),
    };
    return fn({ pool, rig });
  });
}

describe(`race on MySQL: ${CONTENDERS} contenders × 1000 keys`, { skip }, () => {
  test(`${CONTENDERS} separate pools (one connection each): exactly one owner per key, exactly 1000 records`, async (t) => {
    await withRace(async ({ rig }) => {
      const { summary, rows: records } = await ownerRace(rig);
      t.diagnostic(summary);
      assert.equal(records.length, 1000);
    });
  });
});

describe(`recovery race on MySQL: ${CONTENDERS} recoverers on ${CONTENDERS} pools`, { skip }, () => {
  test(`${CONTENDERS} pools recover the same 200 stale records: exactly one re-execution each`, async (t) => {
    await withRace(async ({ pool, rig }) => {
      t.diagnostic(await recoveryRace(rig, await mysqlStore({ pool })));
    });
  });
});

const faultScript = fileURLToPath(new URL('./support/mysql-fault-child.js', import.meta.url));
const TRIALS = Number(process.env.IK_MYSQL_KILL_TRIALS ?? 60);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Runs fn with a fresh database holding ik_effects, a pool on it whose
 * connections are remembered (`ours`), and `killed(c)`: SIGKILLs the child `c`
 * and waits until the server has dropped its connections too. A statement the
 * child sent before it died may still run on the server after the process is
 * gone (a completion, an effect's INSERT); only then is what the tables hold final.
 */
async function withKillRig(fn) {
  await withDatabase(async ({ db, pool }) => {
    const ours = new Set();
    pool.on('connection', (c) => ours.add(Number(c.threadId)));
    await pool.query(
      'CREATE TABLE ik_effects (id INTEGER AUTO_INCREMENT PRIMARY KEY, `key` VARCHAR(255) NOT NULL, who VARCHAR(32) NOT NULL) ENGINE=InnoDB',
    );
    const admin = await adminConnection();
    const killed = async (c) => {
      c.child.kill('SIGKILL');
      await c.exited;
      const deadline = Date.now() + 20_000;
      for (;;) {
        const [list] = await admin.query('SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ?', [db.name]);
        if (list.every((r) => ours.has(Number(r.ID)))) return;
        assert.ok(Date.now() < deadline, `the killed child's connections are still open: ${JSON.stringify(list)}`);
        await sleep(2);
      }
    };
    const effects = async (key) => (await rows(pool, 'SELECT count(*) AS n FROM ik_effects WHERE `key` = ?', [key]))[0].n;
    try {
      return await fn({ db, pool, killed, effects });
    } finally {
      await admin.end();
    }
  });
}

describe(`kill trials on MySQL: ${TRIALS} owners killed at random moments, then recovery`, { skip }, () => {
  test('an owner killed between its effect and its completion: the record stays in flight (409), recovery settles it, never a second effect', async (t) => {
    await withKillRig(async ({ db, pool, killed, effects }) => {
      const store = await mysqlStore({ pool });
      const effect = (who) => async (k) => {
        await pool.execute('INSERT INTO ik_effects (`key`, who) VALUES (?, ?)', [k, who]);
        return jsonResponse(201, {});
      };
      await killTrials(t, {
        trials: TRIALS,
        store,
        spawn: (key, pauseMs) => lineChild(faultScript, [db.url, key, pauseMs], key),
        kill: killed,
        effects,
        effect,
      });
      assert.equal((await rows(pool, 'SELECT count(*) AS n FROM ik_effects'))[0].n, TRIALS);
    });
  });

  test('the negative control: the same kill on a plain "check a row, then act" processor (no intentkey) makes a second effect', async () => {
    await withKillRig(async ({ db, pool, killed, effects }) => {
      await pool.query('CREATE TABLE ik_done (`key` VARCHAR(255) PRIMARY KEY) ENGINE=InnoDB');
      const c = lineChild(faultScript, [db.url, 'naive', '5000', 'naive'], 'naive');
      while ((await effects('naive')) === 0) await sleep(1);
      await killed(c);
      // The redelivery, processed the same plain way: no done row, so it acts again.
      if ((await rows(pool, 'SELECT 1 FROM ik_done WHERE `key` = ?', ['naive'])).length === 0) {
        await pool.execute("INSERT INTO ik_effects (`key`, who) VALUES ('naive', 'redelivery')");
        await pool.execute("INSERT INTO ik_done (`key`) VALUES ('naive')");
      }
      assert.equal(await effects('naive'), 2, 'without intentkey the effect ran twice');
    });
  });
});
