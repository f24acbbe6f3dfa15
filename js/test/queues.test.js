// The queue consumers without servers: the memory store, and the jobs BullMQ and
// pg-boss would hand over, made by hand. What each adapter tells its queue (a
// result, delayed until the instant the core named, UnrecoverableError; a throw
// for pg-boss to retry), and the typed errors for bad options and bad intents.
// The same consumers on the real queues: bullmq.test.js, pg-boss.test.js.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DelayedError, UnrecoverableError } from 'bullmq';
import { createGuard, createKeyer, memoryStore } from '../src/index.js';
import { idempotentProcessor, IntentkeyQueueError } from '../src/queues/bullmq.js';
import { idempotentHandler } from '../src/queues/pg-boss.js';

const keyer = createKeyer({ secret: 'ab'.repeat(32) });
const payment = (amount = '10.00') => ({ creditor_key: 'payee@example.com', amount, currency: 'BRL' });
const T0 = 1_700_000_000;

function setup({ clock = () => T0, ...overrides } = {}) {
  const guard = createGuard({ store: memoryStore(), keyer, staleAfterSeconds: 30, now: () => clock() });
  const runs = [];
  const options = {
    guard,
    intent: (job) => ({ tenantId: 't1', intentId: job.data.intentId, actionType: 'pix.send', payload: job.data.payment }),
    effect: (key, job) => {
      runs.push(job.id);
      return { by: job.id };
    },
    ...overrides,
  };
  return { guard, runs, options };
}

/** A job as BullMQ hands it to a processor, recording moveToDelayed. */
function bullJob(id, data) {
  const job = { id, data, delayedTo: null };
  job.moveToDelayed = async (timestamp, token) => {
    assert.equal(token, 'lock-token');
    job.delayedTo = timestamp;
  };
  return job;
}

test('BullMQ processor: the result, then the stored result for every other job of the intent', async () => {
  const { runs, options } = setup();
  const processor = idempotentProcessor(options);
  const data = { intentId: 'i-1', payment: payment() };
  assert.deepEqual(await processor(bullJob('1', data), 'lock-token'), { by: '1' });
  assert.deepEqual(await processor(bullJob('2', data), 'lock-token'), { by: '1' });
  assert.deepEqual(runs, ['1']);
});

test('BullMQ processor: a payload conflict is UnrecoverableError carrying the typed error', async () => {
  const { options } = setup();
  const processor = idempotentProcessor(options);
  await processor(bullJob('1', { intentId: 'i-1', payment: payment() }), 'lock-token');
  const error = await processor(bullJob('2', { intentId: 'i-1', payment: payment('11.00') }), 'lock-token').catch((e) => e);
  assert.ok(error instanceof UnrecoverableError);
  assert.equal(error.code, 'payload-conflict');
  assert.ok(error.cause instanceof IntentkeyQueueError);
  assert.match(error.message, /^intentkey: job 2: payload-conflict: /);
});

test('BullMQ processor: in flight elsewhere, the job is moved to delayed until the core’s due time (DelayedError, no attempt spent)', async () => {
  let t = T0;
  const { guard, options } = setup({ clock: () => t });
  // Another delivery owns the intent and is still running.
  let release;
  const running = guard.run(
    { key: keyer.intentKey('t1', 'i-1'), fingerprint: keyer.fingerprint('t1', 'pix.send', payment()), tenantId: 't1', actionType: 'pix.send' },
    () => new Promise((resolve) => (release = resolve)),
  );
  await new Promise((resolve) => setImmediate(resolve));
  t = T0 + 5;
  const processor = idempotentProcessor(options);
  const job = bullJob('2', { intentId: 'i-1', payment: payment() });
  const before = Date.now();
  await assert.rejects(processor(job, 'lock-token'), (e) => e instanceof DelayedError);
  // Due 30 s after the claim, 25 s from now: delayed that long (plus a margin), not retried at once.
  assert.ok(job.delayedTo >= before + 25_000 && job.delayedTo <= Date.now() + 25_000 + 1000, String(job.delayedTo - before));
  release({ status: 200, contentType: 'application/json', body: '{"by":"1"}' });
  await running;
});

