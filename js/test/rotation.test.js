// Secret rotation through the npm API: a keyring of secrets with ids and
// activation epochs.
//
// - createKeyer({ keyring }): each intent is keyed with the secret active at
//   its own epoch (the same key as that secret alone gives); calls that carry
//   no epoch are refused once there are two secrets; a dropped secret's
//   intents get `secret-retired`.
// - The Express adapter with a keyring, in a retry storm with a real retrying
//   client (undici's RetryAgent, retrying 409s): the secret changes while the
//   storm runs. Every order's handler runs once, retries after the rotation
//   replay the answer of the run that began before it, another payload gets
//   422. With no window (windowSeconds: 0) the same storm runs handlers twice.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import pg from 'pg';
import { createKeyer, init } from 'intentkey';
import { idempotency } from 'intentkey/express';
import { memoryStore } from 'intentkey/stores/memory';
import { pgStore } from 'intentkey/stores/pg';
import { retryingAgent, send } from './support/real-clients.js';
import { freshSchema, pgAvailability } from './support/pg.js';

const OLD = '11'.repeat(32);
const NEW = '22'.repeat(32);
const ROTATION = 1_800_000_000;
const WINDOW = 3_600;
const pg_ = await pgAvailability('rotation.test.js');

const keyring = (windowSeconds = WINDOW) => ({
  secrets: [
    { id: '2026-11', activeFrom: 0, secret: OLD },
    { id: '2026-12', activeFrom: ROTATION, secret: NEW },
  ],
  windowSeconds,
});

before(() => init());

describe('createKeyer with a keyring', () => {
  const payload = { creditor_key: 'a@b.c', amount: '10.00', currency: 'BRL' };
  const intent = (intentEpoch) => ({ tenantId: 't1', actionType: 'pix.send', payload, intentEpoch });

  test('an intent is keyed with the secret active at its own epoch', () => {
    const ring = createKeyer({ keyring: keyring() });
    const old = createKeyer({ secret: OLD });
    const fresh = createKeyer({ secret: NEW });
    assert.equal(ring.derive(intent(ROTATION - 1)), old.derive(intent(ROTATION - 1)));
    assert.equal(ring.derive(intent(ROTATION)), fresh.derive(intent(ROTATION)));
    assert.notEqual(old.derive(intent(ROTATION)), fresh.derive(intent(ROTATION)));
    assert.equal(ring.intentKeyAt('t1', 'i-1', ROTATION - 1), old.intentKey('t1', 'i-1'));
    assert.equal(ring.intentKeyAt('t1', 'i-1', ROTATION, 40), fresh.intentKey('t1', 'i-1', 40));
    assert.equal(
      ring.fingerprintAt('t1', 'pix.send', payload, ROTATION - 1),
      old.fingerprint('t1', 'pix.send', payload),
    );
  });

  test('what cannot pick a secret is refused with a code that says so', () => {
    const ring = createKeyer({ keyring: keyring() });
    assert.throws(() => ring.intentKey('t1', 'i-1'), { code: 'invalid-keyring' });
    assert.throws(() => ring.fingerprint('t1', 'pix.send', payload), { code: 'invalid-keyring' });
    const dropped = createKeyer({ keyring: { secrets: [{ id: '2026-12', activeFrom: ROTATION, secret: NEW }] } });
    assert.throws(() => dropped.derive(intent(ROTATION - 1)), { code: 'secret-retired', field: 'intent_epoch' });
    assert.throws(() => createKeyer({ secret: OLD, keyring: keyring() }), { code: 'invalid-keyring' });
    assert.throws(() => createKeyer({ keyring: { secrets: [] } }), { code: 'invalid-keyring' });
    assert.throws(
      () => createKeyer({ keyring: { secrets: [{ id: 'a', activeFrom: 0, secret: OLD }, { id: 'a', activeFrom: 9, secret: NEW }] } }),
      (e) => e.code === 'invalid-keyring' && !e.message.includes(OLD) && !e.message.includes(NEW),
    );
    assert.throws(() => createKeyer({ keyring: { secrets: [{ id: 'a', activeFrom: 1.5, secret: OLD }] } }), {
      code: 'invalid-keyring',
    });
    assert.throws(() => createKeyer({ keyring: { secrets: [{ id: 'a', activeFrom: 0, secret: 'abcd' }] } }), {
      code: 'secret-too-short',
    });
  });
});

