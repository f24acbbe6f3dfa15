// The HTTP adapters under real clients and real servers: Express, Fastify and
// Hono (the fetch adapter, served by @hono/node-server), each on a real port,
// each with the memory store and with PostgreSQL. The clients are undici's:
// a RetryAgent that retries POST on a reset connection and on 409/503 (with
// Retry-After), as a payment client does, and plain concurrent requests.
//
// - a dropped connection after the handler ran: the client retries and gets
//   the stored answer; the handler ran once;
// - 20 concurrent duplicates: one handler run, no 5xx;
// - two tenants sending the same key: two runs, each its own answer;
// - a 10,000-character key and a key with a control character: 400, nothing runs;
// - a 201 replays its Location, and a PDF replays byte for byte.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { serve } from '@hono/node-server';
import pg from 'pg';
import { init } from 'intentkey';
import { idempotency as expressIdempotency } from 'intentkey/express';
import { intentkey as fastifyIntentkey } from 'intentkey/fastify';
import { idempotency as honoIdempotency } from 'intentkey/fetch';
import { memoryStore } from 'intentkey/stores/memory';
import { pgStore } from 'intentkey/stores/pg';
import { droppingProxy, pdfBytes, rawRequest, retryingAgent, send } from './support/real-clients.js';
import { freshSchema, pgAvailability } from './support/pg.js';

const SECRET = '7e'.repeat(32);
const PDF = pdfBytes();
const pg_ = await pgAvailability('http-real-clients.test.js');

/** Per app: how often each order id's handler ran. */
function newEffects() {
  const runs = new Map();
  return {
    runs,
    count: (id) => runs.get(id) ?? 0,
    run(id) {
      runs.set(id, (runs.get(id) ?? 0) + 1);
    },
  };
}

/** What every app's handler does: a slow effect, then 201 with a Location, or a PDF. */
async function effect(effects, id, tenant, body) {
  effects.run(`${tenant}/${id}`);
  await new Promise((resolve) => setTimeout(resolve, 30));
  if (id.startsWith('pdf')) return { status: 200, type: 'application/pdf', body: PDF, headers: {} };
  const json = JSON.stringify({ id, tenant, qty: body?.qty ?? null, run: effects.count(`${tenant}/${id}`) });
  return { status: 201, type: 'application/json', body: json, headers: { location: `/orders/${id}` } };
}

const tenantOf = (value) => (typeof value === 'string' && value !== '' ? value : 'shop-1');

