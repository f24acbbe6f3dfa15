// init(): the core modules compiled asynchronously (WebAssembly.compile), once,
// before the first call, so that call does not compile on the event loop; and
// the synchronous path without it. Each case in a fresh process (the modules are
// compiled once per process).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const cwd = fileURLToPath(new URL('..', import.meta.url));

/** Runs `code` as a module in a fresh Node process, with WebAssembly's compilers counted; its JSON line. */
function run(code) {
  const prelude = `
    const counts = { async: 0, sync: 0 };
    const compile = WebAssembly.compile;
    WebAssembly.compile = (...args) => { counts.async++; return compile(...args); };
    const Module = WebAssembly.Module;
    WebAssembly.Module = new Proxy(Module, { construct(target, args) { counts.sync++; return new target(...args); } });
  `;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', prelude + code], { cwd, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

test('await init() compiles every core module asynchronously, once; the first call then compiles nothing', () => {
  const out = run(`
    const { init, createEndpoint, createKeyer } = await import('intentkey');
    const express = await import('intentkey/express');
    const a = init();
    const b = init();
    await a;
    await express.init();
    const afterInit = { ...counts };
    createKeyer({ secret: 'ab'.repeat(32) }).intentKey('t', 'i');
    createEndpoint({ secret: 'ab'.repeat(32) }).failed(0);
    console.log(JSON.stringify({ same: a === b, afterInit, afterUse: counts }));
  `);
  assert.equal(out.same, true, 'init() is idempotent: the same promise');
  assert.ok(out.afterInit.async >= 1, JSON.stringify(out));
  assert.equal(out.afterInit.sync, 0);
  assert.deepEqual(out.afterUse, out.afterInit, 'the first calls compiled nothing more');
});

test('without init(), the first call compiles synchronously and works', () => {
  const out = run(`
    const { createKeyer } = await import('intentkey');
    const key = createKeyer({ secret: 'ab'.repeat(32) }).intentKey('t', 'i');
    console.log(JSON.stringify({ key, counts }));
  `);
  assert.match(out.key, /^[0-9a-f]{64}$/);
  assert.equal(out.counts.async, 0);
  assert.ok(out.counts.sync >= 1);
});
