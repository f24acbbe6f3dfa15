// Waiting for the first attempt (the core's op `watch`): a retry that finds its
// key in flight, with the same payload, waits up to `wait.maxMs` for the first
// attempt's answer and gets its replay instead of 409. The core decides the
// intervals, the budget and what follows each watch; the hosts here only wait,
// woken early by the store (memory and SQLite: their own writes; PostgreSQL:
// LISTEN/NOTIFY on one connection per store; Redis and Redis Cluster: the
// core's scripts SPUBLISH the key, one subscriber per store) or by nothing
// (MySQL, DynamoDB: the host sleeps each interval).
//
// On every store, against Express on a real port:
//   - 32 concurrent duplicates of one slow request (300 ms): 1 handler run,
//     31 replays with the same body, no 409;
//   - a handler slower than the wait (200 ms, 1.5 s): the duplicate gets 409
//     with Retry-After once the budget is spent;
//   - another payload under the key: 422 at once, never waited for.
// Then: PostgreSQL's listener killed mid-wait (the waiter still gets the
// replay, the listener comes back); the wake-up on PostgreSQL and Redis comes
// from the notification, not the next re-check; Stripe's SDK and undici's
// RetryAgent see no 409; guard.run, the journal and a queue consumer wait too;
// a client that disconnects ends its wait; the options are checked by name.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { serve } from '@hono/node-server';
import pg from 'pg';
import Stripe from 'stripe';
import { Agent, request } from 'undici';
import {
  IntentkeyError,
  createEndpoint,
  createGuard,
  createJournal,
  createKeyer,
  dynamoStore,
  jsonResponse,
  memoryStore,
  mysqlStore,
  pgStore,
  redisStore,
  sqliteStore,
} from '../src/index.js';
import { idempotency } from '../src/adapters/express.js';
import { intentkey as fastifyIntentkey } from '../src/adapters/fastify.js';
import { idempotency as honoIdempotency, withIdempotency } from '../src/adapters/fetch-node.js';
import { idempotentHandler } from '../src/queues/pg-boss.js';
import { LISTENER_APPLICATION_NAME } from '../src/stores/pg.js';
import { sqlStatements } from '../src/stores/schema.js';
import { retryingAgent } from './support/real-clients.js';
import { PG_CONFIG, freshSchema, pgAvailability } from './support/pg.js';
import { clusterAvailability, freshClusterPrefix, freshPrefix, redisAvailability } from './support/redis.js';
import { freshDatabase, mysqlAvailability } from './support/mysql.js';
import { dynamoAvailability, freshTable } from './support/dynamo.js';

const SECRET = '3d'.repeat(32);
const FILE = 'wait.test.js';
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Every unhandled rejection fails the file: an abandoned wait must leave none.
const unhandled = [];
process.on('unhandledRejection', (e) => unhandled.push(e));

/** One HTTP client for the file (closed at the end): connections are not shared between the concurrent requests. */
const agent = new Agent({ keepAliveTimeout: 1000, connections: 64 });
after(() => agent.close());

