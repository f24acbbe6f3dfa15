// The one HTTP pipeline every adapter (Express and node:http, Fastify, fetch and
// Hono) runs; the adapters only read the request and write the reply.
//
//   1. admit: the endpoint (the core's `http` interface) parses the key, checks
//      the body size and derives the tenant-scoped storage key and the request
//      fingerprint, or refuses (400, 413, 422…) or lets the request run unguarded;
//   2. claim: the guard runs the core's claim flow on the store (memory and
//      SQLite through the component's guard export, PostgreSQL through its
//      flows); an attempt that does not own the effect gets the endpoint's answer
//      (the replay, 409 with Retry-After, the profile's payload conflict); a store
//      that cannot be reached gets the endpoint's 503;
//   3. the owner's handler runs; what it answers is captured (status, headers,
//      bytes) and finished by its outcome class (a release status such as 429 or
//      503 releases the claim; anything else is stored), then sent as it was;
//      a handler that throws leaves the record in flight and gets the endpoint's
//      500 (no stack trace, no message); an error that carries a status
//      (`status`/`statusCode`, as body parsers and http-errors set it) is
//      settled by the core's classify-error-status (a 4xx releases the claim and
//      the framework's answer to it goes out unstored).
//
// No HTTP rule is here: every status, header and body of an answer is the core's.
import { IntentkeyError } from '../errors.js';
import { PIPELINE } from '../guard.js';
import { bytesIn } from '../claims.js';
import { ENDPOINT_OPTIONS, checkOptionNames } from '../endpoint.js';

/** The options every adapter takes (see options.d.ts). */
const PIPELINE_OPTIONS = Object.freeze([
  ...ENDPOINT_OPTIONS,
  'store',
  'releaseStatuses',
  'ttlSeconds',
  'fastCompletion',
  'now',
  'tenant',
  'route',
  'methods',
  'onError',
]);

/**
 * The HTTP status an error carries (`status`, else `statusCode`: body parsers,
 * http-errors, Fastify, Hono's HTTPException), or null.
 */
export function errorStatus(error) {
  if (error === null || (typeof error !== 'object' && typeof error !== 'function')) return null;
  for (const status of [error.status, error.statusCode]) {
    if (Number.isInteger(status) && status >= 0 && status <= 65535) return status;
  }
  return null;
}

/** The methods guarded by default: the non-idempotent ones the Idempotency-Key draft names. */
export const DEFAULT_METHODS = Object.freeze(['POST', 'PATCH']);

const FAILED = Object.freeze({ tag: 'failed' });
const REFUSED = Object.freeze({ tag: 'refused', val: undefined });
const EMPTY = new Uint8Array(0);

function optionError(option, message) {
  return new IntentkeyError('invalid-argument', `intentkey: \`${option}\` ${message}`, option);
}

function functionOrString(value, option, fallback) {
  if (value === undefined || value === null) return fallback;
  if (typeof value === 'string' || typeof value === 'function') return value;
  throw optionError(option, 'must be a string or a function of the request');
}

/** [name, value] pairs of the handler's headers (a value list becomes one pair per value). */
export function headerPairs(entries) {
  const pairs = [];
  for (const [name, value] of entries) {
    if (value === undefined || value === null) continue;
    if (Array.isArray(value)) for (const v of value) pairs.push([name, String(v)]);
    else pairs.push([name, String(value)]);
  }
  return pairs;
}


/**
 * Makes `createPipeline` over one API (the Node entry's or a pure one's).
 * @param {{ createEndpoint: Function, createGuard: Function }} api
 */
