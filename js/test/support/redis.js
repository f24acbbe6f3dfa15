// Redis for the tests: the server at 127.0.0.1:6379 (REDIS_URL overrides),
// database 2 (database 0 belongs to other suites, 1 to the Rust tests), and the
// Redis Cluster that `bash scripts/redis-cluster.sh start` makes
// (INTENTKEY_REDIS_CLUSTER overrides: redis+cluster://host:port[,host:port…]).
// Every test works under a key prefix of its own (ik-js-<random>) and deletes only the
// keys under it at the end: never FLUSHDB.
//
// When a server cannot be reached: with CI=true the tests FAIL, outside CI
// they are skipped with a message saying so.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import Redis, { Cluster } from 'ioredis';
import { lineChild } from './line-child.js';
import { CONTENDERS, KEYS, checkRace, raceKeys, storeRows } from './race.js';
import { killTrials } from './kill-trials.js';
import { availability } from './availability.js';
import { jsonResponse } from '../../src/index.js';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/2';
export const REDIS_CLUSTER_URL = process.env.INTENTKEY_REDIS_CLUSTER ?? 'redis+cluster://127.0.0.1:7000';

/** The cluster URL's nodes (and credentials) as ioredis's Cluster takes them. */
function clusterConfig() {
  const hosts = REDIS_CLUSTER_URL.replace(/^rediss?\+cluster:\/\//, '').split(/[/?]/)[0];
  const at = hosts.lastIndexOf('@');
  const [username, password] = at < 0 ? [] : hosts.slice(0, at).split(':').map(decodeURIComponent);
  const nodes = hosts
    .slice(at + 1)
    .split(',')
    .map((h) => ({ host: h.slice(0, h.lastIndexOf(':')), port: Number(h.slice(h.lastIndexOf(':') + 1)) }));
  return { nodes, redisOptions: { ...(username ? { username } : {}), ...(password ? { password } : {}) } };
}

/** A Cluster client of the test's own (quit() it); `options` are ioredis Cluster options. */
export function clusterClient(options = {}) {
  const { nodes, redisOptions } = clusterConfig();
  return new Cluster(nodes, { ...options, redisOptions: { ...redisOptions, ...options.redisOptions } });
}

/** Where a server is, for messages (no credentials). */
const where = (url) => url.replace(/\/\/[^@/]*@/, '//');

/** Whether the server `connect()`'s client reaches answers a PING (see availability). */
async function available(file, what, url, connect, hint) {
  return availability(file, what, where(url), await unreachable(connect), hint);
}

/** null when `connect()`'s client answers a PING, else why not. */
async function unreachable(connect) {
  const client = connect();
  client.on('error', () => {});
  try {
    await client.connect();
    await client.ping();
    return null;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  } finally {
    client.disconnect();
  }
}

/**
 * What the Redis tests do here (see availability).
 * @param {string} file the test file, for the SKIPPED line
 */
export function redisAvailability(file) {
  const connect = () => new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 5000 });
  return available(file, 'Redis', REDIS_URL, connect, 'Start redis-server or set REDIS_URL.');
}

/**
 * What the Redis Cluster tests do here (see availability).
 * @param {string} file the test file, for the SKIPPED line
 */
export function clusterAvailability(file) {
  const connect = () => clusterClient({ lazyConnect: true, clusterRetryStrategy: () => null, redisOptions: { connectTimeout: 5000 } });
  return available(file, 'Redis Cluster', REDIS_CLUSTER_URL, connect, 'Start one (bash scripts/redis-cluster.sh start) or set INTENTKEY_REDIS_CLUSTER.');
}

const newPrefix = () => `ik-js-${randomBytes(6).toString('hex')}`;

