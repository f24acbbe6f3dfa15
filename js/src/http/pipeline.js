// The one HTTP pipeline every adapter (Express and node:http, Fastify, fetch and
// Hono) runs; the adapters only read the request and write the reply.
//
// Everything a request goes through is the core's serve flow (WIT
// `flows.flow.serve`): admit (key, body, storage key, fingerprint, or a
// refusal), claim (replay, 409, the payload conflict, 503 or 500 when the store
// fails), the owner's handler (op `effect`), capture (what is stored of its
// answer), finish by the outcome class (a completion the store could not take is
// tried again after the pause the flow asks for, op `wait`), and the answer.
// This file performs what the flow asks for (an asynchronous store's
// operations; a synchronous store's run inside the component), hands it the
// handler's outcome, and reports store failures and handler errors through
// `onError`. No HTTP rule and no sequence of claims is here.
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


const FAILED = Object.freeze({ tag: 'failed' });
const EMPTY = new Uint8Array(0);

/** A store failure the core handed back in its output, as an error to report. */
function failureError(f) {
  return new IntentkeyError(f.tag === 'unavailable' ? 'store-unavailable' : 'store-failed', f.val);
}

/** Whether a served output carries store failures. */
const hasFailures = (out) => (out.finishFailures?.length ?? 0) > 0 || (out.claimFailure ?? null) !== null;

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
    const { now } = guard[PIPELINE];
    const tenant = functionOrString(options.tenant, 'tenant', 'default');
    const route = options.route ?? null;
    if (route !== null && typeof route !== 'function') throw optionError('route', 'must be a function of the request');
    const methods = new Set((options.methods ?? endpoint.defaultMethods).map((m) => String(m).toUpperCase()));
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


    /**
     * Drives the core's serve flow from `step` until it needs the handler (op
     * `effect`: { tag: 'owned', step }) or ends ({ tag: 'served', served }).
     * An asynchronous store's operations are performed here, one awaited at a
     * time; a failure goes to the flow, which decides (503 or 500 before the
     * claim; tried again after the pause it asks for, op `wait`, while
     * finishing), and is reported as it happens. A synchronous store's
     * operations run inside the component (next), and the failures it met
     * are reported from the flow's output.
     */
    async function drive(flow, step, key) {
      let failed = null;
      let seen = 0;
      const waits = [];
      while (step.tag === 'io') {
        const op = step.val;
        if (op.tag === 'effect') return { tag: 'owned', step };
        if (op.tag === 'wait') {
          waits.push(op.val);
          if (failed !== null) report(failed, { phase: 'complete', key, retryInMs: op.val });
          failed = null;
          await new Promise((resolve) => setTimeout(resolve, op.val));
          step = flow.next({ tag: 'waited' });
          continue;
        }
        const { result, error } = await flow.perform(op);
        if (error !== null) seen++;
        failed = error;
        step = flow.next(result);
      }
      const out = step.val.val;
      if (failed !== null) report(failed, { phase: out.path === 'unavailable' ? 'claim' : 'complete', key });
      if (seen === 0) {
        if (out.claimFailure !== undefined && out.claimFailure !== null) report(failureError(out.claimFailure), { phase: 'claim', key });
        (out.finishFailures ?? []).forEach((f, i) =>
          report(failureError(f), { phase: 'complete', key, ...(i < waits.length ? { retryInMs: waits[i] } : {}) }),
        );
      }
      return { tag: 'served', served: out };
    }

    /**
     * Serves `request` up to its handler: { tag: 'reply', reply } (refused, a
     * replay, 409, the payload conflict, 503 or 500 when the store failed),
     * { tag: 'unguarded' } or { tag: 'owned', ticket }. On a synchronous store
     * (memory, SQLite) that is one component call.
     */
    async function serveRequest(request) {
      const flow = guard[PIPELINE].serve(request);
      let end;
      try {
        end = await drive(flow, flow.next(undefined), null);
      } catch (e) {
        flow.drop();
        throw e;
      }
      if (end.tag === 'owned') return { tag: 'owned', ticket: ticketFor(flow, end.step.val.val, request.tenantId) };
      flow.drop();
      const out = end.served;
      if (out.path === 'unguarded') return { tag: 'unguarded' };
      return { tag: 'reply', reply: out.reply };
    }

    /** An owned request in progress: what the adapter hands the handler's outcome to. */
    function ticketFor(flow, key, tenantId) {
      let settled = false;
      const once = () => {
        if (settled) throw new Error('intentkey: this request was already finished (a bug in the adapter)');
        settled = true;
      };
      const result = (out) => ({ path: out.path, reply: out.reply ?? null, finished: out.finished ?? null });
      /** What the adapter does when the flow itself broke (a bug): report; 500 for a failure, else send the answer. */
      function broken(e, handled) {
        flow.drop();
        report(e, { phase: 'complete', key });
        return handled.tag === 'answered'
          ? { path: 'handler', reply: null, finished: null }
          : { path: 'failed', reply: endpoint.failed(now()), finished: null };
      }
      /** Resumes the flow with what the handler did: the result itself when the flow ends at once, else a promise. */
      function resumeNow(handled) {
        let step;
        try {
          step = flow.next({ tag: 'handled', val: { handled, now: BigInt(now()) } });
        } catch (e) {
          return broken(e, handled);
        }
        if (step.tag === 'done' && !hasFailures(step.val.val)) {
          flow.drop();
          return result(step.val.val);
        }
        return drive(flow, step, key).then(
          (end) => {
            flow.drop();
            return result(end.served);
          },
          (e) => broken(e, handled),
        );
      }
    /** The WIT handled of a captured answer, or failed when it cannot be read. */
      function answeredOf(captured) {
        try {
          return {
            tag: 'answered',
            val: {
              status: captured.status,
              headers: headerPairs(captured.headers),
              body: bytesIn(captured.body ?? EMPTY, 'the response body'),
            },
          };
        } catch (e) {
          report(e, { phase: 'capture', key });
          return FAILED;
        }
      }
      return {
        idempotency: Object.freeze({ key, tenantId }),
        get settled() {
          return settled;
        },
        /**
         * The handler answered { status, headers: [name, value][], body }: the
         * core captures what is stored of it and finishes the record (a store
         * that cannot be reached is tried again on the core's schedule). The
         * answer goes to the client as it was, whatever finishing did.
         * Resolves with { path: 'handler', reply: null, finished } (finished
         * null when the store failed on every try: the record stays in flight).
         * Never rejects.
         */
        async answer(captured) {
          once();
          return resumeNow(answeredOf(captured));
        },
        /**
         * answer(), returning the result itself (no promise) when the flow
         * ends at once (a synchronous store that did not fail), else a promise:
         * an adapter that has the whole answer in hand finishes and sends it in
         * the same turn.
         */
        answerNow(captured) {
          once();
          return resumeNow(answeredOf(captured));
        },
        /**
         * The handler chain raised `error` instead of answering: with a 4xx
         * `status`/`statusCode` the core releases the claim ({ path:
         * 'released', reply: null }: the framework answers the error, unstored,
         * and a retry runs again); anything else leaves the record in flight
         * ({ path: 'failed', reply: the core's 500 }, no stack trace), and the
         * error is reported. A result or a promise of one; never rejects.
         */
        raise(error, log) {
          once();
          const status = errorStatus(error);
          const handled = status === null ? FAILED : { tag: 'raised', val: status };
          const reportFailed = (r) => {
            if (r.path === 'failed') report(error, { phase: 'handler', key }, log);
            return r;
          };
          const r = resumeNow(handled);
          return typeof r.then === 'function' ? r.then(reportFailed) : reportFailed(r);
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
      serve: serveRequest,
      report,
      now,
    });
  };
}
