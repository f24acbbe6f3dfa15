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
  binPath, cleanup, fail, here, httpVectorText, keyVectorTexts, packAndInstall, probe, suiteFiles, unavailable,
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

/**
 * A bare specifier (`intentkey`, `intentkey/fetch`), resolved from the project's
 * node_modules through the package's "exports".
 */
function resolveBare(app, spec) {
  const parts = spec.split('/');
  const name = spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
  const subpath = `.${spec.slice(name.length)}`;
  const dir = join(app, 'node_modules', name);
  if (!existsSync(join(dir, 'package.json'))) fail(`${spec}: no package ${name} in the project`);
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  const exports = typeof pkg.exports === 'string' || subpath !== '.' ? pkg.exports?.[subpath] : (pkg.exports?.['.'] ?? pkg.exports);
  const target = resolveExport(exports);
  if (target === null) fail(`${spec}: the package exports nothing for ${subpath} under the conditions ${CONDITIONS.join(', ')}`);
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
    let rel = relative(dirname(join(app, spec)), target);
    if (!rel.startsWith('.')) rel = `./${rel}`;
    modules.push({ type: 'ESModule', path: join(app, spec), contents: `export * from ${JSON.stringify(rel)};\n` });
  }
  return modules;
}

const keyVectors = keyVectorTexts();
const httpVectors = httpVectorText();
const app = packAndInstall('workerd', [...suiteFiles(), [join(here, 'worker.mjs'), 'worker.mjs']]);
let mf;
let problem = null; // failed after miniflare started: reported once it is disposed
try {
  const modules = collectModules(app, join(app, 'worker.mjs'));
  const names = modules.map((m) => relative(app, m.path));
  for (const want of [
    'node_modules/intentkey/src/worker.js',
    'node_modules/intentkey/src/adapters/fetch-workerd.js',
    'node_modules/intentkey/vendor/pure/intentkey.core.wasm',
  ]) {
    if (!names.includes(want)) fail(`the Worker does not load ${want}; it loads ${names.join(', ')}`);
  }
  const wasm = modules.filter((m) => m.type === 'CompiledWasm').length;
  // The cold start: workerd up with the Worker (its modules compiled), then the
  // first request, which instantiates the component and derives one key.
  const t0 = performance.now();
  mf = new Miniflare({
    modules,
    modulesRoot: app,
    compatibilityDate: '2026-04-01',
  });
  await mf.ready;
  const t1 = performance.now();
  const first = await mf.dispatchFetch('http://localhost/key');
  const firstKey = await first.text();
  const t2 = performance.now();
  if (first.status !== 200 || !/^[0-9a-f]{64}$/.test(firstKey)) throw new Error(`GET /key answered ${first.status}: ${firstKey.slice(0, 500)}`);
  console.log(`workerd: cold start: workerd ready with the Worker in ${(t1 - t0).toFixed(0)} ms, its first key request in ${(t2 - t1).toFixed(1)} ms`);
  const response = await mf.dispatchFetch('http://localhost/suite', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ keyVectors, httpVectors }),
  });
  const text = await response.text();
  let result = null;
  try {
    result = JSON.parse(text);
  } catch {
    problem = `workerd answered HTTP ${response.status}, not JSON: ${text.slice(0, 2000)}`;
  }
  if (result !== null) {
    console.log(`${result.line} (${version}; ${modules.length} modules, ${wasm} CompiledWasm, packed package)`);
    if (result.summary) console.log(result.summary);
    if (response.status !== 200 || result.failures.length > 0) {
      for (const f of result.failures) console.error(`  ${f}`);
      problem = `workerd: ${result.failures.length} failure(s), HTTP ${response.status}`;
    }
  }
} catch (e) {
  problem = `workerd: ${e && e.stack ? e.stack : e}`;
} finally {
  await mf?.dispose();
  cleanup(app);
}
if (problem !== null) fail(problem);
