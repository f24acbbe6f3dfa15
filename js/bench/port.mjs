// BENCHMARK ONLY. Never import this from the package: it is the plain node:crypto
// port of the default payments policy that a JavaScript developer would write by
// hand, kept here to measure what the component costs against it and to show what
// such a port gets wrong (bench.mjs runs it over tests/vectors/fields_default_test.json).
// The real rules live once, in the Rust core.
import { createHmac } from 'node:crypto';

const BUCKET_SECONDS = 900;
const IGNORED = new Set(['request_id', 'attempt', 'trace_id', 'created_at', 'user_agent']);

// Number.toFixed rounds the binary double (1.005 -> "1.00"), not the decimal text.
const amount = (raw) => Number(raw).toFixed(2);
const currency = (raw) => raw.trim().toUpperCase();
const creditorKey = (raw) => {
  const key = raw.trim();
  return /^[\d.\-/]+$/.test(key) ? key.replace(/\D/g, '') : key.toLowerCase();
};
// toLowerCase approximates casefold ("ß" stays "ß"); trim is not Python's strip.
const text = (raw) => raw.normalize('NFC').trim().toLowerCase();

const HASHED = { amount, creditor_key: creditorKey, currency, remittance: text };
const HASHED_NAMES = Object.keys(HASHED).sort();

/** The canonical material, the port's way. `payload` is a parsed JSON object. */
export function portMaterial(tenantId, actionType, payload, intentEpoch) {
  const unknown = Object.keys(payload).filter((k) => !(k in HASHED) && !IGNORED.has(k));
  if (unknown.length > 0) throw new Error(`unclassified fields: ${unknown.sort().join(', ')}`);
  const body = {};
  for (const name of HASHED_NAMES) {
    if (name in payload) body[name] = HASHED[name](payload[name]);
  }
  const bucket = Math.floor(Number(intentEpoch) / BUCKET_SECONDS);
  return JSON.stringify([tenantId, actionType, body, bucket]);
}

/** A keyed port: the HMAC key schedule is redone per call, as createHmac does. */
export function portKeyer(secret) {
  const key = typeof secret === 'string' ? Buffer.from(secret, 'hex') : Buffer.from(secret);
  return {
    material: portMaterial,
    derive(tenantId, actionType, payload, intentEpoch) {
      const material = portMaterial(tenantId, actionType, payload, intentEpoch);
      return createHmac('sha256', key).update(material, 'utf8').digest('hex');
    },
  };
}
