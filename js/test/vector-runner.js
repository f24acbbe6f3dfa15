// The golden-vector runner, shared by the Node test (vectors.test.js) and the
// browser page (browser/page.js). It mirrors crates/intentkey/tests/vectors.rs:
// it dispatches on the group type, compares material / key / fingerprint /
// expectedError / errorPath exactly, lints the files (unique tcIds, numberOfTests,
// flags defined in notes) and names `file#tcId` on failure. An unknown group type is
// a failure, never a skip, and so is a known group type that ran no test.
// No Node or DOM APIs here: it runs wherever the package runs.

/** Every group type the vectors use; each must run at least one test. */
export const GROUP_TYPES = [
  'FieldsDerivation',
  'RequestLine',
  'PolicyInvalid',
  'IntentHmac',
  'Fingerprint',
  'UuidV4',
];

// A well-formed 32-byte secret for policy checks (the policy is validated first).
const POLICY_SECRET = '00'.repeat(32);

function hexBytes(hex) {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function str(test, name) {
  const v = test[name];
  if (typeof v !== 'string') throw new Error(`vector member \`${name}\` is not a string`);
  return v;
}

function policyOf(group) {
  // null: the built-in default. Otherwise the policy as JSON text (the vectors'
  // policies hold no number that JSON.parse/stringify would change).
  return group.policy === null ? undefined : JSON.stringify(group.policy);
}

/**
 * Parses a vector file. JSON.parse would round an intentEpoch beyond 2^53, so the
 * integer literals of `"intentEpoch"` members are read as text first (a member name
 * inside a JSON string value is escaped, \"intentEpoch\", and does not match).
 */
export function parseVectorFile(text) {
  return JSON.parse(text.replace(/"intentEpoch":(\s*)(-?[0-9]+)(?=\s*[,}])/g, '"intentEpoch":$1"$2"'));
}

// The epoch as the exact integer: a number when it is a safe integer (the common
// case), otherwise a bigint, so both conversions of the API run.
function epochOf(test) {
  const text = test.intentEpoch;
  if (typeof text !== 'string' || !/^-?[0-9]+$/.test(text)) {
    throw new Error(`intentEpoch ${JSON.stringify(text)} is not an integer literal (use parseVectorFile)`);
  }
  const value = BigInt(text);
  return Number.isSafeInteger(Number(value)) && BigInt(Number(value)) === value ? Number(value) : value;
}

function compare(what, want, got) {
  if (typeof want !== 'string') return `vector lacks \`${what}\``;
  return want === got ? null : `${what} differs:\n    want ${JSON.stringify(want)}\n    got  ${JSON.stringify(got)}`;
}

function describe(e) {
  return e && e.code ? `${e.code} (${e.field ?? '-'}): ${e.message}` : String(e && e.stack ? e.stack : e);
}

/** Compares an outcome with the vector: `run` returns the value or throws. */
function check(api, test, run, valid) {
  let value;
  try {
    value = run();
  } catch (e) {
    if (!(e instanceof api.IntentkeyError)) return `threw a non-intentkey error: ${describe(e)}`;
    if (test.result === 'valid') return `expected valid, got error ${describe(e)}`;
    if (test.result !== 'invalid') return `unknown result ${JSON.stringify(test.result)}`;
    return e.code === test.expectedError ? null : `expected error ${test.expectedError}, got ${describe(e)}`;
  }
  if (test.result === 'invalid') return `expected error ${test.expectedError}, got a result`;
  if (test.result !== 'valid') return `unknown result ${JSON.stringify(test.result)}`;
  return valid(value);
}

function withKeyer(api, options, fn) {
  const keyer = api.createKeyer(options);
  try {
    return fn(keyer);
  } finally {
    keyer.dispose();
  }
}

function runFields(api, group, test) {
  return check(
    api,
    test,
    () =>
      withKeyer(api, { secret: str(test, 'secretHex'), policy: policyOf(group) }, (keyer) => {
        const intent = {
          tenantId: str(test, 'tenantId'),
          actionType: str(test, 'actionType'),
          payload: str(test, 'payload'),
          intentEpoch: epochOf(test),
        };
        return { material: keyer.material(intent), key: keyer.derive(intent) };
      }),
    ({ material, key }) => compare('material', test.material, material) ?? compare('key', test.key, key),
  );
}

function deepEqual(a, b) {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
}

function runRequestLine(api, test) {
  const answers = api.answerLines([str(test, 'line')]);
  if (answers.length !== 1) return `expected one answer line, got ${answers.length}`;
  let answer;
  try {
    answer = JSON.parse(answers[0]);
  } catch {
    return `the answer is not JSON: ${answers[0]}`;
  }
  if (!deepEqual(answer.id, test.id)) {
    return `id echo differs: want ${JSON.stringify(test.id)}, got ${JSON.stringify(answer.id)}`;
  }
  if (test.result === 'valid') {
    if (answer.error) return `expected valid, got error ${answer.error.code}: ${answer.error.message}`;
    return compare('key', test.key, answer.key);
  }
  if (!answer.error) return `expected error ${test.expectedError}, got a key`;
  return answer.error.code === test.expectedError
    ? null
    : `expected error ${test.expectedError}, got ${answer.error.code}: ${answer.error.message}`;
}

