#!/usr/bin/env node
// Compares jco transpile outputs of ../dist/intentkey.wasm, one directory per
// candidate, all in one process and alternately (the machine is noisy): the
// per-call cost of a single derive, of an empty call (uuidKey, the glue's floor)
// and the per-key cost of deriveMany with 1000 intents. How to make the candidate
// directories: see JCO_CHOICE.md. Not part of the package or of `npm run bench`.
//
//   node bench/jco-candidates.mjs /tmp/jco/out-1.12.0 /tmp/jco/out-1.35.0 ...
//
// A directory transpiled with `--instantiation sync` is instantiated with the
// imports passed in; any other must have been transpiled with
// `--map 'intentkey:core/*=<abs path of candidate-imports.mjs>#*'`.
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { random, secretStore, secrets } from './candidate-imports.mjs';

const dirs = process.argv.slice(2).map((d) => resolve(d));
if (dirs.length === 0) {
  console.error('usage: node bench/jco-candidates.mjs DIR...');
  process.exit(2);
}
const ROUNDS = 15;
const c = JSON.parse(readFileSync(new URL('../../bench/inputs.json', import.meta.url), 'utf8')).cases.typical;
secretStore.set('s', Uint8Array.from(Buffer.from(c.secret_hex, 'hex')));
const intents = Array.from({ length: 1000 }, (_, i) => ({
  tenantId: c.tenant_id,
  actionType: c.action_type,
  payloadJson: JSON.stringify({ ...c.payload, request_id: `r-${i}` }),
  intentEpoch: BigInt(c.intent_epoch),
}));

const candidates = [];
for (const dir of dirs) {
  const mod = await import(pathToFileURL(join(dir, 'intentkey.js')).href);
  let keys;
  if (typeof mod.instantiate === 'function') {
    const imports = {
      'intentkey:core/secrets': secrets,
      'intentkey:core/random': random,
      'intentkey:core/secrets@0.6.0': secrets,
      'intentkey:core/random@0.6.0': random,
    };
    keys = mod.instantiate((name) => new WebAssembly.Module(readFileSync(join(dir, name))), imports).keys;
  } else {
    keys = mod.keys;
  }
  const keyer = keys.Keyer.create(undefined, 's');
  candidates.push({ dir, keys, keyer, samples: {} });
}
const first = new Set(candidates.map((x) => x.keyer.derive(intents[0])));
if (first.size !== 1) throw new Error('the candidates disagree on a key');

const random16 = new Uint8Array(16);
for (let round = 0; round < ROUNDS + 2; round++) {
  for (const x of candidates) {
    const methods = [
      ['derive (1 call)', 1, (i) => x.keyer.derive(intents[i % 1000])],
      ['empty call (uuidKey)', 1, () => x.keys.uuidKey(random16)],
      ['deriveMany (per key, 1000/call)', 1000, () => x.keyer.deriveMany(intents)],
    ];
    for (const [name, per, fn] of methods) {
      const start = process.hrtime.bigint();
      for (let i = 0; i < 4000 / per; i++) fn(i);
      const us = Number(process.hrtime.bigint() - start) / 1000 / 4000;
      if (round >= 2) (x.samples[name] ??= []).push(us);
    }
  }
}
const names = Object.keys(candidates[0].samples);
console.log(`| candidate | ${names.join(' | ')} |`);
console.log(`|---|${names.map(() => '---').join('|')}|`);
for (const x of candidates) {
  const cells = names.map((n) => {
    const xs = x.samples[n].sort((a, b) => a - b);
    return `${xs[0].toFixed(2)} (${xs[xs.length >> 1].toFixed(2)})`;
  });
  console.log(`| ${x.dir.split('/').pop()} | ${cells.join(' | ')} |`);
}
