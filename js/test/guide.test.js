// docs/agents-and-queues.md: every ```js block with `// ->` lines runs as written
// (from js/, where the package resolves itself by name) and prints those lines;
// and the agent demo (`npm run demo:agent`) runs from the README and ends with
// one payment.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const jsDir = fileURLToPath(new URL('..', import.meta.url));
const guide = readFileSync(new URL('../../docs/agents-and-queues.md', import.meta.url), 'utf8');
const blocks = [...guide.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]).filter((code) => code.includes('// -> '));

test('the guide has runnable examples', () => {
  assert.ok(blocks.length >= 2, `found ${blocks.length} runnable blocks`);
});

blocks.forEach((code, i) => {
  test(`docs/agents-and-queues.md: example ${i + 1} prints what it says`, () => {
    const expected = [...code.matchAll(/\/\/ -> (.*)/g)].map((m) => m[1]);
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { cwd: jsDir, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(r.stdout.trim().split('\n'), expected);
  });
});

test('npm run demo:agent: a crash, a resume, a separate run of the intent, one payment', () => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  assert.ok(readme.includes('npm run demo:agent'), 'the README shows the agent demo');
  const r = spawnSync('npm', ['run', '-s', 'demo:agent'], { cwd: jsDir, encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /CRASH: the process is killed/);
  assert.match(r.stdout, /model \(replayed from the journal\)/);
  assert.match(r.stdout, /found it: recorded, not re-run/);
  assert.match(r.stdout, /the bank holds 1 payment\(s\)/);
});
