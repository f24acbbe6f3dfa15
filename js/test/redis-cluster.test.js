// The guard on a real Redis Cluster (3 masters, 3 replicas: `bash
// scripts/redis-cluster.sh start`; INTENTKEY_REDIS_CLUSTER overrides, see
// support/redis.js) through an ioredis Cluster, in the core's cluster layout:
// the shared store suite, the layout (hash-tagged buckets over every master;
// list and purge visit them all), the URL and its options, WAIT (wait=N: on
// the connection that wrote), NOSCRIPT, the interop script the Rust tests
// run, the BullMQ prefix rule, the races (16 child processes × 1000 keys; 16
// recoverers over the same stale records) and kill trials (an owner killed
// between its effect and its completion, then recovery). Every test has its
// own key prefix and deletes its keys (KEYS on each master, DEL one at a time).
// Unreachable cluster: fails with CI=true, skipped (with a SKIPPED: line) otherwise.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import Redis from 'ioredis';
import { Job, Queue, Worker } from 'bullmq';
import { IntentkeyError, createGuard, createKeyer, jsonResponse } from '../src/index.js';
import { redisStore } from '../src/stores/redis.js';
import { coreSchema, redisLayout } from '../src/stores/schema.js';
import { idempotentProcessor } from '../src/queues/bullmq.js';
import {
  REDIS_CLUSTER_URL,
  clusterAvailability,
  clusterClient,
  freshClusterPrefix,
  keysByMaster,
  processRace,
  redisKillTrials,
  redisTables,
} from './support/redis.js';
import { T0, claimOf, freshStore, storeSuite, witRecord } from './support/store-suite.js';
import { CONTENDERS, KEYS, recoveryRace } from './support/race.js';

const { skip } = await clusterAvailability('redis-cluster.test.js');
const run = promisify(execFile);
const ok = async () => jsonResponse(201, { id: 'pay_1' });

/** Runs fn with a fresh prefix on the cluster and a store on it (the caller's Cluster, options added), then deletes the prefix's keys. */
/**
 * The return value of job `id` once it completed, read from the job itself
 * (BullMQ's waitUntilFinished relies on an event stream notification, which
 * can be missed on a cluster and then waits out its whole timeout); a failed
 * job rejects with its reason, and a job not finished after `ms` rejects
 * naming its state.
 */
