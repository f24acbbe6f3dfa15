// Redis for the tests: the server at 127.0.0.1:6379 (REDIS_URL overrides),
// database 2 (database 0 belongs to other suites, 1 to the Rust tests). Every
// test works under a key prefix of its own (ik-js-<random>) and deletes only the
// keys under it at the end: never FLUSHDB.
//
// When the server cannot be reached: with CI=true the tests FAIL, outside CI
// they are skipped with a message saying so.
import { randomBytes } from 'node:crypto';
import Redis from 'ioredis';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/2';

/** null when the server answers, else why not. */
async function unreachable() {
  const client = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 5000 });
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
 * What the Redis tests do here: `{ skip: false }` to run, `{ skip: message }`
 * outside CI when the server is unreachable (and a `SKIPPED: <file>: <why>` line).
 * With CI=true an unreachable server throws, failing the test file loudly.
 * @param {string} file the test file, for the SKIPPED line
 */
export async function redisAvailability(file) {
  const why = await unreachable();
  if (why === null) return { skip: false };
  if (process.env.CI === 'true') {
    throw new Error(`Redis at ${REDIS_URL} is unreachable (${why}) and CI=true: the Redis tests cannot run. Start redis-server or set REDIS_URL.`);
  }
  const message = `Redis at ${REDIS_URL} is unreachable (${why}); Redis tests SKIPPED (outside CI; with CI=true they fail)`;
  console.log(`SKIPPED: ${file}: ${message}`);
  return { skip: `SKIPPED: ${message}` };
}

/** A fresh key prefix and a client; drop() deletes the prefix's keys and quits. */
export async function freshPrefix() {
  const prefix = `ik-js-${randomBytes(6).toString('hex')}`;
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
