// intentkey/pg-boss on the real PostgreSQL server: pg-boss 10 in a schema of its
// own per run (dropped afterwards), the guard's records in another (dropped
// afterwards). The consumer's behaviours (support/queue-suite.js), then the kill
// trials (support/queue-trials.js): worker processes SIGKILLed between the effect
// and the acknowledgement, their jobs expired by pg-boss's maintenance and
// retried by replacements, 0 duplicate effects and 0 lost jobs; and the negative
// control, a naive handler under the same trials, which does run effects twice.
// PostgreSQL unreachable: fails with CI=true, skipped (SKIPPED: line) otherwise.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import PgBoss from 'pg-boss';
import { idempotentHandler } from '../src/queues/pg-boss.js';
import { PG_CONFIG, pgAvailability } from './support/pg.js';
import { queueSuite } from './support/queue-suite.js';
import { assertNoDuplicateNoLoss, describeTrials, dropBossSchema, freshBossSchema, runTrials } from './support/queue-trials.js';

const { skip } = await pgAvailability('pg-boss.test.js');

queueSuite('pg-boss', {
  skip,
  async driver() {
    const schema = freshBossSchema();
    const boss = new PgBoss({ ...PG_CONFIG, schema, supervise: false, schedule: false, max: 4 });
    boss.on('error', () => {});
    await boss.start();
    let n = 0;
    return {
      // pg-boss has no delay that spares a retry: a delivery that waits for its intent throws and is retried.
      inFlightRetries: 30,
      async start(options, { concurrency = 1 } = {}) {
        const name = `q${++n}`;
        await boss.createQueue(name);
        const handler = idempotentHandler(options);
        for (let i = 0; i < concurrency; i++) await boss.work(name, { pollingIntervalSeconds: 0.5 }, handler);
        return {
          async add(data, { retries = 0 } = {}) {
            return boss.send(name, data, { retryLimit: retries, retryDelay: 1, retryBackoff: false });
          },
          async job(id) {
            const job = await boss.getJobById(name, id);
            return {
              state: job.state,
              value: job.output,
              reason: job.state === 'failed' ? JSON.stringify(job.output) : undefined,
              raw: job,
            };
          },
          async stop() {
            await boss.offWork(name);
          },
        };
      },
      permanent(failed, { retries }) {
        // pg-boss 10 cannot fail a job with retries left: each retry met the same conflict and ran nothing.
        assert.equal(failed.raw.retryCount, retries);
        assert.equal(failed.value.code, 'payload-conflict');
        assert.equal(failed.value.name, 'IntentkeyQueueError');
      },
      waited(done) {
        assert.ok(done.raw.retryCount >= 1, 'pg-boss retried the delivery that waited');
      },
      async close() {
        await boss.stop({ graceful: false, wait: true });
        await dropBossSchema(schema);
      },
    };
  },
});

test('pg-boss kill trials: 220 jobs, at least 100 workers SIGKILLed after the effect or after the completion, before the ack; 0 duplicates, 0 lost', { skip, timeout: 480_000 }, async () => {
  const r = await runTrials({ queue: 'pg-boss', mode: 'intentkey', trials: 220, workers: 4, concurrency: 3 });
  console.log(`queue kill trials: ${describeTrials(r)}`);
  assertNoDuplicateNoLoss(r, 100);
});

test('pg-boss negative control: a naive handler under the same kills runs effects twice', { skip, timeout: 120_000 }, async () => {
  const r = await runTrials({ queue: 'pg-boss', mode: 'naive', trials: 8, workers: 2, concurrency: 2 });
  console.log(`queue kill trials (negative control): ${describeTrials(r)}`);
  assert.equal(r.lost, 0);
  assert.ok(r.duplicates > 0, `the naive handler ran no effect twice: ${describeTrials(r)}`);
});
