// PostgreSQL for the tests: the server at 127.0.0.1:5432 (trust auth, database
// `test`, user `postgres`; PGHOST, PGPORT, PGUSER and PGDATABASE override).
// Every test works in a schema of its own (ik_js_<random>) and drops it at the
// end: other suites (the Rust host's) use the same database at the same time.
//
// When the server cannot be reached: with CI=true the tests FAIL, outside CI
// they are skipped with a message saying so.
import pg from 'pg';
import { freshNamed } from './fresh.js';

export const PG_CONFIG = Object.freeze({
  host: process.env.PGHOST ?? '127.0.0.1',
  port: Number(process.env.PGPORT ?? 5432),
  user: process.env.PGUSER ?? 'postgres',
  database: process.env.PGDATABASE ?? 'test',
});

const where = `${PG_CONFIG.user}@${PG_CONFIG.host}:${PG_CONFIG.port}/${PG_CONFIG.database}`;

/** null when the server answers, else why not. */
async function unreachable() {
  const client = new pg.Client({ ...PG_CONFIG, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return null;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * What the PostgreSQL tests do here: `{ skip: false }` to run, `{ skip: message }`
 * outside CI when the server is unreachable (and a `SKIPPED: <file>: <why>` line,
 * which the skips reporter counts). With CI=true an unreachable server throws,
 * failing the test file loudly.
 * @param {string} file the test file, for the SKIPPED line
 */
export async function pgAvailability(file) {
  const why = await unreachable();
  if (why === null) return { skip: false };
  if (process.env.CI === 'true') {
    throw new Error(
      `PostgreSQL at ${where} is unreachable (${why}) and CI=true: the PostgreSQL tests cannot run. ` +
        'Start the server (pg_ctlcluster <version> main start) or fix PGHOST/PGPORT.',
    );
  }
  const message = `PostgreSQL at ${where} is unreachable (${why}); PostgreSQL tests SKIPPED (outside CI; with CI=true they fail)`;
  console.log(`SKIPPED: ${file}: ${message}`);
  return { skip: `SKIPPED: ${message}` };
}

/** A client on PG_CONFIG, connected (the caller ends it). */
async function adminClient() {
  const c = new pg.Client(PG_CONFIG);
  await c.connect();
  return c;
}

/**
 * A fresh schema: `config` connects with it as the search_path; drop() removes
 * it and everything in it.
 */
export async function freshSchema() {
  const { name, drop } = await freshNamed(adminClient, (n) => `CREATE SCHEMA ${n}`, (n) => `DROP SCHEMA IF EXISTS ${n} CASCADE`);
  return { name, config: { ...PG_CONFIG, options: `-c search_path=${name}` }, drop };
}
