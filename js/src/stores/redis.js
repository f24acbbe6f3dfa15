// A store in Redis, or a Redis Cluster, through ioredis 5 (an optional peer
// dependency). The record layout, every key name and every Lua script are the
// component's (the core's crates/intentkey/src/claim/redis.rs and
// redis/layout.rs, through the WIT `schema` export: `redis-scripts`,
// `redis-layout` and the calls made from it), the same the Rust store runs, so
// Node and Rust processes share one Redis (or one cluster) and the same records
// (docs/store-schema.md, "Redis"). This file only converts types and does the
// I/O: it sends the calls the core names and hands their replies back.
//
// The claim is SET … NX with no expiry (an in-flight record is never released by
// TTL); completion, recovery writes and release are scripts fenced on the owner
// token; only done records get a TTL. On a cluster every record lives with its
// bucket's indexes under one hash tag, so each script touches one slot; listing
// and purging send one call per bucket. With `wait`, a write that wrote is
// followed by WAIT on the same connection. The operations are asynchronous, so
// the guard drives the core's claim flow through the `flows` resource.
//
// Retries that wait for the first attempt (op `watch`) are woken by this
// store's own writes that changed their record, and by every process's: the
// core's completion, release and recovery scripts SPUBLISH the record's key on
// its bucket's change channel. The first wait starts ONE subscriber per store,
// a duplicate of the client (on a cluster with ioredis's sharded subscribers,
// which route each channel to its slot's node) SSUBSCRIBEd once to every
// channel of the layout; ioredis reconnects and subscribes it again. Lost
// messages are covered by the core's periodic re-check.
import { createHash } from 'node:crypto';
import { IntentkeyError } from '../errors.js';
import { checkOptionNames } from '../endpoint.js';
import { ABORTED_FLAG, CLOSING, TRUSTED, coreSchema, redisCall, redisClaimed, redisDecode, redisLayout, storeError, closer } from './schema.js';
import { createWatchers } from './watchers.js';

/** Compiles the component ahead of the first request (see the main entry's init). */
export { init } from '../node-core.js';

/** The options redisStore takes, and those a URL's query may carry (as the Rust store reads them). */
const OPTIONS = Object.freeze(['client', 'url', 'prefix', 'wait', 'waitTimeoutMs']);
const URL_OPTIONS = Object.freeze({ prefix: 'prefix', wait: 'wait', wait_timeout_ms: 'waitTimeoutMs' });

/** How long WAIT waits for the replicas when no waitTimeoutMs is given. */
const DEFAULT_WAIT_TIMEOUT_MS = 1000;

const CLUSTER_URL = /^(rediss?)\+cluster:\/\//;

async function loadDriver() {
  try {
    const m = await import('ioredis');
    return { Redis: m.default ?? m.Redis ?? m, Cluster: m.Cluster ?? m.default?.Cluster };
  } catch (e) {
    throw new Error(
      'intentkey: redisStore({ url }) needs ioredis 5: npm install ioredis@5 (or pass a connected ioredis client as { client })',
      { cause: e },
    );
  }
}

function optionError(option, message) {
  return new IntentkeyError('invalid-argument', `redisStore: \`${option}\` ${message}`, option);
}

let cachedScripts = null;
/** The core's scripts, with their SHA-1 (EVALSHA, falling back to EVAL). */
function scripts() {
  if (cachedScripts === null) {
    const { redisScripts } = coreSchema();
    cachedScripts = Object.freeze(
      Object.fromEntries(
        redisScripts.map(({ name, source }) => [name, { source, sha: createHash('sha1').update(source).digest('hex') }]),
      ),
    );
  }
  return cachedScripts;
}

// MOVED and ASK reach the store only from a pipeline (ioredis follows them for
// single commands): the slot moved; the script did not run there, retry.
const RETRYABLE_REPLY = /^(LOADING|BUSY|TRYAGAIN|READONLY|MASTERDOWN|CLUSTERDOWN|NOREPLICAS|MOVED|ASK)\b/;

/**
 * ioredis's error as a store error: a server reply (a script's refusal, malformed
 * data, a bad password) failed, unless the server is loading, busy, read-only,
 * redirecting or asks to try again; anything else (a closed or refused
 * connection, a timeout, retries exhausted, a cluster not ready) unavailable.
 */
