// Runs the HTTP conformance vectors in the page through the browser build: the
// pure component's createEndpoint, and a guard over the memory store driven
// through the core's flows (as the browser build of intentkey/fetch does). The
// result lands in window.__intentkeyHttpResult (read by http-vectors.test.js).
import { createEndpoint } from '../../src/browser.js';
import { api } from '../../src/browser-core.js';
import { guardFactory } from '../../src/guard.js';
import { memoryStore } from '../../src/stores/memory.js';
import { httpCanary, httpSummary, parseHttpVectors, runHttpVectors } from '../http-vector-runner.js';

const out = document.getElementById('out');

async function main() {
  await api.init?.();
  const response = await fetch('/tests/vectors/http/http_test.json');
  if (!response.ok) throw new Error(`fetching http_test.json: HTTP ${response.status}`);
  const doc = parseHttpVectors(await response.text());
  const intentkey = { createEndpoint, createGuard: guardFactory(api), memoryStore };
  const started = performance.now();
  const result = await runHttpVectors(intentkey, doc);
  const ms = performance.now() - started;
  const canary = await httpCanary(intentkey, doc);
  const summary = httpSummary('chromium', result);
  out.textContent = [`${summary} (${ms.toFixed(0)} ms)`, ...result.failures, ...canary.map((c) => `canary: ${c}`)].join('\n');
  return {
    summary,
    counts: result.counts,
    handlerRuns: result.handlerRuns,
    expectedRuns: result.expectedRuns,
    failures: result.failures,
    canary,
    ms,
    userAgent: navigator.userAgent,
    isNode: typeof process !== 'undefined',
    sameEndpoint: createEndpoint === api.createEndpoint,
  };
}

main().then(
  (result) => {
    window.__intentkeyHttpResult = result;
  },
  (e) => {
    out.textContent = `error: ${e && e.stack ? e.stack : e}`;
    window.__intentkeyHttpResult = { error: String(e && e.stack ? e.stack : e) };
  },
);