test('pg-boss handler: a batch runs every job; a failed one is thrown after the others ran', async () => {
  const { runs, options } = setup();
  const handler = idempotentHandler(options);
  const job = (id, intentId, amount) => ({ id, name: 'q', data: { intentId, payment: payment(amount) } });
  assert.deepEqual(await handler([job('a', 'i-1')]), { by: 'a' });
  const error = await handler([job('b', 'i-1', '12.00'), job('c', 'i-2'), job('d', 'i-1')]).catch((e) => e);
  assert.ok(error instanceof IntentkeyQueueError);
  assert.equal(error.code, 'payload-conflict');
  assert.deepEqual(runs, ['a', 'c'], 'the conflict ran nothing, the batch went on');
});

test('bad options and bad intents get typed errors naming the field and what to do', async () => {
  const { guard, options } = setup();
  assert.throws(() => idempotentProcessor(), /takes \{ guard, intent, effect/);
  assert.throws(() => idempotentProcessor({ ...options, guard: {} }), /guard must be one createGuard/);
  assert.throws(
    () => idempotentHandler({ ...options, guard: createGuard({ store: memoryStore() }) }),
    /the guard needs a keyer/,
  );
  assert.throws(() => idempotentProcessor({ ...options, intent: 'jobId' }), /intent must be a function .*never the job id/);
  assert.throws(() => idempotentProcessor({ ...options, effect: undefined }), /effect must be a function/);
  assert.throws(() => idempotentProcessor({ ...options, readYourWrites: true }), /readYourWrites needs the lookup/);
  assert.throws(() => idempotentProcessor({ ...options, readYourWrites: 'yes', lookup: () => 'absent' }), /readYourWrites must be a boolean/);
  assert.equal(guard.keyer, keyer);

  const processor = (intent) => idempotentProcessor({ ...options, intent });
  const fails = async (intent, pattern, code) => {
    const e = await processor(intent)(bullJob('9', { intentId: 'i-9', payment: payment() }), 'lock-token').catch((x) => x);
    assert.ok(e instanceof UnrecoverableError, String(e));
    assert.match(e.message, pattern);
    if (code !== undefined) assert.equal(e.code, code);
  };
  await fails(() => undefined, /intent\(job\) must return \{ tenantId, intentId, actionType, payload \}/);
  await fails(() => ({ tenantId: 't1', actionType: 'pix.send', payload: payment() }), /returned no intentEpoch .*or give intentId/);
  await fails(() => ({ tenantId: 't1', intentId: 7, actionType: 'pix.send', payload: payment() }), /intentId must be the recorded intent's id/);
  await fails(() => ({ tenantId: 't1', intentId: 'i', actionType: 'pix.send' }), /returned no payload/);
  await fails(() => ({ tenantId: 't1', intentId: '', actionType: 'pix.send', payload: payment() }), /intent/, 'invalid-intent-id');
  await fails(() => ({ tenantId: 't1', intentId: 'i', actionType: 'pix.send', payload: { amount: 'ten' } }), /decimal/, 'invalid-decimal');
  await assert.rejects(idempotentProcessor(options)({ id: '1', data: {} }), /called without a BullMQ job/);
  await assert.rejects(idempotentHandler(options)({ id: '1', data: {} }), /called without pg-boss jobs/);
});

test('an effect whose result is not JSON: the delivery fails and the record stays in flight for recovery (the effect did run)', async () => {
  const { guard, options } = setup({ effect: () => ({ big: 1n }) });
  const error = await idempotentHandler(options)([{ id: 'a', name: 'q', data: { intentId: 'i-1', payment: payment() } }]).catch((e) => e);
  assert.ok(error instanceof TypeError);
  assert.match(error.message, /the effect’s result must be JSON/);
  assert.equal((await guard.inspect(keyer.intentKey('t1', 'i-1'))).status, 'in_flight');
});