function failure(e) {
  if (e instanceof Error && e.name === 'StoreError') return e;
  const message = e instanceof Error ? e.message : String(e);
  const reply = e?.name === 'ReplyError';
  const unavailable = !reply || RETRYABLE_REPLY.test(message);
  return storeError(unavailable ? 'unavailable' : 'failed', `redis: ${message}`, e);
}

/** The core's refusal (an IntentkeyError: a malformed value, too few replicas) as a store error of `kind`. */
function coreFailure(kind, fn) {
  try {
    return fn();
  } catch (e) {
    throw storeError(kind, `redis: ${e instanceof Error ? e.message : e}`, e);
  }
}

const noScript = (e) => e?.name === 'ReplyError' && String(e.message).startsWith('NOSCRIPT');

/** `value` if it is a whole number from 1 to 2^32 - 1, else an error naming `option`. */
function atLeastOne(option, value, what) {
  if (!Number.isSafeInteger(value) || value < 1 || value > 0xffffffff) throw optionError(option, `must be ${what} (a whole number, 1 or more)`);
  return value;
}

/** A URL's number (digits only) as a number; anything else stays as it was, for atLeastOne to refuse. */
const urlNumber = (text) => (/^[0-9]{1,10}$/.test(text) ? Number(text) : text);

/**
 * A URL split into where to connect and the store's own options: `{ cluster,
 * connect, options }`, where `connect` is the URL without its query (one
 * server) or the cluster's nodes and credentials. An option the query names
 * that the store does not take is an error naming it; messages never hold the URL.
 */
function parseUrl(url) {
  const q = url.indexOf('?');
  const base = q < 0 ? url : url.slice(0, q);
  const options = {};
  for (const pair of q < 0 ? [] : url.slice(q + 1).split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const name = decodeURIComponent(eq < 0 ? pair : pair.slice(0, eq));
    const option = Object.hasOwn(URL_OPTIONS, name) ? URL_OPTIONS[name] : undefined;
    if (option === undefined) {
      throw optionError(name, `in the URL's query is not an option; the URL takes ${Object.keys(URL_OPTIONS).join(', ')}`);
    }
    const value = decodeURIComponent(eq < 0 ? '' : pair.slice(eq + 1));
    options[option] = option === 'prefix' ? value : urlNumber(value);
  }
  const scheme = CLUSTER_URL.exec(base);
  if (scheme === null) return { cluster: false, connect: base, options };
  // redis+cluster://[user:password@]host:port[,host:port…][/]
  let rest = base.slice(scheme[0].length);
  const at = rest.lastIndexOf('@');
  const auth = at < 0 ? '' : rest.slice(0, at);
  rest = at < 0 ? rest : rest.slice(at + 1);
  rest = rest.replace(/\/$/, '');
  if (rest.includes('/')) throw optionError('url', 'names a database: a cluster has only database 0 (redis+cluster://host:port[,host:port…])');
  const nodes = rest
    .split(',')
    .filter((h) => h !== '')
    .map((h) => {
      const m = /^(\[[^\]]+\]|[^:]+):([0-9]{1,5})$/.exec(h);
      if (m === null) throw optionError('url', 'names a cluster node that is not host:port (redis+cluster://host:port[,host:port…])');
      return { host: m[1].replace(/^\[|\]$/g, ''), port: Number(m[2]) };
    });
  if (nodes.length === 0) throw optionError('url', 'names no node (redis+cluster://host:port[,host:port…])');
  const colon = auth.indexOf(':');
  const redisOptions = {};
  if (auth !== '') {
    const username = decodeURIComponent(colon < 0 ? auth : auth.slice(0, colon));
    if (username !== '') redisOptions.username = username;
    if (colon >= 0) redisOptions.password = decodeURIComponent(auth.slice(colon + 1));
  }
  if (scheme[1] === 'rediss') redisOptions.tls = {};
  return { cluster: true, connect: { nodes, redisOptions }, options };
}

