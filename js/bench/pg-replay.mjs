#!/usr/bin/env node
// npm run bench:pg-replay [-- --rounds R --calls N]
//
// Where a PostgreSQL replay's time goes, layer by layer, in one process and one
// run (rounds alternate the layers; a figure is the median round's µs per call):
//   - SELECT 1: one round trip;
//   - the stored answer by key: a prepared SELECT of one column (the HTTP floor's replay);
//   - store.get(key): the core's `get` statement (16 columns), the row decoded by the core;
//   - store.claim(record) of a key that is done: the core's one-statement claim
//     (the insert, which loses, and the record it lost to, read in the same statement);
//   - guard.run of that key: the run flow around the claim (create, advance,
//     perform with its deadline, the outcome), which answers the stored response.
// A fresh schema, dropped at the end. Needs PostgreSQL as the tests do (PGHOST, …).
import pg from 'pg';
import { createGuard, jsonResponse } from '../src/index.js';
import { pgStore } from '../src/stores/pg.js';
import { freshSchema } from '../test/support/pg.js';

const argv = process.argv.slice(2);
const arg = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 && i + 1 < argv.length ? Number(argv[i + 1]) : fallback;
};
const ROUNDS = arg('--rounds', 7);
const CALLS = arg('--calls', 2000);

const schema = await freshSchema();
const pool = new pg.Pool({ ...schema.config, max: 4 });
try {
  const store = await pgStore(pool);
  const guard = createGuard({ store });
  const claim = { key: 'k1', fingerprint: 'fp', tenantId: 't', actionType: 'a' };
  const stored = jsonResponse(201, { id: 1 }, [['Location', '/orders/1']]);
  await guard.run(claim, async () => stored);
  const record = await store.get('k1');
  const repeat = { ...record, ownerToken: 'ff'.repeat(16), status: 'in-flight', response: undefined, expiresAt: undefined };
  const layers = {
    'SELECT 1': () => pool.query({ name: 'bench-one', text: 'SELECT 1' }),
    'the stored answer by key (one column)': () =>
      pool.query({ name: 'bench-body', text: 'SELECT response_body FROM intentkey_records WHERE key = $1', values: ['k1'] }),
    'store.get (16 columns, decoded by the core)': () => store.get('k1'),
    'store.claim of a done key (one statement)': async () => {
      const answer = await store.claim(repeat);
      if (answer === false || answer === true) throw new Error('the claim did not answer the record');
    },
    'guard.run replay (the run flow around the claim)': async () => {
      const r = await guard.run(claim, async () => {
        throw new Error('a replay ran the effect');
      });
      if (!r.replayed) throw new Error('not a replay');
    },
  };
  const results = Object.fromEntries(Object.keys(layers).map((k) => [k, []]));
  for (let round = 0; round < ROUNDS; round++) {
    const names = Object.keys(layers);
    for (let j = 0; j < names.length; j++) {
      const name = names[(j + round) % names.length];
      const f = layers[name];
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < CALLS; i++) await f();
      results[name].push(Number(process.hrtime.bigint() - t0) / CALLS / 1000);
    }
  }
  console.log(`${ROUNDS} rounds × ${CALLS} calls per layer, one at a time; median round, µs per call\n`);
  console.log('| layer | µs per call | over the layer above |');
  console.log('|---|---|---|');
  let previous = null;
  for (const [name, xs] of Object.entries(results)) {
    const m = xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    console.log(`| ${name} | ${m.toFixed(1)} | ${previous === null ? '—' : `+${(m - previous).toFixed(1)}`} |`);
    previous = m;
  }
} finally {
  await pool.end();
  await schema.drop();
}
