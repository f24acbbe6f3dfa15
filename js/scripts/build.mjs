#!/usr/bin/env node
// Transpiles the intentkey component (../dist/intentkey.wasm) with jco into vendor/.
//
// The same vendor/ output runs in Node and in browsers. It is built, never committed.
// Instantiation mode "sync": the package supplies the imports itself (src/core.js),
// compiles the core modules once and can instantiate again after a trap. See
// bench/JCO_CHOICE.md for why this jco version and this mode.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const component = process.env.INTENTKEY_COMPONENT ?? join(root, '..', 'dist', 'intentkey.wasm');
const vendor = join(root, 'vendor');

if (!existsSync(component)) {
  console.error(
    `build: ${relative(process.cwd(), component)} is missing; build the component first ` +
      '(from the repository root: cargo xtask build-component)',
  );
  process.exit(1);
}

const jco = join(root, 'node_modules', '@bytecodealliance', 'jco', 'src', 'jco.js');
if (!existsSync(jco)) {
  console.error('build: jco is not installed; run `npm ci` in js/ first');
  process.exit(1);
}

rmSync(vendor, { recursive: true, force: true });
const args = [
  jco,
  'transpile',
  component,
  '--out-dir',
  vendor,
  '--name',
  'intentkey',
  '--instantiation',
  'sync',
  '--no-typescript',
  '--quiet',
];
const run = spawnSync(process.execPath, args, { stdio: 'inherit' });
if (run.status !== 0) {
  console.error(`build: jco transpile failed (exit ${run.status ?? run.signal})`);
  process.exit(1);
}

const files = readdirSync(vendor).sort();
const expected = ['intentkey.core.wasm', 'intentkey.js'];
for (const name of expected) {
  if (!files.includes(name)) {
    console.error(`build: jco did not write vendor/${name} (got ${files.join(', ')})`);
    process.exit(1);
  }
}
// The browser entry compiles every core module up front (it cannot fetch on demand
// inside jco's synchronous instantiate), so it needs their names.
const cores = files.filter((f) => f.endsWith('.wasm'));
writeFileSync(
  join(vendor, 'core-modules.js'),
  `// Written by scripts/build.mjs: the core modules jco emitted.\nexport const coreModules = ${JSON.stringify(cores)};\n`,
);
const sizes = files.map((f) => `${f} ${statSync(join(vendor, f)).size} B`).join(', ');
console.log(`build: vendor/ from ${relative(root, component)}: ${sizes}`);
