// Runs every golden vector in the page through the package's browser entry.
// The result lands in window.__intentkeyResult (read by browser.test.js) and on the page.
import * as intentkey from '../../src/browser.js';
import { GROUP_TYPES, parseVectorFile, runVectors } from '../vector-runner.js';

const out = document.getElementById('out');

/** An in-flight record (the same one browser.test.js decides on in Node). */
export const RECORD = {
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

async function main() {
  const names = await (await fetch('/__vectors')).json();
  const files = [];
  for (const name of names) {
    const response = await fetch(`/tests/vectors/${name}`);
    if (!response.ok) throw new Error(`fetching ${name}: HTTP ${response.status}`);
    files.push({ name, doc: parseVectorFile(await response.text()) });
  }
  const started = performance.now();
  const result = runVectors(intentkey, files);
  const ms = performance.now() - started;
  const uuids = Array.from({ length: 20 }, () => intentkey.newUuidKey());
  const extra = {
    ms,
    userAgent: navigator.userAgent,
    isNode: typeof process !== 'undefined',
    uuids,
    // The claim decisions run in the browser too: a few, compared in browser.test.js.
    claims: (() => {
      const c = intentkey.claims;
      const r = RECORD;
      // The HTTP answers come from an endpoint (the core's `http` interface); bodies
      // are bytes, passed back as plain arrays.
      const e = intentkey.createEndpoint({ secret: '07'.repeat(32), profile: 'ofb' });
      const plain = (reply) => ({ ...reply, body: Array.from(reply.body) });
      const request = { tenantId: 't', method: 'POST', route: '/orders', keyValues: [], body: new Uint8Array() };
      return {
        header: e.headerName,
        missing: plain(e.admit(request, 0).reply),
        attempt: e.admit({ ...request, keyValues: ['k-1'], contentType: 'application/json', body: '{"a":1}' }, 0).attempt,
        inFlight: plain(e.answer(c.decideExisting(r, 'fp'), 0)),
        conflict: plain(e.answer(c.decideExisting(r, 'other'), 0)),
        failed: plain(e.failed(0)),
        recovery: c.decideRecovery(r, 'unknown', false, 0),
        classes: [c.classify({ answered: { status: 429, contentType: '', body: '' } }), c.classify('failed')],
        rules: c.defaultRules(),
        token: c.ownerToken(new Uint8Array(16).fill(7)),
      };
    })(),
  };
  const lines = GROUP_TYPES.map((t) => `${t}: ${result.passed[t]}/${result.perType[t]}`);
  out.textContent = [
    `${result.total} vectors in ${result.files} files, ${result.failures.length} failed (${ms.toFixed(0)} ms)`,
    ...lines,
    ...result.failures,
  ].join('\n');
  return { ...result, ...extra };
}

main().then(
  (result) => {
    window.__intentkeyResult = result;
  },
  (e) => {
    out.textContent = `error: ${e && e.stack ? e.stack : e}`;
    window.__intentkeyResult = { error: String(e && e.stack ? e.stack : e) };
  },
);
