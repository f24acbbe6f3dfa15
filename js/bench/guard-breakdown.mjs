#!/usr/bin/env node
// node bench/guard-breakdown.mjs: where a guarded call's time goes (best of 7
// loops of 200,000 calls each; µs per call). See bench/GUARD.md.
import { createGuard, memoryStore } from '../src/index.js';
import { internal } from '../src/node-core.js';
const RESPONSE = { status: 201, contentType: 'application/json', headers: [], body: '{"id":"pay_1","status":"accepted"}' };
const effect = async () => RESPONSE;
const store = memoryStore();
const guard = createGuard({ store, now: () => 1_700_000_000 });
const FP = 'a3f1c2d4e5b60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90';
const c = { key: 'replay-key', fingerprint: FP, tenantId: 'tenant-1', actionType: 'pix.send' };
await guard.run(c, effect);
const N = 200000;
function time(name, fn) {
  let best = Infinity;
  for (let r = 0; r < 7; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) fn(i);
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / N);
  }
  console.log(name.padEnd(60), (best / 1000).toFixed(2), 'µs');
}
async function timeAsync(name, fn) {
  let best = Infinity;
  for (let r = 0; r < 7; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) await fn(i);
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / N);
  }
  console.log(name.padEnd(60), (best / 1000).toFixed(2), 'µs');
}
time('empty component call (claims.default-stale-after-seconds)', () => internal.rawClaims((x) => x.defaultStaleAfterSeconds()));
time('owner token (16 pooled random bytes -> claims.owner-token)', () => internal.ownerToken());
const rec = store.get('replay-key');
time('store.get alone (memory)', () => store.get('replay-key'));
time('guard export claim, replay (insert=false, get, decide)', () => internal.driving(store, null, (g) => g.claim(c, 1_700_000_000)));
const noop = { ...store, insert: () => false, get: () => rec };
time('  same, store ops as constants', () => internal.driving(noop, null, (g) => g.claim(c, 1_700_000_000)));
await timeAsync('guard.run replay (whole)', () => guard.run(c, effect));
await timeAsync('bare await effect()', () => effect());
const g2 = createGuard({ store: memoryStore(), now: () => 1_700_000_000 });
await timeAsync('guard.run first call (whole)', (i) => g2.run({ ...c, key: `k${i}-${Math.random()}` }, effect));
