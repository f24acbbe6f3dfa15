// The guard on PostgreSQL (the real server, see support/pg.js): the shared store
// suite, the migration under its advisory lock, the HTTP middleware, and the
// race: 16 contenders on 16 connections (in this process, then in 16 worker
// threads) × 1000 keys. Every test has its own schema and drops it.
// Unreachable server: fails with CI=true, skipped (with a message) otherwise.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import pg from 'pg';
import { claims, createGuard, createKeyer, idempotency, jsonResponse, pgStore } from '../src/index.js';
import { MIGRATION_LOCK } from '../src/stores/pg.js';
import { freshSchema, pgAvailability, PG_CONFIG } from './support/pg.js';
import { storeSuite } from './support/store-suite.js';
import { CONTENDERS, checkRace, contend, raceKeys } from './support/race.js';
import { request, serve } from './support/http.js';

const { skip } = await pgAvailability();

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

storeSuite('PostgreSQL (pg)', {
  skip,
  async open() {
    const schema = await freshSchema();
    const pool = new pg.Pool({ ...schema.config, max: 4 });
    try {
      const store = await pgStore(pool);
      return {
        store,
        async close() {
          await pool.end();
          await schema.drop();
        },
      };
    } catch (e) {
      await pool.end();
      await schema.drop();
      throw e;
    }
  },
});

describe('PostgreSQL store', { skip }, () => {
  test('schema v1: applied once by 8 concurrent stores under the advisory lock, recorded in intentkey_schema_migrations', async () => {
    await withSchema(async ({ schema, pool }) => {
      const clients = await Promise.all(
        Array.from({ length: 8 }, async () => {
          const c = new pg.Client(schema.config);
          await c.connect();
          return c;
        }),
      );
      try {
        await Promise.all(clients.map((c) => pgStore(c)));
      } finally {
        await Promise.all(clients.map((c) => c.end()));
      }
      const versions = await pool.query('SELECT version, applied_at FROM intentkey_schema_migrations');
      assert.equal(versions.rows.length, 1);
      assert.equal(versions.rows[0].version, 1);
      const columns = await pool.query(
        `SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns
         WHERE table_schema = $1 AND table_name = 'intentkey_records' ORDER BY ordinal_position`,
        [schema.name],
      );
      assert.deepEqual(
        columns.rows.map((r) => [r.column_name, r.data_type, r.is_nullable]),
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
        ],
      );
      const idx = await pool.query(`SELECT indexname FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname`, [
        schema.name,
      ]);
      assert.deepEqual(
        idx.rows.map((r) => r.indexname),
        ['intentkey_records_expiry', 'intentkey_records_pkey', 'intentkey_schema_migrations_pkey'],
      );
      // The lock is the documented one, taken as a transaction-level lock.
      assert.equal(MIGRATION_LOCK, 7316502411n);
      // A second start finds version 1 and changes nothing.
      await pgStore(pool);
      assert.equal((await pool.query('SELECT count(*)::int AS n FROM intentkey_schema_migrations')).rows[0].n, 1);
    });
  });

  test('a schema the Rust host migrated (its DDL, version 1 recorded) is used as it is', async () => {
    await withSchema(async ({ pool }) => {
      await pool.query(`
CREATE TABLE IF NOT EXISTS intentkey_schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS intentkey_records (
    key                   TEXT PRIMARY KEY,
    fingerprint           TEXT NOT NULL,
    tenant_id             TEXT NOT NULL,
    action_type           TEXT NOT NULL,
    status                TEXT NOT NULL CHECK (status IN ('in_flight', 'done', 'needs_reconciliation')),
    response_status       INTEGER,
    response_content_type TEXT,
    response_body         TEXT,
    created_at            BIGINT NOT NULL,
    expires_at            BIGINT,
    lookups               INTEGER NOT NULL DEFAULT 0,
    next_lookup_at        BIGINT
);
CREATE INDEX IF NOT EXISTS intentkey_records_expiry ON intentkey_records (expires_at);
INSERT INTO intentkey_schema_migrations (version, applied_at) VALUES (1, 0);
INSERT INTO intentkey_records (key, fingerprint, tenant_id, action_type, status, response_status,
  response_content_type, response_body, created_at, expires_at, lookups)
  VALUES ('from-rust', 'fp', 't', 'a', 'done', 201, 'application/json', '{"id":1}', 100, 1000, 0);`);
      const guard = createGuard({ store: await pgStore(pool), now: () => 200 });
      const r = await guard.run({ key: 'from-rust', fingerprint: 'fp', tenantId: 't', actionType: 'a' }, async () => {
        throw new Error('must not run');
      });
      assert.deepEqual([r.outcome, r.replayed, r.response.body], ['done', true, '{"id":1}']);
      assert.deepEqual((await pool.query('SELECT version FROM intentkey_schema_migrations')).rows, [{ version: 1 }]);
    });
  });

  test('a newer schema version is refused', async () => {
    await withSchema(async ({ pool }) => {
      await pgStore(pool);
      await pool.query('INSERT INTO intentkey_schema_migrations (version, applied_at) VALUES (2, 0)');
      await assert.rejects(pgStore(pool), /schema is at version 2/);
    });
  });

  test('from a config (the store owns and ends its pool), and with an explicit schema instead of search_path', async () => {
    await withSchema(async ({ schema, pool }) => {
      const own = await pgStore({ ...schema.config, max: 2 });
      const guard = createGuard({ store: own });
      assert.equal((await guard.run({ key: 'cfg', fingerprint: 'f', tenantId: 't', actionType: 'a' }, async () => jsonResponse(200, {}))).outcome, 'owned');
      await own.close();
      assert.equal((await pool.query('SELECT count(*)::int AS n FROM intentkey_records')).rows[0].n, 1);
    });
    const schema = await freshSchema();
    const plain = new pg.Pool({ ...PG_CONFIG, max: 2 }); // search_path: the default
    try {
      const store = await pgStore(plain, { schema: schema.name });
      await store.insertIfAbsent(claims.newRecord('qualified', 'f', 't', 'a', 1));
      const r = await plain.query(`SELECT key FROM ${schema.name}.intentkey_records`);
      assert.deepEqual(r.rows, [{ key: 'qualified' }]);
      assert.deepEqual((await store.get('qualified')).key, 'qualified');
    } finally {
      await plain.end();
      await schema.drop();
    }
  });

  test('HTTP middleware on PostgreSQL: owned, replayed, 409, 422, 400', async () => {
    await withSchema(async ({ pool }) => {
      const keyer = createKeyer({ secret: '5c'.repeat(32) });
      const guard = createGuard({ store: await pgStore(pool), keyer });
      let runs = 0;
      let gate = null;
      const mw = idempotency({ guard, tenantId: 'tenant-1', actionType: 'pix.send' });
      const server = await serve((req, res) =>
        mw(req, res, async (err) => {
          if (err) {
            res.statusCode = 500;
            res.end(String(err));
            return;
          }
          runs++;
          if (gate) await gate;
          res.setHeader('Content-Type', 'application/json');
          res.statusCode = 201;
          res.end(JSON.stringify({ id: `pay_${runs}`, key: req.idempotencyKey }));
        }),
      );
      try {
        const body = '{"creditor_key":"123.456.789-09","amount":"10.50","currency":"BRL"}';
        const first = await request(server, { key: 'http-1', body });
        assert.equal(first.status, 201);
        assert.equal(first.headers['idempotent-replayed'], undefined);
        assert.deepEqual(JSON.parse(first.body), { id: 'pay_1', key: 'http-1' });
        const again = await request(server, { key: 'http-1', body: '{"amount":"10.5","currency":"brl","creditor_key":"12345678909"}' });
        assert.equal(again.status, 201);
        assert.equal(again.headers['idempotent-replayed'], 'true');
        assert.equal(again.body, first.body);
        const conflict = await request(server, { key: 'http-1', body: '{"creditor_key":"123.456.789-09","amount":"99.00","currency":"BRL"}' });
        assert.equal(conflict.status, 422);
        assert.equal(conflict.body, claims.answerFor({ outcome: 'payload-conflict' }).body);
        const missing = await request(server, { body });
        assert.equal(missing.status, 400);
        assert.equal(missing.body, claims.missingKeyAnswer('Idempotency-Key').body);
        let open;
        gate = new Promise((r) => {
          open = r;
        });
        const slow = request(server, { key: 'http-2', body });
        while ((await pool.query("SELECT 1 FROM intentkey_records WHERE key = 'http-2'")).rows.length === 0) {
          await new Promise((r) => setTimeout(r, 2));
        }
        const busy = await request(server, { key: 'http-2', body });
        assert.equal(busy.status, 409);
        assert.equal(busy.headers['content-type'], 'application/problem+json');
        open();
        assert.equal((await slow).status, 201);
        assert.equal(runs, 2);
      } finally {
        await server.close();
      }
    });
  });
});

