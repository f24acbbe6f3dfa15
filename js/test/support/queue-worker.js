// One worker process of the queue kill trials (support/queue-trials.js spawns
// and restarts these). It consumes the trial queue (BullMQ or pg-boss) with the
// intentkey consumer (mode `intentkey`) or with a naive processor that runs the
// effect on every delivery (mode `naive`, the negative control).
//
// The effect writes a row into trial_effects, which has NO unique constraint, so
// every run of the effect is counted. Each trial kills its worker exactly once
// (the first delivery to claim the trial in trial_kills), with SIGKILL, at the
// trial's kill point:
//  - `effect`: after the effect's row is written, before the guard records the
//    completion (the record stays in_flight: recovery must find the row);
//  - `ack`: after the guard recorded the completion, before the queue is told
//    (the queue redelivers a job whose record is done: it must replay).
// Whatever else this process was running dies with it, at whatever point it was.
import pg from 'pg';
import { createGuard, createKeyer, pgStore, redisStore } from '../../src/index.js';

const config = JSON.parse(process.env.IKQ_TRIAL);
const pool = new pg.Pool({ ...config.pg, max: config.concurrency + 2 });
pool.on('error', () => {});

/** SIGKILLs this process if this is the first time the trial reaches its kill point. */
async function killPoint(job, point) {
  const { trial, kill } = job.data;
  if (kill !== point) return;
  const r = await pool.query('INSERT INTO trial_kills (trial, point, pid) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [
    trial,
    point,
    process.pid,
  ]);
  if (r.rowCount === 1) process.kill(process.pid, 'SIGKILL');
}

async function effect(key, job) {
  const { trial } = job.data;
  await pool.query('INSERT INTO trial_effects (key, trial, pid) VALUES ($1, $2, $3)', [key, trial, process.pid]);
  await killPoint(job, 'effect');
  return { trial, key };
}

async function lookup(key) {
  const { rows } = await pool.query('SELECT trial FROM trial_effects WHERE key = $1 LIMIT 1', [key]);
  return rows.length === 0 ? 'absent' : { found: { trial: rows[0].trial, key } };
}

/** The processor the queue calls: (job, token) => result. */
let process1;
if (config.mode === 'naive') {
  process1 = async (delivered) => {
    const job = Array.isArray(delivered) ? delivered[0] : delivered; // pg-boss hands a batch (of 1)
    const result = await effect(`naive-${job.data.intentId}`, job);
    await killPoint(job, 'ack');
    return result;
  };
} else {
  const keyer = createKeyer({ secret: config.secret });
  const store = config.guardStore === 'redis' ? await redisStore({ url: config.claimsUrl }) : await pgStore(pool);
  const guard = createGuard({ store, keyer, staleAfterSeconds: config.staleAfterSeconds });
  const options = {
    guard,
    intent: (job) => ({ tenantId: 'trials', intentId: job.data.intentId, actionType: 'pix.send', payload: job.data.payment }),
    effect,
    lookup,
    readYourWrites: true, // PostgreSQL: a committed row is seen by the next query
    onOutcome: ({ job, outcome }) =>
      pool.query('INSERT INTO trial_events (trial, outcome, pid) VALUES ($1, $2, $3)', [job.data.trial, outcome, process.pid]),
  };
  if (config.queue === 'bullmq') {
    const { idempotentProcessor } = await import('../../src/queues/bullmq.js');
    const inner = idempotentProcessor(options);
    process1 = async (job, token) => {
      const result = await inner(job, token);
      await killPoint(job, 'ack');
      return result;
    };
  } else {
    const { idempotentHandler } = await import('../../src/queues/pg-boss.js');
    const inner = idempotentHandler(options);
    process1 = async (jobs) => {
      const result = await inner(jobs);
      await killPoint(jobs[0], 'ack');
      return result;
    };
  }
}

if (config.queue === 'bullmq') {
  const { Worker } = await import('bullmq');
  const worker = new Worker(config.queueName, process1, {
    connection: config.redis,
    prefix: config.prefix,
    concurrency: config.concurrency,
    lockDuration: config.lockDurationMs,
    stalledInterval: config.stalledIntervalMs,
    maxStalledCount: 1_000_000,
    drainDelay: 1,
  });
  worker.on('error', () => {}); // a lost lock after a redelivery, a closing connection: the trial counts the outcome
} else {
  const { default: PgBoss } = await import('pg-boss');
  const boss = new PgBoss({ ...config.pgBoss, schema: config.bossSchema, supervise: false, schedule: false, max: config.concurrency + 1 });
  boss.on('error', () => {});
  await boss.start();
  for (let i = 0; i < config.concurrency; i++) {
    await boss.work(config.queueName, { pollingIntervalSeconds: 0.5, batchSize: 1 }, (jobs) => process1(jobs));
  }
}
process.send?.('ready');
