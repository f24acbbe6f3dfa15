// The core's HTTP rules (the WIT `http` interface) for JavaScript: one endpoint
// per server, holding its secret, its options and its route policies inside the
// component. Every rule is the core's (`intentkey::http`): which header carries
// the key and how it is parsed, the body limit, the tenant-scoped storage key,
// the request fingerprint, and every answer (400, 409, 413, 422, 500, 503, the
// replay with its allow-listed headers and `Idempotent-Replayed`). This file only
// converts JavaScript values to the WIT types and back.
import { IntentkeyError } from './errors.js';
import { disposeResource } from './instance.js';
import { NO_BYTES, bytesIn, decisionIn, isWellFormed, secondsIn, text } from './claims.js';
import { waitError, waitMaxMsIn } from './watching.js';

/** The profiles the core knows (the WIT `profile` enum). */
export const PROFILES = Object.freeze(['ietf', 'stripe', 'ofb']);

const U64_MAX = 2n ** 64n - 1n;

/** Whole seconds now: the default `now` of every endpoint call. */
export const systemNow = () => Math.floor(Date.now() / 1000);

function optionError(option, message) {
  return new IntentkeyError('invalid-argument', `createEndpoint: \`${option}\` ${message}`, option);
}

/** Options that were renamed or dropped, and what to use instead. */
const FORMER_OPTIONS = Object.freeze({
  acceptBareToken: 'the ietf profile takes bare keys by default; `strictKeySyntax: true` accepts only quoted ones',
});

/**
 * Refuses any own key of `options` that is not in `known`: a misspelt option
 * (`maxBodySize`, `strictKeys`) would otherwise be ignored without a word.
 * @param {object} options
 * @param {readonly string[]} known
 * @param {string} who the function the options are given to, for the message
 */
export function checkOptionNames(options, known, who) {
  for (const name of Object.keys(options)) {
    if (known.includes(name)) continue;
    const instead = FORMER_OPTIONS[name];
    throw new IntentkeyError(
      'invalid-argument',
      instead === undefined
        ? `${who}: \`${name}\` is not an option; the options are ${known.join(', ')}`
        : `${who}: \`${name}\` is no longer an option: ${instead}`,
      name,
    );
  }
}

/** The options createEndpoint takes. */
export const ENDPOINT_OPTIONS = Object.freeze([
  'secret',
  'keyring',
  'profile',
  'strictKeySyntax',
  'retryAfterSeconds',
  'replayHeaders',
  'keyRequired',
  'maxBodyBytes',
  'maxStoredBytes',
  'policies',
  'wait',
  'storeDeadlineMs',
]);

/** The longest timer a host can set (setTimeout's limit), in milliseconds. */
const DEADLINE_MAX_MS = 2 ** 31 - 1;

/**
 * The `storeDeadlineMs` option (the deadline of one store call, in
 * milliseconds), checked: a whole number from 1 to 2147483647, else an
 * IntentkeyError `invalid-argument` naming it. Undefined stays undefined
 * (the core's default, claims.storeDeadlineMs()).
 * @param {unknown} value
 * @param {string} who the function given it, for messages
 */
export function checkDeadline(value, who) {
  if (value === undefined || value === null) return undefined;
  if (!Number.isInteger(value) || value < 1 || value > DEADLINE_MAX_MS) {
    throw new IntentkeyError(
      'invalid-argument',
      `${who}: \`storeDeadlineMs\` must be a whole number of milliseconds from 1 to ${DEADLINE_MAX_MS} (how long one store call may take before it counts as store-unavailable)`,
      'storeDeadlineMs',
    );
  }
  return value;
}

function boolOption(value, fallback, option) {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'boolean') throw optionError(option, 'must be true or false');
  return value;
}

function u32Option(value, fallback, option) {
  if (value === undefined || value === null) return fallback;
  if (!Number.isInteger(value) || value < 0 || value > 2 ** 32 - 1) {
    throw optionError(option, 'must be a whole number of seconds from 0 to 4294967295');
  }
  return value;
}

