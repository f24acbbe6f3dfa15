#!/usr/bin/env node
// npm run bench:cold-start [-- --runs N --opt "-O3 -Os" --runtimes node,bun,deno]
//
// How long a fresh process takes from its start to its first key, and where
// that time goes: the package's import, then the first `derive` (which reads,
// compiles and instantiates the core modules: the Node entry compiles them on
// first use), then 2,000 more keys (the steady state, so that a smaller build
// is not a slower one). Each run is a new process (`node`, and `bun` and
// `deno` from the dev dependencies when asked), timed from inside with
// `performance.now()` (its origin is the process's start).
//
// Variants: a copy of the package's `src/` and `vendor/` in a temporary
// directory as built, and for each `--opt` level a copy whose core module went
// through binaryen's `wasm-opt` at that level (the `binaryen` package, a
// dependency of jco). No node_modules is beside a copy, as in a project that
// installed only intentkey: optional peers (@opentelemetry/api) are absent. Runs of the variants alternate, so that a noisy moment
// hits them all; the figures are medians. Every run checks its key against
// the one the package as built derives.
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const argv = process.argv.slice(2);
const arg = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : fallback;
};
const RUNS = Number(arg('--runs', 15));
const LEVELS = arg('--opt', '-O3 -Os').split(/\s+/).filter(Boolean);
const RUNTIMES = arg('--runtimes', 'node').split(',');

const pkg = fileURLToPath(new URL('..', import.meta.url));
const bin = (name) => join(pkg, 'node_modules', '.bin', name);

// The child: import, the first key, then 2,000 keys; one JSON line out.
const CHILD = `
const t0 = performance.now();
const { createKeyer } = await import(process.env.IK_ENTRY);
const t1 = performance.now();
const keyer = createKeyer({ secret: '5c'.repeat(32) });
const intent = { tenantId: 't', actionType: 'pix.send', intentEpoch: 1700000000,
  payload: '{"creditor_key":"123.456.789-09","amount":10.5,"currency":"brl","remittance":"Fatura 1"}' };
const key = keyer.derive(intent);
const t2 = performance.now();
for (let i = 0; i < 2000; i++) keyer.derive(intent);
const t3 = performance.now();
console.log(JSON.stringify({ start: t0, importMs: t1 - t0, firstKeyMs: t2 - t1, totalMs: t2, perKeyUs: ((t3 - t2) * 1000) / 2000, key }));
`;

const scratch = mkdtempSync(join(tmpdir(), 'ik-cold-'));
const script = join(scratch, 'child.mjs');
writeFileSync(script, CHILD);

/**
 * A copy of the package's src/ and vendor/ (as an installed package has them:
 * no node_modules beside it, so no optional peer such as @opentelemetry/api is
 * found), its core module optimized at `level` when one is given.
 */
function copy(level) {
  const dir = join(scratch, level === null ? 'built' : level.replace(/\W/g, ''));
  cpSync(join(pkg, 'src'), join(dir, 'src'), { recursive: true });
  cpSync(join(pkg, 'vendor'), join(dir, 'vendor'), { recursive: true });
  cpSync(join(pkg, 'package.json'), join(dir, 'package.json'));
  if (level !== null) {
    const core = join(dir, 'vendor', 'intentkey.core.wasm');
    execFileSync(bin('wasm-opt'), [level, '--all-features', core, '-o', core], { stdio: 'inherit' });
  }
  return dir;
}

const variants = [{ name: 'as built', dir: copy(null) }];
for (const level of LEVELS) {
  process.stderr.write(`wasm-opt ${level}…\n`);
  variants.push({ name: `wasm-opt ${level}`, dir: copy(level) });
}
for (const v of variants) v.bytes = statSync(join(v.dir, 'vendor', 'intentkey.core.wasm')).size;

function commandFor(runtime) {
  switch (runtime) {
    case 'node':
      return [process.execPath, [script]];
    case 'bun':
      return [bin('bun'), ['run', script]];
    case 'deno':
      return [bin('deno'), ['run', '--allow-read', '--allow-env', script]];
    default:
      throw new Error(`--runtimes: unknown runtime ${runtime} (node, bun, deno)`);
  }
}

const results = {};
let expected = null;
const load = [loadavg()[0]];
try {
  for (let run = 0; run < RUNS; run++) {
    for (const runtime of RUNTIMES) {
      for (let j = 0; j < variants.length; j++) {
        const v = variants[(j + run) % variants.length];
        const [cmd, args] = commandFor(runtime);
        const entry = new URL(`file://${join(v.dir, 'src', 'index.js')}`).href;
        const out = spawnSync(cmd, args, { env: { ...process.env, IK_ENTRY: entry }, encoding: 'utf8' });
        if (out.status !== 0) throw new Error(`${runtime} ${v.name}: exit ${out.status}: ${out.stderr}`);
        const r = JSON.parse(out.stdout.trim().split('\n').pop());
        expected ??= r.key;
        if (r.key !== expected) throw new Error(`${runtime} ${v.name}: key ${r.key}, expected ${expected}`);
        ((results[runtime] ??= {})[v.name] ??= []).push(r);
      }
    }
    load.push(loadavg()[0]);
    process.stderr.write(`run ${run + 1} of ${RUNS}\r`);
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
process.stderr.write('\n');

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};
console.log(`${RUNS} runs per variant and runtime, alternating; load average ${Math.min(...load).toFixed(1)} to ${Math.max(...load).toFixed(1)}; medians\n`);
console.log('| runtime | variant | core module | start of the script | import | first key (compile, instantiate, derive) | start to first key | then per key |');
console.log('|---|---|---|---|---|---|---|---|');
for (const runtime of RUNTIMES) {
  for (const v of variants) {
    const rs = results[runtime][v.name];
    const m = (f) => median(rs.map(f));
    console.log(
      `| ${runtime} | ${v.name} | ${(v.bytes / 1024).toFixed(0)} KiB | ${m((r) => r.start).toFixed(1)} ms | ${m((r) => r.importMs).toFixed(1)} ms | ` +
        `${m((r) => r.firstKeyMs).toFixed(1)} ms | ${m((r) => r.totalMs).toFixed(1)} ms | ${m((r) => r.perKeyUs).toFixed(2)} µs |`,
    );
  }
}
