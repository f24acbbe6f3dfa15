// intentkey/express under Express 5 and plain node:http: the shared adapter suite
// (support/adapter-suite.js), then what is particular to them: where the body
// comes from (the raw stream given back to express.json() after the middleware,
// req.rawBody from a parser before it, or only a parsed object), the route
// template, a throw without onError, the store failing, the SQLite store, and
// configuration errors at construction.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { IntentkeyError, createEndpoint, memoryStore, sqliteStore } from '../src/index.js';
import { idempotency } from '../src/adapters/express.js';
import { serve } from './support/http.js';
import { SECRET, T, adapterSuite, answer, httpClient, newState, serveNodeHttp, text } from './support/adapter-suite.js';

/** Writes answer()'s result with Express. */
function expressHandler(state) {
  return async (req, res) => {
    const a = await answer(state, req.body, req.idempotency);
    res.status(a.status);
    for (const [name, value] of a.headers) res.set(name, value);
    res.send(typeof a.body === 'string' ? a.body : Buffer.from(a.body));
  };
}

const tenantOf = (req) => req.headers['x-tenant'] ?? 'tenant-1';

adapterSuite('Express 5 (the middleware before express.json())', async ({ options, state }) => {
  const app = express();
  app.set('env', 'test');
  const guarded = idempotency({ tenant: tenantOf, ...options });
  app.post('/orders/:id', guarded, express.json(), expressHandler(state));
  app.use(guarded.onError);
  const server = await serve(app);
  return { send: (r) => httpClient(server.port, r), route: '/orders/:id', close: () => server.close() };
});

adapterSuite('node:http (next is the handler)', async ({ options, state }) => {
  const server = await serveNodeHttp(idempotency({ tenant: tenantOf, ...options }), state);
  return { send: (r) => httpClient(server.port, r), route: '/orders/1', close: () => server.close() };
});

const BODY = '{"sku":"A1","qty":2.50,"note":"x"}';
const headers = (key, extra = []) => ['content-type', 'application/json', 'idempotency-key', `"${key}"`, ...extra];

/** An Express app with `stack` before the handler; the handler echoes what it got. */
async function expressApp(stack, { options = {}, after = [] } = {}) {
  const app = express();
  app.set('env', 'test');
  const errors = [];
  const guarded = idempotency({ secret: SECRET, store: memoryStore(), now: () => T, onError: (e) => errors.push(e), ...options });
  let runs = 0;
  app.post('/orders/:id', ...stack(guarded), (req, res) => {
    runs++;
    res.status(201).json({ body: req.body ?? null, raw: req.rawBody === undefined ? null : String(req.rawBody), idem: req.idempotency });
  });
  app.get('/orders/:id', guarded, (req, res) => res.json({ get: true, idem: req.idempotency ?? null }));
  for (const mw of after) app.use(mw);
  app.use(guarded.onError);
  app.use((err, req, res, next) => {
    errors.push(err);
    res.status(599).json({ code: err.code ?? null, message: err.message });
  });
  const server = await serve(app);
  return { server, runs: () => runs, errors, guarded, send: (r) => httpClient(server.port, r) };
}