/** A fresh key prefix and a client; drop() deletes the prefix's keys and quits. */
export async function freshPrefix() {
  const prefix = newPrefix();
  const client = new Redis(REDIS_URL);
  return {
    prefix,
    client,
    url: `${REDIS_URL}?prefix=${prefix}`,
    async drop() {
      let cursor = '0';
      do {
        const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
        if (keys.length > 0) await client.del(...keys);
        cursor = next;
      } while (cursor !== '0');
      await client.quit();
    },
  };
}

/** The keys matching `pattern` (KEYS) on each master of the cluster, asked of each directly: [[host:port, keys], …]. */
export async function keysByMaster(client, pattern) {
  return Promise.all(client.nodes('master').map(async (node) => [`${node.options.host}:${node.options.port}`, await node.keys(pattern)]));
}

/**
 * A fresh key prefix on the cluster and a Cluster client; drop() deletes every
 * key with the prefix in its name (KEYS on each master, DEL one key at a time:
 * a cluster refuses a DEL of keys in several slots) and quits.
 */
export async function freshClusterPrefix() {
  const prefix = newPrefix();
  const client = clusterClient();
  client.on('error', () => {});
  await client.ping();
  return {
    prefix,
    client,
    url: `${REDIS_CLUSTER_URL}?prefix=${prefix}`,
    async drop() {
      for (const [, keys] of await keysByMaster(client, `*${prefix}*`)) {
        for (const key of keys) await client.del(key);
      }
      await client.quit();
    },
  };
}

/**
 * The race's tables on a Redis store (checkRace and checkRecoveryRace read
 * them): its records of every status, as rows, and the effects the
 * contenders pushed to the list `effectsKey` ("key contender").
 */
export async function redisTables(store, client, effectsKey, limit) {
  const rows = await storeRows(store, limit);
  const effects = (await client.lrange(effectsKey, 0, -1)).map((e) => {
    const [key, contender] = e.split(' ');
    return { key, contender: Number(contender) };
  });
  return { rows, effects };
}

const contenderScript = fileURLToPath(new URL('./redis-contender.js', import.meta.url));

/**
 * The race in child processes: CONTENDERS processes (support/redis-contender.js),
 * each with a store of its own from `url`, over KEYS keys at once, their effects
 * pushed to the list `effectsKey`; then the tables are read through `store` and
 * `client` and checked (checkRace). Answers checkRace's summary line.
 */
export async function processRace({ url, store, client, effectsKey }) {
  const children = [];
  try {
    for (let id = 0; id < CONTENDERS; id++) children.push(lineChild(contenderScript, [url, effectsKey, String(id), String(KEYS)]));
    for (const c of children) assert.equal(await c.next(), 'ready', c.stderr());
    for (const c of children) c.child.stdin.end('go\n');
    const reports = [];
    for (const c of children) reports.push(JSON.parse(await c.next()));
    for (const c of children) assert.equal((await c.exited).code, 0, c.stderr());
    const { rows, effects } = await redisTables(store, client, effectsKey, KEYS * 2);
    return checkRace(reports, raceKeys(), rows, effects);
  } finally {
    for (const c of children) c.child.kill();
  }
}

const faultScript = fileURLToPath(new URL('./redis-fault-child.js', import.meta.url));

/**
 * The kill trials (support/kill-trials.js) on a Redis store: each owner is a
 * child process (support/redis-fault-child.js) with a store of its own from
 * `url`, its effect pushed to the list `effectsKey`, SIGKILLed at a random
 * moment; `store` and `client` check and recover.
 */
export async function redisKillTrials(t, { trials, url, store, client, effectsKey }) {
  const effects = async (key) => (await client.lrange(effectsKey, 0, -1)).filter((e) => e.split(' ')[0] === key).length;
  await killTrials(t, {
    trials,
    store,
    spawn: (key, pauseMs) => lineChild(faultScript, [url, effectsKey, key, pauseMs], key),
    async kill(c) {
      c.child.kill('SIGKILL');
      await c.exited;
    },
    effects,
    effect: (who) => async (k) => {
      await client.rpush(effectsKey, `${k} ${who}`);
      return jsonResponse(201, {});
    },
  });
}
