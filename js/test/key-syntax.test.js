// The ietf key syntax through every adapter, called with fetch as most clients
// call an API: a bare key (Idempotency-Key: 8e03…) is a key by default, the same
// key as its quoted form; `strictKeySyntax: true` takes only the RFC 8941
// sf-string and answers a bare key 400. The rule is the core's; the adapters
// only pass the option on, and refuse an option they do not know, by name.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { IntentkeyError, createEndpoint, memoryStore } from '../src/index.js';
import { idempotency as expressIdempotency } from '../src/adapters/express.js';
import fastifyIntentkey from '../src/adapters/fastify.js';
import { idempotency as honoIdempotency, withIdempotency } from '../src/adapters/fetch-node.js';
import { serve } from './support/http.js';
import { SECRET, T } from './support/adapter-suite.js';

const BARE = '8e03978e-40d5-43e8-bc93-6894a57f9324';

/** Each adapter around one handler that counts its runs: { fetch(request) → Response, close }. */
const ADAPTERS = {
  async express(options, state) {
    const app = express();
    const guarded = expressIdempotency(options);
    app.post('/orders', guarded, express.json(), (req, res) => res.status(201).json({ run: ++state.runs }));
    app.use(guarded.onError);
    const server = await serve(app);
    return { base: `http://127.0.0.1:${server.port}`, close: () => server.close() };
  },
  async fastify(options, state) {
    const app = Fastify();
    await app.register(fastifyIntentkey, options);
    app.post('/orders', async (request, reply) => {
      reply.code(201);
      return { run: ++state.runs };
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { base: `http://127.0.0.1:${app.server.address().port}`, close: () => app.close() };
  },
  async hono(options, state) {
    const app = new Hono();
    app.post('/orders', honoIdempotency(options), (c) => c.json({ run: ++state.runs }, 201));
    return { fetch: (r) => app.request(r), close: async () => {} };
  },
  async fetch(options, state) {
    const handler = withIdempotency(async () => Response.json({ run: ++state.runs }, { status: 201 }), options);
    return { fetch: handler, close: async () => {} };
  },
};

async function post(app, key) {
  const init = { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': key }, body: '{"sku":"A1"}' };
  const r = app.base !== undefined ? await fetch(`${app.base}/orders`, init) : await app.fetch(new Request('http://localhost/orders', init));
  const body = await r.text();
  return { status: r.status, replayed: r.headers.get('idempotent-replayed'), type: r.headers.get('content-type'), body };
}

for (const [name, make] of Object.entries(ADAPTERS)) {
  describe(`${name}: ietf keys`, () => {
    const base = () => ({ secret: SECRET, store: memoryStore(), now: () => T });

    test('by default a bare key is a key: the first runs, the retry (bare or quoted) is replayed', async () => {
      const state = { runs: 0 };
      const app = await make(base(), state);
      try {
        const first = await post(app, BARE);
        assert.equal(first.status, 201, first.body);
        assert.equal(first.replayed, null);
        const again = await post(app, BARE);
        assert.deepEqual([again.status, again.replayed, again.body], [201, 'true', first.body]);
        const quoted = await post(app, `"${BARE}"`);
        assert.deepEqual([quoted.status, quoted.replayed], [201, 'true']);
        const bad = await post(app, 'a,b');
        assert.equal(bad.status, 400);
        assert.match(JSON.parse(bad.body).type, /idempotency-key-invalid$/);
        assert.equal(state.runs, 1);
      } finally {
        await app.close();
      }
    });

    test('strictKeySyntax: true answers a bare key 400 (nothing runs) and takes the quoted one', async () => {
      const state = { runs: 0 };
      const app = await make({ ...base(), strictKeySyntax: true }, state);
      try {
        const bare = await post(app, BARE);
        assert.equal(bare.status, 400);
        assert.equal(bare.type, 'application/problem+json');
        assert.match(JSON.parse(bare.body).detail, /not a quoted string/);
        const quoted = await post(app, `"${BARE}"`);
        assert.equal(quoted.status, 201);
        const again = await post(app, `"${BARE}"`);
        assert.deepEqual([again.status, again.replayed], [201, 'true']);
        assert.equal(state.runs, 1);
      } finally {
        await app.close();
      }
    });

    test('an unknown option is a typed error naming it; the former acceptBareToken says what replaced it', async () => {
      const misspelt = { ...base(), strictKeys: true };
      const former = { ...base(), acceptBareToken: true };
      const check = (field, message) => (e) => e instanceof IntentkeyError && e.code === 'invalid-argument' && e.field === field && message.test(e.message);
      await assert.rejects(make(misspelt, { runs: 0 }), check('strictKeys', /`strictKeys` is not an option; the options are .*strictKeySyntax/));
      await assert.rejects(make(former, { runs: 0 }), check('acceptBareToken', /no longer an option: .*strictKeySyntax: true/));
    });
  });
}

test('createEndpoint checks its option names too, and strictKeySyntax must be a boolean', () => {
  assert.throws(() => createEndpoint({ secret: SECRET, maxBodySize: 10 }), (e) => e.code === 'invalid-argument' && e.field === 'maxBodySize');
  assert.throws(() => createEndpoint({ secret: SECRET, strictKeySyntax: 'yes' }), (e) => e.code === 'invalid-argument' && e.field === 'strictKeySyntax');
  const bare = createEndpoint({ secret: SECRET }).admit({ tenantId: 't', method: 'POST', route: '/o', keyValues: [BARE], body: new Uint8Array() }, T);
  const quoted = createEndpoint({ secret: SECRET, strictKeySyntax: true }).admit({ tenantId: 't', method: 'POST', route: '/o', keyValues: [`"${BARE}"`], body: new Uint8Array() }, T);
  assert.equal(bare.tag, 'guarded');
  assert.equal(bare.attempt.key, quoted.attempt.key, 'a bare key and its quoted form are one storage key');
});
