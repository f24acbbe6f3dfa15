// intentkey/fetch: the shared adapter suite through Hono (the middleware) served
// by @hono/node-server and called through app.request(), and through the
// web-standard wrapper withIdempotency around Hono's app.fetch and around a
// bare fetch handler; then what is particular to fetch handlers (a body a
// middleware read first, idempotencyOf, a handler that answers no Response, the
// fetch path importing nothing from Node).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Hono } from 'hono';
import { serve } from '@hono/node-server';
import { memoryStore } from '../src/index.js';
import { idempotency, idempotencyOf, withIdempotency } from '../src/adapters/fetch-node.js';
import { SECRET, T, adapterSuite, answer, fetchClient, httpClient, text } from './support/adapter-suite.js';

/** answer()'s result as a Response. */
function toResponse(a) {
  return new Response(typeof a.body === 'string' ? a.body : a.body, { status: a.status, headers: a.headers });
}

/** A Hono app with the middleware on POST /orders/:id. */
function honoApp({ options, state }) {
  const app = new Hono();
  const guarded = idempotency({ tenant: (c) => c.req.header('x-tenant') ?? 'tenant-1', ...options });
  // Hono's own answer to a throw (quietly: its default logs to the console); the
  // middleware sees the throw in c.error and answers the core's 500 instead.
  app.onError((err, c) => c.text('Internal Server Error', 500));
  app.post('/orders/:id', guarded, async (c) => toResponse(await answer(state, await c.req.json(), c.get('idempotency'))));
  return app;
}

adapterSuite(
  'Hono middleware on @hono/node-server',
  async (setup) => {
    const app = honoApp(setup);
    const server = await new Promise((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
    });
    return {
      send: (r) => httpClient(server.address().port, r),
      route: '/orders/:id',
      close: () => new Promise((resolve) => server.close(() => resolve())),
    };
  },
  { repeatedHeaders: false },
);

adapterSuite(
  'Hono middleware through app.request()',
  async (setup) => {
    const app = honoApp(setup);
    return { send: (r) => fetchClient((request) => app.request(request), r), route: '/orders/:id', close: async () => {} };
  },
  { repeatedHeaders: false },
);

adapterSuite(
  'withIdempotency(app.fetch) around a Hono app',
  async ({ options, state }) => {
    const app = new Hono();
    // Under a wrapper, Hono must let a handler's throw through (its own error
    // answer would look like any other answer, and be stored).
    app.onError((err) => {
      throw err;
    });
    app.post('/orders/:id', async (c) => toResponse(await answer(state, await c.req.json(), idempotencyOf(c.req.raw))));
    const fetch = withIdempotency(app.fetch, { tenant: (request) => request.headers.get('x-tenant') ?? 'tenant-1', ...options });
    return { send: (r) => fetchClient(fetch, r), route: '/orders/1', close: async () => {} };
  },
  { repeatedHeaders: false },
);

adapterSuite(
  'withIdempotency around a bare fetch handler',
  async ({ options, state }) => {
    const fetch = withIdempotency(
      async (request) => toResponse(await answer(state, await request.json(), idempotencyOf(request))),
      { tenant: (request) => request.headers.get('x-tenant') ?? 'tenant-1', ...options },
    );
    return { send: (r) => fetchClient(fetch, r), route: '/orders/1', close: async () => {} };
  },
  { repeatedHeaders: false },
);

const headers = (key) => ['content-type', 'application/json', 'idempotency-key', `"${key}"`];

describe('fetch: particulars', () => {
  test('a body a middleware read before: Hono’s cached copy is fingerprinted', async () => {
    const app = new Hono();
    let runs = 0;
    app.post(
      '/x',
      async (c, next) => {
        await c.req.json(); // read (and cached by Hono) before the idempotency middleware
        await next();
      },
      idempotency({ secret: SECRET, store: memoryStore(), now: () => T }),
      async (c) => {
        runs++;
        return c.json({ got: await c.req.json() }, 201);
      },
    );
    const send = (body) => fetchClient((r) => app.request(r), { path: '/x', headers: headers('c-1'), body });
    const first = await send('{"a":1,"b":[1,2]}');
    assert.deepEqual([first.status, JSON.parse(text(first.body))], [201, { got: { a: 1, b: [1, 2] } }]);
    const again = await send('{ "b": [1, 2], "a": 1.0 }');
    assert.deepEqual([again.status, again.header('idempotent-replayed')], [201, 'true']);
    assert.equal((await send('{"a":2}')).status, 422);
    assert.equal(runs, 1);
  });

  test('idempotencyOf is set only while the owner’s handler runs; a handler that answers no Response failed', async () => {
    let seen;
    let request;
    const errors = [];
    const fetch = withIdempotency(
      async (r) => {
        request = r;
        seen = idempotencyOf(r);
        return r.headers.get('x-bad') === '1' ? { not: 'a response' } : new Response('ok', { status: 200 });
      },
      { secret: SECRET, store: memoryStore(), now: () => T, onError: (e) => errors.push(e) },
    );
    const ok = await fetchClient(fetch, { headers: headers('i-1'), body: '{}' });
    assert.equal(ok.status, 200);
    assert.equal(seen.tenantId, 'default');
    assert.match(seen.key, /^[0-9a-f]{64}$/);
    assert.equal(idempotencyOf(request), undefined);
    const bad = await fetchClient(fetch, { headers: [...headers('i-2'), 'x-bad', '1'], body: '{}' });
    assert.equal(bad.status, 500);
    assert.match(errors[0].message, /must answer a Response/);
    assert.equal((await fetchClient(fetch, { headers: [...headers('i-2'), 'x-bad', '1'], body: '{}' })).status, 409);
  });

  test('the fetch adapter’s browser and workerd builds import nothing from Node', () => {
    const seen = new Set();
    const visit = (url) => {
      if (seen.has(url.href)) return;
      seen.add(url.href);
      const source = readFileSync(url, 'utf8');
      for (const [, spec] of source.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s*['"]([^'"]+)['"]/gm)) {
        assert.ok(!spec.startsWith('node:') && spec.startsWith('.'), `${url.pathname} imports ${spec}`);
        visit(new URL(spec, url));
      }
      assert.doesNotMatch(source, /\bimport\(\s*['"]node:/, `${url.pathname} imports node: dynamically`);
    };
    for (const entry of ['../src/adapters/fetch-browser.js', '../src/adapters/fetch-workerd.js', '../src/stores/memory.js']) {
      visit(new URL(entry, import.meta.url));
    }
    assert.ok(seen.size > 5);
  });
});
