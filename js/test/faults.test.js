// Faults between the app and its store: every store call within a deadline
// (storeDeadlineMs, the core's 2 s by default), and a claim whose insert
// failed (its answer may have been lost; its handler never ran) released in
// the background by the core's release flow, so that no key is left in
// flight whose handler never ran.
//
// The unit tests use stores that hang or fail on purpose. The fault runs put
// a TCP proxy (node:net) between Express and the store (PostgreSQL through
// pgStore, Redis through redisStore's ioredis client): 16 retrying clients
// send new keys for 10 s, and 4 more start when the blackhole begins (a
// client whose request was completing then waits through the core's
// completion retries, so without them every client may be in that phase and
// no request be sent during the blackhole); at 2 s the proxy blackholes the
// network for 4 s
// (the bytes to the store go through, so statements commit, but no answer
// comes back; connections opened meanwhile hang), then resets every
// connection (RST), then 4 s as normal. The checks: no handler runs twice;
// no key is left in flight whose handler never ran (read through a direct
// store once the background releases are over); every request sent during
// the blackhole and answered before its end got 503 within 1.5 x the
// deadline; every request got an answer. The answers per second are printed
// (the host/axum/tests/faults.rs equivalent; BENCHMARKS.md keeps the
// figures).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import express from 'express';
import { IntentkeyError, claims, createEndpoint, createGuard, memoryStore, pgStore, redisStore } from '../src/index.js';
import { idempotency } from '../src/adapters/express.js';
import { serve } from './support/http.js';
import { SECRET } from './support/adapter-suite.js';
import { PG_CONFIG, freshSchema, pgAvailability } from './support/pg.js';
import { REDIS_URL, freshPrefix, redisAvailability } from './support/redis.js';

const FILE = 'faults.test.js';
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `check()` holds. */
async function until(check, ms = 5000) {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out');
    await sleep(20);
  }
}

/**
 * An asynchronous store over memory whose operations in `hang` never answer
 * while `state.hanging`, and whose inserts commit but throw (the answer lost)
 * while `state.losing`.
 */
function faulty(hang = ['insert']) {
  const inner = memoryStore();
  const state = { hanging: false, losing: false, calls: [] };
  const store = { kind: 'faulty' };
  for (const op of ['insert', 'get', 'complete', 'replace', 'release', 'list', 'purge']) {
    store[op] = async (...args) => {
      state.calls.push(op);
      if (state.hanging && hang.includes(op)) return new Promise(() => {});
      const v = inner[op](...args);
      if (state.losing && op === 'insert') {
        throw Object.assign(new Error('connection reset'), { payload: { tag: 'unavailable', val: 'connection reset' } });
      }
      return v;
    };
  }
  return { store, state, inner };
}

const post = (port, key, body = '{}') =>
  fetch(`http://127.0.0.1:${port}/pay`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { 'idempotency-key': key }) },
    body,
  });

async function expressApp(options) {
  const ran = new Map();
  const app = express();
  const guarded = idempotency({ secret: SECRET, ...options });
  app.post('/pay', guarded, (req, res) => {
    ran.set(req.idempotency.key, (ran.get(req.idempotency.key) ?? 0) + 1);
    res.status(201).send('ok');
  });
  app.use(guarded.onError);
  const server = await serve(app);
  return { ran, server, guard: guarded.guard };
}

