// The core's claim, replay and recovery decisions (the WIT `claims` interface) for
// JavaScript, and the conversions between JavaScript values and the WIT types that
// the guard and the stores share. Every rule is in the Rust core
// (`intentkey::claim`): what an attempt gets from an existing record, the outcome
// class of an effect's result, the TTL of done records, the recovery backoff, what
// may be purged (the HTTP answers are the `http` interface's: see endpoint.js).
// This file only converts, refusing values that jco would otherwise wrap or coerce
// silently (a status of 70000, a fractional second, a lone surrogate that would
// become U+FFFD).
//
// The JavaScript record is the stored row in camelCase, with the stored status
// spelling (`in_flight`, `done`, `needs_reconciliation`; see the schema file):
//   { key, fingerprint, tenantId, actionType, status, ownerToken, response,
//     createdAt, expiresAt, lookups, nextLookupAt }
// A response is { status, contentType, headers, body }, headers a list of
// [name, value] pairs, body bytes: a Uint8Array in everything the package gives
// back; a string given in is encoded as UTF-8. Times are whole seconds since the Unix epoch (numbers);
// absent values are null. The WIT forms (what the stores hold and the component
// takes) use the WIT status spelling, bigint times and undefined for none.

import { IntentkeyError } from './errors.js';

const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;
const U32_MAX = 2 ** 32 - 1;

/** Stored spelling -> WIT enum case. A table of names, not a rule. */
export const STATUS_TO_WIT = new Map([
  ['in_flight', 'in-flight'],
  ['done', 'done'],
  ['needs_reconciliation', 'needs-reconciliation'],
]);
/** WIT enum case -> stored spelling. */
export const STATUS_FROM_WIT = new Map([...STATUS_TO_WIT].map(([stored, wit]) => [wit, stored]));

/** The record statuses, as stored. */
export const STATUSES = Object.freeze([...STATUS_TO_WIT.keys()]);

/**
 * A record status given to the public API (guard.list, the claims decisions'
 * records) to its WIT case. Only the stored spelling is accepted: `in-flight`
 * and `needs-reconciliation` are the spellings of claim outcomes, queue error
 * codes and the store interface (WIT), never of a record status here, and are
 * refused like any other value (invalid-argument, naming the field).
 */
export function statusIn(value, field) {
  const wit = STATUS_TO_WIT.get(value);
  if (wit !== undefined) return wit;
  const accepted = STATUSES.map((s) => `'${s}'`).join(', ');
  const got = typeof value === 'string' ? `'${value}'` : typeof value;
  const hint = STATUS_FROM_WIT.has(value)
    ? ` (${got} is the spelling of a claim outcome or of the store interface; a record status is written '${STATUS_FROM_WIT.get(value)}')`
    : '';
  throw new IntentkeyError('invalid-argument', `${field} must be a record status, one of ${accepted}; got ${got}${hint}`, field);
}

/** No replayable headers (shared; jco only reads it). */
export const NO_HEADERS = Object.freeze([]);

/** An empty body. */
export const NO_BYTES = new Uint8Array(0);

const encoder = new TextEncoder();

export const isWellFormed =
  typeof String.prototype.isWellFormed === 'function'
    ? (s) => s.isWellFormed()
    : (s) => !/\p{Surrogate}/u.test(s.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g, ''));

export function text(value, what) {
  if (typeof value !== 'string') throw new TypeError(`${what} must be a string (got ${typeof value})`);
  if (!isWellFormed(value)) throw new TypeError(`${what} is not well-formed Unicode (a lone surrogate)`);
  return value;
}