/** A client of the store's own for `url`, connected: one server's, or a cluster's. */
async function connect(parsed) {
  const { Redis, Cluster } = await loadDriver();
  // Fail fast while Redis is down (store-unavailable) instead of queueing commands.
  // A command sent on a connection that dropped before its answer came is
  // never sent again after the reconnect (ioredis's autoResendUnfulfilledCommands,
  // on by default): it may have run already, and a claim run twice would find
  // its own record and answer 409 for a request whose handler never ran; the
  // caller got store-unavailable, and its flow decides.
  const client = parsed.cluster
    ? new Cluster(parsed.connect.nodes, {
        lazyConnect: true,
        enableOfflineQueue: false,
        redisOptions: { ...parsed.connect.redisOptions, maxRetriesPerRequest: 1, autoResendUnfulfilledCommands: false },
      })
    : new Redis(parsed.connect, { maxRetriesPerRequest: 1, enableOfflineQueue: true, lazyConnect: false, autoResendUnfulfilledCommands: false });
  // Failures reach the caller through the operations (store-unavailable); the
  // client's own reconnect errors are not logged as unhandled.
  client.on('error', () => {});
  try {
    if (parsed.cluster) await client.connect();
    await client.ping();
  } catch (e) {
    client.disconnect();
    throw failure(e);
  }
  return client;
}

/**
 * A record store in Redis or a Redis Cluster.
 * @param {{ client?: any, url?: string, prefix?: string, wait?: number, waitTimeoutMs?: number }} options
 *   an ioredis client or Cluster (the caller keeps it), or a URL
 *   (`redis://host:port/db` or `redis+cluster://host:port[,host:port…]`, with
 *   `?prefix=P&wait=N&wait_timeout_ms=M`; the store makes the client and close()
 *   quits it); `prefix` (default `intentkey`) starts every key the store writes
 *   (on a cluster inside the hash tag `{prefix:NN}`); `wait`: every write that
 *   wrote waits for that many replicas (WAIT, `waitTimeoutMs`, default 1000),
 *   and fewer is store-unavailable
 */