function u64Option(value, fallback, option) {
  if (value === undefined || value === null) return BigInt(fallback);
  const big = typeof value === 'bigint' ? value : Number.isSafeInteger(value) ? BigInt(value) : -1n;
  if (big < 0n || big > U64_MAX) throw optionError(option, 'must be a whole number of bytes (a safe integer or a bigint)');
  return big;
}

function headerNames(value, option) {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw optionError(option, 'must be a list of header names, e.g. ["ETag"]');
  return value.map((name, i) => {
    if (typeof name !== 'string' || name.length === 0 || !isWellFormed(name)) {
      throw optionError(`${option}[${i}]`, 'must be a header name (a non-empty string)');
    }
    return name;
  });
}

/**
 * Route policies as the WIT takes them: [[`METHOD route`, policy JSON]]. Takes an
 * object or a Map from `METHOD route` to a policy (an object or JSON text).
 */
function policiesIn(value) {
  if (value === undefined || value === null) return [];
  let entries;
  if (value instanceof Map) entries = [...value];
  else if (typeof value === 'object' && !Array.isArray(value)) entries = Object.entries(value);
  else throw optionError('policies', "must be an object such as { 'POST /orders': policy }");
  return entries.map(([action, policy]) => {
    if (typeof action !== 'string' || !isWellFormed(action)) {
      throw optionError('policies', 'is keyed by `METHOD route` strings, e.g. "POST /orders"');
    }
    let json = policy;
    if (typeof policy !== 'string') {
      try {
        json = JSON.stringify(policy);
      } catch (e) {
        throw new IntentkeyError(
          'invalid-policy',
          `the policy of ${action} cannot be written as JSON (${e instanceof Error ? e.message : e})`,
          'policies',
        );
      }
      if (typeof json !== 'string' || policy === null || typeof policy !== 'object') {
        throw new IntentkeyError('invalid-policy', `the policy of ${action} must be a JSON object or its text`, 'policies');
      }
    } else if (!isWellFormed(policy)) {
      throw new IntentkeyError('invalid-policy', `the policy of ${action} is not well-formed Unicode`, 'policies');
    }
    return [action, json];
  });
}

/** A WIT reply to { status, headers: [name, value][], body: Uint8Array }. */
export function replyOut(r) {
  return { status: r.status, headers: r.headers.map(([name, value]) => [name, value]), body: r.body };
}

function requestIn(request) {
  if (request === null || typeof request !== 'object') {
    throw new TypeError('admit(request): request is { tenantId, method, route, keyValues, contentType?, body }');
  }
  const { keyValues, contentType, body } = request;
  if (keyValues !== undefined && keyValues !== null && !Array.isArray(keyValues)) {
    throw new TypeError('request.keyValues must be a list of strings (one per header line; [] when absent)');
  }
  return {
    tenantId: text(request.tenantId, 'request.tenantId'),
    method: text(request.method, 'request.method'),
    route: text(request.route, 'request.route'),
    keyValues: (keyValues ?? []).map((v, i) => text(v, `request.keyValues[${i}]`)),
    contentType: contentType === undefined || contentType === null ? undefined : text(contentType, 'request.contentType'),
    body: body === undefined || body === null ? NO_BYTES : bytesIn(body, 'request.body'),
  };
}

function admissionOut(a) {
  switch (a.tag) {
    case 'guarded':
      return { tag: 'guarded', attempt: { ...a.val } };
    case 'unguarded':
      return { tag: 'unguarded' };
    case 'refused':
      return { tag: 'refused', reply: replyOut(a.val) };
    default:
      throw new Error(`intentkey: the core answered an unknown admission ${a.tag} (a bug)`);
  }
}

/**
 * The hidden method of an endpoint that serves a request on a synchronous store
 * in one component call (the guard's `serve`: admit, claim, answer). Only the
 * HTTP pipeline uses it, through the guard (guard.js).
 */
/** `secret` and `keyring` are two ways to give the secrets: one, not both. */
export function oneOf(options) {
  if (options.secret !== undefined && options.secret !== null && options.keyring !== undefined) {
    throw new IntentkeyError(
      'invalid-keyring',
      'give either `secret` (one secret) or `keyring` (secrets with ids and activation epochs), not both',
      'keyring',
    );
  }
}

