// The HTTP middleware, under node:http and under Express 5, on the memory and
// better-sqlite3 stores (pg.test.js runs it on PostgreSQL). Every status and
// problem body is the core's, and so is what a handler's answer means: a 429 or
// 503 releases the claim (a retry runs the handler again), a throw leaves it in
// flight (409 on repeat), anything else is stored and replayed.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { IntentkeyError, claims, createGuard, createKeyer, idempotency, memoryStore, sqliteStore } from '../src/index.js';
import { request, serve } from './support/http.js';

const keyer = createKeyer({ secret: '5c'.repeat(32) });
const BODY = '{"creditor_key":"123.456.789-09","amount":"10.50","currency":"BRL","request_id":"a"}';
const SAME = '{"currency":"brl","amount":10.5,"creditor_key":"12345678909","request_id":"b"}';
const OTHER = '{"creditor_key":"123.456.789-09","amount":"10.51","currency":"BRL"}';

const core = {
  missing: (header = 'Idempotency-Key') => claims.missingKeyAnswer(header),
  inFlight: () => claims.answerFor({ outcome: 'in-flight' }),
  conflict: () => claims.answerFor({ outcome: 'payload-conflict' }),
};

/** A node:http app: the middleware, then a handler the test steers. */
async function nodeApp(store, options = {}) {
  const guard = createGuard({ store, keyer });
  const mw = idempotency({ guard, tenantId: async () => 'tenant-1', actionType: 'pix.send', ...options });
  const state = { runs: 0, gate: null, errors: [], respond: null };
  const server = await serve((req, res) =>
    mw(req, res, async (err) => {
      if (err) {
        state.errors.push(err);
        res.statusCode = err.status ?? 500;
        res.end(`error: ${err.message}`);
        return;
      }
      state.runs++;
      if (state.gate) await state.gate;
      if (state.respond) return state.respond(req, res);
      res.setHeader('X-Handler', 'yes');
      res.writeHead(201, { 'Content-Type': 'application/json' });
      res.write('{"id":"pay_');
      res.write(String(state.runs));
      res.end(`","key":"${req.idempotencyKey}"}`);
    }),
  );
  return { server, state };
}