/** One POST with a key; the status, headers, body text and when it answered (performance.now()). */
async function post(port, { key, body, path = '/orders', signal, headers = {} }) {
  const res = await request(`http://127.0.0.1:${port}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key, ...headers },
    body,
    dispatcher: agent,
    signal,
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text, at: performance.now() };
}

/**
 * Express on a real port over `store`, waiting by `wait`: POST /orders runs the
 * handler (counted; it sleeps `delayMs`, then answers 201 with the run's
 * number), every status sent is counted (`statuses`), and the handler's start
 * and finish times are kept.
 */
async function expressApp(store, { wait, delayMs, profile = 'ietf', status = 201 }) {
  const app = express();
  const stats = { runs: 0, statuses: [], started: [], finished: [] };
  app.use((req, res, next) => {
    res.on('finish', () => stats.statuses.push(res.statusCode));
    next();
  });
  const guarded = idempotency({ secret: SECRET, store, profile, wait, onError: () => {} });
  const handler = async (req, res) => {
    const n = ++stats.runs;
    stats.started.push(performance.now());
    await sleep(delayMs);
    stats.finished.push(performance.now());
    res.status(status).json({ id: `ord_${n}`, object: 'order', amount: req.body?.amount ?? null });
  };
  app.post('/orders', guarded, express.json(), handler);
  app.post('/v1/charges', guarded, express.urlencoded({ extended: false }), handler);
  app.use(guarded.onError);
  const server = http.createServer(app);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    stats,
    count: (s) => stats.statuses.filter((x) => x === s).length,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * The stores: each `open()` answers { store, another (a second store object
 * on the same records, as a second process would have), drop }.
 */
function pgOpen(options = {}) {
  return async () => {
    const schema = await freshSchema();
    const made = [];
    const open = async (extra = {}) => {
      const s = await pgStore({ ...PG_CONFIG, max: 40 }, { schema: schema.name, ...options, ...extra });
      made.push(s);
      return s;
    };
    return {
      store: await open(),
      another: open,
      schema: schema.name,
      async drop() {
        for (const s of made) await s.close();
        await schema.drop();
      },
    };
  };
}

function redisOpen(fresh) {
  return async () => {
    const p = await fresh();
    const made = [];
    const open = async () => {
      const s = await redisStore({ url: p.url });
      made.push(s);
      return s;
    };
    return {
      store: await open(),
      another: open,
      async drop() {
        for (const s of made) await s.close();
        await p.drop();
      },
    };
  };
}

const STORES = [
  {
    name: 'memory',
    wakes: 'its own writes',
    availability: async () => ({ skip: false }),
    open: async () => {
      const store = memoryStore();
      return { store, drop: async () => store.close() };
    },
  },
  {
    name: 'SQLite',
    wakes: 'its own writes',
    availability: async () => ({ skip: false }),
    open: async () => {
      const dir = mkdtempSync(join(tmpdir(), 'ik-wait-'));
      const store = sqliteStore(join(dir, 'records.db'));
      return {
        store,
        async drop() {
          store.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  },
  { name: 'PostgreSQL', wakes: 'LISTEN/NOTIFY', availability: () => pgAvailability(FILE), open: pgOpen() },
  { name: 'Redis', wakes: 'SSUBSCRIBE', availability: () => redisAvailability(FILE), open: redisOpen(freshPrefix) },
  {
    name: 'Redis Cluster',
    wakes: 'SSUBSCRIBE (sharded)',
    availability: () => clusterAvailability(FILE),
    open: redisOpen(freshClusterPrefix),
  },
  {
    name: 'MySQL',
    wakes: 'nothing (polling)',
    availability: () => mysqlAvailability(FILE),
    open: async () => {
      const db = await freshDatabase();
      const store = await mysqlStore({ url: db.url });
      return {
        store,
        async drop() {
          await store.close();
          await db.drop();
        },
      };
    },
  },
  {
    name: 'DynamoDB',
    wakes: 'nothing (polling)',
    availability: () => dynamoAvailability(FILE),
    open: async () => {
      const table = await freshTable();
      const store = await dynamoStore({ url: table.url });
      return {
        store,
        async drop() {
          await store.close();
          await table.drop();
        },
      };
    },
  },
];

const availability = new Map();
for (const s of STORES) availability.set(s.name, await s.availability());

for (const s of STORES) {
  const { skip } = availability.get(s.name);
  describe(`waiting on ${s.name} (woken by ${s.wakes})`, { skip }, () => {
    let opened;
    before(async () => {
      opened = await s.open();
    });
    after(async () => {
      await opened?.drop();
    });

    test('32 concurrent duplicates of a slow request (300 ms), wait 5 s: 1 handler run, 31 replays, no 409', async () => {
      const app = await expressApp(opened.store, { wait: { maxMs: 5000 }, delayMs: 300 });
      try {
        const body = '{"amount":"10.50"}';
        const t0 = performance.now();
        const answers = await Promise.all(Array.from({ length: 32 }, () => post(app.port, { key: 'order-32', body })));
        const took = Math.round(performance.now() - t0);
        assert.equal(app.stats.runs, 1, 'the handler ran once');
        const owner = answers.filter((a) => a.headers['idempotent-replayed'] === undefined);
        const replays = answers.filter((a) => a.headers['idempotent-replayed'] === 'true');
        assert.equal(owner.length, 1);
        assert.equal(replays.length, 31);
        assert.equal(answers.filter((a) => a.status === 409).length, 0, 'no 409');
        assert.equal(app.count(409), 0);
        for (const a of answers) {
          assert.equal(a.status, 201);
          assert.equal(a.text, owner[0].text);
        }
        assert.deepEqual(JSON.parse(owner[0].text), { id: 'ord_1', object: 'order', amount: '10.50' });
        console.log(`wait ${s.name}: 32 duplicates answered in ${took} ms (handler 300 ms): 1 run, 31 replays, 0 x 409`);
      } finally {
        await app.close();
      }
    });

    test('a handler slower than the wait (200 ms, handler 1.5 s): the duplicate gets 409 with Retry-After', async () => {
      const app = await expressApp(opened.store, { wait: { maxMs: 200 }, delayMs: 1500 });
      try {
        const body = '{"amount":"1.00"}';
        const first = post(app.port, { key: 'order-slow', body });
        while (app.stats.runs === 0) await sleep(5);
        const t0 = performance.now();
        const dup = await post(app.port, { key: 'order-slow', body });
        const waited = dup.at - t0;
        assert.equal(dup.status, 409);
        assert.equal(dup.headers['retry-after'], '1');
        assert.ok(waited >= 150, `the duplicate waited the budget first (${Math.round(waited)} ms)`);
        assert.ok(waited < 1200, `and not for the handler (${Math.round(waited)} ms)`);
        assert.equal((await first).status, 201);
        assert.equal(app.stats.runs, 1);
        console.log(`wait ${s.name}: wait 200 ms, handler 1.5 s: 409 after ${Math.round(waited)} ms`);
      } finally {
        await app.close();
      }
    });

    test('another payload under a key in flight: 422 at once, never waited for', async () => {
      const app = await expressApp(opened.store, { wait: { maxMs: 5000 }, delayMs: 1500 });
      try {
        const first = post(app.port, { key: 'order-422', body: '{"amount":"1.00"}' });
        while (app.stats.runs === 0) await sleep(5);
        const t0 = performance.now();
        const other = await post(app.port, { key: 'order-422', body: '{"amount":"2.00"}' });
        const took = other.at - t0;
        assert.equal(other.status, 422);
        assert.ok(took < 1000, `422 in ${Math.round(took)} ms, well under the 5 s wait and before the 1.5 s handler finished`);
        assert.equal(app.stats.finished.length, 0, 'the first request was still running');
        assert.equal((await first).status, 201);
        assert.equal(app.stats.runs, 1);
        console.log(`wait ${s.name}: another payload: 422 in ${Math.round(took)} ms`);
      } finally {
        await app.close();
      }
    });
  });
}

/** The PostgreSQL backends listening for `schema`'s store (application_name and the core's LISTEN statement). */
async function listeners(admin, schema) {
  const { rows } = await admin.query(
    'SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query = $2 ORDER BY backend_start',
    [LISTENER_APPLICATION_NAME, sqlStatements('postgres', schema).listen.text],
  );
  return rows.map((r) => r.pid);
}

describe('PostgreSQL: the listening connection', { skip: availability.get('PostgreSQL').skip }, () => {
  let opened;
  let admin;
  before(async () => {
    opened = await pgOpen()();
    admin = new pg.Client(PG_CONFIG);
    await admin.connect();
  });
  after(async () => {
    await admin?.end();
    await opened?.drop();
  });

  test('notifying: off by default, on with an adapter that waits, `notify: false` keeps it off', async () => {
    // A schema of its own: the listener this test starts is not the next test's.
    const opened = await pgOpen()();
    try {
      const plain = await opened.another();
      const guard = createGuard({ store: plain, keyer: createKeyer({ secret: SECRET }) });
      await guard.run({ key: 'n-1', tenantId: 't', actionType: 'a', fingerprint: 'f' }, async () => jsonResponse(201, {}));
      assert.equal(plain.notifying, false, 'the default path sends no notify');
      assert.deepEqual(await listeners(admin, opened.schema), [], 'and starts no listener');
      const waiting = await opened.another();
      idempotency({ secret: SECRET, store: waiting, wait: { maxMs: 1000 } });
      assert.equal(waiting.notifying, true);
      const forced = await opened.another({ notify: true });
      assert.equal(forced.notifying, true);
      const quiet = await opened.another({ notify: false });
      idempotency({ secret: SECRET, store: quiet, wait: { maxMs: 1000 } });
      await quiet.watch('nobody', 10);
      assert.equal(quiet.notifying, false);
      await assert.rejects(pgStore({ ...PG_CONFIG, max: 1 }, { schema: opened.schema, notifiy: true }), (e) => {
        assert.ok(e instanceof IntentkeyError);
        assert.equal(e.code, 'invalid-argument');
        assert.equal(e.field, 'notifiy');
        return true;
      });
    } finally {
      await opened.drop();
    }
  });

  test('the listener killed mid-wait (pg_terminate_backend): the waiter still gets the replay; the listener comes back', async () => {
    // Two stores on one schema, as two processes have: the owner's writes
    // reach the waiter only through NOTIFY (or its periodic re-check).
    const writer = await expressApp(await opened.another(), { wait: { maxMs: 10_000 }, delayMs: 2000 });
    const waiterStore = await opened.another();
    const waiter = await expressApp(waiterStore, { wait: { maxMs: 10_000 }, delayMs: 0 });
    try {
      const body = '{"amount":"7.00"}';
      const first = post(writer.port, { key: 'order-kill', body });
      while (writer.stats.runs === 0) await sleep(5);
      const dup = post(waiter.port, { key: 'order-kill', body });
      let pids = [];
      for (let i = 0; i < 200 && pids.length === 0; i++) {
        pids = await listeners(admin, opened.schema);
        if (pids.length === 0) await sleep(10);
      }
      assert.equal(pids.length, 1, 'one listener for the waiting store');
      const { rows } = await admin.query('SELECT pg_terminate_backend($1) AS killed', [pids[0]]);
      assert.equal(rows[0].killed, true);
      const [a, b] = await Promise.all([first, dup]);
      assert.equal(a.status, 201);
      assert.equal(b.status, 201);
      assert.equal(b.headers['idempotent-replayed'], 'true');
      assert.equal(b.text, a.text);
      assert.equal(writer.stats.runs + waiter.stats.runs, 1);
      assert.equal(waiter.count(409), 0);
      let back = [];
      for (let i = 0; i < 300 && back.length === 0; i++) {
        back = (await listeners(admin, opened.schema)).filter((p) => p !== pids[0]);
        if (back.length === 0) await sleep(10);
      }
      assert.equal(back.length, 1, 'the listener reconnected');
      console.log(`wait PostgreSQL: listener ${pids[0]} killed mid-wait; the waiter got the replay ${Math.round(b.at - a.at)} ms after the first answer; listener back as ${back[0]}`);
    } finally {
      await writer.close();
      await waiter.close();
    }
  });
});

// The wake-up comes from the notification: the waiter's re-checks (the core's
// intervals: 50, 100, 200, 400, 800 ms, each up to a quarter shorter) end at
// 37-50, 112-150, 262-350, 562-750 and 1162-1550 ms after its first watch, so
// for a first attempt that answers ~1 s after the waiter arrived, the next
// re-check is at least ~160 ms later. The waiter is on a store object of its
// own (another connection, as another process), so only the store's
// notification can wake it early.
for (const name of ['PostgreSQL', 'Redis', 'Redis Cluster']) {
  const s = STORES.find((x) => x.name === name);
  describe(`${name}: woken by the notification, not the next re-check`, { skip: availability.get(name).skip }, () => {
    let opened;
    before(async () => {
      opened = await s.open();
    });
    after(async () => {
      await opened?.drop();
    });

    test('a waiter on another store object answers within ~100 ms of the first answer (handler 1 s)', async () => {
      const writer = await expressApp(opened.store, { wait: { maxMs: 10_000 }, delayMs: 1000 });
      const waiterStore = await opened.another();
      const waiter = await expressApp(waiterStore, { wait: { maxMs: 10_000 }, delayMs: 0 });
      // The subscriber or listener is started by the first wait: warm it up.
      await waiterStore.watch('warm-up', 300);
      const gaps = [];
      try {
        for (let round = 0; round < 3; round++) {
          const body = `{"amount":"${round}.00"}`;
          const key = `order-wake-${round}`;
          const first = post(writer.port, { key, body });
          while (writer.stats.runs === round) await sleep(2);
          await sleep(20);
          const sent = performance.now();
          const dup = await post(waiter.port, { key, body });
          const a = await first;
          assert.equal(dup.status, 201);
          assert.equal(dup.headers['idempotent-replayed'], 'true');
          assert.equal(dup.text, a.text);
          gaps.push({ gap: dup.at - a.at, waited: dup.at - sent, finish: writer.stats.finished[round] - sent });
        }
        const best = Math.min(...gaps.map((g) => g.gap));
        console.log(
          `wait ${name}: waiter answered ${gaps.map((g) => `${Math.round(g.gap)}`).join(', ')} ms after the first answer ` +
            `(waited ${gaps.map((g) => Math.round(g.waited)).join(', ')} ms; handler finished ${gaps.map((g) => Math.round(g.finish)).join(', ')} ms after the waiter arrived)`,
        );
        // Generous: the machine is noisy. A re-check would be >= ~160 ms late.
        assert.ok(best < 100, `woken by the notification: ${gaps.map((g) => Math.round(g.gap)).join(', ')} ms`);
        assert.equal(writer.stats.runs + waiter.stats.runs, 3);
        assert.equal(waiter.count(409), 0);
      } finally {
        await writer.close();
        await waiter.close();
      }
    });
  });
}

describe('real clients with waiting on', () => {
  test("Stripe's SDK (no retries of its own): 8 concurrent sends of one idempotency key get one charge, no 409", async () => {
    const store = memoryStore();
    const app = await expressApp(store, { wait: { maxMs: 5000 }, delayMs: 300, profile: 'stripe', status: 200 });
    try {
      const stripe = new Stripe('sk_test_intentkey_local', {
        host: '127.0.0.1',
        port: app.port,
        protocol: 'http',
        maxNetworkRetries: 0,
        telemetry: false,
      });
      const charges = await Promise.all(
        Array.from({ length: 8 }, () => stripe.charges.create({ amount: 2000, currency: 'usd' }, { idempotencyKey: 'charge-1' })),
      );
      assert.equal(app.stats.runs, 1);
      assert.equal(app.count(409), 0);
      for (const c of charges) assert.deepEqual([c.id, c.object, c.amount], ['ord_1', 'order', '2000']);
      assert.deepEqual(app.stats.statuses.sort(), Array(8).fill(200));
    } finally {
      await app.close();
    }
  });

  test("undici's RetryAgent (retries 409 and 503): 16 concurrent sends, one run, the server never answered 409", async () => {
    const store = memoryStore();
    const app = await expressApp(store, { wait: { maxMs: 5000 }, delayMs: 300 });
    const retrying = retryingAgent();
    try {
      const answers = await Promise.all(
        Array.from({ length: 16 }, async () => {
          const res = await request(`http://127.0.0.1:${app.port}/orders`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'idempotency-key': 'order-retry' },
            body: '{"amount":"3.00"}',
            dispatcher: retrying,
          });
          return { status: res.statusCode, text: await res.body.text() };
        }),
      );
      assert.equal(app.stats.runs, 1);
      assert.equal(app.count(409), 0, 'no 409 for the RetryAgent to retry');
      assert.equal(app.stats.statuses.length, 16, 'no request was sent twice');
      for (const a of answers) assert.deepEqual(a, { status: 201, text: answers[0].text });
    } finally {
      await retrying.close();
      await app.close();
    }
  });
});

