// The guard on Redis (the real server, see support/redis.js) through ioredis,
// driven through the core's `flows` resource: the shared store suite, the
// core's layout and scripts (from the component only), TTLs (none while in
// flight; done records only), the race (16 child processes × 1000 keys) and
// kill trials (an owner killed between its effect and its completion, then
// recovery), WAIT (wait=N) and the interop script the Rust tests run. Every
// test has its own key prefix and deletes its keys. The cluster: redis-cluster.test.js.
// Unreachable server: fails with CI=true, skipped (with a SKIPPED: line) otherwise.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createGuard, jsonResponse } from '../src/index.js';
import { redisStore } from '../src/stores/redis.js';
import { coreSchema } from '../src/stores/schema.js';
import { freshPrefix, processRace, redisAvailability, redisKillTrials } from './support/redis.js';
import { freshStore, storeSuite, witRecord } from './support/store-suite.js';
import { CONTENDERS, KEYS } from './support/race.js';

const { skip } = await redisAvailability('redis.test.js');
const run = promisify(execFile);

/** Runs fn with a fresh prefix and a store on it, then deletes the prefix's keys. */
async function withPrefix(fn) {
  const p = await freshPrefix();
  const store = await redisStore({ client: p.client, prefix: p.prefix });
  try {
    return await fn({ ...p, store });
  } finally {
    await p.drop();
  }
}

storeSuite('Redis (ioredis)', { skip, open: freshStore(freshPrefix, (p) => redisStore({ client: p.client, prefix: p.prefix })) });

const nowSeconds = () => Math.floor(Date.now() / 1000);
const claimOf = (key) => ({ key, fingerprint: 'fp', tenantId: 't1', actionType: 'pix.send' });