/** The endpoint's maker of serve flows (the guard's pipeline uses it). Not public API. */
export const SERVE = Symbol('intentkey.endpoint.serve');

const timeIn = (now) => secondsIn(now === undefined ? systemNow() : now, 'now');

/**
 * Makes `createEndpoint` over one API's instances.
 * @param {{
 *   instance: () => any,
 *   callOn: (inst: any, fn: (inst: any) => any) => any,
 *   withSecret: (inst: any, secret: Uint8Array, fn: (secretId: string) => any) => any,
 *   withKeyring: (inst: any, keyring: unknown, fn: (entries: any[], windowSeconds?: bigint) => any) => any,
 *   secretBytes: (secret: unknown) => Uint8Array,
 *   flow: (create: (Flow: any) => any, on?: any) => any,
 * }} host how core.js reaches the component
 */
export function endpointFactory({ instance, callOn, withSecret, withKeyring, secretBytes, flow }) {
  /**
   * One server's HTTP rules.
   * @param {{
   *   secret?: Uint8Array | ArrayBuffer | string,
   *   keyring?: { secrets: { id: string, activeFrom: number | bigint, secret: Uint8Array | ArrayBuffer | string }[], windowSeconds?: number | bigint },
   *   profile?: 'ietf' | 'stripe' | 'ofb',
   *   strictKeySyntax?: boolean,
   *   retryAfterSeconds?: number,
   *   replayHeaders?: string[],
   *   keyRequired?: boolean,
   *   maxBodyBytes?: number | bigint,
   *   maxStoredBytes?: number | bigint,
   *   policies?: Record<string, object | string> | Map<string, object | string>,
   *   wait?: { maxMs?: number },
   * }} options
   */
  return function createEndpoint(options = {}) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError('createEndpoint takes an options object: { secret or keyring, profile?, policies?, … }');
    }
    checkOptionNames(options, ENDPOINT_OPTIONS, 'createEndpoint');
    const profile = options.profile ?? 'ietf';
    if (!PROFILES.includes(profile)) {
      throw optionError('profile', `must be one of ${PROFILES.join(', ')} (got ${JSON.stringify(profile)})`);
    }
    const inst = instance();
    const base = callOn(inst, (i) => i.http.defaultOptions(profile));
    const wit = {
      profile,
      strictKeySyntax: boolOption(options.strictKeySyntax, base.strictKeySyntax, 'strictKeySyntax'),
      retryAfterSeconds: u32Option(options.retryAfterSeconds, base.retryAfterSeconds, 'retryAfterSeconds'),
      replayHeaders: [...base.replayHeaders, ...headerNames(options.replayHeaders, 'replayHeaders')],
      keyRequired: boolOption(options.keyRequired, base.keyRequired, 'keyRequired'),
      maxBodyBytes: u64Option(options.maxBodyBytes, base.maxBodyBytes, 'maxBodyBytes'),
      maxStoredBytes: u64Option(options.maxStoredBytes, base.maxStoredBytes, 'maxStoredBytes'),
      // How long a retry that finds its key in flight waits for the first
      // attempt (the core's op `watch`); the core refuses more than 60 s.
      waitMaxMs: options.wait === undefined ? base.waitMaxMs : waitMaxMsIn(options.wait, 'createEndpoint'),
    };
    const policies = policiesIn(options.policies);
    // The deadline of one store call of the requests guard.serve() serves (the guard's own wins).
    const storeDeadlineMs = checkDeadline(options.storeDeadlineMs, 'createEndpoint');
    let resource;
    try {
      if (options.keyring !== undefined) {
        oneOf(options);
        resource = withKeyring(inst, options.keyring, (entries, windowSeconds) =>
          callOn(inst, (i) => i.http.Endpoint.createKeyring(entries, windowSeconds, wit, policies)),
        );
      } else {
        const secret = secretBytes(options.secret);
        resource = withSecret(inst, secret, (secretId) =>
          callOn(inst, (i) => i.http.Endpoint.create(secretId, wit, policies)),
        );
      }
    } catch (e) {
      throw waitError(e, 'createEndpoint');
    }
    let live = resource;
    const use = () => {
      if (live === null) throw new TypeError('this endpoint was disposed; create a new one');
      return live;
    };
    const headerName = callOn(inst, () => resource.headerName());
    const defaultMethods = Object.freeze(callOn(inst, (i) => i.http.defaultMethods()));
    const reply = (method) => (now) => {
      const t = timeIn(now);
      const r = use();
      return replyOut(callOn(inst, () => r[method](t)));
    };

    return Object.freeze({
      /** The profile's key header name, as the profile spells it. */
      headerName,
      /** The methods an adapter guards unless told otherwise (the core's: POST, PATCH). */
      defaultMethods,
      profile,
      /** The largest body admitted, in bytes: adapters stop reading one byte past it. */
      maxBodyBytes: Number(wit.maxBodyBytes > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : wit.maxBodyBytes),
      /** Whether a request without a key is refused (else it runs unguarded). */
      keyRequired: wit.keyRequired,
      /** How long a retry that finds its key in flight waits for the first attempt, in ms (0: no wait, 409 at once). */
      waitMaxMs: wit.waitMaxMs,
      /** The deadline of one store call it was made with (undefined: the guard's, else the core's). */
      storeDeadlineMs,
      /** The stored headers a replay restores (the defaults and the added ones). */
      replayHeaders: Object.freeze([...wit.replayHeaders]),
      /**
       * The key, body, storage key and fingerprint rules applied to a request:
       * { tag: 'guarded', attempt } | { tag: 'unguarded' } | { tag: 'refused', reply }.
       */
      admit(request, now) {
        const req = requestIn(request);
        const t = timeIn(now);
        const r = use();
        return admissionOut(callOn(inst, () => r.admit(req, t)));
      },
      /**
       * What is stored of a handler's answer (the core's rule): status,
       * Content-Type, the headers a replay restores, body; past maxStoredBytes,
       * the core's "answer not kept" in its place.
       */
      capture(status, headers, body) {
        const r = use();
        return callOn(inst, () => r.capture(status, headers, body));
      },
      /** The answer to a claim outcome; null when the attempt owns the effect. */
      answer(outcome, now) {
        const o = decisionIn(outcome);
        const t = timeIn(now);
        const r = use();
        const a = callOn(inst, () => r.answer(o, t));
        return a === undefined || a === null ? null : replyOut(a);
      },
      /** 413: the body is larger than maxBodyBytes. */
      tooLarge: reply('tooLarge'),
      /** 503 with Retry-After: the store could not be reached; nothing was done. */
      unavailable: reply('unavailable'),
      /** 500: the handler failed; its outcome is unknown and the record stays in flight. */
      failed: reply('failed'),
      /**
       * The core's outcome class of an error that carries HTTP status `status`
       * raised instead of an answer: 'released' (a 4xx: refused before anything
       * happened) or 'ambiguous' (left in flight, answered with failed()).
       */
      classifyErrorStatus(status) {
        if (!Number.isInteger(status) || status < 0 || status > 65535) {
          throw new TypeError(`classifyErrorStatus: the status must be a whole number from 0 to 65535 (got ${String(status)})`);
        }
        return callOn(inst, (i) => i.http.classifyErrorStatus(status));
      },
      /**
       * A serve flow of the core for `request` (admit, claim, the handler,
       * capture, finish, answer): a flow handle (start, resume, advance, drop),
       * owned by the token of `seed` (16 random bytes), finishing by WIT `rules`.
       */
      [SERVE](request, rules, seed, now) {
        const req = requestIn(request);
        const t = timeIn(now);
        const r = use();
        return flow((Flow) => Flow.serve(r, req, rules, seed, t), inst);
      },
      /** Frees the endpoint (and its copy of the secret) inside the component now. */
      dispose() {
        const r = live;
        live = null;
        disposeResource(inst, r);
      },
    });
  };
}