export async function redisStore(options = {}) {
  if (options === null || typeof options !== 'object') {
    throw optionError('options', 'redisStore takes { client } (an ioredis client or Cluster) or { url } (redis://host:port/db)');
  }
  checkOptionNames(options, OPTIONS, 'redisStore');
  const { redisDefaultPrefix, redisBatch } = coreSchema();
  const S = scripts();
  let client = options.client;
  let parsed;
  if ((client === undefined) === (options.url === undefined)) {
    throw optionError(client === undefined ? 'url' : 'client', 'redisStore takes either { client } or { url }, not both and not neither');
  }
  if (client === undefined) {
    if (typeof options.url !== 'string') throw optionError('url', 'must be a string: redis://host:port/db or redis+cluster://host:port');
    parsed = parseUrl(options.url);
  } else if (client === null || typeof client !== 'object' || typeof client.evalsha !== 'function' || typeof client.pipeline !== 'function') {
    throw optionError('client', 'must be an ioredis client (new Redis(…)) or Cluster (new Cluster(…))');
  } else if (client.options?.keyPrefix || client.options?.redisOptions?.keyPrefix) {
    // The scripts build record keys from the prefix they are given; ioredis's
    // keyPrefix would apply to some keys and not to those.
    throw optionError('client', "has a keyPrefix: use the store's prefix option, not the client's keyPrefix");
  } else if (client.isCluster === true && (client.options?.scaleReads ?? 'master') !== 'master') {
    // A replica may not have the latest write yet: a record read there could be a claim's stale past.
    throw optionError('client', "reads from replicas (scaleReads): the store reads its records from the masters; use scaleReads: 'master'");
  }
  const given = { ...parsed?.options, ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) };
  const prefix = given.prefix ?? redisDefaultPrefix;
  if (typeof prefix !== 'string') throw optionError('prefix', 'must be a string, e.g. payments');
  const wait = given.wait === undefined ? undefined : atLeastOne('wait', given.wait, 'the number of replicas each write waits for');
  if (given.waitTimeoutMs !== undefined && wait === undefined) {
    throw optionError('waitTimeoutMs', 'is the timeout of WAIT: give `wait` (the replicas to wait for) with it');
  }
  const waitTimeoutMs =
    given.waitTimeoutMs === undefined ? DEFAULT_WAIT_TIMEOUT_MS : atLeastOne('waitTimeoutMs', given.waitTimeoutMs, 'milliseconds (WAIT 0 would block forever)');
  const layout = Object.freeze({ prefix, cluster: parsed?.cluster ?? client.isCluster === true });
  redisLayout.check(layout); // the core's: invalid-argument naming `prefix`

  // A command written on a connection that closes before its answer came is
  // not sent again when ioredis does not resend (autoResendUnfulfilledCommands
  // off, as on the clients this store makes), and ioredis then leaves its
  // promise pending for good: here it fails when the connection closes,
  // store-unavailable, so the flow decides now rather than at the deadline.
  let failOnClose = false;
  const lost = new Set();
  /** `promise` of a command sent now, failed if its connection closes first. */
  function sent(promise) {
    if (!failOnClose || client.status !== 'ready') return promise;
    return new Promise((resolve, reject) => {
      const fail = () => {
        lost.delete(fail);
        reject(storeError('unavailable', 'redis: the connection closed before the answer came (the command is not sent again)'));
      };
      lost.add(fail);
      promise.then(
        (value) => {
          lost.delete(fail);
          resolve(value);
        },
        (e) => {
          lost.delete(fail);
          reject(e);
        },
      );
    });
  }

  /** EVALSHA, or EVAL when the server (on a cluster: that slot's master) does not know the script yet. */
  async function run({ script, keys, args }) {
    const { sha, source } = S[script];
    try {
      try {
        return await sent(client.evalsha(sha, keys.length, ...keys, ...args));
      } catch (e) {
        if (!noScript(e)) throw e;
        return await sent(client.eval(source, keys.length, ...keys, ...args));
      }
    } catch (e) {
      throw failure(e);
    }
  }

  /**
   * A write script and WAIT in one pipeline: both go to one node (the master of
   * the keys' slot) on one connection, so WAIT covers this write. Answers the
   * script's reply; when it wrote (1), fewer replicas than `wait` acknowledging
   * it is store-unavailable (the core's check).
   */
  async function runAndWait({ script, keys, args }) {
    const { sha, source } = S[script];
    const send = (eval_, body) => sent(client.pipeline()[eval_](body, keys.length, ...keys, ...args).call('wait', wait, waitTimeoutMs).exec());
    let replies;
    try {
      replies = await send('evalsha', sha);
      if (noScript(replies[0][0])) replies = await send('eval', source);
    } catch (e) {
      throw failure(e);
    }
    const [[error, reply], [waitError, acked]] = replies;
    if (error) {
      if (/^MOVED /.test(error.message ?? '')) client.refreshSlotsCache?.();
      throw failure(error);
    }
    if (Number(reply) !== 1) return reply;
    if (waitError) throw failure(waitError);
    coreFailure('unavailable', () => redisLayout.checkReplicas(wait, acked));
    return reply;
  }

  // Wake-ups (op `watch`): this store's own writes, and the subscriber's messages.
  const watchers = createWatchers();

  /** A write: the core's script call (keys and arguments in its layout); true when it wrote. */
  const write = async (op, value, key) => {
    const call = redisCall(op, layout, value);
    const wrote = Number(await (wait === undefined ? run(call) : runAndWait(call))) === 1;
    if (wrote && key !== undefined) watchers.changed(key);
    return wrote;
  };

  if (client === undefined) {
    client = await connect(parsed);
  } else {
    try {
      await client.ping();
    } catch (e) {
      throw failure(e);
    }
  }
  const owned = parsed !== undefined;
  if (!layout.cluster && client.options?.autoResendUnfulfilledCommands === false && typeof client.on === 'function') {
    failOnClose = true;
    client.on('close', () => {
      for (const fail of [...lost]) fail();
    });
  }

  const closing = closer();

  // The subscriber: one per store, started by the first wait.
  const listener = { sub: null, closed: false, retryAt: 0, connects: 0 };
  const LISTEN_RETRY_MS = 1000;
  /** Starts the subscriber (again, a while after it failed to start). */
  function listen() {
    if (listener.sub !== null || listener.closed || Date.now() < listener.retryAt) return;
    const overrides = { lazyConnect: true, enableOfflineQueue: true, connectionName: 'intentkey-listener' };
    let sub;
    try {
      sub = layout.cluster
        ? client.duplicate([], { shardedSubscribers: true, ...overrides, redisOptions: { ...client.options?.redisOptions, connectionName: 'intentkey-listener' } })
        : client.duplicate(overrides);
    } catch {
      listener.retryAt = Date.now() + LISTEN_RETRY_MS;
      return;
    }
    listener.sub = sub;
    sub.on('error', () => {});
    sub.on('smessage', (_channel, message) => {
      if (typeof message === 'string' && message !== '') watchers.changed(message);
    });
    // Subscribed again after a reconnect: messages may have been lost
    // meanwhile; every waiter claims again now.
    sub.on('ready', () => {
      if (listener.connects++ > 0) watchers.wakeAll();
    });
    const channels = redisLayout.channels(layout);
    (async () => {
      await sub.connect();
      // On a cluster each channel is its own slot: one SSUBSCRIBE each.
      if (layout.cluster) await Promise.all(channels.map((c) => sub.ssubscribe(c)));
      else await sub.ssubscribe(...channels);
    })().catch(() => {
      if (listener.sub !== sub) return;
      listener.sub = null;
      listener.retryAt = Date.now() + LISTEN_RETRY_MS;
      sub.disconnect();
    });
  }

  return {
    kind: 'redis',
    synchronous: false,
    [TRUSTED]: true,
    // Its operations read their signal only as signal.aborted (or not at all).
    [ABORTED_FLAG]: true,
    /** The ioredis client (a Cluster on a cluster). */
    client,
    /** The prefix of every key this store writes. */
    prefix,
    /** Whether the records are in the cluster layout (hash-tagged buckets). */
    cluster: layout.cluster,

    async insert(r) {
      return write('insert', r);
    },

    /**
     * The claim (the core's `claim` script): the insert, or the record it
     * lost to, read in the same script, so a repeat is one round trip.
     */
    async claim(r) {
      const call = redisCall('claim', layout, r);
      const reply = await (wait === undefined ? run(call) : runAndWait(call));
      return redisClaimed(r.key, reply);
    },

    async get(key) {
      let value;
      try {
        value = await sent(client.get(redisLayout.recordKey(layout, key)));
      } catch (e) {
        throw failure(e);
      }
      return value === null ? undefined : coreFailure('failed', () => redisDecode(key, value));
    },

    async complete(c) {
      return write('complete', c, c.key);
    },

    async replace(r) {
      return write('replace', r, r.record.key);
    },

    async release(r) {
      return write('release', r, r.key);
    },

    /**
     * Resolves when the record of `key` changed (this store's write, or a
     * message on its bucket's change channel: the first call starts the
     * subscriber), after `ms`, or when `signal` aborts.
     */
    watch(key, ms, signal) {
      listen();
      return watchers.watch(key, ms, signal);
    },

    // One call per bucket (the core's), each to its slot's master; the core merges the replies in one order.
    async list(status, limit) {
      const replies = await Promise.all(redisLayout.list(layout, status, limit).map(run));
      return coreFailure('failed', () => redisLayout.listed(limit, replies));
    },

    // One call per bucket, each sent again while it looked at a whole batch.
    async purge(now) {
      const counts = await Promise.all(
        redisLayout.purge(layout, now).map(async (call) => {
          let deleted = 0;
          for (;;) {
            const [n, lookedAt] = await run(call);
            deleted += Number(n);
            if (Number(lookedAt) < redisBatch) return deleted;
          }
        }),
      );
      return counts.reduce((a, b) => a + b, 0);
    },

    /**
     * How many records have `status` (WIT spelling): { count, oldest: null }
     * (the sum of the ZCARDs of the layout's status indexes, one per bucket;
     * the oldest claim is not read).
     */
    async count(status) {
      let cards;
      try {
        cards = await Promise.all(redisLayout.indexKeys(layout, status).map((key) => client.zcard(key)));
      } catch (e) {
        throw failure(e);
      }
      return { count: cards.reduce((a, b) => a + Number(b), 0), oldest: null };
    },

    /** Closed when close() is called (a guard's background work on this store stops). */
    [CLOSING]: closing,

    /** Quits the subscriber, wakes every waiter, and quits the client if the store made it (from a URL). */
    async close() {
      closing.close();
      listener.closed = true;
      const { sub } = listener;
      listener.sub = null;
      // A subscriber has nothing to flush: closed at once.
      if (sub !== null) sub.disconnect();
      watchers.wakeAll();
      if (owned) await client.quit().catch(() => client.disconnect());
    },
  };
}
