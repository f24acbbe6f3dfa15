// The guard on PostgreSQL (the real server, see support/pg.js), driven through the
// core's `flows` resource: the shared store suite, the schema (version 3, from
// the component's DDL only) under its advisory lock, fast completions, the HTTP
// adapters, and the races: 16 contenders on 16 connections (in this process,
// then in 16 worker threads) × 1000 keys, and 16 recoverers on 16 connections
// over stale records. Every test has its own schema and drops it.
// Unreachable server: fails with CI=true, skipped (with a SKIPPED: line) otherwise.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import pg from 'pg';
import { createGuard, jsonResponse, pgStore } from '../src/index.js';
import { coreSchema, sqlStatements } from '../src/stores/schema.js';
import { freshSchema, pgAvailability, PG_CONFIG } from './support/pg.js';
import { bytes, freshStore, storeSuite, witRecord } from './support/store-suite.js';
import { CONTENDERS, checkRace, ownerRace, raceKeys, recoveryRace } from './support/race.js';
import { httpRoundTrip } from './support/store-http.js';

const { skip } = await pgAvailability('pg.test.js');

/** A client on `config`, connected (the caller ends it). */
async function connected(config) {
  const c = new pg.Client(config);
  await c.connect();
  return c;
}

/** Runs fn with a fresh schema and a pool on it, then drops both. */
async function withSchema(fn, poolOptions = {}) {
  const schema = await freshSchema();
  const pool = new pg.Pool({ ...schema.config, ...poolOptions });
  try {
    return await fn({ schema, pool });
  } finally {
    await pool.end();
    await schema.drop();
  }
}

/** A fresh schema and a pool of 4 on it; drop() ends the pool, then drops the schema. */
async function schemaWithPool() {
  const schema = await freshSchema();
  const pool = new pg.Pool({ ...schema.config, max: 4 });
  return {
    pool,
    async drop() {
      await pool.end();
      await schema.drop();
    },
  };
}

storeSuite('PostgreSQL (pg)', { skip, open: freshStore(schemaWithPool, ({ pool }) => pgStore(pool)) });

