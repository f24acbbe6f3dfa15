// intentkey/fastify: the shared adapter suite on a listening Fastify 5 server,
// then what is particular to Fastify: the route template, a route that opts
// out, a body past Fastify's own limit, the store failing, and configuration
// errors at registration.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import Fastify from 'fastify';
import { IntentkeyError, createEndpoint, memoryStore } from '../src/index.js';
import intentkey from '../src/adapters/fastify.js';
import { SECRET, T, adapterSuite, answer, httpClient, text } from './support/adapter-suite.js';

async function listen(app) {
  await app.listen({ port: 0, host: '127.0.0.1' });
  return app.server.address().port;
}

adapterSuite('Fastify 5 (plugin)', async ({ options, state }) => {
  const app = Fastify();
  await app.register(intentkey, { tenant: (request) => request.headers['x-tenant'] ?? 'tenant-1', ...options });
  app.post('/orders/:id', async (request, reply) => {
    const a = await answer(state, request.body, request.idempotency);
    reply.code(a.status);
    for (const [name, value] of a.headers) reply.header(name, value);
    return typeof a.body === 'string' ? a.body : Buffer.from(a.body);
  });
  const port = await listen(app);
  return { send: (r) => httpClient(port, r), route: '/orders/:id', close: () => app.close() };
});

const headers = (key) => ['content-type', 'application/json', 'idempotency-key', `"${key}"`];

describe('Fastify: particulars', () => {
  async function app(options = {}, fastifyOptions = {}, setup = () => {}) {
    const f = Fastify(fastifyOptions);
    setup(f);
    await f.register(intentkey, { secret: SECRET, store: memoryStore(), now: () => T, onError: () => {}, ...options });
    let runs = 0;
    f.post('/orders/:id', async (request) => {
      runs++;
      return { body: request.body, idem: request.idempotency };
    });
    f.post('/open', { config: { idempotency: false } }, async (request) => {
      runs++;
      return { idem: request.idempotency };
    });
    f.get('/orders/:id', async (request) => ({ idem: request.idempotency }));
    const port = await listen(f);
    return { f, port, runs: () => runs, send: (r) => httpClient(port, r) };
  }

  test('the route is Fastify’s template; the handler finds request.idempotency; a route opts out; a GET passes through', async () => {
    const { f, send, runs, port } = await app();
    try {
      const r = await send({ path: '/orders/7', headers: headers('x-1'), body: '{"a":1}' });
      const core = createEndpoint({ secret: SECRET });
      const { attempt } = core.admit(
        { tenantId: 'default', method: 'POST', route: '/orders/:id', keyValues: ['"x-1"'], contentType: 'application/json', body: '{"a":1}' },
        T,
      );
      assert.deepEqual(JSON.parse(text(r.body)), { body: { a: 1 }, idem: { key: attempt.key, tenantId: 'default' } });
      assert.equal(f.intentkey.endpoint.headerName, 'Idempotency-Key');
      const other = await send({ path: '/orders/8', headers: headers('x-1'), body: '{"a":1}' });
      assert.equal(other.header('idempotent-replayed'), 'true');
      const open = await send({ path: '/open', headers: ['content-type', 'application/json'], body: '{}' });
      assert.deepEqual([open.status, JSON.parse(text(open.body))], [200, { idem: null }]);
      const get = await fetch(`http://127.0.0.1:${port}/orders/1`);
      assert.deepEqual(await get.json(), { idem: null });
      assert.equal(runs(), 2);
    } finally {
      await f.close();
    }
  });

  test('a body past Fastify’s own bodyLimit is Fastify’s 413 (our limit is higher); nothing is claimed', async () => {
    const { f, send, runs } = await app({ maxBodyBytes: 10_000 }, { bodyLimit: 1000 });
    try {
      const r = await send({ headers: headers('big-1'), body: JSON.stringify({ x: 'y'.repeat(5000) }) });
      assert.equal(r.status, 413);
      assert.equal(runs(), 0);
      assert.equal((await send({ headers: headers('big-1'), body: '{"a":1}' })).status, 200, 'nothing was claimed');
    } finally {
      await f.close();
    }
  });

  test('the store cannot be reached: the core’s 503; a store that answers with an error: the core’s 500, reported through onError, never Fastify’s error handler', async () => {
    let mode = 'unavailable';
    const failing = {
      kind: 'failing',
      synchronous: true,
      insert() {
        throw Object.assign(new Error('x'), { payload: { tag: mode, val: `store ${mode}` } });
      },
      get: () => undefined,
      complete: () => true,
      replace: () => true,
      release: () => true,
      list: () => [],
      purge: () => 0,
    };
    const errors = [];
    const reported = [];
    const { f, send, runs } = await app({ store: failing, onError: (e, context) => reported.push([e, context]) }, {}, (instance) =>
      instance.setErrorHandler((e, request, reply) => {
        errors.push(e);
        reply.code(599).send({ code: e.code });
      }),
    );
    try {
      const r = await send({ headers: headers('s-1'), body: '{}' });
      assert.deepEqual([r.status, r.header('retry-after')], [503, '1']);
      mode = 'failed';
      const f2 = await send({ headers: headers('s-1'), body: '{}' });
      assert.equal(f2.status, 500);
      assert.equal(JSON.parse(f2.text ?? new TextDecoder().decode(f2.body)).type, 'https://intentkey.dev/problems/outcome-unknown');
      assert.deepEqual(errors, [], 'the framework’s error handler never sees a store failure');
      const [error, context] = reported.at(-1);
      assert.ok(error instanceof IntentkeyError && error.code === 'store-failed' && error.message === 'store failed');
      assert.equal(context.phase, 'claim');
      assert.equal(runs(), 0);
    } finally {
      await f.close();
    }
  });

  test('configuration errors fail the registration, naming the option', async () => {
    await assert.rejects(Fastify().register(intentkey, { store: memoryStore() }).ready(), (e) => e instanceof IntentkeyError && e.code === 'invalid-secret');
    await assert.rejects(Fastify().register(intentkey, { secret: SECRET }).ready(), (e) => e.field === 'store');
  });
});
