// The package in workerd (the Cloudflare Workers runtime) through miniflare: the
// packed package is installed into a temporary project, a module Worker
// (worker.mjs) imports it by name, resolved through the package's `workerd` export
// condition as wrangler resolves it, with every .wasm module a CompiledWasm module
// (workerd compiles them when it loads the Worker; a Worker cannot compile bytes).
// The Worker runs the key vectors and the HTTP conformance vectors (suite.js) when
// asked over HTTP; this harness sends the vector files and checks the answer.
// Prints `workerd: N/N key vectors, …`; exits 1 on any failure. If workerd cannot
// run here: SKIPPED: (fails under CI=true).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import {
  binPath, cleanup, fail, here, httpVectorTexts, keyVectorTexts, packAndInstall, probe, suiteFiles, unavailable,
} from './support.mjs';

const version = probe(binPath('workerd'));
if (version === null) unavailable('workerd', 'the workerd binary (npm package workerd, via miniflare) does not run here');

let Miniflare;
try {
  ({ Miniflare } = await import('miniflare'));
} catch (e) {
  unavailable('workerd', `miniflare does not load: ${e.message}`);
}

// The conditions wrangler (esbuild) resolves a package with for workerd.
const CONDITIONS = ['workerd', 'worker', 'browser', 'import', 'default'];

function resolveExport(target) {
  if (typeof target === 'string') return target;
  if (target === null || typeof target !== 'object') return null;
  for (const [condition, next] of Object.entries(target)) {
    if (!CONDITIONS.includes(condition)) continue;
    const found = resolveExport(next);
    if (found !== null) return found;
  }
  return null;
}

/** A bare specifier, resolved from the project's node_modules through package.json "exports". */
function resolveBare(app, spec) {
  const dir = join(app, 'node_modules', spec);
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  const target = resolveExport(pkg.exports?.['.'] ?? pkg.exports);
  if (target === null) fail(`${spec}: no export matches the conditions ${CONDITIONS.join(', ')}`);
  return join(dir, target);
}

// Module specifiers: static imports and re-exports at the start of a line, and
// dynamic imports of a string literal. Enough for these sources (checked: the
// module list must hold every module the Worker loads, or workerd fails to load).
const STATIC = /^(?:import|export)\s(?:[^;'"]*?\sfrom\s*)?(['"])([^'"\n]+)\1/gm;
const DYNAMIC = /\bimport\(\s*(['"])([^'"\n]+)\1\s*\)/g;

/** Every module the Worker imports, as miniflare module definitions (names relative to app/). */
function collectModules(app, entry) {
  const modules = [];
  const bare = new Map();
  const seen = new Set();
  const visit = (path) => {
    if (seen.has(path)) return;
    seen.add(path);
    if (path.endsWith('.wasm')) {
      modules.push({ type: 'CompiledWasm', path });
      return;
    }
    if (!/\.m?js$/.test(path)) fail(`no module rule for ${relative(app, path)}`);
    const code = readFileSync(path, 'utf8');
    modules.push({ type: 'ESModule', path, contents: code });
    for (const re of [STATIC, DYNAMIC]) {
      for (const m of code.matchAll(re)) {
        const spec = m[2];
        if (spec.startsWith('./') || spec.startsWith('../')) {
          const target = resolve(dirname(path), spec);
          // A dynamic import of an optional file (http-suite.js) is resolved only when it is there.
          if (re === DYNAMIC && !existsSync(target)) continue;
          visit(target);
        } else if (!spec.startsWith('cloudflare:') && !spec.startsWith('workerd:')) {
          if (spec.startsWith('node:')) fail(`${relative(app, path)} imports ${spec}, which workerd lacks without nodejs_compat`);
          const target = resolveBare(app, spec);
          bare.set(spec, target);
          visit(target);
        }
      }
    }
  };
  visit(entry);
  // A bare specifier names a module at the root of the Worker (the main module is
  // there): a one-line module re-exports the resolved entry, as a bundler links it.
  for (const [spec, target] of bare) {
    let rel = relative(app, target);
    if (!rel.startsWith('.')) rel = `./${rel}`;
    modules.push({ type: 'ESModule', path: join(app, spec), contents: `export * from ${JSON.stringify(rel)};\n` });
  }
  return modules;
}

const keyVectors = keyVectorTexts();
const httpVectors = httpVectorTexts();
const files = suiteFiles();
files.push([join(here, 'worker.mjs'), 'worker.mjs']);
if (httpVectors !== null) files.push([join(here, 'http-suite.js'), 'http-suite.js']);
const app = packAndInstall('workerd', files);
let mf;
try {
  const modules = collectModules(app, join(app, 'worker.mjs'));
  const names = modules.map((m) => relative(app, m.path));
  for (const want of ['node_modules/intentkey/src/worker.js', 'node_modules/intentkey/vendor/pure/intentkey.core.wasm']) {
    if (!names.includes(want)) fail(`the Worker does not load ${want}; it loads ${names.join(', ')}`);
  }
  const wasm = modules.filter((m) => m.type === 'CompiledWasm').length;
  mf = new Miniflare({
    modules,
    modulesRoot: app,
    compatibilityDate: '2026-04-01',
  });
  const response = await mf.dispatchFetch('http://localhost/suite', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ keyVectors, httpVectors }),
  });
  const text = await response.text();
  let result;
  try {
    result = JSON.parse(text);
  } catch {
    fail(`workerd answered HTTP ${response.status}, not JSON: ${text.slice(0, 2000)}`);
  }
  console.log(`${result.line} (${version}; ${modules.length} modules, ${wasm} CompiledWasm, packed package)`);
  if (response.status !== 200 || result.failures.length > 0) {
    for (const f of result.failures) console.error(`  ${f}`);
    fail(`workerd: ${result.failures.length} failure(s), HTTP ${response.status}`);
  }
} finally {
  await mf?.dispose();
  cleanup(app);
}