async function finished(queue, id, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const job = await Job.fromId(queue, id);
    const state = job === undefined ? 'missing' : await job.getState();
    if (state === 'completed') return job.returnvalue;
    if (state === 'failed') throw new Error(`job ${id} failed: ${job.failedReason}`);
    if (Date.now() > deadline) throw new Error(`job ${id} did not finish within ${ms} ms (state ${state})`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function withPrefix(fn, options = {}) {
  const p = await freshClusterPrefix();
  try {
    const store = await redisStore({ client: p.client, prefix: p.prefix, ...options });
    return await fn({ ...p, store });
  } finally {
    await p.drop();
  }
}

/** The master of each of `keys`' slots ("host:port", from CLUSTER SLOTS). */
async function mastersOf(client, keys) {
  const ranges = await client.cluster('SLOTS');
  return Promise.all(
    keys.map(async (key) => {
      const slot = await client.cluster('KEYSLOT', key);
      const [, , [host, port]] = ranges.find(([from, to]) => slot >= from && slot <= to);
      return `${host}:${port}`;
    }),
  );
}

/** The first bucket index key of each bucket: the core's list calls name one per bucket. */
const bucketKeys = (prefix) => redisLayout.list({ prefix, cluster: true }, 'done', 1).map((call) => call.keys[0]);

storeSuite('Redis Cluster (ioredis Cluster, from a redis+cluster:// URL)', {
  skip,
  open: freshStore(freshClusterPrefix, (p) => redisStore({ url: p.url })),
});

describe('Redis Cluster store', { skip }, () => {
  test('the core’s cluster layout: a record and its bucket’s indexes share one hash tag {prefix:NN}; 16 buckets over all three masters; list merges them oldest first and purge empties them all', async () => {
    // A prefix whose 16 buckets land on every master (each does with probability 1 - 3·(2/3)^16 ≈ 99.5%).
    let p = await freshClusterPrefix();
    for (let tries = 0; new Set(await mastersOf(p.client, bucketKeys(p.prefix))).size < p.client.nodes('master').length; tries++) {
      assert.ok(tries < 20, 'no prefix spreads its buckets over every master');
      await p.drop();
      p = await freshClusterPrefix();
    }
    const { client, prefix } = p;
    try {
      const store = await redisStore({ client, prefix });
      assert.equal(store.cluster, true);
      const layout = { prefix, cluster: true };
      const N = 240;
      const keys = Array.from({ length: N }, (_, i) => `spread-${String(i).padStart(3, '0')}`);
      // Created in reverse key order (the later key, the older record); even keys done, odd ones left in flight.
      for (const [i, key] of keys.entries()) {
        const guard = createGuard({ store, now: () => T0 + N - i, ttlSeconds: 60 });
        const r = await guard
          .run(claimOf(key), async () => {
            if (i % 2 === 1) throw new Error('crashed');
            return jsonResponse(201, {});
          })
          .catch((e) => e);
        assert.equal(i % 2 === 1 ? r.message : r.outcome, i % 2 === 1 ? 'crashed' : 'owned');
      }
      const byMaster = await keysByMaster(client, `{${prefix}:*`);
      assert.equal(byMaster.length, 3, 'three masters');
      for (const [node, ks] of byMaster) assert.ok(ks.some((k) => k.includes('}:rec:')), `master ${node} holds records`);
      const all = byMaster.flatMap(([, ks]) => ks);
      assert.deepEqual(
        all.filter((k) => k.includes('}:rec:')).sort(),
        keys.map((k) => redisLayout.recordKey(layout, k)).sort(),
        'every record, at the key the core names',
      );
      // Every key is in one of the 16 buckets, and each bucket's keys hash to one slot.
      const buckets = new Map();
      for (const k of all) {
        const m = /^\{(.+):(\d\d)\}:(rec:|idx:|exp$)/.exec(k);
        assert.ok(m !== null && m[1] === prefix, k);
        buckets.set(m[2], [...(buckets.get(m[2]) ?? []), k]);
      }
      assert.equal(buckets.size, coreSchema().redisClusterBuckets);
      assert.equal(buckets.size, 16);
      for (const [bucket, ks] of buckets) {
        const slots = new Set(await Promise.all(ks.map((k) => client.cluster('KEYSLOT', k))));
        assert.equal(slots.size, 1, `bucket ${bucket}: one slot`);
      }
      // list: every bucket, merged oldest first (created_at, then key), at most `limit`.
      const oldestFirst = (wanted) => keys.filter((_, i) => i % 2 === wanted).reverse();
      assert.deepEqual((await store.list('in-flight', 1000)).map((r) => r.key), oldestFirst(1));
      assert.deepEqual((await store.list('done', 1000)).map((r) => r.key), oldestFirst(0));
      assert.deepEqual((await store.list('done', 7)).map((r) => r.key), oldestFirst(0).slice(0, 7));
      // purge: every bucket's expired done records, none in flight.
      assert.equal(Number(await store.purge(BigInt(T0))), 0, 'nothing expired yet');
      assert.equal(Number(await store.purge(BigInt(T0 + N + 61))), N / 2);
      assert.deepEqual(await store.list('done', 1000), []);
      assert.equal((await store.list('in-flight', 1000)).length, N / 2);
      const left = (await keysByMaster(client, `{${prefix}:*`)).flatMap(([, ks]) => ks).filter((k) => k.includes('}:rec:'));
      assert.deepEqual(left.sort(), oldestFirst(1).map((k) => redisLayout.recordKey(layout, k)).sort());
    } finally {
      await p.drop();
    }
  });

  test('purge sends a bucket’s call again while it looked at a whole batch: 9,000 expired records (more than the batch of 500 per bucket), all deleted', async () => {
    await withPrefix(async ({ client, prefix, store }) => {
      const { redisBatch } = coreSchema();
      const N = 9000;
      const token = 'a'.repeat(32);
      const response = { status: 201, contentType: 'application/json', headers: [], body: new Uint8Array(0) };
      const keys = Array.from({ length: N }, (_, i) => `purge-${i}`);
      for (let i = 0; i < N; i += 500) {
        await Promise.all(
          keys.slice(i, i + 500).map(async (key) => {
            assert.equal(await store.insert(witRecord(key, token, T0)), true);
            assert.equal(await store.complete({ key, ownerToken: token, response, expiresAt: BigInt(T0 + 60), fast: false }), true);
          }),
        );
      }
      const perBucket = new Map();
      for (const key of keys) {
        const tag = redisLayout.recordKey({ prefix, cluster: true }, key).split('}')[0];
        perBucket.set(tag, (perBucket.get(tag) ?? 0) + 1);
      }
      assert.ok(Math.max(...perBucket.values()) > redisBatch, `a bucket holds more than one batch: ${[...perBucket.values()]}`);
      assert.equal(Number(await store.purge(BigInt(T0 + 61))), N);
      const left = (await keysByMaster(client, `{${prefix}:*`)).flatMap(([, ks]) => ks);
      assert.deepEqual(left, [], 'no record, no index entry left');
    });
  });

  test('from a redis+cluster:// URL naming several nodes (one of them down): the store makes its Cluster and quits it on close(); a Cluster given as { client } stays the caller’s; an unreachable cluster is store-unavailable', async () => {
    await withPrefix(async ({ client, prefix, store }) => {
      const url = `${REDIS_CLUSTER_URL.replace(/\/$/, '')},127.0.0.1:1/?prefix=${prefix}`;
      const own = await redisStore({ url });
      assert.deepEqual([own.cluster, own.client.isCluster, own.prefix], [true, true, prefix]);
      const r = await createGuard({ store: own }).run(claimOf('cfg'), ok);
      assert.equal(r.outcome, 'owned');
      await own.close();
      await new Promise((resolve) => (own.client.status === 'end' ? resolve() : own.client.once('end', resolve)));
      assert.equal((await store.get('cfg')).status, 'done', 'the caller’s store reads what the URL’s wrote');
      await store.close();
      assert.equal(await client.ping(), 'PONG', 'close() leaves the caller’s Cluster open');
      const started = Date.now();
      await assert.rejects(redisStore({ url: 'redis+cluster://127.0.0.1:1,127.0.0.1:2?prefix=p' }), (e) => e.payload?.tag === 'unavailable');
      assert.ok(Date.now() - started < 5000, 'fails fast');
    });
  });

  test('options: an unknown option is refused by name, in the object and in the URL’s query; wait and wait_timeout_ms are checked; a cluster prefix with a brace is the core’s refusal; no password in any message', async () => {
    const refusedAs = (field, pattern) => (e) => {
      assert.ok(e instanceof IntentkeyError, String(e));
      assert.deepEqual([e.code, e.field], ['invalid-argument', field]);
      if (pattern) assert.match(e.message, pattern);
      return true;
    };
    const url = REDIS_CLUSTER_URL;
    await assert.rejects(redisStore({ url, prefx: 'p' }), refusedAs('prefx', /redisStore: `prefx` is not an option; the options are client, url, prefix, wait, waitTimeoutMs/));
    await assert.rejects(redisStore({ url, waitTimeout: 5 }), refusedAs('waitTimeout'));
    await assert.rejects(redisStore({ url: `${url}?prefix=p&prefx=q` }), refusedAs('prefx', /in the URL's query is not an option; the URL takes prefix, wait, wait_timeout_ms/));
    await assert.rejects(redisStore({ url: 'redis://127.0.0.1:6379/2?family=6' }), refusedAs('family'), 'one server too');
    await assert.rejects(redisStore({ url: `${url}?waitTimeoutMs=5` }), refusedAs('waitTimeoutMs', /URL's query/), 'the URL spells it wait_timeout_ms');
    for (const bad of ['0', '-1', 'x', '1.5', '']) await assert.rejects(redisStore({ url: `${url}?wait=${bad}` }), refusedAs('wait'), bad);
    for (const bad of [0, 1.5, '1', null]) await assert.rejects(redisStore({ url, wait: bad }), refusedAs('wait'), String(bad));
    await assert.rejects(redisStore({ url: `${url}?wait=1&wait_timeout_ms=0` }), refusedAs('waitTimeoutMs', /WAIT 0 would block forever/));
    await assert.rejects(redisStore({ url: `${url}?wait_timeout_ms=5` }), refusedAs('waitTimeoutMs', /give `wait`/));
    await assert.rejects(redisStore({ url: `${url}?prefix={pay}` }), refusedAs('prefix', /hash tags/));
    await assert.rejects(redisStore({ url, prefix: 'a}b' }), refusedAs('prefix', /hash tags/));
    await assert.rejects(redisStore({ url, prefix: 'a b' }), refusedAs('prefix'));
    await assert.rejects(redisStore({ url, prefix: 7 }), refusedAs('prefix'));
    await assert.rejects(redisStore({ url: 'redis+cluster://127.0.0.1:7000/1' }), refusedAs('url', /a cluster has only database 0/));
    await assert.rejects(redisStore({ url: 'redis+cluster://127.0.0.1' }), refusedAs('url', /host:port/));
    await assert.rejects(redisStore({}), refusedAs('url', /either \{ client \} or \{ url \}/));
    await assert.rejects(redisStore(null), refusedAs('options'));
    await assert.rejects(redisStore({ url: 42 }), refusedAs('url'));
    await assert.rejects(redisStore({ client: {} }), refusedAs('client'));
    const secret = 'hunter2-secret';
    for (const bad of [`redis+cluster://u:${secret}@/?prefix=p`, `redis+cluster://u:${secret}@127.0.0.1:7000/3`, `redis+cluster://u:${secret}@127.0.0.1:7000?prefix={p}`]) {
      await assert.rejects(redisStore({ url: bad }), (e) => {
        assert.equal(e.code, 'invalid-argument');
        assert.ok(!JSON.stringify({ m: e.message, s: e.stack }).includes(secret), e.message);
        return true;
      });
    }
    await assert.rejects(redisStore({ url: `redis+cluster://u:${secret}@127.0.0.1:1?prefix=p` }), (e) => e.payload?.tag === 'unavailable' && !e.message.includes(secret));
    // On the caller's Cluster too: the layout is the cluster's, so a brace is refused.
    const p = await freshClusterPrefix();
    try {
      await assert.rejects(redisStore({ client: p.client, prefix: `{${p.prefix}}` }), refusedAs('prefix', /hash tags/));
      await assert.rejects(redisStore({ client: p.client, url }), refusedAs('client', /not both/));
      const replicaReads = clusterClient({ scaleReads: 'slave', lazyConnect: true });
      await assert.rejects(redisStore({ client: replicaReads, prefix: p.prefix }), refusedAs('client', /scaleReads/));
      replicaReads.disconnect();
    } finally {
      await p.drop();
    }
  });

  test('wait=1: each write that wrote is followed by WAIT 1 on the same connection to its slot’s master, and the replica holds the record; wait=5 (more replicas than exist) is store-unavailable after the timeout, naming the shortfall', async () => {
    await withPrefix(async ({ client, prefix, url }) => {
      // Every command the masters receive, by client connection (MONITOR).
      const seen = [];
      const monitors = await Promise.all(
        client.nodes('master').map(async (node) => {
          // monitor() opens a connection of its own; the lazy client it duplicates never connects.
          const m = await new Redis({ host: node.options.host, port: node.options.port, lazyConnect: true }).monitor();
          m.on('monitor', (time, args, source) => seen.push({ node: `${node.options.host}:${node.options.port}`, source, args }));
          return m;
        }),
      );
      const store = await redisStore({ url: `${url}&wait=1&wait_timeout_ms=2000` });
      const keys = Array.from({ length: 24 }, (_, i) => `wait-${i}`);
      try {
        const guard = createGuard({ store });
        for (const key of keys) {
          const r = await guard.run(claimOf(key), ok);
          assert.deepEqual([r.outcome, r.finished], ['owned', 'stored']);
          // WAIT 1 answered: the replica of the key's slot has the completed record already.
          const recordKey = redisLayout.recordKey({ prefix, cluster: true }, key);
          const slot = await client.cluster('KEYSLOT', recordKey);
          const [, , , [host, port]] = (await client.cluster('SLOTS')).find(([from, to]) => slot >= from && slot <= to);
          const replica = new Redis({ host, port });
          try {
            await replica.readonly();
            assert.equal(await replica.get(recordKey), await client.get(recordKey), `${key}: on the replica`);
          } finally {
            replica.disconnect();
          }
        }
        assert.equal((await guard.run(claimOf(keys[0]), ok)).outcome, 'done', 'a replay writes nothing');
      } finally {
        await store.close();
        for (const m of monitors) m.disconnect();
      }
      // Each write script (a claim and a completion per key, the replay's claim; EVAL after a
      // NOSCRIPT) was followed, on its connection, by WAIT 1 2000.
      const writes = seen.filter((c) => ['evalsha', 'eval'].includes(c.args[0]) && String(c.args[3]).startsWith(`{${prefix}:`));
      assert.ok(writes.length >= keys.length * 2 + 1, `a claim and a completion per key, and the replay's claim: ${writes.length}`);
      for (const w of writes) {
        const next = seen.slice(seen.indexOf(w) + 1).find((c) => c.source === w.source && c.node === w.node);
        assert.deepEqual(next?.args, ['wait', '1', '2000'], `after ${w.args[3]} on ${w.node}`);
      }
      assert.equal(new Set(writes.map((w) => w.node)).size, client.nodes('master').length, 'on every master');
    });
    await withPrefix(async ({ client, prefix, url }) => {
      const store = await redisStore({ url: `${url}&wait=5&wait_timeout_ms=100` });
      try {
        const started = Date.now();
        await assert.rejects(store.insert(witRecord('short', 'a'.repeat(32), 1)), (e) => {
          assert.equal(e.payload?.tag, 'unavailable');
          assert.match(e.message, /reached 1 of the 5 replica\(s\) WAIT asked for/);
          return true;
        });
        assert.ok(Date.now() - started >= 90, 'WAIT waited for its timeout');
        assert.equal(await client.exists(redisLayout.recordKey({ prefix, cluster: true }, 'short')), 1, 'written on the master, not acknowledged');
        // Through the guard: the core's store-unavailable, and the effect never ran.
        let ran = 0;
        await assert.rejects(
          createGuard({ store }).run(claimOf('short-2'), async () => {
            ran++;
            return jsonResponse(201, {});
          }),
          (e) => e instanceof IntentkeyError && e.code === 'store-unavailable',
        );
        assert.equal(ran, 0);
      } finally {
        await store.close();
      }
    });
  });

  test('NOSCRIPT: masters that do not know the scripts (SCRIPT FLUSH) are sent EVAL, with and without wait; list and purge too', async () => {
    await withPrefix(async ({ client, prefix, store }) => {
      const flush = () => Promise.all(client.nodes('master').map((n) => n.script('FLUSH')));
      const waiting = await redisStore({ client, prefix, wait: 1 });
      const keys = Array.from({ length: 32 }, (_, i) => `noscript-${i}`);
      for (const [i, key] of keys.entries()) {
        await flush();
        const r = await createGuard({ store: i % 2 === 0 ? store : waiting, now: () => T0, ttlSeconds: 60 }).run(claimOf(key), ok);
        assert.deepEqual([r.outcome, r.finished], ['owned', 'stored'], key);
      }
      await flush();
      assert.equal((await store.list('done', 100)).length, keys.length);
      await flush();
      assert.equal(Number(await store.purge(BigInt(T0 + 61))), keys.length);
    });
  });

  test('the Node side of the Rust/Node interop (support/redis-interop.mjs) with a redis+cluster:// URL: owned, then replayed', async () => {
    await withPrefix(async ({ url }) => {
      const script = fileURLToPath(new URL('./support/redis-interop.mjs', import.meta.url));
      const once = async (body) => JSON.parse((await run(process.execPath, [script, url, 'interop-1', body])).stdout);
      assert.deepEqual(await once('from node'), { outcome: 'owned', replayed: false, status: 201, body: 'from node' });
      assert.deepEqual(await once('again'), { outcome: 'done', replayed: true, status: 201, body: 'from node' });
    });
  });

  test('the README’s Redis example runs as written on the cluster and prints what it says', async () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const heading = '### Redis and Redis Cluster';
    assert.ok(readme.includes(heading), `the README has no section ${heading}`);
    const code = /```js\n([\s\S]*?)```/.exec(readme.slice(readme.indexOf(heading)))[1];
    const expected = /\/\/ -> (.*)/.exec(code)[1];
    await withPrefix(async ({ url }) => {
      const { stdout } = await run(process.execPath, ['--input-type=module', '-e', code], {
        cwd: fileURLToPath(new URL('..', import.meta.url)),
        env: { ...process.env, REDIS_STORE_URL: `${url}&wait=1` },
      });
      assert.equal(stdout.trim(), expected);
    });
  });

  test('BullMQ on the cluster: a Worker prefix without a hash tag is refused (field prefix, naming {bull}); with one, a duplicate delivery replays and the effect runs once, its record in the cluster store', async () => {
    await withPrefix(async ({ prefix, store }) => {
      const keyer = createKeyer({ secret: 'ab'.repeat(32) });
      const guard = createGuard({ store, keyer });
      let runs = 0;
      const options = {
        guard,
        intent: (job) => ({ tenantId: 't1', intentId: job.data.paymentId, actionType: 'pix.send', payload: job.data.pix }),
        effect: async () => ({ paid: ++runs }),
      };
      const connection = clusterClient({ redisOptions: { maxRetriesPerRequest: null } });
      connection.on('error', () => {});
      const refusedPrefix = (e) => {
        assert.ok(e instanceof IntentkeyError, String(e));
        assert.deepEqual([e.code, e.field], ['invalid-argument', 'prefix']);
        assert.match(e.message, /Redis Cluster.*CROSSSLOT.*prefix: '\{bull\}'/s);
        return true;
      };
      try {
        for (const bad of [undefined, 'bull', `${prefix}-bull`, `{}${prefix}`, `${prefix}{`]) {
          assert.throws(() => idempotentProcessor(options, { connection, prefix: bad }), refusedPrefix, String(bad));
        }
        // Not a cluster: any prefix. No worker options: nothing to check.
        idempotentProcessor(options, { connection: { host: '127.0.0.1', port: 6379 }, prefix: 'bull' });
        idempotentProcessor(options);
        // What the refusal spares: BullMQ itself with that prefix on the cluster.
        const untagged = new Queue('payments', { connection, prefix: `${prefix}-bull` });
        await assert.rejects(untagged.add('pay', {}), /CROSSSLOT/);
        await untagged.close();

        const workerOptions = { connection, prefix: `{${prefix}-bull}` };
        const queue = new Queue('payments', workerOptions);
        const worker = new Worker('payments', idempotentProcessor(options, workerOptions), { ...workerOptions, drainDelay: 1 });
        worker.on('error', () => {});
        try {
          await worker.waitUntilReady();
          const data = { paymentId: 'pmt-1', pix: { amount: '10.50' } };
          const results = [];
          // The producer enqueues the intent twice: two jobs, two ids.
          for (let copy = 0; copy < 2; copy++) {
            const job = await queue.add('pay', data);
            results.push(await finished(queue, job.id, 20_000));
          }
          assert.deepEqual(results, [{ paid: 1 }, { paid: 1 }], 'the second delivery replays the first result');
          assert.equal(runs, 1);
          assert.equal((await guard.inspect(keyer.intentKey('t1', 'pmt-1'))).status, 'done');
        } finally {
          await worker.close();
          await queue.obliterate({ force: true });
          await queue.close();
        }
      } finally {
        await connection.quit();
      }
    });
  });
});

describe(`race on the Redis Cluster: ${CONTENDERS} child processes × ${KEYS} keys`, { skip }, () => {
  test(`${CONTENDERS} processes, each with a Cluster of its own: exactly one owner per key, no lost records`, async (t) => {
    await withPrefix(async ({ url, client, prefix, store }) => {
      const started = Date.now();
      t.diagnostic(`${await processRace({ url, store, client, effectsKey: `${prefix}:test-effects` })}; ${((Date.now() - started) / 1000).toFixed(1)} s`);
    });
  });
});

describe(`recovery race on the Redis Cluster: ${CONTENDERS} recoverers on ${CONTENDERS} Cluster clients`, { skip }, () => {
  test(`${CONTENDERS} Cluster clients recover the same 200 stale records at once: exactly one re-execution each`, async (t) => {
    await withPrefix(async ({ client, prefix, store }) => {
      const effectsKey = `${prefix}:test-effects`;
      const rig = {
        async connect() {
          const c = clusterClient();
          c.on('error', () => {});
          await c.ping();
          return { client: c, end: () => c.quit() };
        },
        storeOn: (c) => redisStore({ client: c.client, prefix }),
        recordEffect: (c, key, who) => c.client.rpush(effectsKey, `${key} ${who}`),
        tables: () => redisTables(store, client, effectsKey, 1000),
      };
      const started = Date.now();
      t.diagnostic(`${await recoveryRace(rig, store)}; ${((Date.now() - started) / 1000).toFixed(1)} s`);
    });
  });
});

const TRIALS = Number(process.env.IK_REDIS_KILL_TRIALS ?? 60);

describe(`kill trials on the Redis Cluster: ${TRIALS} owners killed at random moments, then recovery`, { skip }, () => {
  test('an owner killed between its effect and its completion: the record stays in flight (409), recovery settles it, never a second effect', async (t) => {
    await withPrefix(async ({ url, client, prefix, store }) => {
      await redisKillTrials(t, { trials: TRIALS, url, store, client, effectsKey: `${prefix}:test-effects` });
    });
  });
});