export function pipelineFactory({ createEndpoint, createGuard }) {
  /**
   * @param {object} options the adapters' options (see the adapters' .d.ts)
   * @param {string} adapter the adapter's name, for messages
   * @param {readonly string[]} [frameworkOptions] option names the framework itself passes (Fastify's `prefix`)
   */
  return function createPipeline(options, adapter, frameworkOptions = []) {
    if (options === null || typeof options !== 'object') {
      throw optionError('options', `${adapter} takes an options object: { secret, store, … }`);
    }
    checkOptionNames(options, [...PIPELINE_OPTIONS, ...frameworkOptions], adapter);
    if ((options.secret === undefined || options.secret === null) && options.keyring === undefined) {
      throw new IntentkeyError(
        'invalid-secret',
        `${adapter}: the \`secret\` option is missing: give at least 32 random bytes, as a Uint8Array or hex ` +
          '(the same secret on every server of the API, kept out of the code), or a `keyring` to rotate secrets',
        'secret',
      );
    }
    const { store } = options;
    if (store === undefined || store === null) {
      throw optionError(
        'store',
        `is missing: ${adapter} needs a record store (memoryStore() for tests, sqliteStore(path), await pgStore(pool))`,
      );
    }
    const endpoint = createEndpoint({
      secret: options.secret,
      keyring: options.keyring,
      profile: options.profile,
      strictKeySyntax: options.strictKeySyntax,
      retryAfterSeconds: options.retryAfterSeconds,
      replayHeaders: options.replayHeaders,
      keyRequired: options.keyRequired,
      maxBodyBytes: options.maxBodyBytes,
      maxStoredBytes: options.maxStoredBytes,
      policies: options.policies,
    });
    let guard;
    try {
      guard = createGuard({
        store,
        endpoint,
        releaseStatuses: options.releaseStatuses,
        ttlSeconds: options.ttlSeconds,
        fastCompletion: options.fastCompletion,
        now: options.now,
      });
    } catch (e) {
      if (e instanceof IntentkeyError) throw e;
      throw optionError(/store/.test(e.message) ? 'store' : 'options', `: ${e.message}`);
    }
    const { claim, finish, finishSync, now, serve } = guard[PIPELINE];
    const tenant = functionOrString(options.tenant, 'tenant', 'default');
    const route = options.route ?? null;
    if (route !== null && typeof route !== 'function') throw optionError('route', 'must be a function of the request');
    const methods = new Set((options.methods ?? DEFAULT_METHODS).map((m) => String(m).toUpperCase()));
    const onError = options.onError ?? null;
    if (onError !== null && typeof onError !== 'function') throw optionError('onError', 'must be a function (error, context)');

    /** Hands an error the client does not see (a handler's throw, a failed completion) to onError, or logs it. */
    function report(error, context, log) {
      try {
        if (onError !== null) onError(error, context);
        else (log ?? console.error)(`intentkey: ${context.phase}:`, error);
      } catch {
        // an onError that throws must not break the request
      }
    }

    /**
     * The tenant of a request: the option's constant, or its function's answer
     * (awaited), which must be a non-empty string.
     */
    async function tenantOf(...args) {
      const t = typeof tenant === 'function' ? await tenant(...args) : tenant;
      if (typeof t !== 'string' || t.length === 0) {
        throw optionError('tenant', `answered ${t === '' ? 'an empty string' : typeof t}: it must give each request a non-empty tenant id`);
      }
      return t;
    }

    /** The route: the option's function (awaited), else `fallback` (the framework's template, or the path). */
    async function routeOf(fallback, ...args) {
      if (route === null) return fallback;
      const r = await route(...args);
      if (typeof r !== 'string' || r.length === 0) throw optionError('route', 'must answer a non-empty string (a template or the path)');
      return r;
    }

    /**
     * The endpoint's admission: { tag: 'reply', reply } (refused: answer it, run
     * nothing), { tag: 'unguarded' } or { tag: 'guarded', attempt }. A body past
     * maxBodyBytes may be given cut one chunk past the limit: the core answers
     * it (413 once the key is good).
     */
    function admit(request) {
      const admission = endpoint.admit(request, now());
      if (admission.tag === 'refused') return { tag: 'reply', reply: admission.reply };
      return admission;
    }

    /** A claim that failed: the core's 503 when the store cannot be reached (reported); any other failure is thrown. */
    function unreachable(e, key) {
      if (!(e instanceof IntentkeyError && e.code === 'store-unavailable')) throw e;
      report(e, { phase: 'claim', key });
      return { tag: 'reply', reply: endpoint.unavailable(now()) };
    }

    /**
     * Claims an admitted attempt: { tag: 'reply', reply } (a replay, 409, the
     * payload conflict, or 503 when the store cannot be reached) or
     * { tag: 'owned', ticket }. Any other store failure is thrown (a clear
     * IntentkeyError: store-failed and what the store said).
     */
    async function claimAttempt(attempt) {
      let claimed;
      try {
        claimed = await claim(attempt);
      } catch (e) {
        return unreachable(e, attempt.key);
      }
      const { outcome, ownerToken } = claimed;
      if (outcome.tag !== 'owned') return { tag: 'reply', reply: endpoint.answer(outcome, now()) };
      return { tag: 'owned', ticket: ticketFor(attempt, ownerToken) };
    }

    /**
     * admit and claim in one: { tag: 'reply', reply } (refused, a replay, 409,
     * the payload conflict, or 503 when the store cannot be reached),
     * { tag: 'unguarded' } or { tag: 'owned', ticket }. On a synchronous store
     * (memory, SQLite) it is one component call; otherwise admit, then claim.
     */
    async function serveRequest(request) {
      if (serve === null) {
        const admission = admit(request);
        if (admission.tag !== 'guarded') return admission;
        return claimAttempt(admission.attempt);
      }
      let served;
      try {
        served = serve(request);
      } catch (e) {
        return unreachable(e, null);
      }
      if (served.tag !== 'owned') return served;
      return { tag: 'owned', ticket: ticketFor(served.attempt, served.ownerToken) };
    }

    /** An owned attempt in progress: what the adapter finishes it with. */
    function ticketFor(attempt, ownerToken) {
      let settled = false;
      const once = () => {
        if (settled) throw new Error('intentkey: this request was already finished (a bug in the adapter)');
        settled = true;
      };
      /**
       * The WIT effect-result of a captured answer (failed when it cannot be
       * read); `refused` (released, the answer not stored) when `released`.
       */
      function effectOf(captured, released = false) {
        try {
          // What is stored is the core's rule (allow-listed headers, the cap on stored answers).
          const response = endpoint.capture(
            captured.status,
            headerPairs(captured.headers),
            bytesIn(captured.body ?? EMPTY, 'the response body'),
          );
          return released ? { tag: 'refused', val: response } : { tag: 'answered', val: response };
        } catch (e) {
          report(e, { phase: 'capture', key: attempt.key });
          return FAILED;
        }
      }
      return {
        idempotency: Object.freeze({ key: attempt.key, tenantId: attempt.tenantId }),
        get settled() {
          return settled;
        },
        /**
         * The handler answered { status, headers: [name, value][], body }:
         * finished by its outcome class. Resolves with what finishing did
         * ('stored', 'released', 'superseded'), or null when the store failed
         * (reported; the record stays in flight and recovery settles it).
         * Never rejects: the handler's answer goes to the client either way.
         */
        async complete(captured, released = false) {
          once();
          const retried = (e, ms) => report(e, { phase: 'complete', key: attempt.key, retryInMs: ms });
          try {
            return await finish(attempt.key, ownerToken, effectOf(captured, released), retried);
          } catch (e) {
            report(e, { phase: 'complete', key: attempt.key });
            return null;
          }
        },
        /**
         * complete(), finished before it returns (no promise), on a synchronous
         * store (memory, SQLite); null on the others. An adapter that has the
         * handler's whole answer in hand finishes the record and sends the
         * answer in the same turn.
         */
        completeSync:
          finishSync === null
            ? null
            : (captured, released = false) => {
                once();
                try {
                  return finishSync(attempt.key, ownerToken, effectOf(captured, released));
                } catch (e) {
                  report(e, { phase: 'complete', key: attempt.key });
                  return null;
                }
              },
        /**
         * What the core makes of an error raised instead of an answer:
         * 'released' when it carries a client (4xx) status (refused before
         * anything happened: the adapter lets the framework answer it, then
         * finishes with complete(answer, true), so nothing is stored and a
         * retry runs again), else 'ambiguous' (the adapter calls fail()).
         */
        errorClass(error) {
          const status = errorStatus(error);
          if (status === null) return 'ambiguous';
          return endpoint.classifyErrorStatus(status);
        },
        /**
         * An error of the released class with no answer to send (thrown on to
         * the caller): the claim is released, nothing stored. Resolves like
         * complete(); never rejects.
         */
        async release() {
          once();
          try {
            return await finish(attempt.key, ownerToken, REFUSED);
          } catch (e) {
            report(e, { phase: 'complete', key: attempt.key });
            return null;
          }
        },
        /**
         * The handler failed (threw, or never answered): its outcome is unknown,
         * so the record stays in flight (a retry gets 409 until recovery settles
         * it). Resolves with the endpoint's 500, which carries no stack trace.
         */
        async fail(error, log) {
          once();
          report(error, { phase: 'handler', key: attempt.key }, log);
          try {
            await finish(attempt.key, ownerToken, FAILED);
          } catch (e) {
            report(e, { phase: 'complete', key: attempt.key }, log);
          }
          return endpoint.failed(now());
        },
      };
    }

    return Object.freeze({
      endpoint,
      guard,
      /** The body limit: adapters stop reading once past it (the core then answers 413). */
      maxBodyBytes: endpoint.maxBodyBytes,
      /** Whether requests with this method go through the pipeline at all. */
      guards: (method) => methods.has(String(method).toUpperCase()),
      tenantOf,
      routeOf,
      admit,
      claim: claimAttempt,
      serve: serveRequest,
      report,
      now,
    });
  };
}
