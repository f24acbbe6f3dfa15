// intentkey/bullmq on real servers: BullMQ on Redis (db 0, a prefix of its own,
// deleted afterwards) with the guard's records in PostgreSQL (a schema of its
// own, dropped afterwards). The consumer's behaviours (support/queue-suite.js),
// then the kill trials (support/queue-trials.js): worker processes SIGKILLed
// between the effect and the acknowledgement, the stalled jobs redelivered to
// replacements, 0 duplicate effects and 0 lost jobs; and the negative control, a
// naive processor under the same trials, which does run effects twice.
// Redis or PostgreSQL unreachable: fails with CI=true, skipped (SKIPPED: line) otherwise.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Queue, Worker } from 'bullmq';
import { idempotentProcessor } from '../src/queues/bullmq.js';
import { pgAvailability } from './support/pg.js';
import { queueSuite } from './support/queue-suite.js';
import {
  REDIS,
  assertNoDuplicateNoLoss,
  describeTrials,
  dropPrefix,
  freshPrefix,
  redisAvailability,
  runTrials,
} from './support/queue-trials.js';

const skip = (await pgAvailability('bullmq.test.js')).skip || (await redisAvailability('bullmq.test.js')).skip;

queueSuite('BullMQ', {
  skip,
  async driver() {
    const prefix = freshPrefix();
    let n = 0;
    return {
      // attempts: 1. A delivery that waits for its intent is moved to delayed, which burns no attempt.
      inFlightRetries: 0,
      async start(options, { concurrency = 1 } = {}) {
        const name = `q${++n}`;
        const queue = new Queue(name, { connection: REDIS, prefix });
        const worker = new Worker(name, idempotentProcessor(options), { connection: REDIS, prefix, concurrency, drainDelay: 1 });
        worker.on('error', () => {});
        return {
          async add(data, { retries = 0 } = {}) {
            const job = await queue.add('job', data, { attempts: retries + 1, backoff: { type: 'fixed', delay: 100 } });
            return job.id;
          },
          async job(id) {
            const job = await queue.getJob(id);
            return { state: await job.getState(), value: job.returnvalue, reason: job.failedReason, raw: job };
          },
          async stop() {
            await worker.close();
            await queue.obliterate({ force: true });
            await queue.close();
          },
        };
      },
      permanent(failed, { retries }) {
        assert.equal(failed.raw.opts.attempts, retries + 1);
        assert.equal(failed.raw.attemptsMade, 1, 'UnrecoverableError: failed at the first attempt, the others unused');
      },
      waited(done) {
        assert.equal(done.raw.opts.attempts, 1, 'a single attempt, and yet completed: waiting burned none');
      },
      async close() {
        await dropPrefix(prefix);
      },
    };
  },
});

test('BullMQ kill trials (the records in Redis beside the queue): 220 jobs, at least 100 workers SIGKILLed after the effect or after the completion, before the ack; 0 duplicates, 0 lost', { skip, timeout: 480_000 }, async () => {
  const r = await runTrials({ queue: 'bullmq', mode: 'intentkey', trials: 220, workers: 4, concurrency: 3, guardStore: 'redis' });
  console.log(`queue kill trials: ${describeTrials(r)}`);
  assertNoDuplicateNoLoss(r, 100);
});

test('BullMQ negative control: a naive processor under the same kills runs effects twice', { skip, timeout: 120_000 }, async () => {
  const r = await runTrials({ queue: 'bullmq', mode: 'naive', trials: 8, workers: 2, concurrency: 2 });
  console.log(`queue kill trials (negative control): ${describeTrials(r)}`);
  assert.equal(r.lost, 0);
  assert.ok(r.duplicates > 0, `the naive processor ran no effect twice: ${describeTrials(r)}`);
});
