// A store in Redis through ioredis 5 (an optional peer dependency). The record
// layout and every Lua script are the component's (the core's
// crates/intentkey/src/claim/redis.rs, through the WIT `schema` export
// `redis-scripts`), the same the Rust store runs, so Node and Rust processes share
// one Redis and the same records (docs/store-schema.md, "Redis").
//
// The claim is SET … NX with no expiry (an in-flight record is never released by
// TTL); completion, recovery writes and release are scripts fenced on the owner
// token; only done records get a TTL. The operations are asynchronous, so the
// guard drives the core's claim flow through the `flows` resource.
import { createHash } from 'node:crypto';
import { TRUSTED, coreSchema, redisCall, redisDecode, storeError, storedStatus } from './schema.js';

/** Compiles the component ahead of the first request (see the main entry's init). */
export { init } from '../node-core.js';

async function loadDriver() {
  try {
    const m = await import('ioredis');
    return m.default ?? m.Redis ?? m;
  } catch (e) {
    throw new Error(
      'intentkey: redisStore({ url }) needs ioredis 5: npm install ioredis@5 (or pass a connected ioredis client as { client })',
      { cause: e },
    );
  }
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

const RETRYABLE_REPLY = /^(LOADING|BUSY|TRYAGAIN|READONLY|MASTERDOWN|CLUSTERDOWN|NOREPLICAS)\b/;

/**
 * ioredis's error as a store error: a server reply (a script's refusal, malformed
 * data, a bad password) failed, unless the server is loading, busy, read-only or
 * asks to try again; anything else (a closed or refused connection, a timeout,
 * retries exhausted) unavailable.
 */
function failure(e) {
  const message = e instanceof Error ? e.message : String(e);
  const reply = e?.name === 'ReplyError';
  const unavailable = !reply || RETRYABLE_REPLY.test(message);
  return storeError(unavailable ? 'unavailable' : 'failed', `redis: ${message}`, e);
}

/** A stored value as the WIT record (the core decodes it); malformed data is a failed store error. */
function decoded(key, value) {
  try {
    return redisDecode(key, value);
  } catch (e) {
    throw storeError('failed', `redis: ${e instanceof Error ? e.message : e}`, e);
  }
}

/** Takes `prefix=…` out of a URL's query. */
function splitPrefix(url) {
  const q = url.indexOf('?');
  if (q < 0) return { url, prefix: undefined };
  let prefix;
  const rest = [];
  for (const pair of url.slice(q + 1).split('&')) {
    if (pair.startsWith('prefix=')) prefix = decodeURIComponent(pair.slice('prefix='.length));
    else if (pair !== '') rest.push(pair);
  }
  return { url: rest.length === 0 ? url.slice(0, q) : `${url.slice(0, q)}?${rest.join('&')}`, prefix };
}

/**
 * A record store in Redis.
 * @param {{ client?: any, url?: string, prefix?: string }} options an ioredis
 *   client (the caller keeps it), or a URL (`redis://host:port/db[?prefix=P]`; the
 *   store makes the client and close() quits it); `prefix` (default `intentkey`)
 *   starts every key the store writes
 */
export async function redisStore(options = {}) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError('redisStore takes { client } (an ioredis client) or { url } (redis://host:port/db)');
  }
  const { redisDefaultPrefix, redisBatch } = coreSchema();
  const S = scripts();
  let client = options.client;
  let owned = false;
  let prefix = options.prefix;
  if (client === undefined) {
    if (typeof options.url !== 'string') throw new TypeError('redisStore needs { client } or { url }');
    const split = splitPrefix(options.url);
    prefix ??= split.prefix;
    const Redis = await loadDriver();
    // Fail fast while Redis is down (store-unavailable) instead of queueing commands.
    client = new Redis(split.url, { maxRetriesPerRequest: 1, enableOfflineQueue: true, lazyConnect: false });
    // Failures reach the caller through the operations (store-unavailable); the
    // client's own reconnect errors are not logged as unhandled.
    client.on('error', () => {});
    owned = true;
  } else if (typeof client.evalsha !== 'function') {
    throw new TypeError('redisStore({ client }) needs an ioredis client');
  } else if (client.options?.keyPrefix) {
    // The scripts build record keys from the prefix they are given; ioredis's
    // keyPrefix would apply to some keys and not to those.
    throw new TypeError("redisStore({ client }): use the store's prefix option, not the client's keyPrefix");
  }
  prefix ??= redisDefaultPrefix;
  if (typeof prefix !== 'string' || prefix === '' || /\s/.test(prefix)) {
    throw new TypeError('redisStore: prefix must be a non-empty string without spaces');
  }
  const recPrefix = `${prefix}:rec:`;
  const index = (stored) => `${prefix}:idx:${stored}`;
  const expiry = `${prefix}:exp`;

  /** EVALSHA, or EVAL when the server does not know the script yet. */
  async function run(name, keys, args) {
    const { sha, source } = S[name];
    try {
      try {
        return await client.evalsha(sha, keys.length, ...keys, ...args);
      } catch (e) {
        if (!(e?.name === 'ReplyError' && String(e.message).startsWith('NOSCRIPT'))) throw e;
        return await client.eval(source, keys.length, ...keys, ...args);
      }
    } catch (e) {
      throw failure(e);
    }
  }
  /** A write: the core's script call (keys and arguments in its layout); true when it wrote. */
  const write = async (op, value) => {
    const { script, keys, args } = redisCall(op, prefix, value);
    return Number(await run(script, keys, args)) === 1;
  };

  try {
    await client.ping();
  } catch (e) {
    if (owned) client.disconnect();
    throw failure(e);
  }

  return {
    kind: 'redis',
    synchronous: false,
    [TRUSTED]: true,
    /** The ioredis client. */
    client,
    /** The prefix of every key this store writes. */
    prefix,

    async insert(r) {
      return write('insert', r);
    },

    async get(key) {
      let value;
      try {
        value = await client.get(`${recPrefix}${key}`);
      } catch (e) {
        throw failure(e);
      }
      return value === null ? undefined : decoded(key, value);
    },

    async complete(c) {
      return write('complete', c);
    },

    async replace(r) {
      return write('replace', r);
    },

    async release(r) {
      return write('release', r);
    },

    async list(status, limit) {
      const stored = storedStatus(status);
      if (limit <= 0) return [];
      const pairs = await run('list', [index(stored)], [stored, String(limit), recPrefix, String(redisBatch)]);
      const out = [];
      for (let i = 0; i + 1 < pairs.length; i += 2) out.push(decoded(pairs[i], pairs[i + 1]));
      return out;
    },

    async purge(now) {
      let deleted = 0;
      for (;;) {
        const [n, lookedAt] = await run('purge', [expiry, index('done')], [String(now), String(redisBatch), recPrefix]);
        deleted += Number(n);
        if (Number(lookedAt) < redisBatch) return deleted;
      }
    },

    /** Quits the client if the store made it (from a URL). */
    async close() {
      if (owned) await client.quit().catch(() => client.disconnect());
    },
  };
}
