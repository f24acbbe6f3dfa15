#!/usr/bin/env node
// npm run bench [-- --rounds N]
//
// Per-key cost of the intentkey component in Node (jco glue + the Rust core in
// WebAssembly) against a hand-written node:crypto port of the default policy
// (port.mjs, benchmark only), on the inputs of ../bench/inputs.json. Then runs the
// port over tests/vectors/fields_default_test.json and reports what it gets wrong.
//
// Methods run alternately, round after round; each cell is the best round
// (the median in brackets). The machine is shared and noisy: compare within a run.
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { answerLines, createKeyer, uuidKey } from '../src/index.js';
import { parseVectorFile } from '../test/vector-runner.js';
import { portKeyer, portMaterial } from './port.mjs';

const repo = new URL('../../', import.meta.url);
const roundsArg = process.argv.indexOf('--rounds');
const ROUNDS = roundsArg > 0 ? Number(process.argv[roundsArg + 1]) : 15;
const BATCH = 1000;
const KEYS_PER_ROUND = 4000;

const TARGET_SINGLE_US = 10;
const TARGET_BATCH_US = 3;

const inputs = JSON.parse(readFileSync(new URL('bench/inputs.json', repo), 'utf8'));

function benchCase(name, c) {
  const keyer = createKeyer({ secret: c.secret_hex });
  const port = portKeyer(c.secret_hex);
  const secret = Buffer.from(c.secret_hex, 'hex');
  // Distinct requests, as a real batch would be: only request_id changes.
  const objects = Array.from({ length: BATCH }, (_, i) => ({ ...c.payload, request_id: `${c.payload.request_id}-${i}` }));
  const texts = objects.map((o) => JSON.stringify(o));
  const intents = texts.map((payload) => ({
    tenantId: c.tenant_id,
    actionType: c.action_type,
    payload,
    intentEpoch: c.intent_epoch,
  }));
  const objectIntents = objects.map((payload, i) => ({ ...intents[i], payload }));
  const lines = objects.map((payload, i) =>
    JSON.stringify({ id: i, secret_hex: c.secret_hex, tenant_id: c.tenant_id, action_type: c.action_type, payload, intent_epoch: c.intent_epoch }),
  );
  const material = keyer.material(intents[0]);
  const random16 = new Uint8Array(16);

  // Every method must give the same key before it is timed.
  const key = keyer.derive(intents[0]);
  const checks = {
    'derive (object payload)': keyer.derive(objectIntents[0]),
    deriveMany: keyer.deriveMany(intents.slice(0, 1))[0].key,
    answerLines: JSON.parse(answerLines(lines.slice(0, 1))[0]).key,
    'JS port': port.derive(c.tenant_id, c.action_type, objects[0], c.intent_epoch),
  };
  for (const [what, got] of Object.entries(checks)) {
    if (got !== key) throw new Error(`${name}: ${what} gives ${got}, derive gives ${key}`);
  }

  let sink = 0;
  const methods = [
    ['derive, 1 call (payload text)', 1, (i) => keyer.derive(intents[i % BATCH]).length],
    ['derive, 1 call (payload object)', 1, (i) => keyer.derive(objectIntents[i % BATCH]).length],
    [`deriveMany, ${BATCH} per call`, BATCH, () => keyer.deriveMany(intents).length],
    [`answerLines, ${BATCH} per call`, BATCH, () => answerLines(lines).length],
    ['JS port (node:crypto)', 1, (i) => port.derive(c.tenant_id, c.action_type, objects[i % BATCH], c.intent_epoch).length],
    ['createHmac of the material alone', 1, () => createHmac('sha256', secret).update(material).digest('hex').length],
    ['empty component call (uuidKey)', 1, () => uuidKey(random16).length],
  ];
  const samples = methods.map(() => []);
  for (let round = 0; round < ROUNDS + 2; round++) {
    methods.forEach(([, perCall, fn], m) => {
      const calls = KEYS_PER_ROUND / perCall;
      const start = process.hrtime.bigint();
      for (let i = 0; i < calls; i++) sink += fn(i);
      const us = Number(process.hrtime.bigint() - start) / 1000 / KEYS_PER_ROUND;
      if (round >= 2) samples[m].push(us); // two warm-up rounds
    });
  }
  if (sink === 0) throw new Error('nothing ran');
  return methods.map(([label], m) => {
    const xs = samples[m].sort((a, b) => a - b);
    return { label, best: xs[0], median: xs[xs.length >> 1] };
  });
}

