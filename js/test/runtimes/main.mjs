// The entry of the Bun and Deno tests (bun.mjs, deno.mjs), run by the runtime in a
// temporary project where the packed package is installed: imports the package by
// name (the runtime resolves its Node entry, index.js, and the Node builds of the
// subpath exports), runs suite.js over the vector files in input.json and prints
// the result as one JSON line.
import * as intentkey from 'intentkey';
import * as fetchAdapter from 'intentkey/fetch';
import { memoryStore } from 'intentkey/stores/memory';
import { readFileSync } from 'node:fs';
import process from 'node:process';
import { runSuite } from './suite.js';

const runtime = process.argv[2];
const { keyVectors, httpVectors } = JSON.parse(readFileSync(new URL('./input.json', import.meta.url), 'utf8'));
const result = await runSuite(runtime, intentkey, {
  entry: 'node',
  keyVectors,
  httpVectors,
  // The Node entry has all three the HTTP vector runner takes.
  httpApi: intentkey,
  fetchAdapter,
  memoryStore,
});
console.log(JSON.stringify(result));
