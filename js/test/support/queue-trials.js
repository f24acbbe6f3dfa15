// The queue kill trials, and what the queue tests share: Redis (db 0, a BullMQ
// prefix of its own per run, deleted afterwards; never FLUSHALL), pg-boss in a
// schema of its own per run (dropped afterwards), and the supervisor.
//
// A trial is one job whose first worker is SIGKILLed between the effect and the
// queue's acknowledgement (support/queue-worker.js, at the trial's kill point,
// drawn at random: `effect` or `ack`). The supervisor keeps `workers` worker
// processes alive, restarting each that dies, until every job is completed (or
// failed) in the queue; the queue redelivers the jobs of the dead (BullMQ: a
// stalled job, its lock expired; pg-boss: an expired job) to the replacements.
import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { pgStore, redisStore } from '../../src/index.js';
import { freshSchema, PG_CONFIG } from './pg.js';

export const REDIS = Object.freeze({
  host: process.env.REDIS_HOST ?? '127.0.0.1',
  port: Number(process.env.REDIS_PORT ?? 6379),
  db: 0, // db 0 only, with a prefix per run: other suites use db 1..15
  maxRetriesPerRequest: null, // BullMQ workers need it
});

export const SECRET = 'ab'.repeat(32);

/** A payment the default (payments) policy classifies. */
export const payment = (i, amount = '10.00') => ({ creditor_key: `payee-${i}@example.com`, amount, currency: 'BRL' });

/** null when Redis answers PING, else why not. */
async function redisUnreachable() {
  const { default: IORedis } = await import('ioredis');
  const redis = new IORedis({ ...REDIS, lazyConnect: true, connectTimeout: 3000, maxRetriesPerRequest: 1, retryStrategy: () => null });
  redis.on('error', () => {});
  try {
    await redis.connect();
    await redis.ping();
    return null;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  } finally {
    redis.disconnect();
  }
}

/**
 * Like pgAvailability (support/pg.js), for Redis: `{ skip: false }`, or outside CI
 * `{ skip: message }` with a SKIPPED: line; with CI=true an unreachable server throws.
 */
export async function redisAvailability(file) {
  const why = await redisUnreachable();
  if (why === null) return { skip: false };
  const where = `${REDIS.host}:${REDIS.port}/0`;
  if (process.env.CI === 'true') {
    throw new Error(`Redis at ${where} is unreachable (${why}) and CI=true: the BullMQ tests cannot run. Start redis-server.`);
  }
  const message = `Redis at ${where} is unreachable (${why}); BullMQ tests SKIPPED (outside CI; with CI=true they fail)`;
  console.log(`SKIPPED: ${file}: ${message}`);
  return { skip: `SKIPPED: ${message}` };
}

/** A BullMQ prefix of its own for one run. */
export const freshPrefix = () => `ikq-${randomBytes(6).toString('hex')}`;

/** Deletes every key under `prefix` (SCAN, then DEL): the run's queues, and nothing else. */
export async function dropPrefix(prefix) {
  const { default: IORedis } = await import('ioredis');
  const redis = new IORedis({ ...REDIS, maxRetriesPerRequest: 3 });
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500);
      if (keys.length > 0) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

/** A pg-boss schema name of its own for one run; dropBossSchema removes it. */
export const freshBossSchema = () => `ikq_boss_${randomBytes(6).toString('hex')}`;

export async function dropBossSchema(name) {
  const c = new pg.Client(PG_CONFIG);
  await c.connect();
  try {
    await c.query(`DROP SCHEMA IF EXISTS ${name} CASCADE`);
  } finally {
    await c.end();
  }
}

