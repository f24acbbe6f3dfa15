// One suite for every HTTP adapter (Express, node:http, Fastify, Hono through
// @hono/node-server and through app.request(), the fetch wrapper): the same
// requests, the same expectations. Every expected status, header and body is
// asked of the core (an endpoint with the same secret and profile), never
// written out here: the tests check that the adapters carry the core's answers
// through the I/O unchanged, and that the handler runs exactly when it should.
//
// Each adapter's app serves POST /orders/:id with one handler, written in the
// framework's idiom around `answer()` below, which the test steers through
// `state`: the body's `mode` picks a binary answer, a throw or a 503.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request as undiciRequest } from 'undici';
import { createEndpoint, memoryStore } from '../../src/index.js';
import { serve } from './http.js';

export const SECRET = '5c'.repeat(32);
/** The clock of every app: the ofb bodies are dated by it. */
export const T = 1_700_000_000;
/** A body that is not UTF-8: 0xff, 0xfe, …, 0x00. */
export const BINARY = Uint8Array.from({ length: 256 }, (_, i) => 255 - i);

const ORDER = '{"sku":"A1","qty":2,"note":"café"}';
/** The same JSON, written differently: the same fingerprint (RFC 8785). */
const ORDER_AGAIN = '{ "qty": 2.0, "note": "caf\\u00e9", "sku": "A1" }';
const OTHER = '{"sku":"A1","qty":3}';

const decoder = new TextDecoder();
export const text = (bytes) => decoder.decode(bytes);

/** A fresh handler state. */
export function newState() {
  return { runs: 0, contexts: [], gate: null, unavailable: 0, errors: [] };
}

/**
 * What the handler answers for a parsed body: { status, headers, body }, or a
 * throw. `context` is what the adapter gave the handler ({ key, tenantId }).
 */
export async function answer(state, body, context) {
  state.runs++;
  state.contexts.push(context);
  if (state.gate !== null) await state.gate;
  const mode = body !== null && typeof body === 'object' ? body.mode : undefined;
  if (mode === 'throw') throw new Error('the ledger is down (/srv/app/ledger.js:42, token=abc)');
  if (mode === 'binary') {
    return { status: 200, headers: [['Content-Type', 'application/pdf'], ['Location', '/files/1']], body: BINARY };
  }
  if (mode === 'unavailable' && state.unavailable > 0) {
    state.unavailable--;
    return { status: 503, headers: [['Content-Type', 'application/json']], body: '{"retry":true}' };
  }
  return {
    status: 201,
    headers: [
      ['Content-Type', 'application/json'],
      ['Location', `/orders/ord_${state.runs}`],
      ['Set-Cookie', 'session=s3cr3t'],
    ],
    body: JSON.stringify({ id: `ord_${state.runs}`, tenant: context?.tenantId ?? null }),
  };
}

/**
 * Serves `guarded` (intentkey/express's middleware) on plain node:http, with
 * next as the handler: it reads the body, parses it as JSON (an empty one as
 * null) and writes answer(state, body, req.idempotency); an error handed to
 * next is answered `errorStatus` with its text. close() stops the server.
 */
