// A completion the store could not take (store-unavailable: a database
// restarting) is tried again on the core's one schedule
// (claims.finishRetryDelaysMs(), about 3 s; axum uses the same), so the
// answer that went out is stored and a retry of the key replays it instead of
// getting 409 until recovery. onError hears of each failed try. Past the
// schedule the record stays in flight (never released).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import { claims, memoryStore } from '../src/index.js';
import { idempotency } from '../src/adapters/express.js';
import { serve } from './support/http.js';
import { SECRET, T } from './support/adapter-suite.js';

/** An asynchronous store over memory whose next `failures` completions fail as unreachable. */
function flaky(failures) {
  const inner = memoryStore();
  const state = { failures, completes: 0 };
  const down = () => Object.assign(new Error('the store is restarting'), { payload: { tag: 'unavailable', val: 'the store is restarting' } });
  const store = { kind: 'flaky' };
  for (const op of ['insert', 'get', 'replace', 'release', 'list', 'purge']) store[op] = async (...args) => inner[op](...args);
  store.complete = async (c) => {
    state.completes++;
    if (state.failures > 0) {
      state.failures--;
      throw down();
    }
    return inner.complete(c);
  };
  return { store, state };
}

async function app(store, errors) {
  let runs = 0;
  const a = express();
  const guarded = idempotency({ secret: SECRET, store, now: () => T, onError: (e, context) => errors.push(context) });
  a.post('/orders', guarded, express.json(), (req, res) => res.status(201).json({ run: ++runs }));
  a.use(guarded.onError);
  const server = await serve(a);
  const post = async () => {
    const r = await fetch(`http://127.0.0.1:${server.port}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': 'order-1' },
      body: '{"sku":"A1"}',
    });
    return { status: r.status, replayed: r.headers.get('idempotent-replayed'), body: await r.text() };
  };
  return { post, runs: () => runs, close: () => server.close() };
}

/** Waits until `check()` holds (the completion runs after the answer went out). */
async function until(check, ms = 5000) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('the core names one retry schedule of about 3 s', () => {
  const delays = claims.finishRetryDelaysMs();
  assert.deepEqual(delays, [100, 200, 400, 800, 1600]);
});

test('a completion that failed twice is tried again and stored: the retry replays, never 409', async () => {
  const { store, state } = flaky(2);
  const errors = [];
  const server = await app(store, errors);
  try {
    const first = await server.post();
    assert.equal(first.status, 201);
    await until(() => state.completes === 3);
    assert.deepEqual(errors.map((c) => [c.phase, c.retryInMs]), [['complete', 100], ['complete', 200]]);
    const again = await server.post();
    assert.deepEqual([again.status, again.replayed, again.body], [201, 'true', first.body]);
    assert.equal(server.runs(), 1);
  } finally {
    await server.close();
  }
});

test('past the schedule the record stays in flight (409), never released', async () => {
  const { store, state } = flaky(100);
  const errors = [];
  const server = await app(store, errors);
  try {
    assert.equal((await server.post()).status, 201);
    await until(() => state.completes === 6, 8000);
    await until(() => errors.length === 6);
    assert.equal(errors.at(-1).retryInMs, undefined, 'the last failure is reported without a retry');
    assert.equal((await server.post()).status, 409);
    assert.equal(server.runs(), 1);
  } finally {
    await server.close();
  }
});
