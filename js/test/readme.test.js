// The README's examples (claim, replay and recovery; rotating the secret; queue consumers; serving without a framework; waiting for the first attempt; telemetry with a Prometheus endpoint) run as written and print what they say.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

for (const heading of [
  '## Claim, replay and recovery',
  '## Rotating the secret',
  '## Queue consumers',
  '### Serving without a framework',
  '## Waiting for the first attempt',
  '## Telemetry',
]) {
  test(`README: the example of "${heading.slice(3)}" runs`, () => runsAsWritten(heading));
}

function runsAsWritten(heading) {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
  assert.ok(readme.includes(heading), `the README has no section ${heading}`);
  const section = readme.slice(readme.indexOf(heading));
  const code = /```js\n([\s\S]*?)```/.exec(section)[1];
  const expected = /\/\/ -> (.*)/.exec(code)[1];
  // Evaluated from js/, where the package resolves itself by name.
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], {
    cwd: fileURLToPath(new URL('..', import.meta.url)),
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), expected);
}
