// Value conversions between JavaScript and the component's WIT types: strings
// checked for well-formed Unicode, payloads, policies and other JSON as text,
// epochs and key lengths in range, intents and journal runs as WIT records, and
// secrets and keyrings as private byte copies. Each bad value becomes the
// IntentkeyError (or TypeError) the core's rules call for; no rule lives here.
import { IntentkeyError } from './errors.js';

const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;
const U32_MAX = 2 ** 32 - 1;

export const isWellFormed =
  typeof String.prototype.isWellFormed === 'function'
    ? (s) => s.isWellFormed()
    : (s) => !/\p{Surrogate}/u.test(s.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g, ''));

export function witString(value, code, field) {
  if (typeof value !== 'string') {
    throw new IntentkeyError(code, `\`${field}\` must be a string`, field);
  }
  if (!isWellFormed(value)) {
    throw new IntentkeyError(code, `\`${field}\` is not well-formed Unicode (a lone surrogate)`, field);
  }
  return value;
}

export function payloadText(payload) {
  let text = payload;
  if (typeof payload !== 'string') {
    try {
      text = JSON.stringify(payload);
    } catch (e) {
      throw new IntentkeyError(
        'invalid-payload',
        `the payload cannot be written as JSON (${e instanceof Error ? e.message : e}); ` +
          'pass BigInt or exact numbers as strings, or pass the payload as JSON text',
        'payload',
      );
    }
    if (typeof text !== 'string') {
      throw new IntentkeyError('invalid-payload', 'the payload must be a JSON object', 'payload');
    }
  }
  if (!isWellFormed(text)) {
    // What the core says for a lone surrogate escape (\ud800) in payload text.
    throw new IntentkeyError(
      'invalid-payload',
      '`payload` is not well-formed Unicode (a lone surrogate); send a JSON object',
      'payload',
    );
  }
  return text;
}

export function toEpoch(epoch) {
  let value;
  if (typeof epoch === 'bigint') value = epoch;
  else if (typeof epoch === 'number' && Number.isSafeInteger(epoch)) value = BigInt(epoch);
  if (value === undefined || value < I64_MIN || value > I64_MAX) {
    throw new IntentkeyError(
      'invalid-epoch',
      '`intent_epoch` must be an integer count of seconds within the signed 64-bit range ' +
        '(a safe-integer number or a bigint)',
      'intent_epoch',
    );
  }
  return value;
}

export function toIntent(intent) {
  if (intent === null || typeof intent !== 'object') {
    throw new TypeError('an intent is an object: { tenantId, actionType, payload, intentEpoch }');
  }
  return {
    tenantId: witString(intent.tenantId, 'invalid-tenant-id', 'tenant_id'),
    actionType: witString(intent.actionType, 'invalid-action-type', 'action_type'),
    payloadJson: payloadText(intent.payload),
    intentEpoch: toEpoch(intent.intentEpoch),
  };
}

/** A journal run { tenantId, intentId, intentEpoch } as the WIT record. */
export function toRun(run) {
  if (run === null || typeof run !== 'object') {
    throw new TypeError('a run is { tenantId, intentId, intentEpoch }: the recorded intent every attempt of the run resumes');
  }
  return {
    tenantId: witString(run.tenantId, 'invalid-tenant-id', 'tenant_id'),
    intentId: witString(run.intentId, 'invalid-intent-id', 'intent_id'),
    intentEpoch: toEpoch(run.intentEpoch),
  };
}

/** Any JSON value as JSON text, or a typed error naming `field`. */
export function jsonText(value, field) {
  let text;
  try {
    text = JSON.stringify(value);
  } catch (e) {
    throw new IntentkeyError('invalid-json', `\`${field}\` cannot be written as JSON (${e instanceof Error ? e.message : e})`, field);
  }
  if (typeof text !== 'string') {
    throw new IntentkeyError('invalid-json', `\`${field}\` cannot be written as JSON (it is ${typeof value})`, field);
  }
  return text;
}

/** A WIT attempt as the guard's input (no prior key: journal attempts keep their run's secret). */
export function attemptOut(a) {
  return { key: a.key, fingerprint: a.fingerprint, tenantId: a.tenantId, actionType: a.actionType };
}