/** The three adapters, each a function that starts its app and returns its port. */
const ADAPTERS = {
  async express(store, effects) {
    const app = express();
    const guarded = expressIdempotency({ secret: SECRET, store, tenant: (req) => tenantOf(req.headers['x-tenant']) });
    app.post('/orders/:id', guarded, express.json(), async (req, res) => {
      const out = await effect(effects, req.params.id, req.idempotency.tenantId, req.body);
      res.status(out.status).type(out.type).set(out.headers).send(Buffer.from(out.body));
    });
    app.use(guarded.onError);
    const server = await new Promise((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    return { port: server.address().port, close: () => new Promise((r) => server.close(r)) };
  },
  async fastify(store, effects) {
    const app = Fastify();
    await app.register(fastifyIntentkey, { secret: SECRET, store, tenant: (request) => tenantOf(request.headers['x-tenant']) });
    app.post('/orders/:id', async (request, reply) => {
      const out = await effect(effects, request.params.id, request.idempotency.tenantId, request.body);
      reply.code(out.status).type(out.type).headers(out.headers);
      return typeof out.body === 'string' ? out.body : Buffer.from(out.body);
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { port: app.server.address().port, close: () => app.close() };
  },
  async hono(store, effects) {
    const app = new Hono();
    app.post('/orders/:id', honoIdempotency({ secret: SECRET, store, tenant: (c) => tenantOf(c.req.header('x-tenant')) }), async (c) => {
      const body = await c.req.json().catch(() => null);
      const out = await effect(effects, c.req.param('id'), c.get('idempotency').tenantId, body);
      return new Response(out.body, { status: out.status, headers: { 'content-type': out.type, ...out.headers } });
    });
    const server = await new Promise((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
    });
    return { port: server.address().port, close: () => new Promise((r) => server.close(r)) };
  },
};

const STORES = {
  memory: { skip: false, open: async () => ({ store: memoryStore(), close: async () => {} }) },
  postgres: {
    skip: pg_.skip,
    async open() {
      const schema = await freshSchema();
      const pool = new pg.Pool({ ...schema.config, max: 8 });
      const store = await pgStore(pool);
      return {
        store,
        close: async () => {
          await pool.end();
          await schema.drop();
        },
      };
    },
  },
};

const order = (qty = 2) => JSON.stringify({ sku: 'A1', qty });
const headers = (key, extra = {}) => ({ 'content-type': 'application/json', 'idempotency-key': `"${key}"`, ...extra });

await init();

for (const [storeName, storeKind] of Object.entries(STORES)) {
  for (const [adapterName, start] of Object.entries(ADAPTERS)) {
    describe(`${adapterName} on ${storeName}, with real clients`, { skip: storeKind.skip }, () => {
      let app;
      let opened;
      let effects;
      let base;
      before(async () => {
        opened = await storeKind.open();
        effects = newEffects();
        app = await start(opened.store, effects);
        base = `http://127.0.0.1:${app.port}`;
      });
      after(async () => {
        await app?.close();
        await opened?.close();
      });

      test('a client that retries after a dropped connection gets the stored answer; the handler ran once', async () => {
        const proxy = await droppingProxy(app.port);
        const agent = retryingAgent();
        try {
          const res = await send(`http://127.0.0.1:${proxy.port}/orders/drop-1`, {
            headers: headers('drop-1'),
            body: order(),
            dispatcher: agent,
          });
          assert.equal(proxy.dropped(), 1, 'the first answer was dropped');
          assert.equal(res.status, 201);
          assert.equal(res.headers['idempotent-replayed'], 'true', 'the retry got the stored answer');
          assert.equal(res.headers.location, '/orders/drop-1');
          assert.equal(res.json().run, 1);
          assert.equal(effects.count('shop-1/drop-1'), 1, 'the handler ran once');
        } finally {
          await agent.close();
          await proxy.close();
        }
      });

      test('20 concurrent duplicates: one effect, no 5xx', async () => {
        const answers = await Promise.all(
          Array.from({ length: 20 }, () => send(`${base}/orders/dup-1`, { headers: headers('dup-1'), body: order() })),
        );
        const statuses = answers.map((a) => a.status);
        assert.equal(effects.count('shop-1/dup-1'), 1, 'one effect');
        assert.ok(statuses.every((s) => s < 500), `no 5xx: ${statuses}`);
        assert.ok(statuses.every((s) => s === 201 || s === 409), `201 or 409: ${statuses}`);
        for (const a of answers.filter((x) => x.status === 409)) assert.ok(Number(a.headers['retry-after']) >= 1, 'a 409 says when to retry');
        // Retrying clients all end with the one stored answer.
        const agent = retryingAgent();
        try {
          const settled = await Promise.all(
            Array.from({ length: 20 }, () => send(`${base}/orders/dup-2`, { headers: headers('dup-2'), body: order(), dispatcher: agent })),
          );
          assert.equal(effects.count('shop-1/dup-2'), 1);
          assert.deepEqual(new Set(settled.map((a) => a.status)), new Set([201]));
          assert.deepEqual(new Set(settled.map((a) => a.json().run)), new Set([1]));
        } finally {
          await agent.close();
        }
      });

      test('two tenants that send the same key do not interfere', async () => {
        const a = await send(`${base}/orders/t-1`, { headers: headers('shared', { 'x-tenant': 'shop-a' }), body: order(1) });
        const b = await send(`${base}/orders/t-1`, { headers: headers('shared', { 'x-tenant': 'shop-b' }), body: order(5) });
        assert.deepEqual([a.status, b.status], [201, 201], 'the second tenant is not refused for a key it never used');
        assert.equal(b.headers['idempotent-replayed'], undefined, 'nor served the first tenant\'s answer');
        assert.deepEqual([a.json().tenant, b.json().tenant], ['shop-a', 'shop-b']);
        const againB = await send(`${base}/orders/t-1`, { headers: headers('shared', { 'x-tenant': 'shop-b' }), body: order(5) });
        assert.equal(againB.headers['idempotent-replayed'], 'true');
        assert.equal(againB.json().qty, 5, 'tenant b replays its own answer');
        assert.deepEqual([effects.count('shop-a/t-1'), effects.count('shop-b/t-1')], [1, 1]);
      });

      test('a 10,000-character key and a key with a control character get 400 and run nothing', async () => {
        // undici refuses to send a control character in a header, so these
        // requests are written on the socket by hand, as a broken client would.
        for (const [what, key, type] of [
          ['10,000 characters', `"${'k'.repeat(10_000)}"`, 'idempotency-key-too-long'],
          ['a tab inside', '"bad\tkey"', 'idempotency-key-invalid'],
          ['a byte beyond ASCII', '"bad\u00e9key"', 'idempotency-key-invalid'],
        ]) {
          const res = await rawRequest(app.port, '/orders/bad-key', [['Content-Type', 'application/json'], ['Idempotency-Key', key]], order());
          assert.equal(res.status, 400, what);
          assert.equal(res.headers['content-type'], 'application/problem+json', what);
          const problem = JSON.parse(res.text);
          assert.equal(problem.type, `https://intentkey.dev/problems/${type}`, what);
          assert.ok(!res.text.includes('kkkkkkkkkk'), `${what}: the key is not echoed`);
          assert.ok(!/\n\s+at /.test(res.text), `${what}: no stack trace`);
        }
        // A control character other than a tab (0x01, 0x1f, 0x7f) never reaches
        // the app: Node's HTTP parser answers 400 itself. Nothing runs either way.
        for (const key of ['"bad\u0001key"', '"bad\u001fkey"', '"bad\u007fkey"']) {
          const res = await rawRequest(app.port, '/orders/bad-key', [['Content-Type', 'application/json'], ['Idempotency-Key', key]], order());
          assert.equal(res.status, 400, JSON.stringify(key));
        }
        assert.equal(effects.count('shop-1/bad-key'), 0, 'nothing ran');
      });

      test('a 201 replays its Location, and a PDF replays byte for byte', async () => {
        const first = await send(`${base}/orders/loc-1`, { headers: headers('loc-1'), body: order() });
        const again = await send(`${base}/orders/loc-1`, { headers: headers('loc-1'), body: order() });
        assert.deepEqual([first.status, again.status], [201, 201]);
        assert.deepEqual([first.headers.location, again.headers.location], ['/orders/loc-1', '/orders/loc-1']);
        assert.equal(again.headers['idempotent-replayed'], 'true');
        assert.deepEqual(again.bytes, first.bytes);

        const pdf = await send(`${base}/orders/pdf-1`, { headers: headers('pdf-1'), body: order() });
        const pdfAgain = await send(`${base}/orders/pdf-1`, { headers: headers('pdf-1'), body: order() });
        assert.equal(pdf.status, 200);
        assert.deepEqual(pdf.bytes, PDF, 'the first answer is the PDF');
        assert.equal(pdfAgain.headers['content-type'], 'application/pdf');
        assert.equal(pdfAgain.headers['idempotent-replayed'], 'true');
        assert.deepEqual(pdfAgain.bytes, PDF, 'the replay is the same bytes');
        assert.equal(effects.count('shop-1/pdf-1'), 1);
      });
    });
  }
}