function fmt(r) {
  return `${r.best.toFixed(2)} (${r.median.toFixed(2)})`;
}

// ---- timing ----
const results = {};
for (const [name, c] of Object.entries(inputs.cases)) results[name] = benchCase(name, c);
const labels = results[Object.keys(results)[0]].map((r) => r.label);

console.log(`## intentkey in Node ${process.version}: µs per key, best of ${ROUNDS} rounds (median)\n`);
console.log(`| case | ${labels.join(' | ')} |`);
console.log(`|---|${labels.map(() => '---').join('|')}|`);
for (const [name, rows] of Object.entries(results)) console.log(`| ${name} | ${rows.map(fmt).join(' | ')} |`);

console.log('\nTargets (best round):');
for (const [name, rows] of Object.entries(results)) {
  const single = rows[0].best;
  const batched = Math.min(rows[2].best, rows[3].best);
  const port = rows[4].best;
  console.log(
    `- ${name}: single call ${single.toFixed(2)} µs (target ≤ ${TARGET_SINGLE_US}: ${single <= TARGET_SINGLE_US ? 'met' : 'NOT met'}); ` +
      `batched ${batched.toFixed(2)} µs/key (target ≤ ${TARGET_BATCH_US}: ${batched <= TARGET_BATCH_US ? 'met' : 'NOT met'}); ` +
      `JS port ${port.toFixed(2)} µs, component single call ${(single / port).toFixed(1)}× the port, batched ${(batched / port).toFixed(1)}×`,
  );
}

// ---- what the port gets wrong ----
const doc = parseVectorFile(readFileSync(new URL('tests/vectors/fields_default_test.json', repo), 'utf8'));
let valid = 0;
let invalid = 0;
const wrong = [];
let accepted = 0;
for (const group of doc.testGroups) {
  if (group.type !== 'FieldsDerivation' || group.policy !== null) continue;
  for (const t of group.tests) {
    let got;
    let gotMaterial;
    try {
      const payload = JSON.parse(t.payload);
      const epoch = Number(t.intentEpoch);
      gotMaterial = portMaterial(t.tenantId, t.actionType, payload, epoch);
      got = portKeyer(t.secretHex).derive(t.tenantId, t.actionType, payload, epoch);
    } catch (e) {
      got = undefined;
      gotMaterial = `throws ${e.constructor.name}: ${e.message}`;
    }
    if (t.result === 'valid') {
      valid++;
      if (got !== t.key) wrong.push({ t, gotMaterial });
    } else {
      invalid++;
      if (got !== undefined) accepted++;
    }
  }
}
console.log(
  `\n## The JS port on fields_default_test.json\n\n` +
    `${wrong.length} of ${valid} valid vectors get the wrong key ` +
    `(${wrong.filter((w) => w.gotMaterial.startsWith('throws')).length} of them throw); ` +
    `it also returns a key for ${accepted} of ${invalid} invalid vectors that the core refuses.\n`,
);
const byFlag = new Map(); // flag -> [wrong, valid vectors with it]
for (const group of doc.testGroups) {
  for (const t of group.tests) {
    if (t.result !== 'valid' || group.policy !== null) continue;
    for (const f of t.flags) byFlag.set(f, [0, (byFlag.get(f)?.[1] ?? 0) + 1]);
  }
}
for (const w of wrong) for (const f of w.t.flags) byFlag.get(f)[0]++;
const flagCells = [...byFlag].sort((a, b) => b[1][0] - a[1][0] || a[0].localeCompare(b[0]));
console.log(`Wrong keys per flag (wrong/valid vectors with the flag): ${flagCells.map(([f, [w, n]]) => `${f} ${w}/${n}`).join(', ')}\n`);
const shown = new Set();
const examples = [];
for (const flag of ['HalfUpRounding', 'FloatAmount', 'CaseFolding', 'PythonWhitespace', 'NotWhitespace', 'JsonEscaping', 'IntegerAmount', 'Precision28', 'DecimalString', 'BucketBoundary']) {
  const w = wrong.find((x) => x.t.flags.includes(flag) && !shown.has(x.t.tcId));
  if (!w) continue;
  shown.add(w.t.tcId);
  examples.push(w);
}
for (const { t, gotMaterial } of examples.slice(0, 8)) {
  console.log(`- #${t.tcId} ${t.comment} [${t.flags.join(', ')}]`);
  console.log(`    payload ${t.payload}`);
  console.log(`    core    ${t.material}`);
  console.log(`    port    ${gotMaterial}`);
}
