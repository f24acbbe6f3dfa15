// guard.run, the journal and the queue consumer drive the core's run flow.
// Regressions:
// - a 2-secret keyring through guard.run({ intent }) and through the queue
//   consumer: the intent's own epoch picks the secret, so every attempt before
//   and after the rotation has the same key and the effect runs once (it used
//   to fail with invalid-keyring: the fingerprint ignored the epoch);
// - a step whose record is taken away on every try ends with the core's one
//   bounded, retryable error, `record-vanished`, as in Rust (it used to reach
//   JSON.parse(undefined));
// - a record left in flight by a crash is recovered by guard.run with a
//   look-up: found is replayed, unknown never re-runs the effect.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createGuard, createJournal, createKeyer, memoryStore } from '../src/index.js';
import { idempotentHandler } from '../src/queues/pg-boss.js';

const ROTATION = 1_800_000_000;
const keyring = {
  secrets: [
    { id: '2026-11', activeFrom: 0, secret: '11'.repeat(32) },
    { id: '2026-12', activeFrom: ROTATION, secret: '22'.repeat(32) },
  ],
};
const payload = { creditor_key: 'ana@example.com', amount: '10.00', currency: 'BRL', remittance: 'rent' };
const intent = { tenantId: 'acme', actionType: 'pix.send', payload, intentEpoch: ROTATION - 3_600 };

test('guard.run({ intent }) under a two-secret keyring: one key and one effect across the rotation', async () => {
  const keyer = createKeyer({ keyring });
  let t = ROTATION - 60;
  const guard = createGuard({ keyer, store: memoryStore(), now: () => t });
  const keys = [];
  for (const at of [ROTATION - 60, ROTATION + 60, ROTATION + 7_200]) {
    t = at;
    const r = await guard.run({ intent }, (key) => {
      keys.push(key);
      return { status: 201, contentType: 'application/json', headers: [], body: new TextEncoder().encode('{"id":"pay_1"}') };
    });
    assert.equal(r.response.status, 201);
  }
  assert.equal(keys.length, 1, 'one effect across the rotation');
  // The key of the secret active at the intent's epoch: the first secret alone gives it.
  const first = createKeyer({ secret: '11'.repeat(32) });
  assert.equal(keys[0], first.derive(intent));
  assert.deepEqual(
    keyer.intentAttempt(intent),
    { key: first.derive(intent), fingerprint: first.fingerprint('acme', 'pix.send', payload), tenantId: 'acme', actionType: 'pix.send' },
  );
});

test('the queue consumer under a two-secret keyring: fields and intent-hmac jobs run once across the rotation', async () => {
  const keyer = createKeyer({ keyring });
  let t = ROTATION - 60;
  const guard = createGuard({ keyer, store: memoryStore(), now: () => t });
  for (const shape of [intent, { ...intent, intentId: 'intent-7' }]) {
    const runs = [];
    const handler = idempotentHandler({ guard, intent: () => shape, effect: (key) => runs.push(key) && { paid: key } });
    for (const at of [ROTATION - 60, ROTATION + 60]) {
      t = at;
      const result = await handler([{ id: `job-${at}`, data: {} }]);
      assert.equal(typeof result.paid, 'string');
    }
    assert.equal(runs.length, 1, `${shape.intentId ?? 'fields'}: one effect`);
    assert.equal(runs[0], keyer.intentAttempt(shape).key);
  }
});

/** A memory store whose records are taken away just before their owner completes them. */
function takenAway() {
  const inner = memoryStore();
  return {
    kind: 'taken-away',
    insert: (r) => inner.insert(r),
    get: (k) => inner.get(k),
    complete: (c) => {
      inner.release({ key: c.key, ownerToken: c.ownerToken });
      return inner.complete(c);
    },
    replace: (r) => inner.replace(r),
    release: (r) => inner.release(r),
    list: (s, n) => inner.list(s, n),
    purge: (n) => inner.purge(n),
  };
}

test('a step superseded on every try ends with record-vanished (retryable), after three claims', async () => {
  const journal = createJournal({ store: takenAway(), keyer: createKeyer({ keyring }) });
  let samples = 0;
  const error = await journal
    .step({ tenantId: 'acme', intentId: 'run-1', intentEpoch: ROTATION }, 'plan', () => ({ sample: ++samples }))
    .catch((e) => e);
  assert.equal(error.name, 'IntentkeyError', String(error));
  assert.equal(error.code, 'record-vanished');
  assert.match(error.message, /try again/);
  assert.equal(samples, 3, 'one step per claim, three claims');
});

test('guard.run with a look-up recovers a crashed attempt once stale: found is replayed, unknown never re-runs', async () => {
  const keyer = createKeyer({ secret: 'ab'.repeat(32) });
  let t = 1_700_000_000;
  const store = memoryStore();
  const guard = createGuard({ keyer, store, now: () => t, staleAfterSeconds: 60 });
  const input = { intent: { ...intent, intentEpoch: t } };
  // A first attempt crashed mid-effect: its record stays in flight.
  await assert.rejects(guard.run(input, () => { throw new Error('crashed'); }), /crashed/);
  let runs = 0;
  const effect = () => ++runs && { status: 201, contentType: 'application/json', headers: [], body: new Uint8Array() };
  const busy = await guard.run(input, effect, { lookup: () => 'unknown' });
  assert.equal(busy.outcome, 'in-flight');
  assert.equal(busy.recovery.outcome, 'not-due');
  t += 120;
  const unknown = await guard.run(input, effect, { lookup: () => 'unknown', readYourWrites: true });
  assert.equal(unknown.outcome, 'in-flight');
  assert.equal(unknown.recovery.action, 'check-later');
  t += 600;
  const found = await guard.run(input, effect, {
    lookup: () => ({ found: { status: 201, contentType: 'application/json', headers: [], body: new TextEncoder().encode('{"id":"p"}') } }),
  });
  assert.equal(found.outcome, 'done');
  assert.equal(found.recovered, true);
  assert.equal(new TextDecoder().decode(found.response.body), '{"id":"p"}');
  assert.equal(runs, 0, 'the effect never ran again');
  await assert.rejects(guard.run(input, effect, { lookp: () => 'unknown' }), /unknown option lookp/);
});