describe('Express: where the body comes from', () => {
  const core = createEndpoint({ secret: SECRET });
  const storageKey = (key, body, contentType = 'application/json') =>
    core.admit({ tenantId: 'default', method: 'POST', route: '/orders/:id', keyValues: [`"${key}"`], contentType, body }, T).attempt;

  test('before express.json(): the raw bytes are fingerprinted and given back, so the parser and the handler still read the body', async () => {
    const { server, send, runs } = await expressApp((g) => [g, express.json()]);
    try {
      const r = await send({ headers: headers('b-1'), body: BODY });
      assert.equal(r.status, 201);
      const got = JSON.parse(text(r.body));
      assert.deepEqual(got.body, { sku: 'A1', qty: 2.5, note: 'x' });
      assert.equal(got.idem.key, storageKey('b-1', BODY).key);
      assert.equal(got.idem.tenantId, 'default');
      assert.equal(runs(), 1);
    } finally {
      await server.close();
    }
  });

  test('after express.json() with rawBody kept: req.rawBody is fingerprinted', async () => {
    const parser = express.json({ verify: (req, res, buf) => (req.rawBody = buf) });
    const { server, send } = await expressApp((g) => [parser, g]);
    try {
      const r = await send({ headers: headers('b-2'), body: BODY });
      assert.equal(r.status, 201);
      assert.equal(JSON.parse(text(r.body)).idem.key, storageKey('b-2', BODY).key);
      // The same request again: a replay.
      const again = await send({ headers: headers('b-2'), body: BODY });
      assert.equal(again.header('idempotent-replayed'), 'true');
    } finally {
      await server.close();
    }
  });

  test('after express.json() with only the parsed object: it is fingerprinted as JSON (the same fingerprint as its raw text, RFC 8785)', async () => {
    const { server, send, runs } = await expressApp((g) => [express.json(), g]);
    try {
      const r = await send({ headers: headers('b-3'), body: BODY });
      assert.equal(r.status, 201);
      assert.deepEqual(JSON.parse(text(r.body)).body, { sku: 'A1', qty: 2.5, note: 'x' });
      // A client's retry of the raw text replays; what JSON.stringify wrote and the raw text fingerprint alike.
      assert.equal(storageKey('b-3', BODY).fingerprint, storageKey('b-3', JSON.stringify(JSON.parse(BODY))).fingerprint);
      const again = await send({ headers: headers('b-3'), body: '{ "note": "x", "qty": 2.5, "sku": "A1" }' });
      assert.deepEqual([again.status, again.header('idempotent-replayed')], [201, 'true']);
      assert.equal((await send({ headers: headers('b-3'), body: '{"sku":"A1","qty":3}' })).status, 422);
      assert.equal(runs(), 1);
    } finally {
      await server.close();
    }
  });

  test('the route is the template (/orders/:id): two ids, one key, the same body are one request; a GET passes through untouched', async () => {
    const { server, send, runs } = await expressApp((g) => [g, express.json()]);
    try {
      assert.equal((await send({ path: '/orders/1', headers: headers('r-1'), body: BODY })).status, 201);
      const other = await send({ path: '/orders/2', headers: headers('r-1'), body: BODY });
      assert.equal(other.header('idempotent-replayed'), 'true');
      assert.equal(runs(), 1);
      const get = await fetch(`http://127.0.0.1:${server.port}/orders/1`);
      assert.deepEqual(await get.json(), { get: true, idem: null });
    } finally {
      await server.close();
    }
  });

  test('a route option: the path instead of the template', async () => {
    const { server, send, runs } = await expressApp((g) => [g, express.json()], { options: { route: (req) => req.path } });
    try {
      assert.equal((await send({ path: '/orders/1', headers: headers('r-2'), body: BODY })).status, 201);
      // Another route under the same key: another fingerprint, so a conflict.
      assert.equal((await send({ path: '/orders/2', headers: headers('r-2'), body: BODY })).status, 422);
      assert.equal(runs(), 1);
    } finally {
      await server.close();
    }
  });
});

