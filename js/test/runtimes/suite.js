// What each runtime test runs inside its runtime (Bun, Deno, workerd), through the
// packed package installed as a new user would (see support.mjs): the key vectors
// (../vector-runner.js) and the HTTP conformance vectors (../http-vector-runner.js,
// when the package's tests have it), plus a first key derived the README's way, a
// random UUIDv4 key (the runtime's crypto.getRandomValues) and a check of which
// package entry the runtime resolved.
// No Node or DOM APIs here: the files come in as text.
import { GROUP_TYPES, parseVectorFile, runVectors } from './vector-runner.js';

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

/**
 * @param {string} runtime the name printed in the count line
 * @param {object} intentkey the package as the runtime resolved it
 * @param {{ entry: 'node' | 'worker', keyVectors: {name: string, text: string}[],
 *   httpVectors?: {name: string, text: string}[], runHttpVectors?: Function }} input
 *   entry: which package entry the runtime must have resolved (node: index.js, with
 *   the guard and the stores; worker: worker.js, the pure component)
 * @returns {{ line: string, failures: string[] }}
 */
export async function runSuite(runtime, intentkey, { entry, keyVectors, httpVectors, runHttpVectors }) {
  const failures = [];
  const hasGuard = typeof intentkey.createGuard === 'function';
  if (hasGuard !== (entry === 'node')) {
    failures.push(`${runtime} resolved the wrong package entry: createGuard is ${hasGuard ? '' : 'not '}exported, want the ${entry} entry`);
  }
  if (typeof intentkey.createKeyer !== 'function') failures.push(`${runtime}: the package exports no createKeyer`);

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
  let line = `${runtime}: ${passedKeys}/${keys.total} key vectors`;

  if (runHttpVectors !== undefined && httpVectors !== undefined) {
    const http = await runHttpVectors(intentkey, httpVectors);
    failures.push(...http.failures);
    line += `, ${http.passed}/${http.total} http vectors`;
  } else {
    line += ', http vectors not run (no http-vector-runner.js)';
  }
  return { line, failures };
}