export function fingerprintArgs(tenantId, actionType, payload) {
  return [
    witString(tenantId, 'invalid-tenant-id', 'tenant_id'),
    witString(actionType, 'invalid-action-type', 'action_type'),
    payloadText(payload),
  ];
}

export function policyText(policy) {
  if (policy === undefined || policy === null) return undefined;
  if (typeof policy === 'string') {
    if (!isWellFormed(policy)) {
      throw new IntentkeyError('invalid-policy', 'the policy is not well-formed Unicode', '');
    }
    return policy;
  }
  let text;
  try {
    text = JSON.stringify(policy);
  } catch (e) {
    throw new IntentkeyError(
      'invalid-policy',
      `the policy cannot be written as JSON (${e instanceof Error ? e.message : e})`,
      '',
    );
  }
  if (typeof text !== 'string') {
    throw new IntentkeyError('invalid-policy', 'the policy must be a JSON object', '');
  }
  return text;
}

const HEX = /^(?:[0-9a-fA-F]{2})*$/;

export function keyLengthIn(keyHexLength) {
  if (keyHexLength === undefined || keyHexLength === null) return undefined;
  if (!Number.isInteger(keyHexLength) || keyHexLength < 0 || keyHexLength > U32_MAX) {
    throw new IntentkeyError(
      'invalid-key-length',
      'the key length must be a whole number of hex characters, 32 to 64',
      'keyHexLength',
    );
  }
  return keyHexLength;
}

/**
 * The shape of a keyring option, `{ secrets: [{ id, activeFrom, secret }], windowSeconds? }`,
 * converted: private copies of the secrets' bytes, activations as bigints.
 */
export function keyringIn(keyring) {
  const bad = (message) => new IntentkeyError('invalid-keyring', message, 'keyring');
  if (keyring === null || typeof keyring !== 'object' || !Array.isArray(keyring.secrets)) {
    throw bad('the keyring is { secrets: [{ id, activeFrom, secret }, …], windowSeconds? }');
  }
  const entries = [];
  try {
    keyring.secrets.forEach((entry, i) => {
      if (entry === null || typeof entry !== 'object') throw bad(`secret ${i} of the keyring is not an object`);
      if (typeof entry.id !== 'string') throw bad(`secret ${i} of the keyring has no string \`id\``);
      const from = entry.activeFrom;
      if (!(typeof from === 'bigint' || (typeof from === 'number' && Number.isSafeInteger(from)))) {
        throw bad(`secret ${i} of the keyring (\`${entry.id.slice(0, 64)}\`) has no whole-seconds \`activeFrom\``);
      }
      entries.push({ id: entry.id, activeFrom: BigInt(from), secret: secretBytes(entry.secret) });
    });
  } catch (e) {
    for (const e2 of entries) e2.secret.fill(0);
    throw e;
  }
  let windowSeconds;
  if (keyring.windowSeconds !== undefined && keyring.windowSeconds !== null) {
    const w = keyring.windowSeconds;
    if (!(typeof w === 'bigint' || (typeof w === 'number' && Number.isSafeInteger(w)))) {
      for (const e of entries) e.secret.fill(0);
      throw bad('the keyring\'s `windowSeconds` must be whole seconds');
    }
    windowSeconds = BigInt(w);
  }
  return { entries, windowSeconds };
}

/** A private copy of the secret's bytes (zeroed once the guest has taken them). */
export function secretBytes(secret) {
  if (typeof secret === 'string') {
    if (!HEX.test(secret)) {
      throw new IntentkeyError(
        'invalid-secret',
        'the secret is not hex: give an even number of 0-9/a-f digits with no spaces',
        'secret',
      );
    }
    const bytes = new Uint8Array(secret.length / 2);
    for (let i = 0; i < bytes.length; i++) {
      bytes[i] = Number.parseInt(secret.slice(2 * i, 2 * i + 2), 16);
    }
    return bytes;
  }
  if (secret instanceof Uint8Array) return new Uint8Array(secret);
  if (secret instanceof ArrayBuffer) return new Uint8Array(secret.slice(0));
  throw new IntentkeyError(
    'invalid-secret',
    'the secret is missing: give at least 32 random bytes as a Uint8Array or a hex string',
    'secret',
  );
}
