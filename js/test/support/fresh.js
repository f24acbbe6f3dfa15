// A place of a test's own on a shared server (a PostgreSQL schema, a MySQL
// database): named ik_js_<random>, made on an admin connection, and dropped
// with everything in it on another; other suites use the same server at the same time.
import { randomBytes } from 'node:crypto';

/** Runs fn on a connection `connect()` opens, then ends it. */
async function onConnection(connect, fn) {
  const c = await connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/**
 * Makes a fresh place: `create(name)` is the statement that makes it, `remove(name)`
 * the one that drops it, each run on its own connection from `connect()`.
 * @returns {Promise<{ name: string, drop: () => Promise<void> }>}
 */
export async function freshNamed(connect, create, remove) {
  const name = `ik_js_${randomBytes(6).toString('hex')}`;
  await onConnection(connect, (c) => c.query(create(name)));
  return {
    name,
    async drop() {
      await onConnection(connect, (c) => c.query(remove(name)));
    },
  };
}
