#!/usr/bin/env node
// npm run bench:guard [-- --rounds N --per-round M]
//
// What a guarded call costs on top of the effect itself, in one process and one run:
//   - bare: `await effect()` (the effect answers at once);
//   - intentkey: createGuard({ store: memoryStore() }).run(claim, effect), a new
//     key each time (first call: claim, effect, finish) and the same key again
//     (replay: claim only, the stored response); with a given fingerprint, and
//     with the payload fingerprinted by the guard's keyer on every call;
//   - @node-idempotency/core 1.0.11 with its memory storage adapter: onRequest,
//     effect, onResponse for a new key; onRequest alone for a seen key.
// Every call is timed alone (process.hrtime.bigint around one await); methods
// alternate round after round so that a noisy moment hits them all. The table
// gives p50 and p99 per call and the overhead p50 − bare p50.
import { createGuard, createKeyer, memoryStore } from '../src/index.js';
import { Idempotency } from '@node-idempotency/core';
import { MemoryStorageAdapter } from '@node-idempotency/storage-adapter-memory';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const ROUNDS = arg('--rounds', 20);
const PER_ROUND = arg('--per-round', 2000);
const WARMUP_ROUNDS = 3;

const RESPONSE = { status: 201, contentType: 'application/json', headers: [], body: '{"id":"pay_1","status":"accepted"}' };
const effect = async () => RESPONSE;
const BODY = { creditor_key: '12345678909', amount: '10.50', currency: 'BRL' };
// The fingerprint intentkey stores beside the key (a keyer would derive it from the payload).
const FINGERPRINT = 'a3f1c2d4e5b60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90';

const guard = createGuard({ store: memoryStore() });
const claimOf = (key) => ({ key, fingerprint: FINGERPRINT, tenantId: 'tenant-1', actionType: 'pix.send' });
// The same, with the fingerprint taken of the payload on every call (the keyer's
// RFC 8785 fingerprint), as node-idempotency hashes the body on every call.
const keyer = createKeyer({ secret: new Uint8Array(32).fill(7) });
const guardFp = createGuard({ store: memoryStore(), keyer });
const payloadClaimOf = (key) => ({ key, payload: BODY, tenantId: 'tenant-1', actionType: 'pix.send' });
const nodeIdem = new Idempotency(new MemoryStorageAdapter(), {});
const requestOf = (key) => ({ method: 'POST', path: '/payments', headers: { 'idempotency-key': key }, body: BODY });

let seq = 0;
const replayClaim = claimOf('replay-key');
const replayPayloadClaim = payloadClaimOf('replay-key');
const replayRequest = requestOf('replay-key');

const methods = {
  bare: async () => {
    await effect();
  },
  'intentkey first call': async () => {
    const r = await guard.run(claimOf(`first-${seq++}`), effect);
    if (r.outcome !== 'owned') throw new Error(`intentkey first call: ${r.outcome}`);
  },
  'intentkey replay': async () => {
    const r = await guard.run(replayClaim, effect);
    if (r.outcome !== 'done') throw new Error(`intentkey replay: ${r.outcome}`);
  },
  'intentkey first call, payload fingerprinted': async () => {
    const r = await guardFp.run(payloadClaimOf(`first-${seq++}`), effect);
    if (r.outcome !== 'owned') throw new Error(`intentkey first call: ${r.outcome}`);
  },
  'intentkey replay, payload fingerprinted': async () => {
    const r = await guardFp.run(replayPayloadClaim, effect);
    if (r.outcome !== 'done') throw new Error(`intentkey replay: ${r.outcome}`);
  },
  'node-idempotency first call': async () => {
    const req = requestOf(`first-${seq++}`);
    const cached = await nodeIdem.onRequest(req);
    if (cached !== undefined) throw new Error('node-idempotency first call: replayed');
    const res = await effect();
    await nodeIdem.onResponse(req, { body: res.body, additional: { status: res.status } });
  },
  'node-idempotency replay': async () => {
    const cached = await nodeIdem.onRequest(replayRequest);
    if (cached === undefined) throw new Error('node-idempotency replay: not replayed');
  },
};

// The replay keys are stored once, before measuring.
await guard.run(replayClaim, effect);
await guardFp.run(replayPayloadClaim, effect);
{
  const cached = await nodeIdem.onRequest(replayRequest);
  if (cached !== undefined) throw new Error('node-idempotency: the replay key was already seen');
  await nodeIdem.onResponse(replayRequest, { body: RESPONSE.body, additional: { status: RESPONSE.status } });
}

const samples = Object.fromEntries(Object.keys(methods).map((name) => [name, []]));
for (let round = 0; round < WARMUP_ROUNDS + ROUNDS; round++) {
  for (const [name, fn] of Object.entries(methods)) {
    const out = samples[name];
    for (let i = 0; i < PER_ROUND; i++) {
      const t0 = process.hrtime.bigint();
      await fn();
      const t1 = process.hrtime.bigint();
      if (round >= WARMUP_ROUNDS) out.push(Number(t1 - t0));
    }
  }
}

const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
const us = (ns) => (ns / 1000).toFixed(2);
const stats = Object.fromEntries(
  Object.entries(samples).map(([name, xs]) => {
    const sorted = Float64Array.from(xs).sort();
    return [name, { p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), n: sorted.length }];
  }),
);
const bare = stats.bare.p50;
const targets = { 'intentkey first call': 8, 'intentkey replay': 6 };
const rows = Object.entries(stats).map(([name, s]) => {
  const overhead = name === 'bare' ? '—' : us(s.p50 - bare);
  const target = targets[name] === undefined ? '' : ` (target ≤ ${targets[name]})`;
  return `| ${name} | ${us(s.p50)} | ${us(s.p99)} | ${overhead}${target} |`;
});
console.log(
  `node ${process.version}, ${ROUNDS} rounds × ${PER_ROUND} calls per method (after ${WARMUP_ROUNDS} warm-up rounds), µs per call\n`,
);
console.log('| method | p50 | p99 | overhead (p50 − bare p50) |');
console.log('|---|---|---|---|');
for (const row of rows) console.log(row);
let failed = false;
for (const [name, limit] of Object.entries(targets)) {
  const overhead = (stats[name].p50 - bare) / 1000;
  if (overhead > limit) {
    failed = true;
    console.log(`\n${name}: overhead ${overhead.toFixed(2)} µs is above the ${limit} µs target`);
  }
}
if (!failed) console.log('\nboth intentkey targets met');

// Against @node-idempotency/core in the same run (the speed issue's targets:
// ≤ 0.8× on a first call, ≤ 1.0× on a replay, the payload fingerprinted).
const over = (name) => (stats[name].p50 - bare) / 1000;
console.log('\n| intentkey / node-idempotency (overhead) | ratio | target |');
console.log('|---|---|---|');
for (const [phase, limit] of [['first call', 0.8], ['replay', 1.0]]) {
  for (const how of ['', ', payload fingerprinted']) {
    const ratio = over(`intentkey ${phase}${how}`) / over(`node-idempotency ${phase}`);
    const verdict = how === '' ? 'recorded (fingerprint given)' : `≤ ${limit}: ${ratio <= limit ? 'met' : 'NOT met'}`;
    console.log(`| ${phase}${how} | ${ratio.toFixed(2)} | ${verdict} |`);
  }
}
