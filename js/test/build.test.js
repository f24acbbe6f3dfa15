// vendor/ is the transpiled ../dist/intentkey.wasm and vendor/pure/ the transpiled
// ../dist/intentkey-pure.wasm: the same binaries every runtime runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';

for (const [dir, component] of [
  ['vendor/', 'intentkey.wasm'],
  ['vendor/pure/', 'intentkey-pure.wasm'],
]) {
  test(`${dir} holds the exact core modules of ../dist/${component} (not stale, not rewritten)`, () => {
    const wasm = readFileSync(new URL(`../../dist/${component}`, import.meta.url));
    const vendor = new URL(`../${dir}`, import.meta.url);
    const cores = readdirSync(vendor).filter((n) => n.endsWith('.wasm'));
    assert.ok(cores.includes('intentkey.core.wasm'), `${dir} has ${cores.join(', ')}`);
    for (const name of cores) {
      const core = readFileSync(new URL(name, vendor));
      assert.ok(
        wasm.indexOf(core) >= 0,
        `${dir}${name} is not inside ../dist/${component}: run npm run build after rebuilding the components`,
      );
    }
  });
}

test('the Node glue imports a store and a destination and exports the guard; the browser glue neither', () => {
  const full = readFileSync(new URL('../vendor/intentkey.js', import.meta.url), 'utf8');
  const pure = readFileSync(new URL('../vendor/pure/intentkey.js', import.meta.url), 'utf8');
  for (const name of ['store', 'gateway']) {
    assert.ok(full.includes(`imports['intentkey:core/${name}']`), `full: ${name}`);
    assert.ok(!pure.includes(`intentkey:core/${name}`), `pure: ${name}`);
  }
  assert.ok(full.includes("'intentkey:core/guard@0.6.0'"));
  assert.ok(!pure.includes('intentkey:core/guard'));
  for (const glue of [full, pure]) {
    assert.ok(glue.includes("'intentkey:core/flows@0.6.0'"));
    assert.ok(glue.includes('Patched (scripts/glue.mjs)'), 'the glue rewrites are applied');
  }
});
