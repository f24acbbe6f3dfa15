// Errors that carry a client status are answers, not unknown outcomes: per
// framework (Express, Fastify, Hono), behind a real HTTP server and called with
// fetch (which sends the key bare, as most clients do), a body the framework
// refuses (`false`, `123`: valid JSON, not an object) or a 4xx error a handler
// throws before its effect is answered with that status, the claim is released
// by the core's classify-error-status (never left in flight: the retry with the
// same key is not 409), and the effect never runs twice. An error without a
// status, or with a 5xx one, still leaves the record in flight (500, then 409).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { HTTPException } from 'hono/http-exception';
import { serve as honoServe } from '@hono/node-server';
import { createEndpoint, memoryStore } from '../src/index.js';
import { idempotency as expressIdempotency } from '../src/adapters/express.js';
import fastifyIntentkey from '../src/adapters/fastify.js';
import { idempotency as honoIdempotency } from '../src/adapters/fetch-node.js';
import { serve } from './support/http.js';
import { SECRET, T } from './support/adapter-suite.js';

/** An error as http-errors makes it: a message and a `status` (and `statusCode`). */
function httpError(status, message) {
  return Object.assign(new Error(message), { status, statusCode: status, expose: status < 500 });
}

/**
 * The one effect of every app: counted per key. A body that is not an object
 * is refused with a 400 error before the effect; `{ "fail": 422 }` throws a
 * 422 before it; `{ "fail": "boom" }` throws without a status after it;
 * `{ "fail": 503 }` throws a 503 after it.
 */
function ledger() {
  const effects = new Map();
  return {
    effects,
    count: (key) => effects.get(key) ?? 0,
    run(key, body) {
      if (body === null || typeof body !== 'object' || Array.isArray(body)) throw httpError(400, 'the order must be a JSON object');
      if (body.fail === 422) throw httpError(422, 'qty must be positive');
      effects.set(key, (effects.get(key) ?? 0) + 1);
      if (body.fail === 'boom') throw new Error('the ledger timed out after writing');
      if (body.fail === 503) throw httpError(503, 'the ledger is down after writing');
      return { id: `ord_${effects.get(key)}`, sku: body.sku };
    },
  };
}

/** POST with fetch: { status, replayed, body }. */
async function post(base, key, body) {
  const r = await fetch(`${base}/orders/1`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body,
  });
  return { status: r.status, replayed: r.headers.get('idempotent-replayed'), body: await r.text() };
}

/** The same request sent again and again with one key, as a retrying client does. */
async function sendWithRetries(base, key, body, tries = 3) {
  const answers = [];
  for (let i = 0; i < tries; i++) answers.push(await post(base, key, body));
  return answers;
}

const options = () => ({ secret: SECRET, store: memoryStore(), now: () => T, onError: () => {} });

