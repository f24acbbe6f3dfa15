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
export { errorStatus, headerPairs } from './serving.js';
import { PIPELINE, checkDeadline, checkTelemetry } from '../guard.js';
import { servingFor } from './serving.js';
import { ENDPOINT_OPTIONS, checkOptionNames } from '../endpoint.js';
import { waitError, waitMaxMsIn } from '../watching.js';

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
  'tracer',
  'meter',
]);

function optionError(option, message) {
  return new IntentkeyError('invalid-argument', `intentkey: \`${option}\` ${message}`, option);
}

function functionOrString(value, option, fallback) {
  if (value === undefined || value === null) return fallback;
  if (typeof value === 'string' || typeof value === 'function') return value;
  throw optionError(option, 'must be a string or a function of the request');
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
    // `wait: { maxMs }` and `storeDeadlineMs`: checked here first, so that a mistake names the adapter.
    waitMaxMsIn(options.wait, adapter);
    checkDeadline(options.storeDeadlineMs, adapter);
    checkTelemetry(options, adapter);
    let endpoint;
    try {
      endpoint = createEndpoint({
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
        wait: options.wait,
      });
    } catch (e) {
      throw e instanceof IntentkeyError && e.field === 'wait.maxMs' ? waitError(e.cause, adapter) : e;
    }
    let guard;
    try {
      guard = createGuard({
        store,
        endpoint,
        releaseStatuses: options.releaseStatuses,
        ttlSeconds: options.ttlSeconds,
        fastCompletion: options.fastCompletion,
        now: options.now,
        wait: options.wait,
        storeDeadlineMs: options.storeDeadlineMs,
        tracer: options.tracer,
        meter: options.meter,
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

    const serving = servingFor({
      start: (request, probe) => guard[PIPELINE].serve(request, probe),
      endpoint,
      now,
      report,
      watch: guard[PIPELINE].watch,
      // A claim whose insert failed is released in the background; a claim
      // left in flight is reported to onError (phase 'release').
      release: (request) => guard[PIPELINE].release(request, report),
      telemetry: guard[PIPELINE].telemetry,
    });

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
      /**
       * Serves a request up to its handler (see http/serving.js); `signal`:
       * aborts a wait for the first attempt (the client went away).
       */
      serve: serving.serve,
      /** Whether a retry that finds its key in flight waits (an adapter then passes an AbortSignal to serve). */
      waits: endpoint.waitMaxMs > 0,
      report,
      now,
    });
  };
}
