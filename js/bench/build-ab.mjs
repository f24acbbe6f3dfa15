// node bench/build-ab.mjs BEFORE_JS_DIR AFTER_JS_DIR
//
// Two builds of this package (two checkouts' js/ directories, each after
// `npm ci && npm run build`) in one process, on the same calls through the
// component:
// - endpoint.admit of a POST with a small JSON body and with a charge-sized
//   one, a new key each call;
// - keyer.derive of ../bench/inputs.json's typical and unicode intents, from
//   the payload's JSON text.
// The two builds take turns, 15 rounds of 20,000 calls each, the order swapped
// each round; a figure is the median of the rounds' µs per call. Each pair is
// first checked to give the same storage key and fingerprint, or the same key.
// Figures: BENCHMARKS.md ("Admission in one pass", "Text folded in one pass").
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
const [beforeDir, afterDir] = process.argv.slice(2);
if (!beforeDir || !afterDir) throw new Error('usage: node bench/build-ab.mjs BEFORE_JS_DIR AFTER_JS_DIR (two built js/ directories)');
const builds = {
  before: await import(new URL('src/index.js', pathToFileURL(resolve(beforeDir) + '/')).href),
  after: await import(new URL('src/index.js', pathToFileURL(resolve(afterDir) + '/')).href),
};
const SECRET = 'ab'.repeat(32);
const bodies = {
  order: new TextEncoder().encode('{"sku":"A1","qty":2}'),
  charge: new TextEncoder().encode('{"amount":2000,"currency":"usd","customer":"cus_1","description":"order 42"}'),
};
const inputs = JSON.parse(readFileSync(new URL('../../bench/inputs.json', import.meta.url), 'utf8')).cases;

/** Each case: a name, and for a build's API a call whose answer both builds must agree on. */
const cases = [
  ...Object.entries(bodies).map(([name, body]) => [`admit ${name}`, (api) => {
    const endpoint = api.createEndpoint({ secret: SECRET });
    let i = 0;
    return () => {
      const { attempt } = endpoint.admit({ tenantId: 'acct_1', method: 'POST', route: '/orders', keyValues: [`k-${i++}`], contentType: 'application/json', body }, 1_700_000_000);
      return `${attempt.key} ${attempt.fingerprint}`;
    };
  }]),
  ...Object.entries(inputs).map(([name, c]) => [`derive ${name}`, (api) => {
    const keyer = api.createKeyer({ secret: c.secret_hex });
    const intent = { tenantId: c.tenant_id, actionType: c.action_type, payload: JSON.stringify(c.payload), intentEpoch: c.intent_epoch };
    return () => keyer.derive(intent);
  }]),
];

function time(op, n) {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) op();
  return Number(process.hrtime.bigint() - t0) / n / 1000;
}
const med = (xs) => xs.slice().sort((x, y) => x - y)[Math.floor(xs.length / 2)];
for (const [name, setup] of cases) {
  // Two fresh calls of each build: the answers of the same call must agree.
  const ops = { before: setup(builds.before), after: setup(builds.after) };
  const checks = { before: setup(builds.before)(), after: setup(builds.after)() };
  if (checks.before !== checks.after) throw new Error(`${name}: the builds disagree (${checks.before} against ${checks.after})`);
  for (const op of Object.values(ops)) time(op, 20000);
  const res = { before: [], after: [] };
  for (let r = 0; r < 15; r++) for (const k of r % 2 ? ['after', 'before'] : ['before', 'after']) res[k].push(time(ops[k], 20000));
  const [b, a] = [med(res.before), med(res.after)];
  console.log(`${name}: before ${b.toFixed(2)} µs, after ${a.toFixed(2)} µs per call (${(a / b).toFixed(2)}×; median of 15 rounds × 20,000)`);
}