export function serveNodeHttp(guarded, state, { errorStatus = 500 } = {}) {
  return serve((req, res) =>
    guarded(req, res, async (err) => {
      if (err) {
        res.statusCode = errorStatus;
        res.end(String(err));
        return;
      }
      const chunks = [];
      for await (const c of req) chunks.push(c);
      const a = await answer(state, JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null'), req.idempotency);
      res.statusCode = a.status;
      for (const [name, value] of a.headers) res.setHeader(name, value);
      res.end(typeof a.body === 'string' ? a.body : Buffer.from(a.body));
    }),
  );
}

/** Sends one request to a server on 127.0.0.1; the response as { status, header(name), body }. */
export async function httpClient(port, { path = '/orders/1', headers = [], body = '' }) {
  const r = await undiciRequest(`http://127.0.0.1:${port}${path}`, { method: 'POST', headers, body });
  const bytes = new Uint8Array(await r.body.arrayBuffer());
  const header = (name) => {
    const v = r.headers[name.toLowerCase()];
    return Array.isArray(v) ? v.join(', ') : v;
  };
  return { status: r.statusCode, header, body: bytes };
}

/** Sends one request through a fetch handler; the response as { status, header(name), body }. */
export async function fetchClient(fetchFn, { path = '/orders/1', headers = [], body = '' }) {
  const h = new Headers();
  for (let i = 0; i + 1 < headers.length; i += 2) h.append(headers[i], headers[i + 1]);
  const r = await fetchFn(new Request(`http://localhost${path}`, { method: 'POST', headers: h, body }));
  const bytes = new Uint8Array(await r.arrayBuffer());
  return { status: r.status, header: (name) => r.headers.get(name) ?? undefined, body: bytes };
}

const HEADER = { ietf: 'Idempotency-Key', stripe: 'Idempotency-Key', ofb: 'x-idempotency-key' };
/** The key as the profile wants it sent: an sf-string for ietf, bare otherwise. */
const sent = (profile, key) => (profile === 'ietf' ? `"${key}"` : key);

/**
 * Registers the suite for one adapter.
 * @param {string} label
 * @param {(setup: { options: object, state: object }) => Promise<{
 *   send: (request: { headers: string[], body: string }) => Promise<{ status: number, header: Function, body: Uint8Array }>,
 *   route: string,
 *   close: () => Promise<void>,
 * }>} makeApp builds the app with `options` (the adapter's options, without
 *   `tenant`: the app reads the tenant from the x-tenant header, default
 *   'tenant-1') around a handler calling answer(state, body, context)
 * @param {{ repeatedHeaders?: boolean }} [capabilities] repeatedHeaders: whether
 *   the transport delivers a header sent twice as two lines (the fetch API joins them)
 */
export function adapterSuite(label, makeApp, { repeatedHeaders = true } = {}) {
  describe(label, () => {
    /** Opens an app with a fresh memory store, runs fn, closes it. */
    const it = (name, fn, extra = {}) =>
      test(name, async () => {
        const state = newState();
        const profile = extra.profile ?? 'ietf';
        const options = {
          secret: SECRET,
          store: memoryStore(),
          now: () => T,
          onError: (error, context) => state.errors.push({ error, context }),
          ...extra,
        };
        const app = await makeApp({ options, state });
        const core = createEndpoint({ secret: SECRET, profile, keyRequired: extra.keyRequired, maxBodyBytes: extra.maxBodyBytes });
        const send = ({ key, keys, tenant, body = ORDER, headers = [] }) => {
          const h = ['content-type', 'application/json', ...headers];
          for (const k of keys ?? (key === undefined ? [] : [key])) h.push(HEADER[profile], k);
          if (tenant !== undefined) h.push('x-tenant', tenant);
          return app.send({ headers: h, body });
        };
        /** The core's admission of the same request. */
        const admit = (keyValues, body = ORDER, tenantId = 'tenant-1') =>
          core.admit({ tenantId, method: 'POST', route: app.route, keyValues, contentType: 'application/json', body }, T);
        try {
          await fn({ send, state, core, admit, key: (k) => sent(profile, k), profile, store: options.store });
        } finally {
          await app.close();
        }
      });

    it('the first request runs the handler with the storage key; a retry (the same JSON, reformatted) is replayed with Idempotent-Replayed, Location and Content-Type, never Set-Cookie', async ({ send, state, admit, key }) => {
      const first = await send({ key: key('order-1') });
      assert.equal(first.status, 201);
      assert.equal(first.header('idempotent-replayed'), undefined);
      assert.equal(first.header('location'), '/orders/ord_1');
      assert.equal(first.header('set-cookie'), 'session=s3cr3t', 'the owner gets what the handler wrote');
      assert.deepEqual(JSON.parse(text(first.body)), { id: 'ord_1', tenant: 'tenant-1' });
      const { attempt } = admit([key('order-1')]);
      assert.deepEqual(state.contexts, [{ key: attempt.key, tenantId: 'tenant-1' }]);
      assert.match(attempt.key, /^[0-9a-f]{64}$/);
      for (const body of [ORDER, ORDER_AGAIN]) {
        const again = await send({ key: key('order-1'), body });
        assert.equal(again.status, 201);
        assert.equal(again.header('idempotent-replayed'), 'true');
        assert.equal(again.header('location'), '/orders/ord_1');
        assert.match(again.header('content-type'), /^application\/json/);
        assert.equal(again.header('set-cookie'), undefined, 'Set-Cookie is not on the replay allow-list');
        assert.deepEqual(again.body, first.body);
      }
      assert.equal(state.runs, 1);
    });

    it('the record is finished before the client has the answer: done, holding what the client got', async ({ send, admit, key, store }) => {
      const first = await send({ key: key('order-done') });
      assert.equal(first.status, 201);
      const { attempt } = admit([key('order-done')]);
      const record = store.get(attempt.key);
      assert.equal(record?.status, 'done', 'the answer reached the client while its record was still in flight');
      assert.equal(record.response.status, 201);
      assert.deepEqual(record.response.body, first.body);
      // Names as the framework spelled them; Set-Cookie is not on the allow-list, so not stored.
      assert.deepEqual(record.response.headers.map(([n, v]) => [n.toLowerCase(), v]), [['location', '/orders/ord_1']]);
    });

    it('a 64 KB key header is refused (the core\'s 400, or 431 from a Node server\'s header limit) and nothing runs', async ({ send, state, store, key }) => {
      const answer = await send({ key: key('k'.repeat(64 * 1024)) });
      assert.ok([400, 431].includes(answer.status), `got ${answer.status}`);
      assert.ok(answer.body.byteLength < 1024, `the refusal stays small: ${answer.body.byteLength} bytes`);
      assert.equal(state.runs, 0);
      assert.equal(store.list('in-flight', 10).length + store.list('done', 10).length, 0, 'nothing is stored');
    });

    it('a 10,000-deep JSON body gets the core\'s 400 (small), nothing runs, and the app serves the next request', async ({ send, state, store, admit, key }) => {
      const deep = `${'['.repeat(10_000)}1${']'.repeat(10_000)}`;
      const refused = admit([key('deep-1')], deep);
      assert.equal(refused.tag, 'refused');
      const answer = await send({ key: key('deep-1'), body: deep });
      assert.equal(answer.status, 400);
      assert.deepEqual(answer.body, refused.reply.body);
      assert.ok(answer.body.byteLength < 1024, `the refusal stays small: ${answer.body.byteLength} bytes`);
      assert.equal(state.runs, 0);
      assert.equal(store.list('in-flight', 10).length + store.list('done', 10).length, 0, 'nothing is stored');
      assert.equal((await send({ key: key('after-deep') })).status, 201);
      assert.equal(state.runs, 1);
    });

    it('a binary body is replayed byte for byte', async ({ send, state, key }) => {
      const body = '{"mode":"binary"}';
      const first = await send({ key: key('pdf-1'), body });
      assert.equal(first.status, 200);
      assert.deepEqual(first.body, BINARY);
      const again = await send({ key: key('pdf-1'), body });
      assert.deepEqual([again.status, again.header('idempotent-replayed'), again.header('content-type')], [200, 'true', 'application/pdf']);
      assert.equal(again.header('location'), '/files/1');
      assert.deepEqual(again.body, BINARY);
      assert.equal(state.runs, 1);
    });

    it('a retry while the first request runs gets 409 with Retry-After; the handler runs once', async ({ send, state, core, key }) => {
      let open;
      state.gate = new Promise((resolve) => {
        open = resolve;
      });
      const slow = send({ key: key('busy-1') });
      while (state.runs === 0) await new Promise((r) => setTimeout(r, 2));
      const busy = await send({ key: key('busy-1') });
      const expected = core.answer('in-flight', T);
      assert.equal(busy.status, 409);
      assert.equal(busy.header('retry-after'), '1');
      assert.equal(busy.header('content-type'), expected.headers.find(([n]) => n === 'Content-Type')[1]);
      assert.deepEqual(busy.body, expected.body);
      open();
      assert.equal((await slow).status, 201);
      assert.equal(state.runs, 1);
    });

    for (const profile of ['ietf', 'stripe', 'ofb']) {
      it(`${profile}: the same key with another payload gets the profile’s answer (422, or 400 for stripe); the handler does not run`, async ({ send, state, core, key }) => {
        assert.equal((await send({ key: key('reused-1') })).status, 201);
        const reused = await send({ key: key('reused-1'), body: OTHER });
        const expected = core.answer('payload-conflict', T);
        assert.equal(reused.status, { ietf: 422, stripe: 400, ofb: 422 }[profile]);
        assert.equal(reused.status, expected.status);
        assert.deepEqual(reused.body, expected.body);
        assert.equal(reused.header('idempotent-replayed'), undefined);
        assert.equal(state.runs, 1);
      }, { profile });
    }

    for (const profile of ['ietf', 'stripe', 'ofb']) {
      it(`${profile}: a missing, overlong, control-character${repeatedHeaders ? ' or repeated' : ''} key gets the core’s 400; the handler does not run`, async ({ send, state, admit, key }) => {
        const cases = [
          ['missing', []],
          ['empty', ['']],
          ['overlong', [key('k'.repeat(256))]],
          ['control character', [key('ab\tcd')]],
        ];
        if (profile === 'ofb') cases.push(['over 40', ['k'.repeat(41)]]);
        if (repeatedHeaders) cases.push(['repeated', [key('a-1'), key('a-2')]]);
        for (const [what, keys] of cases) {
          const r = await send({ keys });
          const expected = admit(keys);
          assert.equal(expected.tag, 'refused', what);
          assert.equal(r.status, 400, what);
          assert.deepEqual(r.body, expected.reply.body, what);
        }
        assert.equal(state.runs, 0);
      }, { profile });
    }

    it('two tenants sending the same client key do not interfere', async ({ send, state, key }) => {
      const a = await send({ key: key('shared-1'), tenant: 'tenant-a' });
      const b = await send({ key: key('shared-1'), tenant: 'tenant-b', body: OTHER });
      assert.deepEqual([a.status, b.status], [201, 201]);
      assert.deepEqual(JSON.parse(text(a.body)), { id: 'ord_1', tenant: 'tenant-a' });
      assert.deepEqual(JSON.parse(text(b.body)), { id: 'ord_2', tenant: 'tenant-b' });
      assert.notEqual(state.contexts[0].key, state.contexts[1].key, 'storage keys are tenant-scoped');
      const againA = await send({ key: key('shared-1'), tenant: 'tenant-a' });
      const againB = await send({ key: key('shared-1'), tenant: 'tenant-b', body: OTHER });
      assert.deepEqual([againA.header('idempotent-replayed'), againB.header('idempotent-replayed')], ['true', 'true']);
      assert.deepEqual(againA.body, a.body);
      assert.deepEqual(againB.body, b.body);
      // The same header names, other values: each replay restores its own.
      assert.deepEqual([againA.header('location'), againB.header('location')], ['/orders/ord_1', '/orders/ord_2']);
      assert.equal(state.runs, 2);
    });

    it('a handler that throws: the core’s 500 (no stack trace, no message), the record stays in flight, the retry gets 409', async ({ send, state, core, key }) => {
      const body = '{"mode":"throw"}';
      const failed = await send({ key: key('boom-1'), body });
      assert.equal(failed.status, 500);
      assert.deepEqual(failed.body, core.failed(T).body);
      assert.doesNotMatch(text(failed.body), /ledger|\.js|token|at /);
      const handlerErrors = state.errors.filter((e) => e.context.phase === 'handler');
      assert.equal(handlerErrors.length, 1, 'the error goes to onError');
      assert.match(handlerErrors[0].error.message, /the ledger is down/);
      const again = await send({ key: key('boom-1'), body });
      assert.equal(again.status, 409);
      assert.deepEqual(again.body, core.answer('in-flight', T).body);
      assert.equal(state.runs, 1);
    });

    it('a 503 from the handler is sent but releases the claim: the retry runs the handler again and its 201 is stored', async ({ send, state, key }) => {
      state.unavailable = 1;
      const body = '{"mode":"unavailable"}';
      const first = await send({ key: key('flaky-1'), body });
      assert.deepEqual([first.status, text(first.body)], [503, '{"retry":true}']);
      const second = await send({ key: key('flaky-1'), body });
      assert.equal(second.status, 201);
      assert.equal(second.header('idempotent-replayed'), undefined);
      const third = await send({ key: key('flaky-1'), body });
      assert.deepEqual([third.status, third.header('idempotent-replayed')], [201, 'true']);
      assert.deepEqual(third.body, second.body);
      assert.equal(state.runs, 2);
    });

    it('keys optional: a request without a key runs unguarded, every time', async ({ send, state }) => {
      assert.equal((await send({})).status, 201);
      assert.equal((await send({})).status, 201);
      assert.equal(state.runs, 2);
    }, { keyRequired: false });

    it('a body over maxBodyBytes gets the core’s 413; the handler does not run', async ({ send, state, core, key }) => {
      const big = JSON.stringify({ sku: 'A1', note: 'x'.repeat(5000) });
      const r = await send({ key: key('big-1'), body: big });
      assert.equal(r.status, 413);
      assert.deepEqual(r.body, core.tooLarge(T).body);
      assert.equal(state.runs, 0);
      assert.equal((await send({ key: key('small-1') })).status, 201);
    }, { maxBodyBytes: 1000 });
  });
}
