// The same transpiled component in a real headless Chromium: a page loads the
// package's browser entry and runs every golden vector. Files come from a small
// static server on 127.0.0.1 (random port) started here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { existsSync, readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { GROUP_TYPES } from '../vector-runner.js';
import { claims, createEndpoint } from '../../src/index.js';

// The record the page decides on (page.js's RECORD; page.js itself only runs in a browser).
const RECORD = {
  key: 'k',
  fingerprint: 'fp',
  tenantId: 't',
  actionType: 'a',
  status: 'in_flight',
  ownerToken: '07'.repeat(16),
  response: null,
  createdAt: 0,
  expiresAt: null,
  lookups: 0,
  nextLookupAt: null,
};

const repo = fileURLToPath(new URL('../../../', import.meta.url));
const vectors = join(repo, 'tests', 'vectors');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
// Only what the page needs is served.
const SERVED = ['js/src/', 'js/vendor/', 'js/test/', 'tests/vectors/'];
const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
};

function startServer() {
  const server = createServer(async (req, res) => {
    try {
      const path = decodeURIComponent(new URL(req.url, 'http://x').pathname).slice(1);
      if (path === '__vectors') {
        const names = readdirSync(vectors).filter((n) => n.endsWith('.json')).sort();
        res.writeHead(200, { 'content-type': TYPES['.json'] });
        res.end(JSON.stringify(names));
        return;
      }
      const rel = normalize(path);
      if (rel.includes('..') || !SERVED.some((p) => rel.split(sep).join('/').startsWith(p))) {
        res.writeHead(404).end();
        return;
      }
      const body = await readFile(join(repo, rel));
      res.writeHead(200, { 'content-type': TYPES[extname(rel)] ?? 'application/octet-stream' });
      res.end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

test('every golden vector passes in headless Chromium', async (t) => {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium`);
  assert.ok(existsSync(join(repo, 'js', 'vendor', 'intentkey.js')), 'vendor/ is missing: npm run build');
  const server = await startServer();
  t.after(() => server.close());
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true, timeout: 60_000 });
  t.after(() => browser.close());
  const page = await browser.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  const wasmFetched = [];
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`HTTP ${r.status()} for ${r.url()}`);
    if (r.url().endsWith('.wasm')) wasmFetched.push(r.url());
  });
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
  });
  const { port } = server.address();
  await page.goto(`http://127.0.0.1:${port}/js/test/browser/page.html`);
  await page.waitForFunction(() => window.__intentkeyResult !== undefined, null, { timeout: 120_000 });
  const result = await page.evaluate(() => window.__intentkeyResult);
  assert.equal(result.error, undefined, result.error);
  assert.deepEqual(problems, []);
  assert.equal(result.isNode, false, 'the page ran outside Node');
  const counts = GROUP_TYPES.map((k) => `${k} ${result.passed[k]}/${result.perType[k]}`).join(', ');
  console.log(`chromium (${result.userAgent.match(/Chrome\/[\d.]+/)?.[0]}): ${result.total} vectors in ${result.files} files in ${result.ms.toFixed(0)} ms: ${counts}`);
  assert.deepEqual(result.failures, [], `${result.failures.length} vectors failed in the browser:\n${result.failures.join('\n')}`);
  for (const kind of GROUP_TYPES) assert.ok(result.perType[kind] > 0, `group type ${kind} was skipped`);
  assert.ok(result.total > 0);
  // Randomness from crypto.getRandomValues: v4 keys, all different.
  for (const key of result.uuids) assert.match(key, /^[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}$/);
  assert.equal(new Set(result.uuids).size, result.uuids.length);
  // The same claim decisions and HTTP answers (keys and fingerprints too) as in
  // Node (the pure component there, the full one here).
  const r = { ...RECORD };
  const e = createEndpoint({ secret: '07'.repeat(32), profile: 'ofb' });
  const plain = (reply) => ({ ...reply, body: Array.from(reply.body) });
  const request = { tenantId: 't', method: 'POST', route: '/orders', keyValues: [], body: new Uint8Array() };
  assert.deepEqual(result.claims, {
    header: 'x-idempotency-key',
    missing: plain(e.admit(request, 0).reply),
    attempt: e.admit({ ...request, keyValues: ['k-1'], contentType: 'application/json', body: '{"a":1}' }, 0).attempt,
    inFlight: plain(e.answer(claims.decideExisting(r, 'fp'), 0)),
    conflict: plain(e.answer(claims.decideExisting(r, 'other'), 0)),
    failed: plain(e.failed(0)),
    recovery: claims.decideRecovery(r, 'unknown', false, 0),
    classes: ['released', 'ambiguous'],
    rules: claims.defaultRules(),
    token: '07'.repeat(16),
  });
  // The page loaded the pure component, not the full one.
  assert.ok(wasmFetched.length > 0 && wasmFetched.every((url) => url.includes('/js/vendor/pure/')), JSON.stringify(wasmFetched));
});
