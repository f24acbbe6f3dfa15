// Runs every golden vector (../tests/vectors/*.json) through the package in Node.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import * as intentkey from '../src/index.js';
import { GROUP_TYPES, parseVectorFile, runVectors } from './vector-runner.js';

const dir = new URL('../../tests/vectors/', import.meta.url);

function loadVectorFiles() {
  return readdirSync(dir)
    .filter((name) => name.endsWith('.json'))
    .sort()
    .map((name) => ({ name, doc: parseVectorFile(readFileSync(new URL(name, dir), 'utf8')) }));
}

test('golden vectors (every group type, every file)', () => {
  const files = loadVectorFiles();
  const result = runVectors(intentkey, files);
  const counts = GROUP_TYPES.map((t) => `${t} ${result.passed[t]}/${result.perType[t]}`).join(', ');
  console.log(`node: ${result.total} vectors in ${result.files} files: ${counts}`);
  assert.ok(result.total > 0, 'no vectors ran');
  assert.deepEqual(
    result.failures,
    [],
    `${result.failures.length} of ${result.total} vectors failed:\n${result.failures.join('\n')}`,
  );
});

test('the runner refuses an unknown group type and a group type that ran nothing', () => {
  const doc = {
    schema: 'intentkey_vectors_v1',
    numberOfTests: 1,
    notes: {},
    testGroups: [{ type: 'MadeUpGroup', tests: [{ tcId: 1, flags: [], result: 'valid' }] }],
  };
  const result = runVectors(intentkey, [{ name: 'made_up.json', doc }]);
  assert.ok(result.failures.some((f) => f.startsWith('made_up.json#1') && f.includes('unknown group type')));
  for (const kind of GROUP_TYPES) {
    assert.ok(result.failures.includes(`group type ${kind} ran no test`), kind);
  }
});