describe('Fastify and Hono wait too', () => {
  test('Fastify: 8 concurrent duplicates, 1 run, 7 replays, no 409', async () => {
    const app = Fastify();
    let runs = 0;
    await app.register(fastifyIntentkey, { secret: SECRET, store: memoryStore(), wait: { maxMs: 5000 } });
    app.post('/orders', async (request, reply) => {
      runs++;
      await sleep(300);
      return reply.code(201).send({ id: `ord_${runs}` });
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const answers = await Promise.all(Array.from({ length: 8 }, () => post(app.server.address().port, { key: 'f-1', body: '{}' })));
      assert.equal(runs, 1);
      assert.deepEqual(answers.map((a) => a.status), Array(8).fill(201));
      assert.equal(answers.filter((a) => a.headers['idempotent-replayed'] === 'true').length, 7);
    } finally {
      await app.close();
    }
  });

  test('Hono (intentkey/fetch on @hono/node-server): 8 concurrent duplicates, 1 run, 7 replays, no 409', async () => {
    const app = new Hono();
    let runs = 0;
    app.post('/orders', honoIdempotency({ secret: SECRET, store: memoryStore(), wait: { maxMs: 5000 } }), async (c) => {
      runs++;
      await sleep(300);
      return c.json({ id: `ord_${runs}` }, 201);
    });
    const server = await new Promise((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
    });
    try {
      const answers = await Promise.all(Array.from({ length: 8 }, () => post(server.address().port, { key: 'h-1', body: '{}' })));
      assert.equal(runs, 1);
      assert.deepEqual(answers.map((a) => a.status), Array(8).fill(201));
      assert.equal(answers.filter((a) => a.headers['idempotent-replayed'] === 'true').length, 7);
    } finally {
      server.closeAllConnections?.();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('a client that goes away ends its wait', () => {
  test('Express: the waiting duplicate is aborted by its client; its flow stops watching; no unhandled rejection', async () => {
    const inner = memoryStore();
    let watches = 0;
    // A store of the caller's own (checked by the guard), counting the watches.
    const store = {
      kind: 'counting',
      synchronous: true,
      insert: (r) => inner.insert(r),
      get: (k) => inner.get(k),
      complete: (c) => inner.complete(c),
      replace: (r) => inner.replace(r),
      release: (r) => inner.release(r),
      list: (s, l) => inner.list(s, l),
      purge: (n) => inner.purge(n),
      watch: (key, ms, signal) => {
        watches++;
        return inner.watch(key, ms, signal);
      },
    };
    const app = await expressApp(store, { wait: { maxMs: 10_000 }, delayMs: 1500 });
    try {
      const first = post(app.port, { key: 'gone-1', body: '{}' });
      while (app.stats.runs === 0) await sleep(5);
      const aborter = new AbortController();
      const dup = post(app.port, { key: 'gone-1', body: '{}', signal: aborter.signal });
      while (watches < 3) await sleep(5);
      aborter.abort();
      await assert.rejects(dup);
      await sleep(100);
      const atAbort = watches;
      await sleep(700);
      assert.equal(watches, atAbort, 'no watch after the client went away');
      assert.equal((await first).status, 201);
      assert.equal(app.stats.runs, 1);
      assert.equal(app.count(409), 0, 'nothing was answered to the client that left');
      assert.deepEqual(unhandled, []);
    } finally {
      await app.close();
    }
  });

  test('guard.run and guard.serve with a signal: an aborted wait rejects with the reason', async () => {
    const store = memoryStore();
    const endpoint = createEndpoint({ secret: SECRET, wait: { maxMs: 10_000 } });
    const guard = createGuard({ store, endpoint, wait: { maxMs: 10_000 } });
    const input = { key: 'abort-run', tenantId: 't', actionType: 'a', fingerprint: 'f' };
    let release;
    const first = guard.run(input, () => new Promise((r) => (release = () => r(jsonResponse(201, { ok: 1 })))));
    await sleep(5);
    const aborter = new AbortController();
    const second = guard.run(input, async () => jsonResponse(201, { twice: true }), { signal: aborter.signal });
    setTimeout(() => aborter.abort(new Error('caller gave up')), 120);
    await assert.rejects(second, /caller gave up/);
    const request = { tenantId: 't', method: 'POST', route: '/x', keyValues: ['abort-serve'], contentType: 'application/json', body: '{}' };
    let open;
    const owner = guard.serve(request, () => new Promise((r) => (open = () => r({ status: 201, headers: [], body: new Uint8Array() }))));
    await sleep(5);
    const served = new AbortController();
    const waiting = guard.serve(request, async () => ({ status: 500, headers: [], body: new Uint8Array() }), { signal: served.signal });
    setTimeout(() => served.abort(new Error('client left')), 120);
    await assert.rejects(waiting, /client left/);
    release();
    open();
    assert.equal((await first).outcome, 'owned');
    assert.equal((await owner).path, 'handler');
    const again = await guard.run(input, async () => jsonResponse(201, { twice: true }));
    assert.equal(again.outcome, 'done');
  });
});

describe('runs wait too: guard.run, the journal, a queue consumer', () => {
  test('guard.run on PostgreSQL: two concurrent runs of one intent (two stores), the effect once, the second replayed', { skip: availability.get('PostgreSQL').skip }, async () => {
    const opened = await pgOpen()();
    try {
      const keyer = createKeyer({ secret: SECRET });
      const one = createGuard({ store: opened.store, keyer, wait: { maxMs: 5000 } });
      const two = createGuard({ store: await opened.another(), keyer, wait: { maxMs: 5000 } });
      const intent = { tenantId: 't1', actionType: 'pix.send', payload: { creditor_key: 'a@b.c', amount: '10.50', currency: 'BRL' }, intentEpoch: 1_700_000_000 };
      let effects = 0;
      const pay = async (key) => {
        effects++;
        await sleep(400);
        return jsonResponse(201, { id: `pay_${effects}`, key });
      };
      const a = one.run({ intent }, pay);
      await sleep(30);
      const b = await two.run({ intent }, pay);
      const r = await a;
      assert.equal(effects, 1);
      assert.equal(r.outcome, 'owned');
      assert.equal(b.outcome, 'done');
      assert.equal(b.replayed, true);
      assert.deepEqual(b.response.body, r.response.body);
      // Without waiting, the same race answers in flight.
      const noWait = createGuard({ store: opened.store, keyer });
      const other = { ...intent, payload: { ...intent.payload, amount: '11.00' } };
      const c = one.run({ intent: other }, pay);
      await sleep(30);
      const d = await noWait.run({ intent: other }, pay);
      assert.equal(d.outcome, 'in-flight');
      await c;
    } finally {
      await opened.drop();
    }
  });

  test('the journal: a step another attempt of the run is at waits for its output instead of step-in-flight', async () => {
    const store = memoryStore();
    const keyer = createKeyer({ secret: SECRET });
    const journal = createJournal({ store, keyer, wait: { maxMs: 5000 } });
    const run = { tenantId: 't', intentId: 'run-1', intentEpoch: 1_700_000_000 };
    let calls = 0;
    const plan = async () => {
      calls++;
      await sleep(200);
      return { text: 'the plan' };
    };
    const [a, b] = await Promise.all([journal.step(run, 'plan', plan), (async () => (await sleep(10), journal.step(run, 'plan', plan)))()]);
    assert.deepEqual([a, b, calls], [{ text: 'the plan' }, { text: 'the plan' }, 1]);
    const impatient = createJournal({ store, keyer });
    const running = journal.step(run, 'act', plan);
    await sleep(10);
    await assert.rejects(impatient.step(run, 'act', plan), (e) => e.code === 'step-in-flight');
    await running;
  });

  test('a queue consumer (pg-boss handler): two deliveries of one intent at once, the effect once, both complete', async () => {
    const guard = createGuard({ store: memoryStore(), keyer: createKeyer({ secret: SECRET }) });
    let effects = 0;
    const handler = idempotentHandler({
      guard,
      intent: (job) => ({ tenantId: 'shop', intentId: job.data.paymentId, actionType: 'pix.send', payload: job.data.pix }),
      effect: async () => {
        effects++;
        await sleep(200);
        return { id: `pay_${effects}` };
      },
      wait: { maxMs: 5000 },
    });
    const data = { paymentId: 'pmt-1', pix: { creditor_key: 'a@b.c', amount: '1.00', currency: 'BRL' } };
    const [a, b] = await Promise.all([
      handler([{ id: 'job-1', name: 'payments', data }]),
      (async () => (await sleep(10), handler([{ id: 'job-2', name: 'payments', data }])))(),
    ]);
    assert.deepEqual([a, b, effects], [{ id: 'pay_1' }, { id: 'pay_1' }, 1]);
  });
});

describe('the wait option, named and checked', () => {
  const field = (expected) => (e) => {
    assert.ok(e instanceof IntentkeyError, String(e));
    assert.equal(e.code, 'invalid-argument');
    assert.equal(e.field, expected);
    return true;
  };
  const store = memoryStore();
  test('the adapters: an unknown key inside wait, a wait past 60 s, a wait that is not an object', async () => {
    assert.throws(() => idempotency({ secret: SECRET, store, wait: { maxMss: 5000 } }), field('wait.maxMss'));
    assert.throws(() => idempotency({ secret: SECRET, store, wait: { maxMs: 60_001 } }), field('wait.maxMs'));
    assert.throws(() => idempotency({ secret: SECRET, store, wait: { maxMs: 1.5 } }), field('wait.maxMs'));
    assert.throws(() => idempotency({ secret: SECRET, store, wait: 5000 }), field('wait'));
    assert.throws(() => idempotency({ secret: SECRET, store, waitMs: 5000 }), field('waitMs'));
    assert.throws(() => withIdempotency(() => new Response(), { secret: SECRET, store, wait: { max: 1 } }), field('wait.max'));
    const app = Fastify();
    await assert.rejects(app.register(fastifyIntentkey, { secret: SECRET, store, wait: { maxMss: 1 } }).ready(), field('wait.maxMss'));
    await app.close().catch(() => {});
    assert.throws(() => idempotency({ secret: SECRET, store, wait: { maxMs: 60_001 } }), /at most|longer than 60000 ms/);
    assert.equal(idempotency({ secret: SECRET, store, wait: { maxMs: 60_000 } }).endpoint.waitMaxMs, 60_000);
    assert.equal(idempotency({ secret: SECRET, store }).endpoint.waitMaxMs, 0);
  });
  test('the endpoint, the guard, guard.run, the journal and the queue consumers', async () => {
    const keyer = createKeyer({ secret: SECRET });
    assert.throws(() => createEndpoint({ secret: SECRET, wait: { maxMs: 70_000 } }), field('wait.maxMs'));
    assert.throws(() => createGuard({ store, wait: { maxMss: 1 } }), field('wait.maxMss'));
    assert.throws(() => createGuard({ store, wait: { maxMs: 60_001 } }), field('wait.maxMs'));
    assert.throws(() => createJournal({ store, keyer, wait: { maxMs: -1 } }), field('wait.maxMs'));
    const guard = createGuard({ store, keyer, wait: { maxMs: 250 } });
    assert.equal(guard.waitMaxMs, 250);
    await assert.rejects(
      guard.run({ key: 'k', tenantId: 't', actionType: 'a', fingerprint: 'f' }, async () => jsonResponse(200, {}), { wait: { ms: 1 } }),
      field('wait.ms'),
    );
    assert.throws(
      () => idempotentHandler({ guard, intent: () => ({}), effect: () => null, wait: { maxMs: 99_999 } }),
      field('wait.maxMs'),
    );
  });
});

test('no unhandled rejection in this file', () => {
  assert.deepEqual(unhandled, []);
});