describe('the store deadline', () => {
  test('the core names it (2000 ms); storeDeadlineMs is checked by name on every entry', () => {
    assert.equal(claims.storeDeadlineMs(), 2000);
    assert.equal(createGuard({ store: memoryStore() }).storeDeadlineMs, 2000);
    assert.equal(createGuard({ store: memoryStore(), storeDeadlineMs: 250 }).storeDeadlineMs, 250);
    for (const bad of [0, -1, 1.5, '1000', 2 ** 31]) {
      assert.throws(
        () => idempotency({ secret: SECRET, store: memoryStore(), storeDeadlineMs: bad }),
        (e) => e instanceof IntentkeyError && e.code === 'invalid-argument' && e.field === 'storeDeadlineMs' && /idempotency\(\)/.test(e.message),
        String(bad),
      );
      assert.throws(() => createGuard({ store: memoryStore(), storeDeadlineMs: bad }), (e) => e.field === 'storeDeadlineMs');
    }
    assert.throws(
      () => idempotency({ secret: SECRET, store: memoryStore(), storeDeadlineMS: 10 }),
      (e) => e instanceof IntentkeyError && e.field === 'storeDeadlineMS',
    );
    // guard.serve's requests: the endpoint's deadline, unless the guard has its own.
    const endpoint = createEndpoint({ secret: SECRET, storeDeadlineMs: 300 });
    assert.equal(endpoint.storeDeadlineMs, 300);
    assert.equal(createGuard({ store: memoryStore(), endpoint }).storeDeadlineMs, 300);
    assert.equal(createGuard({ store: memoryStore(), endpoint, storeDeadlineMs: 400 }).storeDeadlineMs, 400);
    assert.throws(() => createEndpoint({ secret: SECRET, storeDeadlineMs: 0 }), (e) => e.field === 'storeDeadlineMs' && /createEndpoint/.test(e.message));
  });

  test('an insert that never answers: 503 with Retry-After at the deadline, reported, the handler never runs', async () => {
    const { store, state } = faulty();
    const errors = [];
    const { ran, server } = await expressApp({ store, storeDeadlineMs: 150, onError: (e, c) => errors.push([e, c]) });
    try {
      state.hanging = true;
      const t0 = Date.now();
      const r = await post(server.port, 'k1');
      const took = Date.now() - t0;
      assert.equal(r.status, 503);
      assert.ok(r.headers.get('retry-after'));
      assert.ok(took >= 140 && took < 1000, `answered at the deadline, not a hang: ${took} ms`);
      assert.equal(ran.size, 0);
      const [e, c] = errors[0];
      assert.equal(c.phase, 'claim');
      assert.equal(e.code, 'store-unavailable');
      assert.match(e.message, /the store did not answer the insert within 150 ms \(the store deadline\)/);
    } finally {
      await server.close();
    }
  });

  test('a completion that never answers is tried again on the core’s schedule; the answer goes out', async () => {
    const { store, state } = faulty(['complete']);
    const errors = [];
    const { ran, server } = await expressApp({ store, storeDeadlineMs: 50, onError: (e, c) => errors.push(c) });
    try {
      state.hanging = true;
      const r = await post(server.port, 'k2');
      assert.equal(r.status, 201);
      assert.equal(ran.size, 1);
      assert.equal(state.calls.filter((op) => op === 'complete').length, 6, 'six tries in all');
      assert.deepEqual(errors.map((c) => c.retryInMs).slice(0, 5), claims.finishRetryDelaysMs());
      state.hanging = false;
      assert.equal((await post(server.port, 'k2')).status, 409, 'left in flight for recovery: never run twice');
    } finally {
      await server.close();
    }
  });

  test('guard.run: a store call past the deadline rejects with store-unavailable (the run is retryable)', async () => {
    const { store, state } = faulty(['get', 'insert']);
    const guard = createGuard({ store, storeDeadlineMs: 100 });
    state.hanging = true;
    await assert.rejects(
      guard.run({ key: 'k', tenantId: 't', actionType: 'a', fingerprint: 'f' }, async () => ({ status: 200, contentType: '', headers: [], body: new Uint8Array() })),
      (e) => e instanceof IntentkeyError && e.code === 'store-unavailable' && /within 100 ms/.test(e.message),
    );
  });
});

