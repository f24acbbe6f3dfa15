// Node-side support for the runtime tests (bun.mjs, deno.mjs, workerd.mjs): the
// runtime's binary from node_modules (fail under CI=true, SKIPPED: otherwise), the
// package packed and installed into a temporary project as a new user would, and
// the vector files.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const here = dirname(fileURLToPath(import.meta.url));
export const pkgDir = join(here, '..', '..');
export const vectorsDir = join(pkgDir, '..', 'tests', 'vectors');
const HTTP_RUNNER = join(pkgDir, 'test', 'http-vector-runner.js');
const HTTP_VECTORS = join(vectorsDir, 'http', 'http_test.json');

/** The key vector files (tests/vectors/*.json), sorted, as text. */
export function keyVectorTexts() {
  return readdirSync(vectorsDir)
    .filter((name) => name.endsWith('.json'))
    .sort()
    .map((name) => ({ name, text: readFileSync(join(vectorsDir, name), 'utf8') }));
}

/** The HTTP conformance vectors (tests/vectors/http/http_test.json) as text. */
export function httpVectorText() {
  if (!existsSync(HTTP_VECTORS)) fail(`${HTTP_VECTORS} is missing`);
  return readFileSync(HTTP_VECTORS, 'utf8');
}

export function fail(message) {
  console.error(`FAILED: ${message}`);
  process.exit(1);
}

/**
 * The runtime cannot run here: under CI=true that fails the run; otherwise one
 * `SKIPPED:` line (counted by scripts/test-all.sh) and exit 0.
 */
export function unavailable(runtime, why) {
  if (process.env.CI === 'true') fail(`${runtime}: ${why} (CI=true: the runtime must run)`);
  console.log(`SKIPPED: ${runtime}: ${why}`);
  process.exit(0);
}

/** Runs `<bin> <args>` and returns its first output line, or null if it cannot run. */
export function probe(bin, args = ['--version']) {
  if (!existsSync(bin)) return null;
  const r = spawnSync(bin, args, { encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) return null;
  return `${r.stdout}${r.stderr}`.trim().split('\n')[0];
}

export function binPath(name) {
  return join(pkgDir, 'node_modules', '.bin', name);
}

function run(cmd, args, cwd) {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) fail(`${cmd} ${args.join(' ')} (in ${cwd}) exited ${r.status ?? r.signal}:\n${r.stdout}${r.stderr}`);
  return r.stdout;
}

/**
 * Packs the package (npm pack, without rebuilding vendor/: CI builds it before the
 * tests, and the build test checks it is current) and installs the tarball into a
 * new temporary project, as a new user would. Copies the given test files next to
 * the project's package.json. Returns the project directory; the caller removes it
 * with cleanup().
 */
export function packAndInstall(prefix, testFiles) {
  const root = mkdtempSync(join(tmpdir(), `intentkey-${prefix}-`));
  // Removed however the test ends (fail() exits at once).
  process.on('exit', () => rmSync(root, { recursive: true, force: true }));
  const packed = JSON.parse(run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', root], pkgDir));
  const files = packed[0].files.map((f) => f.path);
  for (const need of ['src/index.js', 'src/worker.js', 'vendor/intentkey.core.wasm', 'vendor/pure/core-modules-static.js']) {
    if (!files.includes(need)) fail(`the packed package lacks ${need} (run npm run build first)`);
  }
  const app = join(root, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: `intentkey-${prefix}-app`, private: true, type: 'module' }));
  run('npm', ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--offline', join(root, packed[0].filename)], app);
  for (const [from, to] of testFiles) copyFileSync(from, join(app, to));
  return app;
}

export function cleanup(app) {
  rmSync(dirname(app), { recursive: true, force: true });
}

/** The test files every runtime copies into its project. */
export function suiteFiles() {
  return [
    [join(here, 'suite.js'), 'suite.js'],
    [join(pkgDir, 'test', 'vector-runner.js'), 'vector-runner.js'],
    [HTTP_RUNNER, 'http-vector-runner.js'],
  ];
}

/**
 * The Bun and Deno tests: installs the packed package into a project with main.mjs
 * and the suite, writes the vector files to input.json, runs `command(app)` (the
 * runtime on main.mjs) and checks the JSON line main.mjs prints. Prints the count
 * line; exits 1 on any failure.
 */
export function runMain(runtime, version, command) {
  const input = { keyVectors: keyVectorTexts(), httpVectors: httpVectorText() };
  const app = packAndInstall(runtime, [...suiteFiles(), [join(here, 'main.mjs'), 'main.mjs']]);
  try {
    writeFileSync(join(app, 'input.json'), JSON.stringify(input));
    const [cmd, args] = command(app);
    const r = spawnSync(cmd, args, { cwd: app, encoding: 'utf8', maxBuffer: 64 << 20, env: { ...process.env, NO_COLOR: '1' } });
    const last = r.stdout.trim().split('\n').at(-1) ?? '';
    let result;
    try {
      result = JSON.parse(last);
    } catch {
      fail(`${runtime} exited ${r.status ?? r.signal} without a result:\n${r.stdout}${r.stderr}`);
    }
    console.log(`${result.line} (${version}; packed package)`);
    console.log(result.summary);
    if (r.status !== 0 || result.failures.length > 0) {
      for (const f of result.failures) console.error(`  ${f}`);
      if (r.stderr) console.error(r.stderr);
      fail(`${runtime}: ${result.failures.length} failure(s), exit ${r.status ?? r.signal}`);
    }
  } finally {
    cleanup(app);
  }
}
