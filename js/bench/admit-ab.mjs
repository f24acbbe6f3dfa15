// node bench/admit-ab.mjs BEFORE_JS_DIR AFTER_JS_DIR
//
// endpoint.admit through the component, from two builds of this package (two
// checkouts' js/ directories, each after `npm ci && npm run build`), in one
// process: a POST with a small JSON body and with a charge-sized one, a new key
// each call. The two builds take turns, 15 rounds of 20,000 calls each, the
// order swapped each round; a figure is the median of the rounds' µs per call.
// It first checks that both builds admit the request to the same storage key
// and fingerprint. Figures: BENCHMARKS.md ("Admission in one pass").
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
const [beforeDir, afterDir] = process.argv.slice(2);
if (!beforeDir || !afterDir) throw new Error('usage: node bench/admit-ab.mjs BEFORE_JS_DIR AFTER_JS_DIR (two built js/ directories)');
const before = await import(new URL('src/index.js', pathToFileURL(resolve(beforeDir) + '/')).href);
const after = await import(new URL('src/index.js', pathToFileURL(resolve(afterDir) + '/')).href);
const SECRET = 'ab'.repeat(32);
const bodies = {
  order: new TextEncoder().encode('{"sku":"A1","qty":2}'),
  charge: new TextEncoder().encode('{"amount":2000,"currency":"usd","customer":"cus_1","description":"order 42"}'),
};
function setup(api, body) {
  const endpoint = api.createEndpoint({ secret: SECRET });
  let i = 0;
  return () => endpoint.admit({ tenantId: 'acct_1', method: 'POST', route: '/orders', keyValues: [`k-${i++}`], contentType: 'application/json', body }, 1_700_000_000);
}
function time(op, n) {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) op();
  return Number(process.hrtime.bigint() - t0) / n / 1000;
}
for (const [name, body] of Object.entries(bodies)) {
  const ops = { before: setup(before, body), after: setup(after, body) };
  const a = ops.before(), b = ops.after();
  if (a.attempt.fingerprint !== b.attempt.fingerprint || a.attempt.key !== b.attempt.key) throw new Error('different attempt');
  for (const op of Object.values(ops)) time(op, 20000);
  const res = { before: [], after: [] };
  for (let r = 0; r < 15; r++) for (const k of r % 2 ? ['after', 'before'] : ['before', 'after']) res[k].push(time(ops[k], 20000));
  const med = (xs) => xs.slice().sort((x, y) => x - y)[Math.floor(xs.length / 2)];
  console.log(`${name}: before ${med(res.before).toFixed(2)} µs, after ${med(res.after).toFixed(2)} µs per admit (median of 15 rounds × 20,000)`);
}