/** A small seeded generator (mulberry32), so a run's kill points can be replayed. */
function random(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs the kill trials on one queue and returns what happened (checked by the caller).
 * @param {{
 *   queue: 'bullmq' | 'pg-boss',
 *   mode: 'intentkey' | 'naive',
 *   trials: number,
 *   workers?: number,
 *   concurrency?: number,
 *   staleAfterSeconds?: number,
 *   timeoutMs?: number,
 *   seed?: number,
 * }} o
 */
export async function runTrials(o) {
  const { queue, mode, trials } = o;
  const workers = o.workers ?? 4;
  const concurrency = o.concurrency ?? 4;
  const staleAfterSeconds = o.staleAfterSeconds ?? 3;
  const timeoutMs = o.timeoutMs ?? 400_000; // a hang guard, not a speed target
  // Where the guard keeps its records: PostgreSQL (pgStore) or Redis (redisStore, in
  // the run's own prefix, beside the BullMQ queue).
  const guardStore = o.guardStore ?? 'pg';
  const seed = o.seed ?? Number(process.env.IKQ_SEED ?? randomBytes(4).readUInt32LE(0));
  const draw = random(seed);
  const started = performance.now();

  const schema = await freshSchema();
  const pool = new pg.Pool({ ...schema.config, max: 4 });
  const prefix = freshPrefix();
  const bossSchema = freshBossSchema();
  const queueName = 'trials';
  const children = new Set();
  let stopping = false;
  let parentBoss = null;
  let bullQueue = null;
  const deaths = { SIGKILL: 0, other: [] };
  let spawns = 0;
  try {
    await pool.query('CREATE TABLE trial_effects (key text NOT NULL, trial int NOT NULL, pid int NOT NULL)'); // no unique constraint
    await pool.query('CREATE TABLE trial_kills (trial int PRIMARY KEY, point text NOT NULL, pid int NOT NULL)');
    await pool.query('CREATE TABLE trial_events (trial int NOT NULL, outcome text NOT NULL, pid int NOT NULL)');
    if (mode === 'intentkey') await pgStore(pool); // the schema once, before the workers start

    const jobs = Array.from({ length: trials }, (_, trial) => ({
      trial,
      intentId: `intent-${trial}`,
      kill: draw() < 0.5 ? 'effect' : 'ack',
      payment: payment(trial),
    }));

    if (queue === 'bullmq') {
      const { Queue } = await import('bullmq');
      bullQueue = new Queue(queueName, { connection: REDIS, prefix });
      await bullQueue.addBulk(jobs.map((data) => ({ name: 'pay', data, opts: { attempts: 1 } })));
    } else {
      const { default: PgBoss } = await import('pg-boss');
      // The parent supervises: maintenance expires the jobs of dead workers every second.
      parentBoss = new PgBoss({
        ...PG_CONFIG,
        schema: bossSchema,
        supervise: true,
        schedule: false,
        maintenanceIntervalSeconds: 1,
        monitorStateIntervalSeconds: 1,
        max: 3,
      });
      parentBoss.on('error', () => {});
      await parentBoss.start();
      await parentBoss.createQueue(queueName, { retryLimit: 1000, retryDelay: 1, retryBackoff: false, expireInSeconds: 2 });
      for (const data of jobs) await parentBoss.send(queueName, data);
    }

    const config = {
      queue,
      mode,
      concurrency,
      staleAfterSeconds,
      secret: SECRET,
      pg: schema.config,
      queueName,
      redis: REDIS,
      prefix,
      lockDurationMs: 1500,
      stalledIntervalMs: 500,
      pgBoss: PG_CONFIG,
      bossSchema,
      guardStore,
      claimsUrl: `redis://${REDIS.host}:${REDIS.port}/0?prefix=${prefix}:claims`,
    };
    const env = { ...process.env, IKQ_TRIAL: JSON.stringify(config) };
    const workerPath = new URL('./queue-worker.js', import.meta.url);
    const spawn = () => {
      spawns++;
      const child = fork(workerPath, [], { env, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
      let stderr = '';
      child.stderr.on('data', (d) => {
        stderr += d;
      });
      children.add(child);
      child.on('exit', (code, signal) => {
        children.delete(child);
        if (stopping) return;
        if (signal === 'SIGKILL') deaths.SIGKILL++;
        else deaths.other.push({ code, signal, stderr: stderr.slice(-2000) });
        spawn();
      });
    };
    for (let i = 0; i < workers; i++) spawn();

    // Until every job is completed or failed in the queue.
    let counts;
    for (;;) {
      counts = await queueCounts();
      if (counts.completed + counts.failed >= trials) break;
      if (deaths.other.length > 0) break;
      if (performance.now() - started > timeoutMs) break;
      await sleep(250);
    }
    stopping = true;
    await Promise.all([...children].map((c) => new Promise((resolve) => {
      c.once('exit', resolve);
      c.kill('SIGKILL');
    })));
    const wallMs = Math.round(performance.now() - started);

    const effects = (await pool.query('SELECT trial, count(*)::int AS n FROM trial_effects GROUP BY trial')).rows;
    const perTrial = new Map(effects.map((r) => [r.trial, r.n]));
    const kills = (await pool.query('SELECT point, count(*)::int AS n FROM trial_kills GROUP BY point')).rows;
    const events = (await pool.query('SELECT outcome, count(*)::int AS n FROM trial_events GROUP BY outcome')).rows;
    let records = [];
    if (mode === 'intentkey' && guardStore === 'pg') {
      records = (await pool.query('SELECT status, count(*)::int AS n FROM intentkey_records GROUP BY status')).rows;
    } else if (mode === 'intentkey') {
      const claims = await redisStore({ url: `redis://${REDIS.host}:${REDIS.port}/0?prefix=${prefix}:claims` });
      try {
        for (const status of ['in-flight', 'done', 'needs-reconciliation']) {
          const n = (await claims.list(status, trials + 10)).length;
          if (n > 0) records.push({ status: status.replaceAll('-', '_'), n });
        }
      } finally {
        await claims.close();
      }
    }
    const results = await queueResults();
    let duplicates = 0;
    let missing = 0;
    for (let t = 0; t < trials; t++) {
      const n = perTrial.get(t) ?? 0;
      if (n === 0) missing++;
      else duplicates += n - 1;
    }
    const wrongResults = results.filter((r) => r.state === 'completed' && r.value?.trial !== r.trial).length;
    return {
      queue,
      mode,
      seed,
      trials,
      workers,
      concurrency,
      staleAfterSeconds,
      wallMs,
      guardStore: mode === 'intentkey' ? guardStore : undefined,
      spawns,
      sigkills: deaths.SIGKILL,
      otherDeaths: deaths.other,
      kills: Object.fromEntries(kills.map((r) => [r.point, r.n])),
      events: Object.fromEntries(events.map((r) => [r.outcome, r.n])),
      records: Object.fromEntries(records.map((r) => [r.status, r.n])),
      completed: counts.completed,
      failed: counts.failed,
      lost: trials - results.filter((r) => r.state === 'completed').length,
      duplicates,
      trialsWithDuplicates: [...perTrial.values()].filter((n) => n > 1).length,
      missingEffects: missing,
      wrongResults,
      failures: results.filter((r) => r.state !== 'completed').slice(0, 5),
    };
  } finally {
    stopping = true;
    for (const c of children) c.kill('SIGKILL');
    if (bullQueue !== null) {
      await bullQueue.obliterate({ force: true }).catch(() => {});
      await bullQueue.close();
      await dropPrefix(prefix);
    }
    if (parentBoss !== null) await parentBoss.stop({ graceful: false, wait: true }).catch(() => {});
    if (queue === 'pg-boss') await dropBossSchema(bossSchema);
    await pool.end();
    await schema.drop();
  }

  async function queueCounts() {
    if (queue === 'bullmq') {
      const c = await bullQueue.getJobCounts('completed', 'failed');
      return { completed: c.completed, failed: c.failed };
    }
    const { rows } = await pool.query(
      `SELECT count(*) FILTER (WHERE state = 'completed')::int AS completed, count(*) FILTER (WHERE state = 'failed')::int AS failed
       FROM ${bossSchema}.job WHERE name = $1`,
      [queueName],
    );
    return rows[0];
  }

  /** Each job: its trial, its state, its result. */
  async function queueResults() {
    if (queue === 'bullmq') {
      const all = await bullQueue.getJobs(['completed', 'failed', 'active', 'wait', 'delayed', 'paused', 'prioritized'], 0, -1);
      return Promise.all(
        all.map(async (j) => ({ trial: j.data.trial, state: await j.getState(), value: j.returnvalue, reason: j.failedReason })),
      );
    }
    const { rows } = await pool.query(`SELECT (data->>'trial')::int AS trial, state, output FROM ${bossSchema}.job WHERE name = $1`, [
      queueName,
    ]);
    return rows.map((r) => ({ trial: r.trial, state: r.state, value: r.output, reason: r.state === 'failed' ? r.output : undefined }));
  }
}

/** One line of figures for a report (and BENCHMARKS.md). */
export function describeTrials(r) {
  const e = r.events;
  return (
    `${r.queue} ${r.mode}${r.guardStore === undefined ? '' : ` (records in ${r.guardStore === 'pg' ? 'PostgreSQL' : 'Redis'})`}: ${r.trials} trials (seed ${r.seed}), ${r.workers} workers × ${r.concurrency} in ${(r.wallMs / 1000).toFixed(1)} s; ` +
    `kills at effect ${r.kills.effect ?? 0}, at ack ${r.kills.ack ?? 0} (${r.sigkills} SIGKILLs, ${r.spawns} worker starts); ` +
    `duplicates ${r.duplicates}, lost ${r.lost}, missing effects ${r.missingEffects}; ` +
    (r.mode === 'intentkey'
      ? `ran ${e.ran ?? 0}, replayed ${e.replayed ?? 0}, recovered found ${e.recovered ?? 0}, recovered absent (re-executed) ${e['re-executed'] ?? 0}, ` +
        `waits ${e.waiting ?? 0}; records ${JSON.stringify(r.records)}`
      : `completed ${r.completed}`)
  );
}

/** The checks every intentkey trial run must pass. */
export function assertNoDuplicateNoLoss(r, minKills) {
  assert.deepEqual(r.otherDeaths, [], 'no worker died except by the trials’ SIGKILL');
  // A trial whose earlier delivery died with another trial's worker (after its
  // effect) is recovered without reaching its own kill point: hence >= minKills, not = trials.
  // Two trials in one worker may both reach their kill points before it dies: SIGKILLs <= kills.
  assert.ok(r.sigkills <= r.kills.effect + r.kills.ack, 'each SIGKILL is at a trial’s kill point');
  assert.ok(r.sigkills >= minKills, `at least ${minKills} workers killed between an effect and its ack: ${describeTrials(r)}`);
  assert.ok(r.kills.effect + r.kills.ack >= minKills, `at least ${minKills} kill trials: ${describeTrials(r)}`);
  assert.ok(r.kills.effect > 0 && r.kills.ack > 0, 'both kill points were exercised');
  assert.equal(r.duplicates, 0, `duplicate effects: ${describeTrials(r)}`);
  assert.equal(r.missingEffects, 0, 'every intent has its effect');
  assert.equal(r.lost, 0, `every job completed in the queue: ${JSON.stringify(r.failures)}`);
  assert.equal(r.failed, 0);
  assert.equal(r.wrongResults, 0, 'every job’s result is its own intent’s');
  assert.deepEqual(r.records, { done: r.trials }, 'every record done');
  assert.ok((r.events.replayed ?? 0) > 0, 'ack kills were replayed');
  assert.ok((r.events.recovered ?? 0) > 0, 'effect kills were recovered from the destination');
}
