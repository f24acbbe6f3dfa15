#!/usr/bin/env node
// npm run bench:glue [-- --rounds N --ms M]
//
// What the build's rewrites of jco's glue (scripts/glue.mjs) buy, in one process:
// the same API (src/core.js, src/guard.js) built twice over the same compiled core
// modules, once on the patched glue the package ships (vendor/intentkey.js) and
// once on the glue as jco wrote it (bench/.unpatched/intentkey.js, which
// `node scripts/build.mjs --unpatched-glue bench/.unpatched` keeps; this script
// runs that build when the copy is missing or does not patch into vendor/'s glue).
//
// Cases, on the same inputs for both glues:
//   - key derivation: keyer.derive of the typical payments intent of
//     ../bench/inputs.json (payload text), and keyer.deriveMany of 1,000 of them;
//   - HTTP: endpoint.admit of a POST with a 1 KiB JSON body (key, body and
//     fingerprint rules), and keyer.fingerprint of the same 1 KiB JSON as text;
//   - the guard on memoryStore: guard.run with a new key (first call) and with a
//     stored one (replay);
//   - non-ASCII: keyer.derive of the unicode intent of inputs.json, keyer.fingerprint
//     of a 1 KiB JSON text with non-ASCII letters, and a guard.run replay whose
//     tenant and action are not ASCII (the rewrites' slow path).
// Each round runs every case on both glues back to back, the order swapped each
// round (patched first, then unpatched first), so a noisy moment hits both. A
// case's figure is the median over rounds of its operations per second; the ratio
// is patched ÷ unpatched of those medians, and beside it the median of the
// per-round ratios (each taken from two back-to-back timings).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { createApi } from '../src/core.js';
import { guardFactory } from '../src/guard.js';
import { memoryStore } from '../src/stores/memory.js';
import { patchGlue } from '../scripts/glue.mjs';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const ROUNDS = arg('--rounds', 15);
const MS = arg('--ms', 60); // per case, per glue, per round
const WARMUP_ROUNDS = 3;

const js = new URL('../', import.meta.url);
const vendor = new URL('vendor/', js);
const unpatchedDir = new URL('bench/.unpatched/', js);

// ---- the two glues, from the same jco output ----
function pairIsCurrent() {
  const patched = new URL('intentkey.js', vendor);
  const plain = new URL('intentkey.js', unpatchedDir);
  if (!existsSync(patched) || !existsSync(plain)) return false;
  return patchGlue(readFileSync(plain, 'utf8'), 'bench/.unpatched/intentkey.js') === readFileSync(patched, 'utf8');
}
if (!pairIsCurrent()) {
  console.error('glue: building vendor/ and keeping the unpatched glue in bench/.unpatched/');
  const build = spawnSync(
    process.execPath,
    [fileURLToPath(new URL('scripts/build.mjs', js)), '--unpatched-glue', fileURLToPath(unpatchedDir)],
    { stdio: 'inherit' },
  );
  if (build.status !== 0 || !pairIsCurrent()) {
    console.error('glue: the build failed, or its unpatched glue does not patch into vendor/intentkey.js');
    process.exit(1);
  }
}

const modules = new Map();
function getCoreModule(name) {
  let module = modules.get(name);
  if (module === undefined) {
    module = new WebAssembly.Module(readFileSync(new URL(name, vendor)));
    modules.set(name, module);
  }
  return module;
}

async function variant(label, glueUrl) {
  const { instantiate } = await import(glueUrl.href);
  const api = createApi({ instantiate, getCoreModule, world: 'intentkey' });
  return { label, api, createGuard: guardFactory(api) };
}
const variants = [
  await variant('patched', new URL('intentkey.js', vendor)),
  await variant('unpatched', new URL('intentkey.js', unpatchedDir)),
];

// ---- inputs ----
const inputs = JSON.parse(readFileSync(new URL('../bench/inputs.json', js), 'utf8')).cases;
const BATCH = 1000;

/** Distinct intents of one inputs.json case: only request_id changes. */
function intentsOf(c, n) {
  return Array.from({ length: n }, (_, i) => ({
    tenantId: c.tenant_id,
    actionType: c.action_type,
    payload: JSON.stringify({ ...c.payload, request_id: `${c.payload.request_id}-${i}` }),
    intentEpoch: c.intent_epoch,
  }));
}

/**
 * A payments payload of `bytes` UTF-8 bytes (the fields of the default policy):
 * the case's payload with a long remittance, `text` repeated and padded to size.
 */