const stores = {
  memory: () => ({ store: memoryStore(), close() {} }),
  'better-sqlite3': () => {
    const dir = mkdtempSync(join(tmpdir(), 'intentkey-http-'));
    const store = sqliteStore(join(dir, 'r.db'));
    return {
      store,
      close() {
        store.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
};

for (const [label, open] of Object.entries(stores)) {
  describe(`node:http middleware on ${label}`, () => {
    const it = (name, fn, options) =>
      test(name, async () => {
        const { store, close } = open();
        const { server, state } = await nodeApp(store, options);
        try {
          await fn(server, state, store);
        } finally {
          await server.close();
          close();
        }
      });

    it('owned, then replayed with Idempotent-Replayed: true; the handler runs once', async (server, state) => {
      const first = await request(server, { key: 'h-1', body: BODY });
      assert.equal(first.status, 201);
      assert.equal(first.headers['x-handler'], 'yes');
      assert.equal(first.headers['content-type'], 'application/json');
      assert.equal(first.headers['idempotent-replayed'], undefined);
      assert.deepEqual(JSON.parse(first.body), { id: 'pay_1', key: 'h-1' });
      const again = await request(server, { key: 'h-1', body: SAME }); // same intent, reformatted
      assert.equal(again.status, 201);
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.equal(again.headers['content-type'], 'application/json');
      assert.equal(again.body, first.body);
      assert.equal(state.runs, 1);
    });

    it('a missing key: the core’s 400 problem; the handler does not run', async (server, state) => {
      const r = await request(server, { body: BODY });
      assert.equal(r.status, 400);
      assert.equal(r.headers['content-type'], 'application/problem+json');
      assert.equal(r.body, core.missing().body);
      assert.equal((await request(server, { key: '', body: BODY })).status, 400);
      assert.equal(state.runs, 0);
    });

    it('same key, other payload: the core’s 422 problem', async (server, state) => {
      await request(server, { key: 'h-2', body: BODY });
      const r = await request(server, { key: 'h-2', body: OTHER });
      assert.equal(r.status, 422);
      assert.equal(r.headers['content-type'], 'application/problem+json');
      assert.equal(r.headers['idempotent-replayed'], undefined);
      assert.equal(r.body, core.conflict().body);
      assert.equal(state.runs, 1);
    });

    it('a repeat while the handler runs: the core’s 409 problem', async (server, state, store) => {
      let open;
      state.gate = new Promise((r) => {
        open = r;
      });
      const slow = request(server, { key: 'h-3', body: BODY });
      while ((await store.get('h-3')) === null) await new Promise((r) => setTimeout(r, 1));
      const busy = await request(server, { key: 'h-3', body: BODY });
      assert.equal(busy.status, 409);
      assert.equal(busy.headers['content-type'], 'application/problem+json');
      assert.equal(busy.body, core.inFlight().body);
      open();
      assert.equal((await slow).status, 201);
      assert.equal(state.runs, 1);
    });

    it('an error response is stored and replayed', async (server, state) => {
      state.respond = (req, res) => {
        res.statusCode = 402;
        res.setHeader('Content-Type', 'application/problem+json');
        res.end('{"title":"insufficient funds"}');
      };
      const first = await request(server, { key: 'h-4', body: BODY });
      assert.equal(first.status, 402);
      const again = await request(server, { key: 'h-4', body: BODY });
      assert.equal(again.status, 402);
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.equal(again.body, '{"title":"insufficient funds"}');
      assert.equal(state.runs, 1);
    });

    it('a body the keyer refuses goes to next(err) as the core’s IntentkeyError', async (server, state) => {
      const r = await request(server, { key: 'h-5', body: '[1,2]' });
      assert.equal(r.status, 500);
      assert.equal(state.errors.length, 1);
      assert.ok(state.errors[0] instanceof IntentkeyError);
      assert.equal(state.errors[0].code, 'invalid-payload');
      assert.equal(state.runs, 0);
    });

    it('a body over the limit goes to next(err) with status 413', async (server, state) => {
      const r = await request(server, { key: 'h-6', body: `{"remittance":"${'x'.repeat(300_000)}"}` });
      assert.equal(r.status, 413);
      assert.equal(state.runs, 0);
    }, { limit: 1000 });

    it('required: false lets requests without a key through unguarded', async (server, state) => {
      const r = await request(server, { body: BODY });
      assert.equal(r.status, 201);
      assert.equal((await request(server, { body: BODY })).status, 201);
      assert.equal(state.runs, 2);
    }, { required: false });

    it('a 429 (or 503) is sent but released: the retry runs the handler again, and its 201 is stored', async (server, state, store) => {
      state.respond = (req, res) => {
        res.statusCode = state.runs === 1 ? 429 : state.runs === 2 ? 503 : 201;
        res.setHeader('Content-Type', 'application/json');
        res.end(JSON.stringify({ run: state.runs }));
      };
      const busy = await request(server, { key: 'h-429', body: BODY });
      assert.deepEqual([busy.status, busy.headers['idempotent-replayed']], [429, undefined]);
      assert.equal(await createGuard({ store }).inspect('h-429'), null, 'released: no record');
      assert.equal((await request(server, { key: 'h-429', body: BODY })).status, 503);
      const ok = await request(server, { key: 'h-429', body: BODY });
      assert.deepEqual([ok.status, JSON.parse(ok.body)], [201, { run: 3 }]);
      const replay = await request(server, { key: 'h-429', body: BODY });
      assert.deepEqual([replay.status, replay.headers['idempotent-replayed'], replay.body], [201, 'true', ok.body]);
      assert.equal(state.runs, 3);
    });

    it('a handler that throws leaves the record in flight: the error goes to next(err), a repeat gets 409', async (server, state, store) => {
      state.respond = async () => {
        throw new Error('the bank timed out');
      };
      const failed = await request(server, { key: 'h-throw', body: BODY });
      assert.equal(failed.status, 500);
      assert.equal(failed.body, 'error: the bank timed out');
      assert.equal(state.errors.length, 1);
      assert.equal((await createGuard({ store }).inspect('h-throw')).status, 'in_flight');
      const again = await request(server, { key: 'h-throw', body: BODY });
      assert.equal(again.status, 409);
      assert.equal(again.body, core.inFlight().body);
      assert.equal(state.runs, 1);
    });

    it('another header name', async (server, state) => {
      const r = await request(server, { body: BODY, headers: { 'x-request-key': 'h-7' } });
      assert.equal(r.status, 201);
      const missing = await request(server, { key: 'h-7', body: BODY });
      assert.equal(missing.status, 400);
      assert.equal(missing.body, core.missing('X-Request-Key').body);
      assert.equal(state.runs, 1);
    }, { header: 'X-Request-Key' });
  });
}

describe('Express 5', () => {
  async function app(withParser) {
    const guard = createGuard({ store: memoryStore(), keyer });
    const a = express();
    a.set('env', 'test'); // finalhandler: no stack traces on stderr
    let runs = 0;
    const stack = [];
    if (withParser) stack.push(express.json({ verify: (req, res, buf) => (req.rawBody = buf) }));
    const guarded = idempotency({ guard, tenantId: (req) => req.get('x-tenant') ?? 'tenant-1' });
    stack.push(guarded);
    a.post('/payments', ...stack, (req, res) => {
      runs++;
      const body = typeof req.body === 'string' ? JSON.parse(req.body) : req.body;
      if (body.amount === '0.00') {
        res.status(402).json({ error: 'amount must be positive' });
        return;
      }
      if (body.amount === '6.66') throw new Error('the ledger is down');
      res.status(201).set('Location', `/payments/${runs}`).json({ id: `pay_${runs}`, key: req.idempotencyKey });
    });
    a.use(guarded.onError);
    const server = await serve(a);
    return { server, runs: () => runs, guard };
  }

  for (const withParser of [true, false]) {
    test(`owned, replayed (errors too), 422, 400 (${withParser ? 'after express.json with rawBody' : 'reading the body itself'})`, async () => {
      const { server, runs, guard } = await app(withParser);
      try {
        const first = await request(server, { key: 'e-1', body: BODY });
        assert.equal(first.status, 201);
        assert.equal(first.headers.location, '/payments/1');
        assert.match(first.headers['content-type'], /^application\/json/);
        assert.deepEqual(JSON.parse(first.body), { id: 'pay_1', key: 'e-1' });
        const again = await request(server, { key: 'e-1', body: SAME });
        assert.equal(again.status, 201);
        assert.equal(again.headers['idempotent-replayed'], 'true');
        assert.equal(again.body, first.body);
        assert.equal(again.headers['content-type'], first.headers['content-type']);
        assert.equal(again.headers.location, '/payments/1', 'Location is replayed');
        // Another tenant, same key: the fingerprint covers the tenant, so it conflicts.
        const tenant = await request(server, { key: 'e-1', body: BODY, headers: { 'x-tenant': 'tenant-2' } });
        assert.equal(tenant.status, 422);
        assert.equal((await request(server, { key: 'e-1', body: OTHER })).status, 422);
        assert.equal((await request(server, { body: BODY })).status, 400);
        const declined = '{"creditor_key":"123.456.789-09","amount":"0.00","currency":"BRL"}';
        assert.equal((await request(server, { key: 'e-2', body: declined })).status, 402);
        const replayed = await request(server, { key: 'e-2', body: declined });
        assert.equal(replayed.status, 402);
        assert.equal(replayed.headers['idempotent-replayed'], 'true');
        assert.deepEqual(JSON.parse(replayed.body), { error: 'amount must be positive' });
        assert.equal(replayed.headers.location, undefined);
        assert.equal(runs(), 2);
        // A route that throws: Express answers 500, the record stays in flight (onError).
        const broken = '{"creditor_key":"123.456.789-09","amount":"6.66","currency":"BRL"}';
        assert.equal((await request(server, { key: 'e-3', body: broken })).status, 500);
        assert.equal((await guard.inspect('e-3')).status, 'in_flight');
        assert.equal((await request(server, { key: 'e-3', body: broken })).status, 409);
        assert.equal(runs(), 3);
      } finally {
        await server.close();
      }
    });
  }
});
