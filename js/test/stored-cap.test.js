// The cap on what is stored of an answer (`maxStoredBytes`, the core's
// Options::capture): through every adapter, an answer larger than the cap is
// sent whole once, and every retry of its key gets the core's documented
// "answer not kept" (the status kept, a problem body, Idempotent-Answer-Kept:
// false) — the handler never runs twice. An answer under the cap is replayed
// byte for byte, and headers outside the allow-list are not stored.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { memoryStore } from '../src/index.js';
import { idempotency as expressIdempotency } from '../src/adapters/express.js';
import fastifyIntentkey from '../src/adapters/fastify.js';
import { idempotency as honoIdempotency, withIdempotency } from '../src/adapters/fetch-node.js';
import { serve } from './support/http.js';
import { SECRET, T } from './support/adapter-suite.js';

const big = (n) => ({ run: n, pad: 'x'.repeat(200) });

const ADAPTERS = {
  async express(options, state) {
    const app = express();
    const guarded = expressIdempotency(options);
    app.post('/orders', guarded, express.json(), (req, res) => {
      state.runs++;
      res.status(201).set('x-trace', 't1').json(req.body.big ? big(state.runs) : { run: state.runs });
    });
    app.use(guarded.onError);
    const server = await serve(app);
    return { base: `http://127.0.0.1:${server.port}`, close: () => server.close() };
  },
  async fastify(options, state) {
    const app = Fastify();
    await app.register(fastifyIntentkey, options);
    app.post('/orders', async (request, reply) => {
      state.runs++;
      reply.code(201).header('x-trace', 't1');
      return request.body.big ? big(state.runs) : { run: state.runs };
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { base: `http://127.0.0.1:${app.server.address().port}`, close: () => app.close() };
  },
  async hono(options, state) {
    const app = new Hono();
    app.post('/orders', honoIdempotency(options), async (c) => {
      state.runs++;
      const body = await c.req.json();
      c.header('x-trace', 't1');
      return c.json(body.big ? big(state.runs) : { run: state.runs }, 201);
    });
    return { fetch: (r) => app.request(r), close: async () => {} };
  },
  async fetch(options, state) {
    const handler = withIdempotency(async (request) => {
      state.runs++;
      const body = await request.json();
      return Response.json(body.big ? big(state.runs) : { run: state.runs }, { status: 201, headers: { 'x-trace': 't1' } });
    }, options);
    return { fetch: handler, close: async () => {} };
  },
};

async function post(app, key, body) {
  const init = { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': key }, body: JSON.stringify(body) };
  const r = app.base !== undefined ? await fetch(`${app.base}/orders`, init) : await app.fetch(new Request('http://localhost/orders', init));
  return {
    status: r.status,
    replayed: r.headers.get('idempotent-replayed'),
    kept: r.headers.get('idempotent-answer-kept'),
    trace: r.headers.get('x-trace'),
    type: r.headers.get('content-type'),
    body: await r.text(),
  };
}

for (const [name, make] of Object.entries(ADAPTERS)) {
  describe(`${name}: the cap on stored answers`, () => {
    test('an answer past maxStoredBytes is sent once, then replayed as "answer not kept"; the handler runs once', async () => {
      const state = { runs: 0 };
      const app = await make({ secret: SECRET, store: memoryStore(), now: () => T, maxStoredBytes: 64 }, state);
      try {
        const first = await post(app, 'k-big', { big: true });
        assert.equal(first.status, 201);
        assert.equal(JSON.parse(first.body).pad.length, 200, 'the first answer goes out whole');
        for (let i = 0; i < 2; i++) {
          const again = await post(app, 'k-big', { big: true });
          assert.equal(again.status, 201, 'the status is kept');
          assert.equal(again.replayed, 'true');
          assert.equal(again.kept, 'false');
          assert.equal(again.type, 'application/problem+json');
          const problem = JSON.parse(again.body);
          assert.equal(problem.type, 'https://intentkey.dev/problems/answer-not-kept');
          assert.match(problem.detail, /not run again/);
        }
        // Under the cap: replayed byte for byte, and x-trace (not allow-listed) not stored.
        const small = await post(app, 'k-small', { big: false });
        const replay = await post(app, 'k-small', { big: false });
        assert.equal(small.trace, 't1');
        assert.deepEqual([replay.status, replay.body, replay.replayed, replay.kept, replay.trace], [201, small.body, 'true', null, null]);
        assert.equal(state.runs, 2, 'one run per key');
      } finally {
        await app.close();
      }
    });
  });
}

test('maxStoredBytes is checked: a bad value is a typed error naming it', async () => {
  await assert.rejects(
    (async () => expressIdempotency({ secret: SECRET, store: memoryStore(), maxStoredBytes: -1 }))(),
    (e) => /maxStoredBytes/.test(e.message),
  );
});