/** Whole seconds: a safe-integer number or an in-range bigint, to the WIT s64. */
export function secondsIn(value, what) {
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
export function secondsOut(value, what) {
  const n = Number(value);
  if (!Number.isSafeInteger(n)) {
    throw new RangeError(`${what} (${value}) is beyond the safe integers; use realistic times and TTLs`);
  }
  return n;
}

function optionalSecondsOut(value, what) {
  return value === undefined || value === null ? null : secondsOut(value, what);
}

/**
 * A body as the WIT takes it (list<u8>): a Uint8Array as is (a Buffer is viewed
 * as a plain Uint8Array, without a copy), a string encoded as UTF-8, any other
 * ArrayBuffer view or an ArrayBuffer viewed as bytes.
 * @param {unknown} body
 * @param {string} what
 * @returns {Uint8Array}
 */
export function bytesIn(body, what) {
  if (body instanceof Uint8Array) {
    return Object.getPrototypeOf(body) === Uint8Array.prototype
      ? body
      : new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
  }
  if (typeof body === 'string') {
    if (!isWellFormed(body)) throw new TypeError(`${what} is not well-formed Unicode (a lone surrogate)`);
    return body.length === 0 ? NO_BYTES : encoder.encode(body);
  }
  if (ArrayBuffer.isView(body)) return new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  throw new TypeError(`${what} must be bytes (a Uint8Array) or a string (sent as UTF-8)`);
}

export function u32(value, what) {
  if (!Number.isInteger(value) || value < 0 || value > U32_MAX) {
    throw new TypeError(`${what} must be a whole number from 0 to ${U32_MAX}`);
  }
  return value;
}

function headersIn(headers, what) {
  if (headers === undefined || headers === null) return NO_HEADERS;
  if (!Array.isArray(headers)) throw new TypeError(`${what} must be a list of [name, value] pairs`);
  if (headers.length === 0) return NO_HEADERS;
  const out = new Array(headers.length);
  for (let i = 0; i < headers.length; i++) {
    const pair = headers[i];
    if (!Array.isArray(pair) || pair.length !== 2) {
      throw new TypeError(`${what}[${i}] must be a [name, value] pair of strings`);
    }
    out[i] = [text(pair[0], `${what}[${i}] name`), text(pair[1], `${what}[${i}] value`)];
  }
  return out;
}

/**
 * A response as the WIT takes it: `status` a u16, `contentType` text, `body` bytes
 * (a Uint8Array, or a string sent as UTF-8), `headers` (optional) a list of
 * [name, value] pairs.
 * @param {unknown} response
 * @param {string} [what]
 */
export function responseIn(response, what = 'the response') {
  if (response === null || typeof response !== 'object') {
    throw new TypeError(`${what} must be an object { status, contentType, headers?, body }`);
  }
  const { status, contentType, headers, body } = /** @type {any} */ (response);
  if (!Number.isInteger(status) || status < 0 || status > 65535) {
    throw new TypeError(`${what}.status must be a whole number from 0 to 65535 (an HTTP status)`);
  }
  return {
    status,
    contentType: text(contentType, `${what}.contentType`),
    headers: headersIn(headers, `${what}.headers`),
    body: bytesIn(body, `${what}.body`),
  };
}

/** A WIT response to a JavaScript one (a copy). */
export function responseOut(response) {
  return {
    status: response.status,
    contentType: response.contentType,
    headers: response.headers.map(([name, value]) => [name, value]),
    body: response.body,
  };
}

/** A JavaScript record to the WIT record. */
export function recordIn(record, what = 'the record') {
  if (record === null || typeof record !== 'object') throw new TypeError(`${what} must be an object`);
  const status = statusIn(record.status, `${what}.status`);
  return {
    key: text(record.key, `${what}.key`),
    fingerprint: text(record.fingerprint, `${what}.fingerprint`),
    tenantId: text(record.tenantId, `${what}.tenantId`),
    actionType: text(record.actionType, `${what}.actionType`),
    status,
    ownerToken: text(record.ownerToken ?? '', `${what}.ownerToken`),
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
  if (status === undefined) throw new TypeError(`an unknown record status ${r.status}`);
  return {
    key: r.key,
    fingerprint: r.fingerprint,
    tenantId: r.tenantId,
    actionType: r.actionType,
    status,
    ownerToken: r.ownerToken,
    response: r.response === undefined || r.response === null ? null : responseOut(r.response),
    createdAt: secondsOut(r.createdAt, 'createdAt'),
    expiresAt: optionalSecondsOut(r.expiresAt, 'expiresAt'),
    lookups: r.lookups,
    nextLookupAt: optionalSecondsOut(r.nextLookupAt, 'nextLookupAt'),
  };
}

/** WIT claim-outcome -> { outcome, response? }. */
export function decisionOut(o) {
  return o.tag === 'done' ? { outcome: 'done', response: responseOut(o.val) } : { outcome: o.tag };
}

const OUTCOMES = new Set(['owned', 'in-flight', 'done', 'payload-conflict']);

/**
 * A claim outcome -> WIT claim-outcome. Takes a decision as decideExisting gives
 * it ({ outcome, response? }), its outcome alone ('owned', 'in-flight',
 * 'payload-conflict'), or the WIT form itself ({ tag, val? }).
 */
export function decisionIn(decision) {
  if (typeof decision === 'string' && decision !== 'done' && OUTCOMES.has(decision)) return { tag: decision };
  if (decision !== null && typeof decision === 'object' && typeof decision.tag === 'string' && !('outcome' in decision)) {
    decision = decision.tag === 'done' ? { outcome: 'done', response: decision.val } : { outcome: decision.tag };
  }
  if (decision === null || typeof decision !== 'object' || !OUTCOMES.has(decision.outcome)) {
    throw new TypeError(
      `a claim outcome is { outcome: ${[...OUTCOMES].join(' | ')}, response? } (the response when done)`,
    );
  }
  if (decision.outcome === 'done') {
    return { tag: 'done', val: responseIn(decision.response, 'the decision.response') };
  }
  return { tag: decision.outcome };
}

/** 'absent' | 'unknown' | { found: response } -> WIT lookup. */
export function lookupIn(lookup) {
  if (lookup === 'absent' || lookup === 'unknown') return { tag: lookup };
  if (lookup !== null && typeof lookup === 'object' && 'found' in lookup) {
    return { tag: 'found', val: responseIn(lookup.found, 'the look-up found') };
  }
  throw new TypeError(
    "a look-up answers { found: { status, contentType, headers?, body } }, 'absent' or 'unknown' " +
      `(got ${typeof lookup === 'string' ? JSON.stringify(lookup) : typeof lookup})`,
  );
}

/** WIT recovery-action -> { action, ... }. */
export function recoveryOut(a) {
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
      throw new TypeError(`an unknown recovery action ${a.tag}`);
  }
}

/**
 * An effect's result: { answered: response } | { refused: response | null } |
 * 'failed' -> WIT effect-result.
 */
export function effectIn(effect) {
  if (effect === 'failed') return { tag: 'failed' };
  if (effect !== null && typeof effect === 'object') {
    if ('answered' in effect) return { tag: 'answered', val: responseIn(effect.answered, 'the answered response') };
    if ('refused' in effect) {
      const r = effect.refused;
      return { tag: 'refused', val: r === null || r === undefined ? undefined : responseIn(r, 'the refused response') };
    }
  }
  throw new TypeError("an effect result is { answered: response }, { refused: response | null } or 'failed'");
}

/** { ttlSeconds, releaseStatuses, fastCompletion } -> WIT rules. */
export function rulesIn(rules, what = 'the rules') {
  if (rules === null || typeof rules !== 'object') {
    throw new TypeError(`${what} must be { ttlSeconds, releaseStatuses, fastCompletion }`);
  }
  const { ttlSeconds, releaseStatuses, fastCompletion } = rules;
  if (!Array.isArray(releaseStatuses) && !(releaseStatuses instanceof Uint16Array)) {
    throw new TypeError(`${what}.releaseStatuses must be a list of HTTP statuses`);
  }
  const statuses = new Uint16Array(releaseStatuses.length);
  for (let i = 0; i < releaseStatuses.length; i++) {
    const s = releaseStatuses[i];
    if (!Number.isInteger(s) || s < 0 || s > 65535) {
      throw new TypeError(`${what}.releaseStatuses[${i}] must be a whole number from 0 to 65535`);
    }
    statuses[i] = s;
  }
  if (typeof fastCompletion !== 'boolean') throw new TypeError(`${what}.fastCompletion must be a boolean`);
  return { ttlSeconds: secondsIn(ttlSeconds, `${what}.ttlSeconds`), releaseStatuses: statuses, fastCompletion };
}

/** WIT rules -> { ttlSeconds, releaseStatuses, fastCompletion }. */
export function rulesOut(r) {
  return {
    ttlSeconds: secondsOut(r.ttlSeconds, 'ttlSeconds'),
    releaseStatuses: Array.from(r.releaseStatuses),
    fastCompletion: r.fastCompletion,
  };
}

/**
 * The claims API over a way of calling the component's `claims` interface.
 * @param {(fn: (claims: any) => any) => any} callClaims runs fn on the current
 *   instance's claims exports, translating errors and traps
 */
export function createClaims(callClaims) {
  let defaults = null;
  let staleAfter = null;
  let deadline = null;
  let giveUp = null;
  const rules = () => (defaults ??= rulesOut(callClaims((c) => c.defaultRules())));
  return Object.freeze({
    /** What an attempt whose insert lost to `existing` gets: { outcome, response? }. */
    decideExisting(existing, fingerprint) {
      const r = recordIn(existing, 'the existing record');
      const fp = text(fingerprint, 'fingerprint');
      return decisionOut(callClaims((c) => c.decideExisting(r, fp)));
    },
    /** The outcome class of an effect's result: 'terminal' | 'released' | 'ambiguous'. */
    classify(effect, rulesValue = rules()) {
      const e = effectIn(effect);
      const r = rulesIn(rulesValue);
      return callClaims((c) => c.classify(e, r));
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
    /** The documented default rules: { ttlSeconds, releaseStatuses, fastCompletion } (a copy). */
    defaultRules() {
      const r = rules();
      return { ...r, releaseStatuses: [...r.releaseStatuses] };
    },
    /** The default TTL of done records, in seconds. */
    defaultTtlSeconds() {
      return rules().ttlSeconds;
    },
    /**
     * The waits (ms) before each new try of a finish the store could not take
     * (store-unavailable): the core's one schedule, about 3 s in all.
     */
    finishRetryDelaysMs() {
      return [...callClaims((c) => c.finishRetryDelaysMs())];
    },
    /**
     * The default deadline of one store call, in milliseconds (2000): a call
     * that has not answered by then is a failure that trying again may cure
     * (store-unavailable), never a hang. The `storeDeadlineMs` option changes it.
     */
    storeDeadlineMs() {
      deadline ??= callClaims((c) => c.storeDeadlineMs());
      return deadline;
    },
    /**
     * How long the release of a claim whose insert failed is tried, in
     * milliseconds (300000); a background release waits at most this long for
     * that abandoned insert to end first.
     */
    releaseGiveUpMs() {
      giveUp ??= callClaims((c) => c.releaseGiveUpMs());
      return giveUp;
    },
    /** The default stale-after of recovery, in seconds. */
    defaultStaleAfterSeconds() {
      if (staleAfter === null) staleAfter = secondsOut(callClaims((c) => c.defaultStaleAfterSeconds()), 'staleAfter');
      return staleAfter;
    },
    /**
     * Checks a journaled step's output (JSON text, at most maxBytes; default 1 MiB)
     * and makes the response it is recorded as.
     */
    stepOutput(step, outputJson, maxBytes) {
      const name = text(step, 'step');
      const output = text(outputJson, 'output');
      if (maxBytes !== undefined && !(Number.isInteger(maxBytes) && maxBytes >= 0 && maxBytes <= 2 ** 32 - 1)) {
        throw new TypeError('maxOutputBytes must be a whole number of bytes below 4 GiB');
      }
      return responseOut(callClaims((c) => c.stepOutput(name, output, maxBytes)));
    },
    /**
     * What a claim outcome ({ tag: 'owned' | 'in-flight' | 'payload-conflict' } or
     * { tag: 'done', val: response }) means for a step or tool call: undefined when
     * this attempt owns it, the recorded output (JSON text) when done; throws
     * step-in-flight or step-input-changed otherwise.
     */
    stepAnswer(name, outcome) {
      const n = text(name, 'name');
      const o = outcome.tag === 'done' ? { tag: 'done', val: responseIn(outcome.val, 'the recorded output') } : { tag: outcome.tag };
      return callClaims((c) => c.stepAnswer(n, o));
    },
    /** An owner token (32 hex) from 16 random bytes. */
    ownerToken(randomBytes) {
      if (!(randomBytes instanceof Uint8Array)) throw new TypeError('ownerToken takes a Uint8Array of 16 random bytes');
      return callClaims((c) => c.ownerToken(randomBytes));
    },
  });
}