describe('a claim whose insert failed is released in the background', () => {
  test('the insert committed but its answer was lost: 503 at once, then released, so the retry runs (not 409)', async () => {
    const { store, state, inner } = faulty();
    const errors = [];
    const { ran, server } = await expressApp({ store, onError: (e, c) => errors.push(c) });
    try {
      state.losing = true;
      const first = await post(server.port, 'k3');
      assert.equal(first.status, 503);
      state.losing = false;
      await until(() => inner.list('in-flight', 10).length === 0);
      assert.ok(state.calls.includes('release'), 'released through the store');
      const again = await post(server.port, 'k3');
      assert.equal(again.status, 201);
      assert.equal(ran.size, 1);
      assert.deepEqual(errors.map((c) => c.phase), ['claim'], 'the lost insert is reported; the release is not');
    } finally {
      await server.close();
    }
  });

  test('while the store cannot be reached the release is tried again on the core’s schedule, until it answers', async () => {
    const { store, state, inner } = faulty(['release']);
    const errors = [];
    const endpoint = createEndpoint({ secret: SECRET });
    const guard = createGuard({ store, endpoint, storeDeadlineMs: 50, onError: (e, c) => errors.push([e, c]) });
    state.losing = true;
    state.hanging = true;
    const request = { tenantId: 't', method: 'POST', route: '/pay', keyValues: ['k4'], contentType: 'application/json', body: new TextEncoder().encode('{}') };
    // The insert commits, its answer is lost; every release then hangs.
    const served = await guard.serve(request, () => ({ status: 201, headers: [], body: new Uint8Array() }));
    assert.equal(served.path, 'unavailable');
    assert.equal(served.reply.status, 503);
    state.losing = false;
    await until(() => state.calls.filter((op) => op === 'release').length >= 3, 5000);
    assert.equal(inner.list('in-flight', 10).length, 1, 'still in flight while the store does not answer');
    state.hanging = false;
    await until(() => inner.list('in-flight', 10).length === 0, 5000);
    assert.deepEqual(errors.map(([, c]) => c.phase), ['claim']);
  });

  test('an insert the deadline abandoned, which lands later, is released after it lands: the key is not left in flight', async () => {
    const mem = memoryStore();
    const state = { landed: 0, releases: 0 };
    // An asynchronous store whose insert answers (and commits) after three deadlines.
    const store = Object.create(mem);
    store.synchronous = false;
    store.insert = async (r) => {
      await sleep(150);
      state.landed++;
      return mem.insert(r);
    };
    store.release = async (r) => {
      state.releases++;
      return mem.release(r);
    };
    const errors = [];
    const guard = createGuard({ store, endpoint: createEndpoint({ secret: SECRET }), storeDeadlineMs: 50, onError: (e, c) => errors.push([e, c]) });
    const request = { tenantId: 't', method: 'POST', route: '/pay', keyValues: ['k-late'], contentType: 'application/json', body: new TextEncoder().encode('{}') };
    let runs = 0;
    const handler = () => {
      runs++;
      return { status: 201, headers: [], body: new Uint8Array() };
    };
    const served = await guard.serve(request, handler);
    assert.equal(served.path, 'unavailable');
    assert.equal(served.reply.status, 503);
    assert.equal(state.landed, 0, 'answered before the insert landed');
    assert.equal(state.releases, 0, 'no release before the abandoned insert ended');
    await until(() => state.landed === 1 && state.releases >= 1, 5000);
    await until(() => mem.list('in-flight', 10).length === 0, 5000);
    assert.equal(runs, 0);
    // The retry runs the handler: the key was not left in flight.
    store.insert = async (r) => mem.insert(r);
    const retried = await guard.serve(request, handler);
    assert.equal(retried.path, 'handler');
    assert.equal(retried.ran, true);
    assert.equal(runs, 1);
    assert.deepEqual(errors.map(([, c]) => c.phase), ['claim']);
  });

  test('the package’s own store: close() stops a release in progress, reported (phase release) as left in flight', async () => {
    const mem = memoryStore();
    const state = { failing: true, releases: 0 };
    // The memory store, failing its releases, as an asynchronous store of the package's own.
    const store = Object.create(mem);
    store.synchronous = false;
    store.insert = async (r) => {
      mem.insert(r);
      throw Object.assign(new Error('reset'), { payload: { tag: 'unavailable', val: 'reset' } });
    };
    store.release = async () => {
      state.releases++;
      throw Object.assign(new Error('down'), { payload: { tag: 'unavailable', val: 'down' } });
    };
    const errors = [];
    const endpoint = createEndpoint({ secret: SECRET });
    const guard = createGuard({ store, endpoint, onError: (e, c) => errors.push([e, c]) });
    const request = { tenantId: 't', method: 'POST', route: '/pay', keyValues: ['k5'], body: new Uint8Array() };
    const served = await guard.serve(request, () => ({ status: 201, headers: [], body: new Uint8Array() }));
    assert.equal(served.path, 'unavailable');
    await until(() => state.releases >= 2);
    mem.close();
    await until(() => errors.length === 2);
    const [e, c] = errors[1];
    assert.equal(c.phase, 'release');
    assert.equal(c.key, mem.list('in-flight', 10)[0].key, 'the claim stays in flight for recovery');
    assert.equal(e.code, 'store-unavailable');
    assert.match(e.message, /left in flight: the store was closed before it could be released; recovery settles it/);
  });
});

/**
 * A TCP proxy that can blackhole (keep every connection open and forward the
 * client's bytes, so statements commit, but hold the server's; connections
 * opened meanwhile hang before reaching the server) and reset (destroy every
 * connection, the app's side with an RST).
 */
class FaultProxy {
  constructor(host, port) {
    this.upstream = { host, port };
    this.blackhole = false;
    this.conns = new Set();
  }

