// The HTTP conformance vectors in a real headless Chromium: a page loads the
// package's browser build (the pure component) and runs every vector through
// http-vector-runner.js, the runner Node uses. Files come from a small static
// server on 127.0.0.1 (random port) started here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const repo = fileURLToPath(new URL('../../../', import.meta.url));
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
      const rel = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname).slice(1));
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

test('every HTTP vector passes in headless Chromium', async (t) => {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium`);
  assert.ok(existsSync(join(repo, 'js', 'vendor', 'pure')), 'vendor/pure is missing: npm run build');
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
  await page.goto(`http://127.0.0.1:${port}/js/test/browser/http-vectors.html`);
  await page.waitForFunction(() => window.__intentkeyHttpResult !== undefined, null, { timeout: 120_000 });
  const result = await page.evaluate(() => window.__intentkeyHttpResult);
  assert.equal(result.error, undefined, result.error);
  assert.deepEqual(problems, []);
  assert.equal(result.isNode, false, 'the page ran outside Node');
  assert.equal(result.sameEndpoint, true, 'the browser entry and the guard share one API');
  console.log(`${result.summary} (${result.userAgent.match(/Chrome\/[\d.]+/)?.[0]}, ${result.ms.toFixed(0)} ms)`);
  assert.deepEqual(result.failures, [], `${result.failures.length} HTTP vectors failed in the browser:\n${result.failures.join('\n')}`);
  assert.deepEqual(result.canary, [], 'the runner did not report altered vectors');
  assert.ok(result.counts.steps[0] > 0 && result.counts.fingerprints[0] > 0, 'no vectors ran');
  assert.equal(result.handlerRuns, result.expectedRuns);
  // The page loaded the pure component, not the full one.
  assert.ok(wasmFetched.length > 0 && wasmFetched.every((url) => url.includes('/js/vendor/pure/')), JSON.stringify(wasmFetched));
});