describe('Express: failures', () => {
  test('without onError mounted, Express answers a throw itself and that answer is stored like any other (why the README says to mount onError)', async () => {
    const app = express();
    app.set('env', 'test');
    let runs = 0;
    const guarded = idempotency({ secret: SECRET, store: memoryStore(), now: () => T });
    app.post('/x', guarded, () => {
      runs++;
      throw new Error('boom');
    });
    const server = await serve(app);
    try {
      const send = () => httpClient(server.port, { path: '/x', headers: headers('f-1'), body: '{}' });
      assert.equal((await send()).status, 500);
      const again = await send();
      assert.deepEqual([again.status, again.header('idempotent-replayed')], [500, 'true']);
      assert.equal(runs, 1);
    } finally {
      await server.close();
    }
  });

  test('the store cannot be reached: the core’s 503 with Retry-After, nothing run; a store that fails otherwise: the core’s 500, reported, nothing run', async () => {
    const store = memoryStore();
    let mode = 'ok';
    const flaky = {
      kind: 'flaky',
      synchronous: true,
      insert(record) {
        if (mode === 'unavailable') throw Object.assign(new Error('busy'), { payload: { tag: 'unavailable', val: 'sqlite: SQLITE_BUSY' } });
        if (mode === 'failed') throw Object.assign(new Error('no table'), { payload: { tag: 'failed', val: 'sqlite: no such table: intentkey_records' } });
        return store.insert(record);
      },
      get: (k) => store.get(k),
      complete: (c) => store.complete(c),
      replace: (r) => store.replace(r),
      release: (r) => store.release(r),
      list: (s, l) => store.list(s, l),
      purge: (n) => store.purge(n),
    };
    const { send, runs, errors, server } = await expressApp((g) => [g, express.json()], { options: { store: flaky } });
    try {
      mode = 'unavailable';
      const r = await send({ headers: headers('s-1'), body: BODY });
      assert.equal(r.status, 503);
      assert.equal(r.header('retry-after'), '1');
      assert.deepEqual(r.body, createEndpoint({ secret: SECRET }).unavailable(T).body);
      mode = 'failed';
      // A store that answers with an error (a table missing, a record it
      // cannot decode): the core's 500, never the framework's error page, and
      // the error reported through onError; nothing runs.
      const f = await send({ headers: headers('s-1'), body: BODY });
      assert.equal(f.status, 500);
      assert.deepEqual(f.body, createEndpoint({ secret: SECRET }).failed(T).body);
      assert.ok(!text(f.body).includes('no such table'), 'the store’s message never reaches the client');
      assert.ok(errors.some((e) => e instanceof IntentkeyError && e.code === 'store-failed' && /no such table/.test(e.message)));
      assert.equal(runs(), 0);
      mode = 'ok';
      assert.equal((await send({ headers: headers('s-1'), body: BODY })).status, 201);
      assert.equal(runs(), 1);
    } finally {
      await server.close();
    }
  });

  test('configuration errors throw at construction, naming the option', () => {
    assert.throws(() => idempotency({ store: memoryStore() }), (e) => e instanceof IntentkeyError && e.code === 'invalid-secret' && e.field === 'secret' && /secret/.test(e.message));
    assert.throws(() => idempotency({ secret: 'ab'.repeat(8), store: memoryStore() }), (e) => e.code === 'secret-too-short');
    assert.throws(() => idempotency({ secret: SECRET }), (e) => e.code === 'invalid-argument' && e.field === 'store');
    assert.throws(() => idempotency({ secret: SECRET, store: memoryStore(), profile: 'soap' }), (e) => e.field === 'profile');
    assert.throws(() => idempotency({ secret: SECRET, store: memoryStore(), tenant: 42 }), (e) => e.field === 'tenant');
    assert.throws(() => idempotency({ secret: SECRET, store: memoryStore(), policies: { 'POST /x': { version: 99 } } }), (e) => e.code === 'invalid-policy');
    assert.throws(() => idempotency({ secret: SECRET, store: memoryStore(), releaseStatuses: ['x'] }), /releaseStatuses/);
    // The secret never appears in a message.
    try {
      idempotency({ secret: 'ab'.repeat(8), store: memoryStore() });
    } catch (e) {
      assert.doesNotMatch(e.message, /abab/);
    }
  });

  test('a tenant function that answers nothing is a clear error (next(err)), not a guess', async () => {
    const { send, errors, server } = await expressApp((g) => [g, express.json()], { options: { tenant: () => '' } });
    try {
      const r = await send({ headers: headers('t-1'), body: BODY });
      assert.equal(r.status, 599);
      assert.ok(errors.some((e) => e instanceof IntentkeyError && e.field === 'tenant'));
    } finally {
      await server.close();
    }
  });
});

test('node:http on better-sqlite3: stored, replayed byte for byte from the bytes column, released on 503', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'intentkey-express-'));
  const store = sqliteStore(join(dir, 'r.db'));
  const state = newState();
  state.unavailable = 1;
  const guarded = idempotency({ secret: SECRET, store, now: () => T, onError: () => {} });
  const server = await serve((req, res) =>
    guarded(req, res, async () => {
      const chunks = [];
      for await (const c of req) chunks.push(c);
      const a = await answer(state, JSON.parse(Buffer.concat(chunks).toString('utf8')), req.idempotency);
      res.statusCode = a.status;
      for (const [name, value] of a.headers) res.setHeader(name, value);
      res.end(typeof a.body === 'string' ? a.body : Buffer.from(a.body));
    }),
  );
  try {
    const send = (key, body) => httpClient(server.port, { headers: headers(key), body });
    const first = await send('q-1', '{"mode":"binary"}');
    const again = await send('q-1', '{"mode":"binary"}');
    assert.deepEqual([again.status, again.header('idempotent-replayed')], [200, 'true']);
    assert.deepEqual(again.body, first.body);
    const row = store.db.prepare("SELECT response_body, response_headers FROM intentkey_records WHERE status = 'done'").get();
    assert.equal(row.response_body, null);
    assert.deepEqual(JSON.parse(row.response_headers), [['Location', '/files/1']], 'only what a replay restores is stored');
    assert.equal((await send('q-2', '{"mode":"unavailable"}')).status, 503);
    assert.equal((await send('q-2', '{"mode":"unavailable"}')).status, 201);
    assert.equal(state.runs, 3);
  } finally {
    await server.close();
    store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
