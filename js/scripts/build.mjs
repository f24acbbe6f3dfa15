#!/usr/bin/env node
// Transpiles the intentkey components with jco into vendor/:
//   ../dist/intentkey.wasm       (world `intentkey`: store and gateway imports, the
//                                 guard export)  -> vendor/       (the Node entry)
//   ../dist/intentkey-pure.wasm  (world `pure`: keys, claims, schema, flows; no
//                                 store)         -> vendor/pure/  (the browser entry)
//
// Both are built, never committed. The generated glue gets three exact rewrites
// of how strings and memory views cross the boundary (scripts/glue.mjs; the build
// fails if jco's output no longer matches them). With `--unpatched-glue DIR`, the
// glue as jco wrote it is also kept, as DIR/intentkey.js and DIR/pure/intentkey.js,
// for bench/glue.mjs, which measures the rewrites (never shipped: DIR must be
// outside vendor/). Instantiation mode "sync": the package supplies the imports
// itself (src/instance.js), compiles the core modules once and can instantiate
// again after a trap. See bench/JCO_CHOICE.md for why this jco version and this
// mode.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { patchGlue } from './glue.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const unpatchedArg = process.argv.indexOf('--unpatched-glue');
if (unpatchedArg > 0 && !process.argv[unpatchedArg + 1]) {
  console.error('build: --unpatched-glue takes a directory');
  process.exit(1);
}
const unpatched = unpatchedArg > 0 ? resolve(process.cwd(), process.argv[unpatchedArg + 1]) : null;
if (unpatched !== null && (unpatched === join(root, 'vendor') || unpatched.startsWith(join(root, 'vendor') + sep))) {
  console.error('build: --unpatched-glue must be outside vendor/ (vendor/ is what the package ships)');
  process.exit(1);
}
const dist = join(root, '..', 'dist');
const targets = [
  { component: process.env.INTENTKEY_COMPONENT ?? join(dist, 'intentkey.wasm'), out: join(root, 'vendor') },
  {
    component: process.env.INTENTKEY_PURE_COMPONENT ?? join(dist, 'intentkey-pure.wasm'),
    out: join(root, 'vendor', 'pure'),
    staticImports: true,
  },
];

for (const { component } of targets) {
  if (!existsSync(component)) {
    console.error(
      `build: ${relative(process.cwd(), component)} is missing; build the components first ` +
        '(from the repository root: cargo xtask build-component)',
    );
    process.exit(1);
  }
}

const jco = join(root, 'node_modules', '@bytecodealliance', 'jco', 'src', 'jco.js');
if (!existsSync(jco)) {
  console.error('build: jco is not installed; run `npm ci` in js/ first');
  process.exit(1);
}

rmSync(join(root, 'vendor'), { recursive: true, force: true });
for (const { component, out, staticImports } of targets) {
  mkdirSync(out, { recursive: true });
  const args = [
    jco,
    'transpile',
    component,
    '--out-dir',
    out,
    '--name',
    'intentkey',
    '--instantiation',
    'sync',
    '--no-typescript',
    '--quiet',
  ];
  const run = spawnSync(process.execPath, args, { stdio: 'inherit' });
  if (run.status !== 0) {
    console.error(`build: jco transpile of ${relative(root, component)} failed (exit ${run.status ?? run.signal})`);
    process.exit(1);
  }
  const files = readdirSync(out)
    .filter((f) => statSync(join(out, f)).isFile())
    .sort();
  for (const name of ['intentkey.core.wasm', 'intentkey.js']) {
    if (!files.includes(name)) {
      console.error(`build: jco did not write ${relative(root, join(out, name))} (got ${files.join(', ')})`);
      process.exit(1);
    }
  }
  // The boundary's byte moving, made cheaper (same bytes, same layout): see glue.mjs.
  const glue = join(out, 'intentkey.js');
  const generated = readFileSync(glue, 'utf8');
  writeFileSync(glue, patchGlue(generated, relative(root, glue)));
  if (unpatched !== null) {
    const copy = join(unpatched, relative(join(root, 'vendor'), glue));
    mkdirSync(dirname(copy), { recursive: true });
    writeFileSync(copy, generated);
    console.log(`build: jco's unpatched glue kept as ${relative(process.cwd(), copy)}`);
  }
  // The browser entry compiles every core module up front (it cannot fetch on demand
  // inside jco's synchronous instantiate), so it needs their names.
  const cores = files.filter((f) => f.endsWith('.wasm'));
  writeFileSync(
    join(out, 'core-modules.js'),
    `// Written by scripts/build.mjs: the core modules jco emitted.\nexport const coreModules = ${JSON.stringify(cores)};\n`,
  );
  if (staticImports) {
    // The workerd entry (src/worker.js) imports the same modules statically: workerd
    // (and bundlers with a CompiledWasm rule for .wasm, e.g. wrangler's) hands each
    // static .wasm import over as a compiled WebAssembly.Module, and compiling bytes
    // at run time is not allowed there.
    const imports = cores.map((name, i) => `import m${i} from './${name}';\n`).join('');
    const entries = cores.map((name, i) => `  [${JSON.stringify(name)}, m${i}],\n`).join('');
    writeFileSync(
      join(out, 'core-modules-static.js'),
      `// Written by scripts/build.mjs: the core modules jco emitted, as static imports.\n${imports}` +
        `export const compiledModules = new Map([\n${entries}]);\n`,
    );
  }
  const sizes = files.map((f) => `${f} ${statSync(join(out, f)).size} B`).join(', ');
  console.log(`build: ${relative(root, out)}/ from ${relative(root, component)}: ${sizes}`);
}