describe('PostgreSQL store', { skip }, () => {
  /** The shape of a schema: columns, indexes and constraints, as the catalog tells them. */
  async function shape(pool, schema) {
    const columns = await pool.query(
      `SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns
       WHERE table_schema = $1 ORDER BY table_name, ordinal_position`,
      [schema],
    );
    const indexes = await pool.query(
      `SELECT indexname, replace(indexdef, $1, 'S') AS def FROM pg_indexes WHERE schemaname = $2 ORDER BY indexname`,
      [`${schema}.`, schema],
    );
    const checks = await pool.query(
      `SELECT conname, pg_get_constraintdef(c.oid) AS def FROM pg_constraint c
       JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = $1 ORDER BY conname`,
      [schema],
    );
    return { columns: columns.rows, indexes: indexes.rows, checks: checks.rows };
  }

  test('schema version 3, only from the component’s DDL: applied once by 8 concurrent stores under the advisory lock', async () => {
    const { migrations, migrationsTable, schemaVersion, migrationLock } = coreSchema();
    assert.equal(schemaVersion, 3);
    assert.equal(migrationLock, 7316502411n);
    await withSchema(async ({ schema, pool }) => {
      const clients = await Promise.all(Array.from({ length: 8 }, () => connected(schema.config)));
      try {
        await Promise.all(clients.map((c) => pgStore(c)));
      } finally {
        await Promise.all(clients.map((c) => c.end()));
      }
      const versions = await pool.query('SELECT version FROM intentkey_schema_migrations ORDER BY version');
      assert.deepEqual(versions.rows, [{ version: 1 }, { version: 2 }, { version: 3 }]);
      const got = await shape(pool, schema.name);
      assert.deepEqual(
        got.columns.filter((c) => c.column_name !== 'version' && c.column_name !== 'applied_at').map((r) => [r.column_name, r.data_type, r.is_nullable]),
        [
          ['key', 'text', 'NO'],
          ['fingerprint', 'text', 'NO'],
          ['tenant_id', 'text', 'NO'],
          ['action_type', 'text', 'NO'],
          ['status', 'text', 'NO'],
          ['response_status', 'integer', 'YES'],
          ['response_content_type', 'text', 'YES'],
          ['response_body', 'text', 'YES'],
          ['created_at', 'bigint', 'NO'],
          ['expires_at', 'bigint', 'YES'],
          ['lookups', 'integer', 'NO'],
          ['next_lookup_at', 'bigint', 'YES'],
          ['owner_token', 'text', 'NO'],
          ['response_headers', 'text', 'YES'],
          ['response_body_bytes', 'bytea', 'YES'],
        ],
      );
      assert.deepEqual(
        got.indexes.map((r) => r.indexname),
        ['intentkey_records_expiry', 'intentkey_records_pkey', 'intentkey_records_status', 'intentkey_schema_migrations_pkey'],
      );
      // Exactly what the component's statements make, applied by hand elsewhere.
      const reference = await freshSchema();
      const c = new pg.Client(reference.config);
      await c.connect();
      try {
        await c.query(migrationsTable);
        for (const m of migrations) for (const statement of m.statements) await c.query(statement);
        assert.deepEqual(await shape(c, reference.name), got);
      } finally {
        await c.end();
        await reference.drop();
      }
      // A second start finds version 3 and changes nothing.
      await pgStore(pool);
      assert.equal((await pool.query('SELECT count(*)::int AS n FROM intentkey_schema_migrations')).rows[0].n, 3);
    });
  });

  test('a version 1 schema (with records) is migrated to version 3 and served; its text bodies are read as UTF-8 bytes', async () => {
    const { migrations, migrationsTable } = coreSchema();
    await withSchema(async ({ pool }) => {
      await pool.query(migrationsTable);
      for (const statement of migrations[0].statements) await pool.query(statement);
      await pool.query(`
INSERT INTO intentkey_schema_migrations (version, applied_at) VALUES (1, 0);
INSERT INTO intentkey_records (key, fingerprint, tenant_id, action_type, status, response_status,
  response_content_type, response_body, created_at, expires_at, lookups)
  VALUES ('from-v1', 'fp', 't', 'a', 'done', 201, 'application/json', '{"id":1}', 100, 100000, 0);`);
      const guard = createGuard({ store: await pgStore(pool), now: () => 200 });
      const r = await guard.run({ key: 'from-v1', fingerprint: 'fp', tenantId: 't', actionType: 'a' }, async () => {
        throw new Error('must not run');
      });
      assert.deepEqual([r.outcome, r.replayed, r.response.body, r.response.headers], ['done', true, bytes('{"id":1}'), []]);
      assert.equal((await guard.inspect('from-v1')).ownerToken, '');
      assert.deepEqual((await pool.query('SELECT version FROM intentkey_schema_migrations ORDER BY version')).rows, [
        { version: 1 },
        { version: 2 },
        { version: 3 },
      ]);
      // New writes: the bytes in response_body_bytes (BYTEA), NULL in the legacy text column.
      const binary = new Uint8Array([0xff, 0, 0xc3, 0x28, 0x5c, 0x78]);
      await guard.run({ key: 'v3', fingerprint: 'fp', tenantId: 't', actionType: 'a' }, async () => ({
        status: 200,
        contentType: 'application/octet-stream',
        body: binary,
      }));
      const row = (await pool.query("SELECT response_body, response_body_bytes FROM intentkey_records WHERE key = 'v3'")).rows[0];
      assert.equal(row.response_body, null);
      assert.deepEqual(new Uint8Array(row.response_body_bytes), binary);
      assert.deepEqual((await guard.inspect('v3')).response.body, binary);
    });
  });

  test('a newer schema version is refused', async () => {
    await withSchema(async ({ pool }) => {
      await pgStore(pool);
      await pool.query('INSERT INTO intentkey_schema_migrations (version, applied_at) VALUES (4, 0)');
      await assert.rejects(pgStore(pool), /schema version 4; this package knows version 3/);
    });
  });

  test('from a config (the store owns and ends its pool), and with an explicit schema instead of search_path', async () => {
    await withSchema(async ({ schema, pool }) => {
      const own = await pgStore({ ...schema.config, max: 2 });
      const guard = createGuard({ store: own });
      const r = await guard.run({ key: 'cfg', fingerprint: 'f', tenantId: 't', actionType: 'a' }, async () => jsonResponse(200, {}));
      assert.equal(r.outcome, 'owned');
      await own.close();
      assert.equal((await pool.query('SELECT count(*)::int AS n FROM intentkey_records')).rows[0].n, 1);
    });
    // The tables must land in `schema`, never where search_path points. It points
    // at a second fresh schema of this test's own (not public, which may hold
    // another application's intentkey tables), so the test sees only what it made.
    const schema = await freshSchema();
    const decoy = await freshSchema();
    const plain = new pg.Pool({ ...decoy.config, max: 2 });
    try {
      const store = await pgStore(plain, { schema: schema.name });
      assert.equal(await store.insert(witRecord('qualified', 'a'.repeat(32), 1)), true);
      const r = await plain.query(`SELECT key FROM ${schema.name}.intentkey_records`);
      assert.deepEqual(r.rows, [{ key: 'qualified' }]);
      assert.deepEqual((await store.get('qualified')).key, 'qualified');
      const versions = await plain.query(`SELECT version FROM ${schema.name}.intentkey_schema_migrations ORDER BY version`);
      assert.deepEqual(versions.rows, [{ version: 1 }, { version: 2 }, { version: 3 }]);
      const leaked = await plain.query('SELECT tablename FROM pg_tables WHERE schemaname = $1', [decoy.name]);
      assert.deepEqual(leaked.rows, [], 'nothing created outside the schema');
    } finally {
      await plain.end();
      await schema.drop();
      await decoy.drop();
    }
  });

  test('two stores whose schema names share a 60-byte prefix share one connection (short prepared-statement names; no 42P05)', async () => {
    // PostgreSQL cuts identifiers, prepared-statement names too, at 63 bytes, so a
    // name built from the schema name made these two stores collide on one
    // connection: "42P05 prepared statement already exists".
    const prefix = `ik_js_${randomBytes(6).toString('hex')}_`.padEnd(60, 'x');
    const names = [`${prefix}_a`, `${prefix}_b`];
    const client = new pg.Client(PG_CONFIG);
    await client.connect();
    try {
      for (const name of names) await client.query(`CREATE SCHEMA "${name}"`);
      const stores = [];
      for (const schema of names) stores.push(await pgStore(client, { schema }));
      for (const [i, store] of stores.entries()) {
        assert.equal(await store.insert(witRecord(`k${i}`, 'a'.repeat(32), 1)), true);
        assert.equal(await store.insert(witRecord('shared', 'b'.repeat(32), i)), true);
      }
      for (const [i, store] of stores.entries()) {
        assert.equal((await store.get(`k${i}`)).key, `k${i}`);
        assert.equal(await store.get(`k${1 - i}`), undefined);
        assert.equal((await store.get('shared')).createdAt, BigInt(i));
        assert.deepEqual((await store.list('in-flight', 10)).map((r) => r.key).sort(), [`k${i}`, 'shared']);
      }
      const statements = names.map((schema) => sqlStatements('postgres', schema));
      for (const name of Object.keys(statements[0])) {
        const [a, b] = statements.map((x) => x[name].preparedName);
        assert.notEqual(a, b, name);
        assert.ok(Buffer.byteLength(a) <= 63 && Buffer.byteLength(b) <= 63, `${a} ${b}`);
      }
    } finally {
      for (const name of names) await client.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`).catch(() => {});
      await client.end();
    }
  });

  test('fast completion: the core’s one statement with set_config(synchronous_commit, off, true), on a Pool and on a Client', async () => {
    await withSchema(async ({ schema, pool }) => {
      const guard = createGuard({ store: await pgStore(pool), fastCompletion: true });
      for (let i = 0; i < 10; i++) {
        const r = await guard.run({ key: `fast-${i}`, fingerprint: 'f', tenantId: 't', actionType: 'a' }, async () => jsonResponse(201, { i }));
        assert.equal(r.finished, 'stored');
      }
      const done = await pool.query("SELECT count(*)::int AS n FROM intentkey_records WHERE status = 'done'");
      assert.equal(done.rows[0].n, 10);
      // SET LOCAL ends with its transaction: no pooled connection keeps it.
      const settings = await Promise.all(
        Array.from({ length: pool.totalCount }, () => pool.query('SHOW synchronous_commit')),
      );
      for (const s of settings) assert.equal(s.rows[0].synchronous_commit, 'on');
      // A fenced fast completion still refuses another owner.
      const store = await pgStore(pool);
      await store.insert(witRecord('fast-x', 'a'.repeat(32), 1));
      const completion = (token) => ({
        key: 'fast-x',
        ownerToken: token,
        response: { status: 200, contentType: 'text/plain', headers: [], body: bytes('ok') },
        expiresAt: 100n,
        fast: true,
      });
      assert.equal(await store.complete(completion('b'.repeat(32))), false);
      assert.equal(await store.complete(completion('a'.repeat(32))), true);
      // On a single Client (shared with its owner's other queries) the same, in one statement.
      const client = new pg.Client(schema.config);
      await client.connect();
      try {
        const onClient = createGuard({ store: await pgStore(client), fastCompletion: true });
        const r = await onClient.run({ key: 'fast-client', fingerprint: 'f', tenantId: 't', actionType: 'a' }, async () => jsonResponse(201, {}));
        assert.equal(r.finished, 'stored');
        assert.equal((await client.query('SHOW synchronous_commit')).rows[0].synchronous_commit, 'on');
      } finally {
        await client.end();
      }
    });
  });

  test('a lost connection is store-unavailable (retryable), not a trap', async () => {
    await withSchema(async ({ schema }) => {
      const client = new pg.Client(schema.config);
      await client.connect();
      const guard = createGuard({ store: await pgStore(client) });
      await client.end();
      await assert.rejects(
        guard.run({ key: 'gone', fingerprint: 'f', tenantId: 't', actionType: 'a' }, async () => jsonResponse(200, {})),
        (e) => e.code === 'store-unavailable' && e.cause !== undefined,
      );
    });
  });

  test('a claim still waiting for a connection when the store deadline passes is never sent', async () => {
    await withSchema(async ({ pool }) => {
      const store = await pgStore(pool);
      const guard = createGuard({ store, storeDeadlineMs: 150 });
      // The pool's only connection is held: the claim waits for it past its deadline.
      const held = await pool.connect();
      let ran = 0;
      try {
        await assert.rejects(
          guard.run({ key: 'waited', fingerprint: 'f', tenantId: 't', actionType: 'a' }, async () => {
            ran++;
            return jsonResponse(201, {});
          }),
          (e) => e.code === 'store-unavailable' && /deadline/.test(e.message),
        );
      } finally {
        held.release();
      }
      // The connection is free now: a claim that was not dropped would be sent and commit.
      await new Promise((resolve) => setTimeout(resolve, 300));
      const rows = (await pool.query("SELECT count(*)::int AS n FROM intentkey_records WHERE key = 'waited'")).rows;
      assert.equal(rows[0].n, 0, 'the abandoned claim was dropped before it was sent');
      assert.equal(ran, 0);
    }, { max: 1 });
  });

  test('HTTP on PostgreSQL (intentkey/express on node:http): owned, replayed byte for byte, 409, the core’s 422 and 400, 503 released', async () => {
    await withSchema(async ({ pool }) => {
      await httpRoundTrip({ store: await pgStore(pool), rows: async (sql) => (await pool.query(sql)).rows });
    });
  });
});

/** The record and effect tables, as checkRace and checkRecoveryRace read them. */
async function tables(pool) {
  const rows = (await pool.query('SELECT key, status, response_body, response_body_bytes FROM intentkey_records')).rows;
  const effects = (await pool.query('SELECT key, contender FROM ik_effects')).rows;
  return { rows, effects };
}

/** Runs fn with a fresh schema holding ik_effects, a pool on it, and the race's rig: a client (one connection) per contender. */
async function withRace(fn) {
  await withSchema(async ({ schema, pool }) => {
    await pool.query('CREATE TABLE ik_effects (key TEXT NOT NULL, contender INTEGER NOT NULL)');
    const rig = {
      connect: () => connected(schema.config),
      storeOn: (c) => pgStore(c),
      recordEffect: (c, key, who) => c.query('INSERT INTO ik_effects (key, contender) VALUES ($1, $2)', [key, who]),
      tables: () => tables(pool),
    };
    return fn({ schema, pool, rig });
  });
}

describe(`race on PostgreSQL: ${CONTENDERS} contenders × 1000 keys`, { skip }, () => {
  test(`${CONTENDERS} separate connections in this process: exactly one owner per key, no lost records`, async (t) => {
    await withRace(async ({ rig }) => {
      t.diagnostic((await ownerRace(rig)).summary);
    });
  });

  test(`${CONTENDERS} worker threads, one connection each: exactly one owner per key, no lost records`, async (t) => {
    await withRace(async ({ schema, pool }) => {
      const keys = raceKeys();
      const workers = Array.from(
        { length: CONTENDERS },
        (_, id) =>
          new Worker(new URL('./support/pg-contender.js', import.meta.url), {
            workerData: { config: schema.config, id, keys },
          }),
      );
      let fail;
      const failed = new Promise((_, reject) => {
        fail = reject;
      });
      const exits = workers.map(
        (w) =>
          new Promise((resolve) => {
            w.once('error', fail);
            w.once('exit', resolve);
          }),
      );
      const orFail = (p) => Promise.race([p, failed]);
      try {
        const messages = workers.map((w) => {
          const queue = [];
          const waiting = [];
          w.on('message', (m) => (waiting.length ? waiting.shift()(m) : queue.push(m)));
          return () => (queue.length ? Promise.resolve(queue.shift()) : new Promise((r) => waiting.push(r)));
        });
        await orFail(Promise.all(messages.map((next) => next()))); // all ready: migrated and connected
        for (const w of workers) w.postMessage('go');
        const reports = (await orFail(Promise.all(messages.map((next) => next())))).map((m) => m.report);
        await Promise.all(exits);
        const { rows, effects } = await tables(pool);
        t.diagnostic(checkRace(reports, keys, rows, effects));
        const versions = await pool.query('SELECT version FROM intentkey_schema_migrations ORDER BY version');
        assert.deepEqual(versions.rows, [{ version: 1 }, { version: 2 }, { version: 3 }]);
      } finally {
        await Promise.all(workers.map((w) => w.terminate()));
      }
    });
  });
});

describe(`recovery race on PostgreSQL: ${CONTENDERS} recoverers on ${CONTENDERS} connections`, { skip }, () => {
  test(`${CONTENDERS} connections recover the same 200 stale records: exactly one re-execution each`, async (t) => {
    await withRace(async ({ pool, rig }) => {
      t.diagnostic(await recoveryRace(rig, await pgStore(pool)));
    });
  });
});
