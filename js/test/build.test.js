// vendor/ is the transpiled ../dist/intentkey.wasm: the same binary every runtime runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';

test('vendor/ holds the exact core module of ../dist/intentkey.wasm (not stale, not rewritten)', () => {
  const component = readFileSync(new URL('../../dist/intentkey.wasm', import.meta.url));
  const vendor = new URL('../vendor/', import.meta.url);
  const cores = readdirSync(vendor).filter((n) => n.endsWith('.wasm'));
  assert.ok(cores.includes('intentkey.core.wasm'), `vendor/ has ${cores.join(', ')}`);
  for (const name of cores) {
    const core = readFileSync(new URL(name, vendor));
    assert.ok(
      component.indexOf(core) >= 0,
      `vendor/${name} is not inside ../dist/intentkey.wasm: run npm run build after rebuilding the component`,
    );
  }
});