describe('Redis store', { skip }, () => {
  test('the layout and scripts are the component’s: the claim is SET NX without expiry, written in the core’s ik1 layout', async () => {
    const { redisScripts, redisDefaultPrefix, redisBatch } = coreSchema();
    assert.deepEqual(
      redisScripts.map((s) => s.name),
      ['insert', 'complete', 'replace', 'release', 'list', 'purge', 'claim'],
    );
    assert.equal(redisDefaultPrefix, 'intentkey');
    assert.equal(redisBatch, 500);
    assert.match(redisScripts[0].source, /'SET', KEYS\[1\], h \.\. ARGV\[8\] \.\. '\\n' \.\. ARGV\[9\], 'NX'/);
    await withPrefix(async ({ client, prefix, store }) => {
      const token = 'a'.repeat(32);
      assert.equal(await store.insert(witRecord('raw', token, 1)), true);
      assert.equal(await store.insert(witRecord('raw', 'b'.repeat(32), 2)), false);
      assert.equal(await client.get(`${prefix}:rec:raw`), `ik1 in_flight ${token} 1 0 - -\n["fp","tenant-1","pix.send"]\n`);
      assert.equal(await client.pttl(`${prefix}:rec:raw`), -1, 'an in-flight record has no TTL');
      assert.deepEqual(await client.zrange(`${prefix}:idx:in_flight`, 0, -1, 'WITHSCORES'), ['raw', '1']);
      // Malformed data is a failed store error, not a crash.
      await client.set(`${prefix}:rec:junk`, 'not a record');
      await assert.rejects(store.get('junk'), (e) => e.payload?.tag === 'failed' && /written by something other than intentkey/.test(e.message));
    });
  });

  test('TTL only on done records, when their expiry is in the future; purge removes what Redis expired from the indexes', async () => {
    await withPrefix(async ({ client, prefix, store }) => {
      const now = nowSeconds();
      const pttl = (key) => client.pttl(`${prefix}:rec:${key}`);
      const ok = async () => jsonResponse(201, {});
      const guard = createGuard({ store, now: () => now, ttlSeconds: 3600 });
      await assert.rejects(guard.run(claimOf('flight'), async () => {
        throw new Error('crashed');
      }));
      assert.equal(await pttl('flight'), -1);
      await guard.run(claimOf('done'), ok);
      const ttl = await pttl('done');
      assert.ok(ttl > 3_590_000 && ttl <= 3_600_000, `TTL ${ttl}`);
      await createGuard({ store, now: () => 1_700_000_000, ttlSeconds: 60 }).run(claimOf('past'), ok);
      assert.equal(await pttl('past'), -1, 'an expiry in the past: no TTL (purge deletes it)');
      // A 1 s TTL from the next whole second: the expiry is still ahead of
      // the server's clock when the record is written, however long the
      // steps above took (from the floored `now` it could already be past,
      // and the record then gets no TTL at all).
      const soon = Math.ceil(Date.now() / 1000);
      await createGuard({ store, now: () => soon, ttlSeconds: 1 }).run(claimOf('short'), ok);
      assert.ok((await pttl('short')) > 0, 'a done record with its expiry ahead gets a TTL');
      const deadline = Date.now() + 10_000;
      while ((await pttl('short')) !== -2) {
        assert.ok(Date.now() < deadline, 'Redis did not expire the record within 10 s');
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.notEqual(await client.zscore(`${prefix}:idx:done`, 'short'), null, 'Redis leaves the index member');
      assert.deepEqual((await store.list('done', 10)).map((r) => r.key), ['past', 'done']);
      assert.equal(Number(await store.purge(BigInt(now + 10))), 1);
      assert.equal(await client.zscore(`${prefix}:idx:done`, 'short'), null);
      assert.equal(await client.zscore(`${prefix}:exp`, 'short'), null);
      assert.deepEqual((await store.list('in-flight', 10)).map((r) => r.key), ['flight']);
    });
  });

  test('from a URL (?prefix=…): the store owns and quits its client; a stopped server is store-unavailable', async () => {
    await withPrefix(async ({ url, client, prefix }) => {
      const own = await redisStore({ url });
      assert.equal(own.prefix, prefix);
      const r = await createGuard({ store: own }).run(claimOf('cfg'), async () => jsonResponse(200, {}));
      assert.equal(r.outcome, 'owned');
      await own.close();
      assert.equal(await client.exists(`${prefix}:rec:cfg`), 1);
    });
    await assert.rejects(redisStore({ url: 'redis://127.0.0.1:1/2' }), (e) => e.payload?.tag === 'unavailable');
  });

  test('wait=N on one server: WAIT after each write that wrote; fewer replicas than N acknowledging it is store-unavailable naming them', async () => {
    await withPrefix(async ({ url, client, prefix }) => {
      const replicas = Number(/connected_slaves:(\d+)/.exec(await client.info('replication'))[1]);
      const store = await redisStore({ url: `${url}&wait=${replicas + 1}&wait_timeout_ms=50` });
      try {
        const started = Date.now();
        await assert.rejects(store.insert(witRecord('w-1', 'a'.repeat(32), 1)), (e) => {
          assert.equal(e.payload?.tag, 'unavailable');
          assert.match(e.message, new RegExp(`reached ${replicas} of the ${replicas + 1} replica\\(s\\) WAIT asked for`));
          return true;
        });
        assert.ok(Date.now() - started >= 40, 'WAIT waited for its timeout');
        assert.equal(await client.exists(`${prefix}:rec:w-1`), 1, 'the write is on the server, not acknowledged');
        // A write that did not write (the key exists) waits for nothing: not an error.
        assert.equal(await store.insert(witRecord('w-1', 'b'.repeat(32), 2)), false);
      } finally {
        await store.close();
      }
    });
  });

  test('the Node side of the Rust/Node interop (support/redis-interop.mjs) on one server: owned, then replayed', async () => {
    await withPrefix(async ({ url }) => {
      const script = fileURLToPath(new URL('./support/redis-interop.mjs', import.meta.url));
      const once = async (body) => JSON.parse((await run(process.execPath, [script, url, 'interop-1', body])).stdout);
      assert.deepEqual(await once('from node'), { outcome: 'owned', replayed: false, status: 201, body: 'from node' });
      assert.deepEqual(await once('again'), { outcome: 'done', replayed: true, status: 201, body: 'from node' });
    });
  });
});

describe(`race on Redis: ${CONTENDERS} child processes × ${KEYS} keys`, { skip }, () => {
  test(`${CONTENDERS} processes, one connection each: exactly one owner per key, no lost records`, async (t) => {
    await withPrefix(async ({ url, client, prefix, store }) => {
      t.diagnostic(await processRace({ url, store, client, effectsKey: `${prefix}:test-effects` }));
    });
  });
});

const TRIALS = Number(process.env.IK_REDIS_KILL_TRIALS ?? 60);

describe(`kill trials on Redis: ${TRIALS} owners killed at random moments, then recovery`, { skip }, () => {
  test('an owner killed between its effect and its completion: the record stays in flight (409), recovery settles it, never a second effect', async (t) => {
    await withPrefix(async ({ url, client, prefix, store }) => {
      await redisKillTrials(t, { trials: TRIALS, url, store, client, effectsKey: `${prefix}:test-effects` });
    });
  });
});