function jsonOf(bytes, payload, text) {
  const base = JSON.stringify({ ...payload, remittance: '' });
  let remittance = '';
  while (Buffer.byteLength(base) + Buffer.byteLength(remittance + text) <= bytes) remittance += text;
  remittance += 'x'.repeat(bytes - Buffer.byteLength(base) - Buffer.byteLength(remittance));
  const out = JSON.stringify({ ...payload, remittance });
  if (Buffer.byteLength(out) !== bytes) throw new Error(`jsonOf: ${Buffer.byteLength(out)} bytes, not ${bytes}`);
  return out;
}
const BODY_ASCII = jsonOf(1024, inputs.typical.payload, 'Invoice 2024-03, line items 1 to 40; ');
const BODY_UNICODE = jsonOf(1024, inputs.unicode.payload, 'Pagamento de Março — Fatura 2024/03; ');
const BODY_BYTES = new TextEncoder().encode(BODY_ASCII);
if (!/[^\x00-\x7f]/.test(BODY_UNICODE) || /[^\x00-\x7f]/.test(BODY_ASCII)) throw new Error('jsonOf: wrong alphabet');

const RESPONSE = { status: 201, contentType: 'application/json', headers: [], body: '{"id":"pay_1","status":"accepted"}' };
const effect = async () => RESPONSE;
const FINGERPRINT = 'a3f1c2d4e5b60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90';

// ---- the cases: per glue, a setup that returns one operation (sync or async) ----
const typical = inputs.typical;
const unicode = inputs.unicode;
const typicalIntents = intentsOf(typical, BATCH);
const unicodeIntents = intentsOf(unicode, BATCH);

let firstSeq = 0;
const cases = [
  {
    name: 'derive (typical intent)',
    group: 'key',
    setup: ({ api }) => {
      const keyer = api.createKeyer({ secret: typical.secret_hex });
      let i = 0;
      return { op: () => keyer.derive(typicalIntents[i++ % BATCH]) };
    },
  },
  {
    name: `deriveMany (${BATCH} typical intents per call)`,
    group: 'key',
    perCall: BATCH,
    setup: ({ api }) => {
      const keyer = api.createKeyer({ secret: typical.secret_hex });
      return {
        op: () => keyer.deriveMany(typicalIntents),
        check: () => keyer.deriveMany(typicalIntents.slice(0, 3)).map((r) => r.key).join(),
      };
    },
  },
  {
    name: 'endpoint.admit (POST, 1 KiB JSON body)',
    group: 'http',
    setup: ({ api }) => {
      const endpoint = api.createEndpoint({ secret: typical.secret_hex });
      let i = 0;
      const request = () => ({
        tenantId: 'tenant-0042',
        method: 'POST',
        route: '/payments',
        keyValues: [`b5f0c7e2-0d1a-4a8e-9c55-${String(i++ % 1e6).padStart(12, '0')}`],
        contentType: 'application/json',
        body: BODY_BYTES,
      });
      return {
        op: () => endpoint.admit(request(), 1_700_000_000),
        check: () => {
          i = 0;
          const a = endpoint.admit(request(), 1_700_000_000);
          if (a.tag !== 'guarded') throw new Error(`admit: ${a.tag}`);
          return JSON.stringify(a.attempt);
        },
      };
    },
  },
  {
    name: 'fingerprint (1 KiB JSON text)',
    group: 'http',
    setup: ({ api }) => {
      const keyer = api.createKeyer({ secret: typical.secret_hex });
      return { op: () => keyer.fingerprint('tenant-0042', 'pix.send', BODY_ASCII) };
    },
  },
  {
    name: 'guard.run first call (memoryStore)',
    group: 'guard',
    async: true,
    // A fresh store per round: the records of earlier rounds are not kept.
    setup: ({ createGuard }) => {
      const guard = createGuard({ store: memoryStore() });
      return {
        op: async () => {
          const claim = { key: `first-${firstSeq++}`, fingerprint: FINGERPRINT, tenantId: 'tenant-1', actionType: 'pix.send' };
          const r = await guard.run(claim, effect);
          if (r.outcome !== 'owned') throw new Error(`first call: ${r.outcome}`);
        },
      };
    },
  },
  {
    name: 'guard.run replay (memoryStore)',
    group: 'guard',
    async: true,
    setup: async ({ createGuard }) => {
      const guard = createGuard({ store: memoryStore() });
      const claim = { key: 'replay-key', fingerprint: FINGERPRINT, tenantId: 'tenant-1', actionType: 'pix.send' };
      await guard.run(claim, effect);
      return {
        op: async () => {
          const r = await guard.run(claim, effect);
          if (r.outcome !== 'done') throw new Error(`replay: ${r.outcome}`);
        },
      };
    },
  },
  {
    name: 'derive (unicode intent)',
    group: 'non-ASCII',
    setup: ({ api }) => {
      const keyer = api.createKeyer({ secret: unicode.secret_hex });
      let i = 0;
      return { op: () => keyer.derive(unicodeIntents[i++ % BATCH]) };
    },
  },
  {
    name: 'fingerprint (1 KiB non-ASCII JSON text)',
    group: 'non-ASCII',
    setup: ({ api }) => {
      const keyer = api.createKeyer({ secret: unicode.secret_hex });
      return { op: () => keyer.fingerprint('tenant-0042', 'pix.send', BODY_UNICODE) };
    },
  },
  {
    name: 'guard.run replay (non-ASCII tenant and action)',
    group: 'non-ASCII',
    async: true,
    setup: async ({ createGuard }) => {
      const store = memoryStore();
      const guard = createGuard({ store });
      const claim = {
        key: 'replay-key',
        fingerprint: FINGERPRINT,
        tenantId: 'inquilino-São-Paulo',
        actionType: 'pagamento.ação',
      };
      await guard.run(claim, effect);
      // The record the component handed the store (lifted by the glue) keeps the text.
      const stored = store.get(claim.key);
      if (stored.tenantId !== claim.tenantId || stored.actionType !== claim.actionType) {
        throw new Error(`stored ${stored.tenantId} ${stored.actionType}`);
      }
      return {
        op: async () => {
          const r = await guard.run(claim, effect);
          if (r.outcome !== 'done') throw new Error(`replay: ${r.outcome}`);
        },
      };
    },
  },
];

