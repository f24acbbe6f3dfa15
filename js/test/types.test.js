// The shipped TypeScript types compile against a usage file, resolved through the
// package's own `exports` (self-reference by name).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

test('src/index.d.ts type-checks real use (tsc --strict)', () => {
  const tsc = fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url));
  const project = fileURLToPath(new URL('./types/tsconfig.json', import.meta.url));
  const r = spawnSync(process.execPath, [tsc, '-p', project], { encoding: 'utf8' });
  assert.equal(r.status, 0, `tsc failed:\n${r.stdout}${r.stderr}`);
});
