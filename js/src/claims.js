// The core's claim, replay and recovery decisions (the WIT `claims` interface) for
// JavaScript. Every rule is in the Rust core (`intentkey::claim`): what an attempt
// gets from an existing record, the 409/422/400 problem bodies, the TTL of done
// records, the recovery backoff, what may be purged. This file only converts
// JavaScript values to the WIT types and back, refusing values that jco would
// otherwise wrap or coerce silently (a status of 70000, a fractional second).
//
// The JavaScript record is the stored row in camelCase, with the stored status
// spelling (`in_flight`, `done`, `needs_reconciliation`, see docs/store-schema.md):
//   { key, fingerprint, tenantId, actionType, status, response, createdAt,
//     expiresAt, lookups, nextLookupAt }
// Times are whole seconds since the Unix epoch (numbers); absent values are null.

const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;
const U32_MAX = 2 ** 32 - 1;

/** Stored spelling -> WIT enum case. A table of names, not a rule. */
const STATUS_TO_WIT = new Map([
  ['in_flight', 'in-flight'],
  ['done', 'done'],
  ['needs_reconciliation', 'needs-reconciliation'],
]);
const STATUS_FROM_WIT = new Map([...STATUS_TO_WIT].map(([stored, wit]) => [wit, stored]));

/** The record statuses, as stored. */
export const STATUSES = Object.freeze([...STATUS_TO_WIT.keys()]);

const isWellFormed =
  typeof String.prototype.isWellFormed === 'function'
    ? (s) => s.isWellFormed()
    : (s) => !/\p{Surrogate}/u.test(s.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g, ''));

function text(value, what) {
  if (typeof value !== 'string') throw new TypeError(`${what} must be a string (got ${typeof value})`);
  if (!isWellFormed(value)) throw new TypeError(`${what} is not well-formed Unicode (a lone surrogate)`);
  return value;
}

/** Whole seconds: a safe-integer number or an in-range bigint, to the WIT s64. */
function secondsIn(value, what) {
  let big;
  if (typeof value === 'bigint') big = value;
  else if (typeof value === 'number' && Number.isSafeInteger(value)) big = BigInt(value);
  if (big === undefined || big < I64_MIN || big > I64_MAX) {
    throw new TypeError(`${what} must be whole seconds: a safe integer or a bigint in the signed 64-bit range`);
  }
  return big;
}

function optionalSecondsIn(value, what) {
  return value === null || value === undefined ? undefined : secondsIn(value, what);
}

/** A WIT s64 back to a number (seconds stay far below 2^53 in practice). */
function secondsOut(value, what) {
  const n = Number(value);
  if (!Number.isSafeInteger(n)) {
    throw new RangeError(`${what} (${value}) is beyond the safe integers; use realistic times and TTLs`);
  }
  return n;
}

function optionalSecondsOut(value, what) {
  return value === undefined || value === null ? null : secondsOut(value, what);
}

function u32(value, what) {
  if (!Number.isInteger(value) || value < 0 || value > U32_MAX) {
    throw new TypeError(`${what} must be a whole number from 0 to ${U32_MAX}`);
  }
  return value;
}

/**
 * A response as the WIT takes it. `status` is a u16, `contentType` and `body` text.
 * @param {unknown} response
 * @param {string} [what]
 */
export function responseIn(response, what = 'the response') {
  if (response === null || typeof response !== 'object') {
    throw new TypeError(`${what} must be an object { status, contentType, body }`);
  }
  const { status, contentType, body } = /** @type {any} */ (response);
  if (!Number.isInteger(status) || status < 0 || status > 65535) {
    throw new TypeError(`${what}.status must be a whole number from 0 to 65535 (an HTTP status)`);
  }
  return {
    status,
    contentType: text(contentType, `${what}.contentType`),
    body: text(body, `${what}.body`),
  };
}

function responseOut(response) {
  return { status: response.status, contentType: response.contentType, body: response.body };
}

/** A JavaScript record to the WIT record. */
export function recordIn(record, what = 'the record') {
  if (record === null || typeof record !== 'object') throw new TypeError(`${what} must be an object`);
  const status = STATUS_TO_WIT.get(record.status);
  if (status === undefined) {
    throw new TypeError(`${what}.status must be one of ${STATUSES.join(', ')} (got ${String(record.status)})`);
  }
  return {
    key: text(record.key, `${what}.key`),
    fingerprint: text(record.fingerprint, `${what}.fingerprint`),
    tenantId: text(record.tenantId, `${what}.tenantId`),
    actionType: text(record.actionType, `${what}.actionType`),
    status,
    response:
      record.response === null || record.response === undefined
        ? undefined
        : responseIn(record.response, `${what}.response`),
    createdAt: secondsIn(record.createdAt, `${what}.createdAt`),
    expiresAt: optionalSecondsIn(record.expiresAt, `${what}.expiresAt`),
    lookups: u32(record.lookups ?? 0, `${what}.lookups`),
    nextLookupAt: optionalSecondsIn(record.nextLookupAt, `${what}.nextLookupAt`),
  };
}

/** A WIT record to a JavaScript record. */
export function recordOut(r) {
  const status = STATUS_FROM_WIT.get(r.status);
  if (status === undefined) throw new TypeError(`the core returned an unknown status ${r.status}`);
  return {
    key: r.key,
    fingerprint: r.fingerprint,
    tenantId: r.tenantId,
    actionType: r.actionType,
    status,
    response: r.response === undefined || r.response === null ? null : responseOut(r.response),
    createdAt: secondsOut(r.createdAt, 'createdAt'),
    expiresAt: optionalSecondsOut(r.expiresAt, 'expiresAt'),
    lookups: r.lookups,
    nextLookupAt: optionalSecondsOut(r.nextLookupAt, 'nextLookupAt'),
  };
}

