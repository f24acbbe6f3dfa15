// What each runtime test runs inside its runtime (Bun, Deno, workerd), through the
// packed package installed as a new user would (see support.mjs): the key vectors
// (../vector-runner.js), the HTTP conformance vectors and their canary
// (../http-vector-runner.js), a first key derived the README's way, a random
// UUIDv4 key (the runtime's crypto.getRandomValues), a retried POST through
// intentkey/fetch (the handler runs once, the retry is a replay) and a check of
// which package entry the runtime resolved.
// No Node or DOM APIs here: the files come in as text.
import { GROUP_TYPES, parseVectorFile, runVectors } from './vector-runner.js';
import { httpCanary, httpSummary, parseHttpVectors, runHttpVectors } from './http-vector-runner.js';

/** The first valid FieldsDerivation vector, derived the way a new user would. */
function firstKey(intentkey, files) {
  for (const { name, doc } of files) {
    for (const group of doc.testGroups ?? []) {
      if (group.type !== 'FieldsDerivation' || group.policy !== null) continue;
      const test = (group.tests ?? []).find((t) => t.result === 'valid' && /^-?[0-9]+$/.test(t.intentEpoch));
      if (test === undefined) continue;
      const keyer = intentkey.createKeyer({ secret: test.secretHex });
      try {
        const key = keyer.derive({
          tenantId: test.tenantId,
          actionType: test.actionType,
          payload: test.payload,
          intentEpoch: Number(test.intentEpoch),
        });
        return key === test.key ? null : `${name}#${test.tcId}: derived ${key}, want ${test.key}`;
      } finally {
        keyer.dispose();
      }
    }
  }
  return 'no valid default-policy FieldsDerivation vector to derive';
}

/** A POST retried with the same key through intentkey/fetch: one handler run, the same answer replayed. */
async function fetchRetry(fetchAdapter, memoryStore) {
  let runs = 0;
  const handler = async (request) => {
    runs++;
    const order = await request.json();
    return Response.json({ id: `order-${runs}`, amount: order.amount }, { status: 201, headers: { Location: `/orders/${runs}` } });
  };
  const app = fetchAdapter.withIdempotency(handler, { secret: '11'.repeat(32), store: memoryStore() });
  const send = () =>
    app(
      new Request('https://example.test/orders', {
        method: 'POST',
        headers: { 'Idempotency-Key': '"order-7"', 'Content-Type': 'application/json' },
        body: JSON.stringify({ amount: 42 }),
      }),
    );
  const first = await send();
  const firstBody = await first.text();
  const again = await send();
  const againBody = await again.text();
  const problems = [];
  if (runs !== 1) problems.push(`the handler ran ${runs} times`);
  if (first.status !== 201 || again.status !== 201) problems.push(`statuses ${first.status}, ${again.status}`);
  if (firstBody !== againBody) problems.push(`replayed body ${againBody}, first ${firstBody}`);
  if (again.headers.get('location') !== '/orders/1') problems.push(`replayed Location ${again.headers.get('location')}`);
  return problems.map((p) => `intentkey/fetch retry: ${p}`);
}

/**
 * @param {string} runtime the name printed in the count line
 * @param {object} intentkey the package (`intentkey`) as the runtime resolved it
 * @param {{ entry: 'node' | 'worker', keyVectors: {name: string, text: string}[],
 *   httpVectors: string, httpApi: object, fetchAdapter: object, memoryStore: Function }} input
 *   entry: which package entry the runtime must have resolved (node: index.js, with
 *   the guard and the stores; worker: worker.js, the pure component); httpVectors:
 *   the text of http_test.json; httpApi: { createEndpoint, createGuard, memoryStore }
 *   for the HTTP vector runner; fetchAdapter: `intentkey/fetch`; memoryStore: from
 *   `intentkey/stores/memory`
 * @returns {Promise<{ line: string, summary: string, failures: string[] }>}
 */
export async function runSuite(runtime, intentkey, { entry, keyVectors, httpVectors, httpApi, fetchAdapter, memoryStore }) {
  const failures = [];
  const hasGuard = typeof intentkey.createGuard === 'function';
  if (hasGuard !== (entry === 'node')) {
    failures.push(`${runtime} resolved the wrong package entry: createGuard is ${hasGuard ? '' : 'not '}exported, want the ${entry} entry`);
  }
  for (const name of ['createKeyer', 'createEndpoint', 'init']) {
    if (typeof intentkey[name] !== 'function') failures.push(`${runtime}: the package exports no ${name}`);
  }
  await intentkey.init();

  const uuid = intentkey.newUuidKey();
  if (!/^[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}$/.test(uuid)) {
    failures.push(`newUuidKey gave ${JSON.stringify(uuid)}, not a UUIDv4`);
  }

  const files = keyVectors.map(({ name, text }) => ({ name, doc: parseVectorFile(text) }));
  const first = firstKey(intentkey, files);
  if (first !== null) failures.push(`first key: ${first}`);

  const keys = runVectors(intentkey, files);
  const passedKeys = GROUP_TYPES.reduce((n, t) => n + keys.passed[t], 0);
  failures.push(...keys.failures);

  const doc = parseHttpVectors(httpVectors);
  const http = await runHttpVectors(httpApi, doc);
  failures.push(...http.failures);
  if (http.handlerRuns !== http.expectedRuns) {
    failures.push(`http: the handler ran ${http.handlerRuns} times, the vectors say ${http.expectedRuns}`);
  }
  failures.push(...(await httpCanary(httpApi, doc)).map((p) => `http canary: ${p}`));
  // Every step, fingerprint, storage key and endpoint answer is one HTTP vector.
  const lists = ['steps', 'fingerprints', 'storage keys', 'endpoint answers'];
  const httpPassed = lists.reduce((n, l) => n + http.counts[l][1], 0);
  const httpTotal = lists.reduce((n, l) => n + http.counts[l][0], 0);
  if (httpTotal === 0) failures.push('http: no vectors ran');

  failures.push(...(await fetchRetry(fetchAdapter, memoryStore)));

  return {
    line: `${runtime}: ${passedKeys}/${keys.total} key vectors, ${httpPassed}/${httpTotal} http vectors`,
    summary: httpSummary(runtime, http),
    failures,
  };
}
