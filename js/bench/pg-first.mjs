#!/usr/bin/env node
// npm run bench:pg-first [-- --rounds R --calls N --async-commit]
//
// Where a PostgreSQL first request's time goes, layer by layer, in one process
// and one run (the layers take turns call by call, in an order shuffled at each
// turn, ROUNDS × CALLS calls each, each call a new key; a figure is a quantile
// of the calls' µs):
//   - two bare commits: the HTTP bench's floor (a bare INSERT … ON CONFLICT DO
//     NOTHING of 8 columns, then a bare UPDATE writing the answer), prepared;
//   - the core's insert + complete: its two statements (the claim's insert of
//     every column, the completion fenced on the owner token), their values
//     bound here once (only the key changes), run on the same pool: what the
//     core's statements cost the server over the floor's;
//   - the core's claim + complete: the same with the one-statement claim (the
//     insert, and the record it lost to read in the same statement), which the
//     guard sends so that a replay is one round trip;
//   - store.claim + store.complete: those two through pgStore (the values made
//     by the core from the record, the claim's row decoded by the core);
//   - guard.run first call: the run flow around them (create or rerun the
//     flow, advance to the effect, the owner token, the effect's answer
//     lowered, advance to the end, each store call within its deadline).
// --async-commit runs every layer with synchronous_commit off (the session's
// setting): both sides still commit twice, but no commit waits for the WAL
// flush, whose time on a shared disk is most of the noise; what is left is
// what each layer costs the client and the server's CPU.
// The HTTP request adds the adapter (peek, admit, hold, finish: the memory row
// of npm run bench:http). A fresh schema, dropped at the end. Needs PostgreSQL
// as the tests do (PGHOST, …).
import pg from 'pg';
import { createGuard, jsonResponse } from '../src/index.js';
import { pgStore } from '../src/stores/pg.js';
import { sqlParams, sqlStatements } from '../src/stores/schema.js';
import { freshSchema } from '../test/support/pg.js';

const argv = process.argv.slice(2);
const arg = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 && i + 1 < argv.length ? Number(argv[i + 1]) : fallback;
};
const ROUNDS = arg('--rounds', 7);
const CALLS = arg('--calls', 1000);
const ASYNC_COMMIT = argv.includes('--async-commit');