describe(`race on PostgreSQL: ${CONTENDERS} contenders × 1000 keys`, { skip }, () => {
  async function tables(pool) {
    const rows = (await pool.query('SELECT key, status, response_body FROM intentkey_records')).rows;
    const effects = (await pool.query('SELECT key, contender FROM ik_effects')).rows;
    return { rows, effects };
  }

  test(`${CONTENDERS} separate connections in this process: exactly one owner per key, no lost records`, async (t) => {
    await withSchema(async ({ schema, pool }) => {
      await pool.query('CREATE TABLE ik_effects (key TEXT NOT NULL, contender INTEGER NOT NULL)');
      const keys = raceKeys();
      const clients = await Promise.all(
        Array.from({ length: CONTENDERS }, async () => {
          const c = new pg.Client(schema.config);
          await c.connect();
          return c;
        }),
      );
      try {
        const guards = await Promise.all(clients.map(async (c) => createGuard({ store: await pgStore(c) })));
        const reports = await Promise.all(
          guards.map((guard, id) =>
            contend({
              guard,
              id,
              keys,
              recordEffect: (key, who) => clients[id].query('INSERT INTO ik_effects (key, contender) VALUES ($1, $2)', [key, who]),
            }),
          ),
        );
        const { rows, effects } = await tables(pool);
        t.diagnostic(checkRace(reports, keys, rows, effects));
      } finally {
        await Promise.all(clients.map((c) => c.end()));
      }
    });
  });

  test(`${CONTENDERS} worker threads, one connection each: exactly one owner per key, no lost records`, async (t) => {
    await withSchema(async ({ schema, pool }) => {
      await pool.query('CREATE TABLE ik_effects (key TEXT NOT NULL, contender INTEGER NOT NULL)');
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
        const versions = await pool.query('SELECT version FROM intentkey_schema_migrations');
        assert.deepEqual(versions.rows, [{ version: 1 }]);
      } finally {
        await Promise.all(workers.map((w) => w.terminate()));
      }
    });
  });
});