function runPolicyInvalid(api, test) {
  try {
    withKeyer(api, { secret: POLICY_SECRET, policy: JSON.stringify(test.policy) }, () => null);
  } catch (e) {
    if (!(e instanceof api.IntentkeyError)) return `threw a non-intentkey error: ${describe(e)}`;
    if (e.code !== test.expectedError) return `got ${describe(e)}`;
    const want = str(test, 'errorPath');
    const got = e.field ?? '';
    return want === got ? null : `error path differs: want ${JSON.stringify(want)}, got ${JSON.stringify(got)} (${describe(e)})`;
  }
  return 'expected invalid-policy, the policy was accepted';
}

function runIntentHmac(api, test) {
  return check(
    api,
    test,
    () =>
      withKeyer(api, { secret: str(test, 'secretHex') }, (keyer) =>
        keyer.intentKey(str(test, 'tenantId'), str(test, 'intentId'), test.keyHexLength),
      ),
    (key) => compare('key', test.key, key),
  );
}

function runFingerprint(api, group, test) {
  return check(
    api,
    test,
    () =>
      withKeyer(api, { secret: str(test, 'secretHex'), policy: policyOf(group) }, (keyer) => {
        const args = [str(test, 'tenantId'), str(test, 'actionType'), str(test, 'payload')];
        const material = keyer.fingerprintMaterial(...args);
        const fingerprint = keyer.fingerprint(...args);
        const matches = keyer.fingerprintMatches(...args, fingerprint);
        return { material, fingerprint, matches };
      }),
    ({ material, fingerprint, matches }) =>
      compare('material', test.material, material) ??
      compare('fingerprint', test.fingerprint, fingerprint) ??
      (matches ? null : 'fingerprint does not match itself'),
  );
}

function runUuid(api, test) {
  const bytes = hexBytes(str(test, 'randomHex'));
  if (bytes.length !== 16) return 'randomHex is not 16 bytes';
  return compare('key', test.key, api.uuidKey(bytes));
}

/**
 * Runs every vector.
 * @param {object} api the package's exports (createKeyer, uuidKey, answerLines, IntentkeyError)
 * @param {{name: string, doc: any}[]} files parsed vector files, sorted by name
 * @returns {{total: number, perType: Record<string, number>, passed: Record<string, number>,
 *   failures: string[], files: number}} perType counts the tests run, passed those that passed
 */
export function runVectors(api, files) {
  const perType = Object.fromEntries(GROUP_TYPES.map((t) => [t, 0]));
  const passed = Object.fromEntries(GROUP_TYPES.map((t) => [t, 0]));
  const failures = [];
  let total = 0;
  if (files.length === 0) failures.push('no vector files');
  for (const { name, doc } of files) {
    if (doc.schema !== 'intentkey_vectors_v1') failures.push(`${name}: schema ${JSON.stringify(doc.schema)}`);
    const notes = new Set(Object.keys(doc.notes ?? {}));
    const ids = new Set();
    let count = 0;
    for (const group of doc.testGroups ?? []) {
      const kind = group.type;
      for (const test of group.tests ?? []) {
        count++;
        const id = test.tcId;
        if (ids.has(id)) failures.push(`${name}#${id}: duplicate tcId`);
        ids.add(id);
        for (const flag of test.flags ?? []) {
          if (!notes.has(flag)) failures.push(`${name}#${id}: flag ${flag} not defined in notes`);
        }
        let failure;
        try {
          switch (kind) {
            case 'FieldsDerivation':
              failure = runFields(api, group, test);
              break;
            case 'RequestLine':
              failure = runRequestLine(api, test);
              break;
            case 'PolicyInvalid':
              failure = runPolicyInvalid(api, test);
              break;
            case 'IntentHmac':
              failure = runIntentHmac(api, test);
              break;
            case 'Fingerprint':
              failure = runFingerprint(api, group, test);
              break;
            case 'UuidV4':
              failure = runUuid(api, test);
              break;
            default:
              failure = `unknown group type ${JSON.stringify(kind)}; a runner must run every group`;
          }
        } catch (e) {
          failure = `runner error: ${describe(e)}`;
        }
        if (Object.hasOwn(perType, kind)) {
          perType[kind]++;
          if (!failure) passed[kind]++;
        }
        if (failure) failures.push(`${name}#${id} (${test.comment ?? ''}): ${failure}`);
      }
    }
    if (doc.numberOfTests !== count) {
      failures.push(`${name}: numberOfTests is ${doc.numberOfTests}, the file holds ${count}`);
    }
    total += count;
  }
  for (const kind of GROUP_TYPES) {
    if (perType[kind] === 0) failures.push(`group type ${kind} ran no test`);
  }
  return { total, perType, passed, failures, files: files.length };
}