const schema = await freshSchema();
const pool = new pg.Pool({ ...schema.config, max: 4, ...(ASYNC_COMMIT ? { options: `${schema.config.options} -c synchronous_commit=off` } : {}) });
try {
  // Every layer writes into the fresh schema (never into what search_path would find otherwise).
  const { rows: where } = await pool.query('SELECT current_schema()');
  if (where[0].current_schema !== schema.name) throw new Error(`the bench would write into ${where[0].current_schema}, not ${schema.name}`);
  const store = await pgStore(pool);
  const guard = createGuard({ store });
  const answer = jsonResponse(201, { id: 'ord_1' }, [['Location', '/orders/ord_1']]);
  const answerBytes = Buffer.from(JSON.stringify({ id: 'ord_1' }));
  const token = '0123456789abcdef0123456789abcdef';
  let seq = 0;
  const now = () => BigInt(Math.floor(Date.now() / 1000));
  // A record as the core hands it to the store's insert (WIT `record`).
  const recordOf = (key) => ({
    key,
    fingerprint: 'a3f1c2d4e5b60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90',
    tenantId: 'tenant-1',
    actionType: 'POST /orders',
    status: 'in-flight',
    ownerToken: token,
    createdAt: now(),
    lookups: 0,
    nextLookupAt: undefined,
    response: undefined,
    expiresAt: undefined,
  });
  const completionOf = (key) => ({
    key,
    ownerToken: token,
    response: { status: 201, contentType: 'application/json', headers: [['location', '/orders/ord_1']], body: answerBytes },
    expiresAt: now() + 86400n,
    fast: false,
  });
  // The core's statements with their values bound once, as pgStore binds them; only the key changes.
  const sql = sqlStatements('postgres', undefined);
  const bound = (values) => values.map((v) => (v.tag === 'null' ? null : v.tag === 'integer' ? v.val.toString() : v.tag === 'bytes' ? Buffer.from(v.val) : v.val));
  const insertValues = bound(sqlParams('insert', recordOf('template')));
  const completeValues = bound(sqlParams('complete', completionOf('template')));
  const withKey = (values, key) => [key, ...values.slice(1)];
  const core = async (claimName, prefix) => {
    const key = `${prefix}-${seq++}`;
    const st = sql[claimName];
    const ins = await pool.query({ name: `bench-${claimName}`, text: st.text, values: withKey(insertValues, key), rowMode: 'array' });
    const won = claimName === 'claim' ? Number(ins.rows[0][0]) === 1 : ins.rowCount === 1;
    if (!won) throw new Error(`the core's ${claimName} lost a new key`);
    const done = await pool.query({ name: 'bench-complete', text: sql.complete.text, values: withKey(completeValues, key) });
    if (done.rowCount !== 1) throw new Error("the core's complete lost its record");
  };
  const layers = {
    'two bare commits (the floor)': async () => {
      const key = `floor-${seq++}`;
      const ins = await pool.query({
        name: 'bench-floor-insert',
        text:
          'INSERT INTO intentkey_records (key, fingerprint, tenant_id, action_type, status, owner_token, created_at, lookups) ' +
          "VALUES ($1, 'fp', 't', 'a', 'in_flight', $2, $3, 0) ON CONFLICT (key) DO NOTHING",
        values: [key, token, Math.floor(Date.now() / 1000)],
      });
      if (ins.rowCount !== 1) throw new Error('the floor lost a new key');
      await pool.query({
        name: 'bench-floor-update',
        text:
          "UPDATE intentkey_records SET status = 'done', response_status = 201, response_content_type = 'application/json', " +
          'response_headers = NULL, response_body = $2, expires_at = $3, next_lookup_at = NULL WHERE key = $1',
        values: [key, answerBytes, Math.floor(Date.now() / 1000) + 86400],
      });
    },
    "the core's insert + complete, bound by hand": () => core('insert', 'insert'),
    "the core's claim + complete, bound by hand": () => core('claim', 'claim'),
    'store.claim + store.complete (through pgStore)': async () => {
      const key = `store-${seq++}`;
      if ((await store.claim(recordOf(key))) !== true) throw new Error('store.claim lost a new key');
      if ((await store.complete(completionOf(key))) !== true) throw new Error('store.complete lost its record');
    },
    'guard.run first call (the run flow)': async () => {
      const r = await guard.run(
        { key: `run-${seq++}`, fingerprint: 'fp', tenantId: 'tenant-1', actionType: 'POST /orders' },
        async () => answer,
      );
      if (r.outcome !== 'owned' || r.finished !== 'stored') throw new Error(`guard.run: ${r.outcome} ${r.finished}`);
    },
  };
  const results = Object.fromEntries(Object.keys(layers).map((k) => [k, []]));
  // One warm-up round (prepared statements, the component's code).
  for (const f of Object.values(layers)) for (let i = 0; i < 100; i++) await f();
  // The layers take turns call by call: a slow moment of the disk or the
  // machine falls on all of them alike. Their order is shuffled at each turn
  // (Fisher–Yates, a fixed-seed xorshift: the same in every run): a call costs
  // a few µs more right after some others, which a fixed order would charge
  // to the same layer every time.
  const entries = Object.entries(layers);
  let seed = 0x9e3779b9;
  const next = () => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return seed >>> 0;
  };
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < CALLS; i++) {
      for (let j = entries.length - 1; j > 0; j--) {
        const k = next() % (j + 1);
        [entries[j], entries[k]] = [entries[k], entries[j]];
      }
      for (const [name, f] of entries) {
        const t0 = process.hrtime.bigint();
        await f();
        results[name].push(Number(process.hrtime.bigint() - t0) / 1000);
      }
    }
  }
  const quantile = (xs, q) => xs[Math.round((xs.length - 1) * q)];
  console.log(`${ROUNDS * CALLS} calls per layer, the layers taking turns call by call, a new key each${ASYNC_COMMIT ? ', synchronous_commit off' : ''}; µs per call\n`);
  console.log('| layer | p25 | median | p75 | median over the layer above | over the floor |');
  console.log('|---|---|---|---|---|---|');
  let previous = null;
  let floor = null;
  for (const [name, xs] of Object.entries(results)) {
    xs.sort((a, b) => a - b);
    const m = quantile(xs, 0.5);
    floor ??= m;
    const above = previous === null ? '—' : `${m >= previous ? '+' : ''}${(m - previous).toFixed(1)}`;
    console.log(`| ${name} | ${quantile(xs, 0.25).toFixed(1)} | ${m.toFixed(1)} | ${quantile(xs, 0.75).toFixed(1)} | ${above} | ${(m / floor).toFixed(2)}× |`);
    previous = m;
  }
} finally {
  await pool.end();
  await schema.drop();
}