/** WIT claim-outcome -> { outcome, response? }. */
function decisionOut(o) {
  return o.tag === 'done' ? { outcome: 'done', response: responseOut(o.val) } : { outcome: o.tag };
}

const OUTCOMES = new Set(['owned', 'in-flight', 'done', 'payload-conflict']);

/** { outcome, response? } -> WIT claim-outcome. */
function decisionIn(decision) {
  if (decision === null || typeof decision !== 'object' || !OUTCOMES.has(decision.outcome)) {
    throw new TypeError(`a claim decision is { outcome: ${[...OUTCOMES].join(' | ')}, response? }`);
  }
  if (decision.outcome === 'done') {
    return { tag: 'done', val: responseIn(decision.response, 'the decision.response') };
  }
  return { tag: decision.outcome };
}

function answerOut(a) {
  return { status: a.status, contentType: a.contentType, body: a.body, replayed: a.replayed };
}

/** 'absent' | 'unknown' | { found: response } -> WIT lookup. */
export function lookupIn(lookup) {
  if (lookup === 'absent' || lookup === 'unknown') return { tag: lookup };
  if (lookup !== null && typeof lookup === 'object' && 'found' in lookup) {
    return { tag: 'found', val: responseIn(lookup.found, 'the look-up found') };
  }
  throw new TypeError(
    "a look-up answers { found: { status, contentType, body } }, 'absent' or 'unknown' " +
      `(got ${typeof lookup === 'string' ? JSON.stringify(lookup) : typeof lookup})`,
  );
}

function recoveryOut(a) {
  switch (a.tag) {
    case 'record-done':
      return { action: 'record-done', response: responseOut(a.val) };
    case 're-execute':
      return { action: 're-execute' };
    case 'check-later':
      return {
        action: 'check-later',
        lookups: a.val.lookups,
        nextLookupAt: secondsOut(a.val.nextLookupAt, 'nextLookupAt'),
      };
    case 'reconcile':
      return { action: 'reconcile', lookups: a.val };
    default:
      throw new TypeError(`the core returned an unknown recovery action ${a.tag}`);
  }
}

/**
 * The claims API over a way of calling the component's `claims` interface.
 * @param {(fn: (claims: any) => any) => any} callClaims runs fn on the current
 *   instance's claims exports, translating traps
 */
export function createClaims(callClaims) {
  let defaultTtl = null;
  return Object.freeze({
    /** A fresh in_flight record, as a claim inserts it. */
    newRecord(key, fingerprint, tenantId, actionType, now) {
      const args = [
        text(key, 'key'),
        text(fingerprint, 'fingerprint'),
        text(tenantId, 'tenantId'),
        text(actionType, 'actionType'),
        secondsIn(now, 'now'),
      ];
      return recordOut(callClaims((c) => c.newRecord(...args)));
    },
    /** What an attempt whose insert lost to `existing` gets: { outcome, response? }. */
    decideExisting(existing, fingerprint) {
      const r = recordIn(existing, 'the existing record');
      const fp = text(fingerprint, 'fingerprint');
      return decisionOut(callClaims((c) => c.decideExisting(r, fp)));
    },
    /** The record completed with `response`, expiring `ttlSeconds` after `now`. */
    complete(existing, response, now, ttlSeconds) {
      const r = recordIn(existing, 'the existing record');
      const resp = responseIn(response);
      const t = secondsIn(now, 'now');
      const ttl = secondsIn(ttlSeconds, 'ttlSeconds');
      return recordOut(callClaims((c) => c.complete(r, resp, t, ttl)));
    },
    /** The HTTP answer for a decision; null when the attempt owns the effect. */
    answerFor(decision) {
      const o = decisionIn(decision);
      const a = callClaims((c) => c.answerFor(o));
      return a === undefined || a === null ? null : answerOut(a);
    },
    /** The 400 problem answer when the key is missing from `header`. */
    missingKeyAnswer(header) {
      const h = text(header, 'header');
      return answerOut(callClaims((c) => c.missingKeyAnswer(h)));
    },
    /** What a destination look-up means for an in_flight record. */
    decideRecovery(existing, lookup, readYourWrites, now) {
      const r = recordIn(existing, 'the existing record');
      const l = lookupIn(lookup);
      if (typeof readYourWrites !== 'boolean') throw new TypeError('readYourWrites must be a boolean');
      const t = secondsIn(now, 'now');
      return recoveryOut(callClaims((c) => c.decideRecovery(r, l, readYourWrites, t)));
    },
    /** Whether an in_flight record is due a destination look-up at `now`. */
    recoveryDue(existing, now, staleAfterSeconds) {
      const r = recordIn(existing, 'the existing record');
      const t = secondsIn(now, 'now');
      const s = secondsIn(staleAfterSeconds, 'staleAfterSeconds');
      return callClaims((c) => c.recoveryDue(r, t, s));
    },
    /** Whether a record may be purged at `now` (done and expired only). */
    purgeable(existing, now) {
      const r = recordIn(existing, 'the existing record');
      const t = secondsIn(now, 'now');
      return callClaims((c) => c.purgeable(r, t));
    },
    /** The default TTL of done records, in seconds. */
    defaultTtlSeconds() {
      if (defaultTtl === null) defaultTtl = secondsOut(callClaims((c) => c.defaultTtlSeconds()), 'the TTL');
      return defaultTtl;
    },
  });
}