const APPS = {
  async express(book) {
    const app = express();
    app.set('env', 'test');
    const guarded = expressIdempotency(options());
    // The documented order: guarded, then express.json() (strict: `false` is its 400), then onError.
    app.post('/orders/:id', guarded, express.json(), (req, res) => {
      res.status(201).json(book.run(req.idempotency.key, req.body));
    });
    app.use(guarded.onError);
    const server = await serve(app);
    return { base: `http://127.0.0.1:${server.port}`, close: () => server.close() };
  },
  async fastify(book) {
    const app = Fastify();
    await app.register(fastifyIntentkey, options());
    // A body schema: Fastify refuses `false` (400) before the plugin claims anything.
    app.post('/orders/:id', { schema: { body: { type: 'object' } } }, async (request, reply) => {
      reply.code(201);
      return book.run(request.idempotency.key, request.body);
    });
    // No schema: the handler refuses `false` itself, by throwing a 400 before its effect.
    app.post('/loose/orders/:id', async (request, reply) => {
      reply.code(201);
      return book.run(request.idempotency.key, request.body);
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { base: `http://127.0.0.1:${app.server.address().port}`, loose: true, close: () => app.close() };
  },
  async hono(book) {
    const app = new Hono();
    app.onError((err, c) => (err instanceof HTTPException ? err.getResponse() : c.text('Internal Server Error', 500)));
    app.post('/orders/:id', honoIdempotency(options()), async (c) => {
      const body = await c.req.json();
      let out;
      try {
        out = book.run(c.get('idempotency').key, body);
      } catch (e) {
        throw e.status !== undefined ? new HTTPException(e.status, { message: e.message }) : e;
      }
      return c.json(out, 201);
    });
    const server = await new Promise((resolve) => {
      const s = honoServe({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
    });
    return {
      base: `http://127.0.0.1:${server.address().port}`,
      close: () => new Promise((resolve) => server.close(() => resolve())),
    };
  },
};

test('the core classifies an error by the status it carries: 4xx released, anything else ambiguous', () => {
  const endpoint = createEndpoint({ secret: SECRET });
  for (const s of [400, 404, 413, 415, 422, 429, 499]) assert.equal(endpoint.classifyErrorStatus(s), 'released', String(s));
  for (const s of [0, 200, 302, 399, 500, 503, 599]) assert.equal(endpoint.classifyErrorStatus(s), 'ambiguous', String(s));
  assert.throws(() => endpoint.classifyErrorStatus(400.5), TypeError);
});

for (const [framework, makeApp] of Object.entries(APPS)) {
  describe(`${framework}: errors with a client status`, () => {
    const withApp = (fn) => async () => {
      const book = ledger();
      const app = await makeApp(book);
      try {
        await fn(app, book);
      } finally {
        await app.close();
      }
    };

    for (const bad of ['false', '123']) {
      test(`a body of ${bad} is answered 400 every time, never 409; the same key then runs the good request once`, withApp(async ({ base }, book) => {
        const key = `k-${framework}-${bad}`;
        const answers = await sendWithRetries(base, key, bad);
        assert.deepEqual(
          answers.map((a) => a.status),
          [400, 400, 400],
          `every retry is answered as the first (${answers.map((a) => a.body).join(' | ')})`,
        );
        assert.ok(answers.every((a) => a.replayed === null), 'a released answer is not stored, so never replayed');
        assert.equal(book.effects.size, 0, 'the effect never ran');

        const good = await sendWithRetries(base, key, '{"sku":"A1"}');
        assert.deepEqual(good.map((a) => a.status), [201, 201, 201]);
        assert.deepEqual(good.map((a) => a.replayed), [null, 'true', 'true']);
        assert.equal(JSON.parse(good[2].body).id, 'ord_1');
        assert.deepEqual([...book.effects.values()], [1], 'the effect ran once');
      }));
    }

    test('a 4xx error thrown by the handler before its effect is answered with its status and released; the effect never runs', withApp(async ({ base }, book) => {
      const answers = await sendWithRetries(base, `k-${framework}-422`, '{"sku":"A1","fail":422}');
      assert.deepEqual(answers.map((a) => a.status), [422, 422, 422]);
      assert.equal(book.effects.size, 0);
    }));

    test('an error without a status, or with a 5xx one, still leaves the record in flight: 500, then 409, and the effect ran once', withApp(async ({ base }, book) => {
      for (const [name, fail] of [['boom', '"boom"'], ['503', '503']]) {
        const answers = await sendWithRetries(base, `k-${framework}-${name}`, `{"sku":"A1","fail":${fail}}`);
        assert.deepEqual(answers.map((a) => a.status), [500, 409, 409], fail);
      }
      assert.deepEqual([...book.effects.values()], [1, 1]);
    }));

    if (framework === 'fastify') {
      test('without a body schema: the handler\'s own 400 for `false` is released; the retry is 400 again, never 409', withApp(async ({ base }, book) => {
        const r = [];
        for (let i = 0; i < 2; i++) {
          const res = await fetch(`${base}/loose/orders/1`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'idempotency-key': 'k-loose' },
            body: 'false',
          });
          r.push(res.status);
          await res.arrayBuffer();
        }
        assert.deepEqual(r, [400, 400]);
        assert.equal(book.effects.size, 0);
      }));
    }
  });
}