// Both glues must give the same answers (a key, a fingerprint, an admission) before
// anything is timed; the guard cases check each outcome as they run.
for (const c of cases) {
  if (c.async) continue;
  const [a, b] = await Promise.all(
    variants.map(async (v) => {
      const { op, check } = await c.setup(v);
      return (check ?? op)();
    }),
  );
  if (a !== b) throw new Error(`${c.name}: patched ${a}, unpatched ${b}`);
}

let sink = 0;
/** Operations per second of `op` over about MS milliseconds (whole batches of `step` calls). */
async function measure(op, async, perCall) {
  const budget = BigInt(MS) * 1_000_000n;
  const step = perCall > 1 ? 1 : 64;
  let calls = 0;
  const t0 = process.hrtime.bigint();
  let t = t0;
  while (t - t0 < budget) {
    if (async) {
      for (let i = 0; i < step; i++) await op();
    } else {
      for (let i = 0; i < step; i++) sink += op() === undefined ? 0 : 1;
    }
    calls += step;
    t = process.hrtime.bigint();
  }
  return (calls * perCall) / (Number(t - t0) / 1e9);
}

const samples = cases.map(() => variants.map(() => []));
const load = [];
for (let round = 0; round < WARMUP_ROUNDS + ROUNDS; round++) {
  const order = round % 2 === 0 ? [0, 1] : [1, 0];
  for (const [ci, c] of cases.entries()) {
    for (const vi of order) {
      const { op } = await c.setup(variants[vi]);
      const opsPerSec = await measure(op, c.async === true, c.perCall ?? 1);
      if (round >= WARMUP_ROUNDS) samples[ci][vi].push(opsPerSec);
    }
  }
  load.push(loadavg()[0]);
}
if (sink === 0) throw new Error('nothing ran');

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const rate = (x) => (x >= 1e5 ? `${(x / 1e3).toFixed(0)}k` : x >= 1e4 ? `${(x / 1e3).toFixed(1)}k` : x.toFixed(0));
const us = (x) => (1e6 / x).toFixed(2);

console.log(
  `node ${process.version}, ${ROUNDS} rounds (after ${WARMUP_ROUNDS} warm-up) × ${MS} ms per case and glue; ` +
    `load average ${Math.min(...load).toFixed(1)} to ${Math.max(...load).toFixed(1)}\n`,
);
console.log('| group | case | patched ops/s (µs) | unpatched ops/s (µs) | patched ÷ unpatched | median per-round ratio |');
console.log('|---|---|---|---|---|---|');
for (const [ci, c] of cases.entries()) {
  const [p, u] = samples[ci].map(median);
  const paired = median(samples[ci][0].map((x, r) => x / samples[ci][1][r]));
  console.log(
    `| ${c.group} | ${c.name} | ${rate(p)} (${us(p)}) | ${rate(u)} (${us(u)}) | **${(p / u).toFixed(2)}×** | ${paired.toFixed(2)}× |`,
  );
}
console.log('\nops/s: calls per second (keys per second for deriveMany), median over rounds; µs: its inverse.');
