// The README's claim example runs as written and prints what it says.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

test('README: the claim, replay and recovery example runs', () => {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
  const section = readme.slice(readme.indexOf('## Claim, replay and recovery'));
  const code = /```js\n([\s\S]*?)```/.exec(section)[1];
  const expected = /\/\/ -> (.*)/.exec(code)[1];
  // Evaluated from js/, where the package resolves itself by name.
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], {
    cwd: fileURLToPath(new URL('..', import.meta.url)),
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), expected);
});