/** An Express app guarded with a keyring on `store`, its clock in `clock.now`. */
async function app(store, ring, clock) {
  const runs = new Map();
  const server = express();
  const guarded = idempotency({ keyring: ring, store, now: () => clock.now, ttlSeconds: WINDOW });
  server.post('/orders/:id', guarded, express.json(), async (req, res) => {
    const id = req.params.id;
    runs.set(id, (runs.get(id) ?? 0) + 1);
    // The secret changes once every order's first run has begun, while
    // they are all still in flight.
    if (runs.size === ORDERS && clock.now < ROTATION) clock.now = ROTATION + 30;
    // The effect takes a while: the storm's duplicates arrive meanwhile.
    await new Promise((resolve) => setTimeout(resolve, 40 + (Number(id.slice(6)) % 5) * 40));
    res.status(201).json({ id, amount: req.body.amount, run: runs.get(id) });
  });
  server.use(guarded.onError);
  const listening = await new Promise((resolve) => {
    const s = server.listen(0, '127.0.0.1', () => resolve(s));
  });
  return {
    runs,
    url: `http://127.0.0.1:${listening.address().port}`,
    close: () => new Promise((r) => listening.close(r)),
  };
}

const ORDERS = 30;

/**
 * The storm: each order is sent 3 times at once by a client that retries 409s;
 * the secret changes as soon as every order's first run has begun; then each
 * order is retried once more, and every third with another amount.
 */
async function storm(store, ring) {
  const clock = { now: ROTATION - 30 };
  const server = await app(store, ring, clock);
  const dispatcher = retryingAgent();
  const post = (i, amount) =>
    send(`${server.url}/orders/order-${i}`, {
      headers: { 'content-type': 'application/json', 'idempotency-key': `"order-${i}"` },
      body: JSON.stringify({ amount }),
      dispatcher,
    });
  try {
    const first = [];
    for (let i = 0; i < ORDERS; i++) for (let k = 0; k < 3; k++) first.push(post(i, '10.00').then((r) => [i, r]));
    const answers = await Promise.all(first);
    assert.equal(clock.now, ROTATION + 30, 'the secret changed during the storm');
    const later = await Promise.all(Array.from({ length: ORDERS }, (_, i) => post(i, '10.00').then((r) => [i, r])));
    const changed = await Promise.all(
      Array.from({ length: ORDERS / 3 }, (_, j) => post(3 * j, '99.00').then((r) => r.status)),
    );
    return { runs: server.runs, answers, later, changed };
  } finally {
    await dispatcher.close();
    await server.close();
  }
}

function checkOnce({ runs, answers, later, changed }) {
  for (let i = 0; i < ORDERS; i++) assert.equal(runs.get(`order-${i}`), 1, `order-${i} ran ${runs.get(`order-${i}`)} times`);
  const byOrder = new Map();
  for (const [i, r] of [...answers, ...later]) {
    assert.equal(r.status, 201, `order-${i}: ${r.status} ${r.text()}`);
    const text = r.text();
    if (byOrder.has(i)) assert.equal(text, byOrder.get(i), `order-${i} answered two different bodies`);
    byOrder.set(i, text);
  }
  for (const [i, r] of later) assert.equal(r.headers['idempotent-replayed'], 'true', `order-${i} after the rotation`);
  assert.deepEqual(changed, Array(ORDERS / 3).fill(422));
}

describe('a rotation in the middle of a retry storm (Express, undici RetryAgent)', () => {
  test('memory store: every order runs once across the rotation', async () => {
    checkOnce(await storm(memoryStore(), keyring()));
  });

  test('memory store, no window: the same storm runs orders twice (what the window is for)', async () => {
    const { runs } = await storm(memoryStore(), keyring(0));
    const twice = [...runs.values()].filter((n) => n === 2).length;
    assert.equal(twice, ORDERS, `with no look-up of the previous key, ${twice} of ${ORDERS} orders ran twice`);
  });

  describe('PostgreSQL', { skip: pg_.skip }, () => {
    let pool;
    let schema;
    after(async () => {
      await pool?.end();
      await schema?.drop();
    });
    test('every order runs once across the rotation', async () => {
      schema = await freshSchema();
      pool = new pg.Pool({ ...schema.config, max: 8 });
      checkOnce(await storm(await pgStore(pool), keyring()));
    });
  });
});
