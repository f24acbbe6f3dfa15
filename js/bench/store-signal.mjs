#!/usr/bin/env node
// node bench/store-signal.mjs
//
// What the store deadline's abort costs per store call: guard.run first calls
// (a claim and a completion, two store calls) over an asynchronous in-memory
// store that answers at once, given a plain { aborted } flag (the package's
// stores, marked ABORTED_FLAG) or a real AbortSignal (any other store). One
// process, the two alternating round after round (23 rounds of 2,000 calls,
// the first 3 dropped); the figure is the median round's µs per call.
import { createGuard, jsonResponse, memoryStore } from '../src/index.js';
import { ABORTED_FLAG, TRUSTED } from '../src/stores/trusted.js';
function asyncStore(flag) {
  const m = memoryStore();
  const s = { kind: 'memory', synchronous: false, [TRUSTED]: true };
  if (flag) s[ABORTED_FLAG] = true;
  for (const op of ['insert', 'get', 'complete', 'replace', 'release', 'list', 'purge']) s[op] = async (...a) => m[op](...a.slice(0, op === 'list' ? 2 : 1));
  return s;
}
const guards = { flag: createGuard({ store: asyncStore(true) }), signal: createGuard({ store: asyncStore(false) }) };
const effect = async () => jsonResponse(201, { ok: true });
let n = 0;
async function round(g, calls) {
  const t = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) await g.run({ key: `k${n++}`, fingerprint: 'f', tenantId: 't', actionType: 'a' }, effect);
  return Number(process.hrtime.bigint() - t) / calls / 1000;
}
const res = { flag: [], signal: [] };
for (let r = 0; r < 23; r++) for (const name of r % 2 ? ['flag', 'signal'] : ['signal', 'flag']) { const us = await round(guards[name], 2000); if (r >= 3) res[name].push(us); }
const med = (a) => a.sort((x, y) => x - y)[a.length >> 1];
console.log(`guard.run first call over an async store (2 store calls), median of 20 rounds x 2000: AbortSignal ${med(res.signal).toFixed(2)} us, flag ${med(res.flag).toFixed(2)} us`);