  async start() {
    this.server = net.createServer((client) => this.accept(client));
    await new Promise((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = this.server.address().port;
    return this;
  }

  accept(client) {
    const conn = { client, server: null, connected: false, up: [], down: [], pending: null, dead: false };
    this.conns.add(conn);
    client.setNoDelay(true);
    client.on('error', () => {});
    client.on('close', () => this.drop(conn));
    client.on('data', (chunk) => {
      if (conn.connected) conn.server.write(chunk);
      else conn.up.push(chunk);
    });
    const open = () => {
      if (conn.dead) return;
      const server = net.connect(this.upstream.port, this.upstream.host);
      conn.server = server;
      server.setNoDelay(true);
      server.on('error', () => {});
      server.on('connect', () => {
        conn.connected = true;
        for (const chunk of conn.up) server.write(chunk);
        conn.up = [];
      });
      // The answers are held while the blackhole lasts.
      server.on('data', (chunk) => {
        if (this.blackhole) conn.down.push(chunk);
        else client.write(chunk);
      });
      server.on('close', () => this.drop(conn));
    };
    // A connection opened during a blackhole hangs too.
    if (this.blackhole) conn.pending = open;
    else open();
  }

  drop(conn) {
    if (conn.dead) return;
    conn.dead = true;
    this.conns.delete(conn);
    conn.client.destroy();
    conn.server?.destroy();
  }

  setBlackhole(on) {
    this.blackhole = on;
    if (on) return;
    for (const conn of this.conns) {
      for (const chunk of conn.down) conn.client.write(chunk);
      conn.down = [];
      const open = conn.pending;
      conn.pending = null;
      open?.();
    }
  }

  /** Destroys every connection, the app's side with an RST. */
  reset() {
    for (const conn of [...this.conns]) {
      conn.dead = true;
      this.conns.delete(conn);
      conn.client.resetAndDestroy();
      conn.server?.destroy();
    }
  }

  async close() {
    this.reset();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

const DEADLINE_MS = 1000;
const CLIENTS = 16;
/** Clients that start when the blackhole begins: their first requests are sent during it. */
const LATE_CLIENTS = 4;
const BLACKHOLE_AT_MS = 2000;
const BLACKHOLE_FOR_MS = 4000;
const RUN_FOR_MS = 10_000;
const CLIENT_TIMEOUT_MS = 5000;

/** How a status counts in the per-second table: 201, 503, 409, other, none (a connection error or the client's timeout). */
const slot = (status) => (status === 201 ? 0 : status === 503 ? 1 : status === 409 ? 2 : status === 0 ? 4 : 3);

/**
 * The fault run: Express over `store` (through the proxy), 16 retrying clients
 * for RUN_FOR_MS (and 4 from the blackhole's start), the blackhole and the reset; answers what was seen and run,
 * and the keys left in flight whose handler never ran (read through `direct`).
 */
async function faultRun({ name, store, proxy, direct }) {
  const errors = [];
  const start = Date.now();
  const { ran, server } = await expressApp({ store, storeDeadlineMs: DEADLINE_MS, onError: (_e, c) => errors.push(c.phase) });
  const seen = [];
  let stop = false;
  const client = async (c) => {
    let n = 0;
    while (!stop) {
      n++;
      const key = `c${c}-${n}-${Math.random().toString(36).slice(2)}`;
      // One key, retried until it is answered 201 (or the run ends).
      for (;;) {
        const sent = Date.now();
        let status = 0;
        try {
          const r = await fetch(`http://127.0.0.1:${server.port}/pay`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'idempotency-key': key },
            body: '{}',
            signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS),
          });
          await r.arrayBuffer();
          status = r.status;
        } catch {
          status = 0;
        }
        seen.push({ client: c, sentMs: sent - start, atMs: Date.now() - start, status, took: Date.now() - sent });
        if (status === 201 || stop) break;
        await sleep(50);
      }
    }
  };
  const clients = Array.from({ length: CLIENTS }, (_, c) => client(c));
  await sleep(BLACKHOLE_AT_MS);
  proxy.setBlackhole(true);
  const holeStart = Date.now() - start;
  const late = Array.from({ length: LATE_CLIENTS }, (_, c) => client(CLIENTS + c));
  await sleep(BLACKHOLE_FOR_MS);
  proxy.reset();
  proxy.setBlackhole(false);
  const holeEnd = Date.now() - start;
  await sleep(RUN_FOR_MS - BLACKHOLE_AT_MS - BLACKHOLE_FOR_MS);
  stop = true;
  await Promise.all([...clients, ...late]);

  // The background releases end once the store answers again (a few seconds at most).
  let neverRan = [];
  for (let i = 0; i < 75; i++) {
    const inFlight = await direct.list('in-flight', 100_000);
    neverRan = inFlight.filter((r) => !ran.has(r.key)).map((r) => r.key);
    if (neverRan.length === 0) break;
    await sleep(200);
  }
  await server.close();

  const perSecond = new Map();
  for (const s of seen) {
    const second = Math.floor(s.atMs / 1000);
    if (!perSecond.has(second)) perSecond.set(second, [0, 0, 0, 0, 0]);
    perSecond.get(second)[slot(s.status)]++;
  }
  // Requests sent once the blackhole began, answered before the reset ended it.
  const inHole = seen.filter((s) => s.sentMs >= holeStart && s.atMs < holeEnd);
  const slowest = Math.max(0, ...inHole.map((s) => s.took));
  console.log(`faults (${name}): ${seen.length} requests, ${ran.size} handlers ran, ${errors.length} errors reported`);
  console.log(`faults (${name}): per second: answers (201 / 503 / 409 / other / none)`);
  for (const second of [...perSecond.keys()].sort((a, b) => a - b)) {
    console.log(`faults (${name}): ${String(second).padStart(3)} s  [${perSecond.get(second).join(', ')}]`);
  }
  console.log(`faults (${name}): slowest answer sent during the blackhole: ${slowest} ms; answers with no status: ${seen.filter((s) => s.status === 0).length}`);
  return { seen, ran, neverRan, inHole, slowest, errors, holeEnd };
}

/** The checks of a fault run. */
function checkFaultRun({ seen, ran, neverRan, inHole, slowest, holeEnd }) {
  assert.equal([...ran.values()].filter((n) => n > 1).length, 0, 'no handler ran twice');
  assert.deepEqual(neverRan, [], 'no key is left in flight whose handler never ran');
  assert.ok(inHole.length > 0, 'requests were answered during the blackhole');
  for (let c = CLIENTS; c < CLIENTS + LATE_CLIENTS; c++) {
    const first = seen.find((s) => s.client === c);
    assert.ok(first !== undefined && first.status === 503 && first.took < DEADLINE_MS * 1.5, `a client started in the blackhole: its first answer 503 at the deadline (${JSON.stringify(first)})`);
  }
  assert.deepEqual([...new Set(inHole.map((s) => s.status))], [503], 'during the blackhole every answer is 503');
  assert.ok(slowest < DEADLINE_MS * 1.5, `every answer during the blackhole within 1.5 x the deadline, not a hang: ${slowest} ms`);
  assert.equal(seen.filter((s) => s.status === 0).length, 0, 'every request got an answer');
  assert.ok(
    seen.some((s) => s.atMs > holeEnd + 1500 && s.status === 201),
    'it recovers after the faults',
  );
}

const pgSkip = (await pgAvailability(FILE)).skip;
const redisSkip = (await redisAvailability(FILE)).skip;

test('faults between Express and PostgreSQL: a blackhole, then a reset', { skip: pgSkip, timeout: 60_000 }, async () => {
  const schema = await freshSchema();
  const proxy = await new FaultProxy(PG_CONFIG.host, PG_CONFIG.port).start();
  const direct = await pgStore({ ...schema.config, max: 2 });
  const store = await pgStore({ ...schema.config, host: '127.0.0.1', port: proxy.port, max: 10 });
  try {
    checkFaultRun(await faultRun({ name: 'PostgreSQL', store, proxy, direct }));
  } finally {
    await proxy.close();
    await store.close().catch(() => {});
    await direct.close();
    await schema.drop();
  }
});

test('faults between Express and Redis: a blackhole, then a reset', { skip: redisSkip, timeout: 60_000 }, async () => {
  const fresh = await freshPrefix();
  const proxy = await new FaultProxy('127.0.0.1', Number(new URL(REDIS_URL).port || 6379)).start();
  const db = new URL(REDIS_URL).pathname.slice(1) || '0';
  const direct = await redisStore({ url: fresh.url });
  const store = await redisStore({ url: `redis://127.0.0.1:${proxy.port}/${db}?prefix=${fresh.prefix}` });
  try {
    checkFaultRun(await faultRun({ name: 'Redis', store, proxy, direct }));
  } finally {
    await proxy.close();
    await store.close().catch(() => {});
    await direct.close();
    await fresh.drop();
  }
});
