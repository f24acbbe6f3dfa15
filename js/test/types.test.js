// The shipped TypeScript types compile against usage files, resolved through the
// package's own `exports` (self-reference by name): the Node entry and the
// adapters (tsc --strict, library checks on), the browser entry under the
// `browser` condition, and the Fastify plugin (its own project: Fastify's types
// need @types/node, which is not installed, so library checks are off there).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const tsc = fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url));

for (const [label, project] of [
  ['src/index.d.ts and the Express, fetch and store subpaths type-check real use', 'tsconfig.json'],
  ['the browser condition resolves browser.d.ts: no guard, no SQL stores', 'tsconfig.browser.json'],
  ['intentkey/fastify: the plugin’s options and request.idempotency', 'tsconfig.fastify.json'],
]) {
  test(`${label} (tsc --strict)`, () => {
    const r = spawnSync(process.execPath, [tsc, '-p', fileURLToPath(new URL(`./types/${project}`, import.meta.url))], {
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, `tsc failed:\n${r.stdout}${r.stderr}`);
  });
}
