// Runs the HTTP conformance vectors (../tests/vectors/http/http_test.json) through
// the package in Node: createEndpoint for the endpoint, createGuard over a
// memoryStore for the claims (the component's guard export drives it).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as intentkey from '../src/index.js';
import { httpCanary, httpSummary, parseHttpVectors, runHttpVectors } from './http-vector-runner.js';

const file = new URL('../../tests/vectors/http/http_test.json', import.meta.url);

function load() {
  return parseHttpVectors(readFileSync(file, 'utf8'));
}

test('HTTP vectors (every case, fingerprint, storage key and fixed answer)', async () => {
  await intentkey.init?.();
  const doc = load();
  const result = await runHttpVectors(intentkey, doc);
  console.log(httpSummary('node', result));
  assert.ok(result.counts.steps[0] > 0 && result.counts.fingerprints[0] > 0, 'no vectors ran');
  assert.deepEqual(result.failures, [], `${result.failures.length} HTTP vector failures:\n${result.failures.join('\n')}`);
  assert.equal(result.handlerRuns, result.expectedRuns);
});

test('the HTTP runner reports altered vectors', async () => {
  await intentkey.init?.();
  assert.deepEqual(await httpCanary(intentkey, load()), []);
});

test('the HTTP runner refuses a malformed file', () => {
  const doc = load();
  assert.throws(() => parseHttpVectors(JSON.stringify({ ...doc, schema: 'other' })), /schema/);
  assert.throws(() => parseHttpVectors(JSON.stringify({ ...doc, numberOfSteps: 1 })), /numberOfSteps/);
});
