// MySQL / MariaDB for the tests: the server at 127.0.0.1:3306 (user root, empty
// password, database `test`; MYSQL_URL overrides, as mysql://user:pass@host:port/db).
// Every test works in a database of its own (ik_js_<random>) and drops it at
// the end: other suites may use the same server at the same time.
//
// When the server cannot be reached: with CI=true the tests FAIL, outside CI
// they are skipped with a message saying so.
import mysql from 'mysql2/promise';
import { freshNamed } from './fresh.js';

export const MYSQL_URL = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

/** The server's address, without the password, for messages. */
function where() {
  const u = new URL(MYSQL_URL);
  return `${decodeURIComponent(u.username)}@${u.host}${u.pathname}`;
}

/** A connection to the server's `test` database (the caller ends it). */
export function adminConnection(options = {}) {
  return mysql.createConnection({ uri: MYSQL_URL, ...options });
}

/** null when the server answers, else why not. */
async function unreachable() {
  let c;
  try {
    c = await adminConnection({ connectTimeout: 5000 });
    await c.query('SELECT 1');
    return null;
  } catch (e) {
    return e instanceof Error ? e.message || String(e.code) : String(e);
  } finally {
    await c?.end().catch(() => {});
  }
}

/**
 * What the MySQL tests do here: `{ skip: false }` to run, `{ skip: message }`
 * outside CI when the server is unreachable (and a `SKIPPED: <file>: <why>` line,
 * which the skips reporter counts). With CI=true an unreachable server throws,
 * failing the test file loudly.
 * @param {string} file the test file, for the SKIPPED line
 */
export async function mysqlAvailability(file) {
  const why = await unreachable();
  if (why === null) return { skip: false };
  if (process.env.CI === 'true') {
    throw new Error(
      `MySQL/MariaDB at ${where()} is unreachable (${why}) and CI=true: the MySQL tests cannot run. ` +
        'Start the server (service mariadb start) or set MYSQL_URL.',
    );
  }
  const message = `MySQL/MariaDB at ${where()} is unreachable (${why}); MySQL tests SKIPPED (outside CI; with CI=true they fail)`;
  console.log(`SKIPPED: ${file}: ${message}`);
  return { skip: `SKIPPED: ${message}` };
}

/** The server's URL with `database` as its path. */
export function urlOf(database) {
  const u = new URL(MYSQL_URL);
  u.pathname = `/${database}`;
  return u.toString();
}

/** A fresh, empty database: `url` points at it; drop() removes it and everything in it. */
export async function freshDatabase() {
  const { name, drop } = await freshNamed(adminConnection, (n) => `CREATE DATABASE ${n}`, (n) => `DROP DATABASE IF EXISTS ${n}`);
  return { name, url: urlOf(name), drop };
}
