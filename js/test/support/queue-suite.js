// The behaviours of a queue consumer, on a real queue (BullMQ on Redis, pg-boss on
// PostgreSQL) with the guard's records in PostgreSQL (pgStore). One suite, run by
// test/bullmq.test.js and test/pg-boss.test.js through a driver:
//   driver.start({ consumer options, concurrency }) -> { add(data, { retries }), job(id), stop() }
//   job(id) -> { state: 'completed' | 'failed' | 'waiting' | 'delayed' | 'active' | …, value, deliveries, reason }
//   driver.permanent: how the queue fails a job for good (checked by the conflict test)
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { createGuard, createKeyer, pgStore, refused } from '../../src/index.js';
import { freshSchema } from './pg.js';
import { payment, SECRET } from './queue-trials.js';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const nowSeconds = () => Math.floor(Date.now() / 1000);

/** Polls until `check()` answers something truthy (then returns it), or fails after `ms`. */
export async function until(check, what, ms = 20_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/**
 * @param {string} name the queue
 * @param {{ skip: string | false, driver: () => Promise<object> }} o
 */
export function queueSuite(name, { skip, driver: makeDriver }) {
  describe(`queue consumer on ${name}`, { skip }, () => {
    let schema;
    let pool;
    let guard;
    let keyer;
    let driver;
    const STALE = 3;

    before(async () => {
      schema = await freshSchema();
      pool = new pg.Pool({ ...schema.config, max: 6 });
      keyer = createKeyer({ secret: SECRET });
      guard = createGuard({ store: await pgStore(pool), keyer, staleAfterSeconds: STALE });
      driver = await makeDriver();
    });
    after(async () => {
      await driver?.close();
      await pool?.end();
      await schema?.drop();
    });

    /** A consumer whose effect counts its runs per key (and can be held on a gate). */
    function consumer(overrides = {}) {
      const runs = new Map();
      const events = [];
      const options = {
        guard,
        intent: (job) => ({ tenantId: 't1', intentId: job.data.intentId, actionType: 'pix.send', payload: job.data.payment }),
        effect: async (key, job) => {
          runs.set(key, (runs.get(key) ?? 0) + 1);
          return { paid: job.data.intentId, by: job.id, run: runs.get(key) };
        },
        onOutcome: (e) => {
          events.push({ job: String(e.job.id), outcome: e.outcome, reason: e.reason, code: e.error?.code });
        },
        ...overrides,
      };
      return { options, runs, events };
    }

    const keyOf = (intentId) => keyer.intentKey('t1', intentId);
    const total = (runs) => [...runs.values()].reduce((a, b) => a + b, 0);

    test('a duplicate delivery (the producer re-enqueued the intent: a new job id) replays the stored result; the effect ran once', async () => {
      const c = consumer();
      const q = await driver.start(c.options);
      try {
        const first = await q.add({ intentId: 'dup-1', payment: payment(1) });
        const one = await until(async () => (await q.job(first)).state === 'completed' && q.job(first), 'the first job');
        const second = await q.add({ intentId: 'dup-1', payment: payment(1) });
        assert.notEqual(second, first, 'the re-enqueued job has a new job id');
        const two = await until(async () => (await q.job(second)).state === 'completed' && q.job(second), 'the second job');
        assert.deepEqual(two.value, one.value, 'the stored result, replayed');
        assert.deepEqual(one.value, { paid: 'dup-1', by: first, run: 1 });
        assert.deepEqual([...c.runs], [[keyOf('dup-1'), 1]]);
        assert.deepEqual(
          c.events.map((e) => [e.job, e.outcome]),
          [
            [first, 'ran'],
            [second, 'replayed'],
          ],
        );
      } finally {
        await q.stop();
      }
    });

    test('fields mode: a re-enqueued payload with reformatted fields and new attempt metadata is the same intent', async () => {
      const c = consumer({
        intent: (job) => ({ tenantId: 't1', actionType: 'pix.send', payload: job.data.payment, intentEpoch: job.data.recordedAt }),
      });
      const q = await driver.start(c.options);
      try {
        const recordedAt = 1_700_000_000;
        const a = await q.add({ recordedAt, intentId: 'f-1', payment: { ...payment(2), request_id: 'r-1' } });
        await until(async () => (await q.job(a)).state === 'completed', 'the first job');
        const b = await q.add({
          recordedAt,
          intentId: 'f-1',
          payment: { creditor_key: 'PAYEE-2@example.com', amount: '10.0', currency: ' brl ', request_id: 'r-2', attempt: 2 },
        });
        const done = await until(async () => (await q.job(b)).state === 'completed' && q.job(b), 'the second job');
        assert.deepEqual(done.value, { paid: 'f-1', by: a, run: 1 });
        assert.equal(total(c.runs), 1);
        assert.deepEqual(
          c.events.map((e) => e.outcome),
          ['ran', 'replayed'],
        );
      } finally {
        await q.stop();
      }
    });

    test('a payload conflict (one intent id, another payload) fails the job for good, with a typed error, and runs nothing', async () => {
      const c = consumer();
      const q = await driver.start(c.options);
      try {
        const a = await q.add({ intentId: 'conflict-1', payment: payment(3) });
        await until(async () => (await q.job(a)).state === 'completed', 'the first job');
        const b = await q.add({ intentId: 'conflict-1', payment: payment(3, '99.00') }, { retries: 2 });
        const failed = await until(async () => (await q.job(b)).state === 'failed' && q.job(b), 'the conflicting job to fail', 30_000);
        assert.match(failed.reason, /payload-conflict/);
        driver.permanent(failed, { retries: 2 });
        assert.equal(total(c.runs), 1, 'the conflicting job ran nothing');
        assert.ok(c.events.some((e) => e.job === b && e.outcome === 'payload-conflict'));
      } finally {
        await q.stop();
      }
    });

    test('a delivery that finds its intent in flight is retried later by the queue, then completes with the first run’s result', async () => {
      let open;
      const gate = new Promise((resolve) => {
        open = resolve;
      });
      let started;
      const running = new Promise((resolve) => {
        started = resolve;
      });
      const c = consumer();
      const effect = c.options.effect;
      c.options.effect = async (key, job) => {
        started();
        await gate; // the first delivery is still running when the second arrives
        return effect(key, job);
      };
      const q = await driver.start(c.options, { concurrency: 2 });
      try {
        const a = await q.add({ intentId: 'busy-1', payment: payment(4) });
        await running;
        const b = await q.add({ intentId: 'busy-1', payment: payment(4) }, { retries: driver.inFlightRetries });
        await until(() => c.events.some((e) => e.job === b && e.outcome === 'waiting'), 'the second delivery to wait');
        const waiting = await q.job(b);
        assert.notEqual(waiting.state, 'completed');
        assert.notEqual(waiting.state, 'failed');
        open();
        const first = await until(async () => (await q.job(a)).state === 'completed' && q.job(a), 'the first job');
        const second = await until(async () => (await q.job(b)).state === 'completed' && q.job(b), 'the second job', 30_000);
        assert.deepEqual(second.value, first.value);
        assert.equal(total(c.runs), 1, 'the effect ran once');
        const bOutcomes = c.events.filter((e) => e.job === b).map((e) => e.outcome);
        assert.equal(bOutcomes.at(-1), 'replayed');
        assert.ok(bOutcomes.slice(0, -1).every((o) => o === 'waiting'), JSON.stringify(bOutcomes));
        driver.waited(second);
      } finally {
        open();
        await q.stop();
      }
    });

    test('recovery of a stale in-flight claim: found completes from the destination, absent re-executes once, unknown never re-executes', async () => {
      // Three claims left in flight a minute ago by an owner that crashed (an ambiguous throw).
      const past = createGuard({ store: guard.store, keyer, now: () => nowSeconds() - 60 });
      for (const id of ['rec-found', 'rec-absent', 'rec-unknown']) {
        await assert.rejects(
          past.run(
            { key: keyOf(id), fingerprint: keyer.fingerprint('t1', 'pix.send', payment(5)), tenantId: 't1', actionType: 'pix.send' },
            () => {
              throw new Error('the worker crashed');
            },
          ),
          /crashed/,
        );
      }
      const answers = new Map([
        [keyOf('rec-found'), { found: { paid: 'rec-found', by: 'the destination' } }],
        [keyOf('rec-absent'), 'absent'],
        [keyOf('rec-unknown'), 'unknown'],
      ]);
      const asked = [];
      const c = consumer({
        lookup: async (key, job) => {
          asked.push(job.data.intentId);
          return answers.get(key);
        },
        readYourWrites: true,
      });
      const q = await driver.start(c.options, { concurrency: 3 });
      try {
        const ids = {};
        for (const id of ['rec-found', 'rec-absent', 'rec-unknown']) {
          ids[id] = await q.add({ intentId: id, payment: payment(5) }, { retries: driver.inFlightRetries });
        }
        const found = await until(async () => (await q.job(ids['rec-found'])).state === 'completed' && q.job(ids['rec-found']), 'found');
        assert.deepEqual(found.value, { paid: 'rec-found', by: 'the destination' }, 'the destination’s answer is the result');
        const absent = await until(async () => (await q.job(ids['rec-absent'])).state === 'completed' && q.job(ids['rec-absent']), 'absent');
        assert.deepEqual(absent.value, { paid: 'rec-absent', by: ids['rec-absent'], run: 1 });
        await until(() => c.events.some((e) => e.job === ids['rec-unknown'] && e.reason?.includes('could not tell')), 'unknown');
        await sleep(1500);
        const unknown = await q.job(ids['rec-unknown']);
        assert.ok(!['completed', 'failed'].includes(unknown.state), `unknown stays pending in the queue (${unknown.state})`);
        assert.deepEqual([...c.runs], [[keyOf('rec-absent'), 1]], 'only absent re-executed, once; found and unknown never ran');
        const record = await guard.inspect(keyOf('rec-unknown'));
        assert.equal(record.status, 'in_flight');
        assert.equal(record.lookups, 1);
        assert.ok(record.nextLookupAt > nowSeconds() + 30, 'the core backs the next look-up off');
        assert.equal((await guard.inspect(keyOf('rec-found'))).status, 'done');
        assert.deepEqual(
          Object.fromEntries(['rec-found', 'rec-absent'].map((id) => [id, c.events.find((e) => e.job === ids[id] && e.outcome !== 'waiting').outcome])),
          { 'rec-found': 'recovered', 'rec-absent': 're-executed' },
        );
        assert.equal(asked.filter((x) => x === 'rec-unknown').length, 1, 'unknown was asked once, and is not asked again before the backoff');
      } finally {
        await q.stop();
      }
    });

    test('a refused effect (nothing happened) releases the claim and the queue retries it', async () => {
      let calls = 0;
      const c = consumer();
      const effect = c.options.effect;
      c.options.effect = async (key, job) => {
        calls++;
        if (calls === 1) throw refused(null, 'the destination answered 429: nothing was done');
        return effect(key, job);
      };
      const q = await driver.start(c.options);
      try {
        const a = await q.add({ intentId: 'refused-1', payment: payment(6) }, { retries: 2 });
        const done = await until(async () => (await q.job(a)).state === 'completed' && q.job(a), 'the retried job', 30_000);
        assert.deepEqual(done.value, { paid: 'refused-1', by: a, run: 1 });
        assert.equal(calls, 2);
        assert.deepEqual(
          c.events.map((e) => e.outcome),
          ['refused', 'ran'],
        );
        assert.equal((await guard.inspect(keyOf('refused-1'))).status, 'done');
      } finally {
        await q.stop();
      }
    });

    test('an intent that cannot be keyed (a field the policy does not classify) fails the job with the core’s typed error', async () => {
      const c = consumer();
      const q = await driver.start(c.options);
      try {
        const a = await q.add({ intentId: 'bad-1', payment: { ...payment(7), surprise: 1 } }, { retries: 2 });
        const failed = await until(async () => (await q.job(a)).state === 'failed' && q.job(a), 'the job to fail', 30_000);
        assert.match(failed.reason, /unclassified fields/);
        assert.equal(total(c.runs), 0);
        assert.ok(c.events.length > 0);
        for (const e of c.events) assert.deepEqual([e.outcome, e.code], ['invalid-intent', 'unclassified-fields']);
      } finally {
        await q.stop();
      }
    });
  });
}

