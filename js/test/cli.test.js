// bin/intentkey.js: the JSON-lines contract, checked against the RequestLine vectors
// and, when the Rust tool has been built, byte for byte against it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseVectorFile } from './vector-runner.js';
import { unreadableLineAnswer } from '../src/index.js';

const bin = fileURLToPath(new URL('../bin/intentkey.js', import.meta.url));
const repo = fileURLToPath(new URL('../../', import.meta.url));
const examples = join(repo, 'examples', 'intents.jsonl');

function runJs(input, args = ['derive', '--jsonl']) {
  const r = spawnSync(process.execPath, [bin, ...args], { input, maxBuffer: 1 << 28 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr.toString('utf8') };
}

// The Rust tool, if built (cargo build / cargo test build target/debug/intentkey).
function rustBinary() {
  const targetDir = process.env.CARGO_TARGET_DIR ?? join(repo, 'target');
  return ['debug', 'release']
    .map((profile) => join(targetDir, profile, 'intentkey'))
    .find((path) => existsSync(path));
}

const requestLines = parseVectorFile(
  readFileSync(join(repo, 'tests', 'vectors', 'request_lines_test.json'), 'utf8'),
).testGroups.flatMap((g) => g.tests);

// Lines the vectors do not hold: BOM, not UTF-8, CR, empty, U+2028 and U+001C in data.
const ODD = Buffer.concat([
  Buffer.from('\ufeff{"id":1}\n\n{"id":'),
  Buffer.from([0xff, 0xfe]),
  Buffer.from('}\r\n{"id":"a\u2028b"}\n{"id":"c\u001cd"}\n{"id":"x"}\r\n{"id":"y"}\r'),
]);

test('CLI answers every RequestLine vector, one line each, in order', () => {
  const input = `${requestLines.map((t) => t.line).join('\n')}\n`;
  const { status, stdout, stderr } = runJs(input);
  assert.equal(status, 0, stderr);
  const answers = stdout.toString('utf8').split('\n');
  assert.equal(answers.pop(), '', 'output ends with a newline');
  assert.equal(answers.length, requestLines.length);
  let keys = 0;
  requestLines.forEach((t, i) => {
    const answer = JSON.parse(answers[i]);
    assert.deepEqual(answer.id, t.id, `request_lines_test.json#${t.tcId}: id`);
    if (t.result === 'valid') {
      assert.equal(answer.key, t.key, `request_lines_test.json#${t.tcId}: key`);
      keys++;
    } else {
      assert.equal(answer.error?.code, t.expectedError, `request_lines_test.json#${t.tcId}: error`);
    }
  });
  const n = requestLines.length;
  assert.equal(stderr, `intentkey: answered ${n} lines: ${keys} keys, ${n - keys} errors\n`);
});

test('CLI splits on "\\n" only and answers lines that are not UTF-8', () => {
  const { status, stdout, stderr } = runJs(ODD);
  assert.equal(status, 0, stderr);
  const answers = stdout.toString('utf8').split('\n');
  assert.equal(answers.pop(), '');
  assert.equal(answers.length, 7);
  assert.match(answers[0], /^\{"id":null,"error":\{"code":"invalid-json"/, 'a BOM is data, as in Rust');
  assert.match(answers[1], /^\{"id":null,"error":\{"code":"invalid-json"/);
  assert.equal(answers[2], unreadableLineAnswer());
  assert.match(answers[3], /^\{"id":"a\u2028b","error":\{"code":"invalid-secret"/, 'U+2028 is data');
  assert.match(answers[4], /^\{"id":null,"error":\{"code":"invalid-json"/, 'U+001C is data (bad JSON)');
  assert.match(answers[5], /^\{"id":"x","error"/);
  assert.match(answers[6], /^\{"id":"y","error"/, 'a last line without "\\n" is answered');
  assert.equal(stderr, 'intentkey: answered 7 lines: 0 keys, 7 errors\n');
});

test('CLI keeps order across batches, reads --input, and --quiet silences the summary', () => {
  const secret = '5c'.repeat(32);
  const lines = [];
  for (let i = 0; i < 2500; i++) {
    lines.push(
      i % 10 === 9
        ? `{"id":${i}}`
        : JSON.stringify({ id: i, secret_hex: secret, tenant_id: 't', action_type: 'pix.send', payload: { amount: `${i}.00` }, intent_epoch: 1_700_000_000 }),
    );
  }
  const dir = mkdtempSync(join(tmpdir(), 'intentkey-cli-'));
  try {
    const file = join(dir, 'in.jsonl');
    writeFileSync(file, lines.join('\n'));
    const { status, stdout, stderr } = runJs('', ['derive', '--jsonl', '--quiet', '--input', file]);
    assert.equal(status, 0, stderr);
    assert.equal(stderr, '');
    const answers = stdout.toString('utf8').trimEnd().split('\n').map((l) => JSON.parse(l));
    assert.equal(answers.length, 2500);
    answers.forEach((a, i) => {
      assert.equal(a.id, i);
      assert.equal(i % 10 === 9 ? a.error?.code : typeof a.key, i % 10 === 9 ? 'invalid-secret' : 'string');
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  assert.equal(runJs('').stdout.length, 0);
  assert.equal(runJs('', ['derive']).status, 2);
  assert.equal(runJs('', ['derive', '--jsonl', '--secret', 'x']).status, 2);
  assert.equal(runJs('', ['derive', '--jsonl', '--policy', join(repo, 'no-such-policy.json')]).status, 2);
});

test('CLI output is byte-identical to the Rust tool', (t) => {
  const rust = rustBinary();
  if (!rust) {
    // Under CI the comparison must run: a missing binary is a failure, not a skip.
    assert.notEqual(process.env.CI, 'true', 'CI=true but the Rust tool is not built (cargo build -p intentkey-cli)');
    t.skip('the Rust tool is not built (cargo build -p intentkey-cli)');
    return;
  }
  const inputs = {
    'examples/intents.jsonl': readFileSync(examples),
    'RequestLine vectors': Buffer.from(`${requestLines.map((x) => x.line).join('\n')}\n`),
    'odd lines': ODD,
  };
  for (const [name, input] of Object.entries(inputs)) {
    const r = spawnSync(rust, ['derive', '--jsonl'], { input, maxBuffer: 1 << 28 });
    assert.equal(r.status, 0, `rust on ${name}: ${r.stderr}`);
    const js = runJs(input);
    assert.equal(js.status, 0, js.stderr);
    assert.ok(Buffer.compare(js.stdout, r.stdout) === 0, `${name}: stdout differs from ${rust}`);
    assert.equal(js.stderr, r.stderr.toString('utf8'), `${name}: summary differs`);
  }
});

test('CLI --policy: custom-policy vectors as request lines, and a bad policy is refused up front', () => {
  const doc = parseVectorFile(readFileSync(join(repo, 'tests', 'vectors', 'policy_custom_test.json'), 'utf8'));
  const dir = mkdtempSync(join(tmpdir(), 'intentkey-policy-'));
  try {
    let checked = 0;
    for (const group of doc.testGroups.filter((g) => g.type === 'FieldsDerivation' && g.policy !== null)) {
      const policyFile = join(dir, `policy-${checked}.json`);
      writeFileSync(policyFile, JSON.stringify(group.policy));
      // Request lines built from the vectors' raw texts (payload and epoch kept exact).
      const tests = group.tests.filter((t) => {
        try {
          JSON.parse(t.payload);
          return true;
        } catch {
          return false;
        }
      });
      const lines = tests.map(
        (t) =>
          `{"id":${t.tcId},"secret_hex":${JSON.stringify(t.secretHex)},"tenant_id":${JSON.stringify(t.tenantId)},` +
          `"action_type":${JSON.stringify(t.actionType)},"payload":${t.payload},"intent_epoch":${t.intentEpoch}}`,
      );
      const { status, stdout, stderr } = runJs(`${lines.join('\n')}\n`, ['derive', '--jsonl', '--quiet', '--policy', policyFile]);
      assert.equal(status, 0, stderr);
      const answers = stdout.toString('utf8').trimEnd().split('\n').map((l) => JSON.parse(l));
      assert.equal(answers.length, tests.length);
      tests.forEach((t, i) => {
        assert.equal(answers[i].id, t.tcId);
        if (t.result === 'valid') assert.equal(answers[i].key, t.key, `policy_custom_test.json#${t.tcId}`);
        else assert.equal(answers[i].error?.code, t.expectedError, `policy_custom_test.json#${t.tcId}`);
        checked++;
      });
    }
    assert.ok(checked > 40, `only ${checked} custom-policy lines checked`);

    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '{"version":1,"fields":{"amount":{"class":"key","normalizer":"decimal","scale":19}}}');
    const r = runJs('{"id":1}\n', ['derive', '--jsonl', '--policy', bad]);
    assert.equal(r.status, 2);
    assert.equal(r.stdout.length, 0);
    assert.match(r.stderr, /^intentkey: policy .*bad\.json: invalid-policy: .*fields\.amount\.scale/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
