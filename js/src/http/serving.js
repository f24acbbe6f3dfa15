// Serving one request: the driver of the core's serve flow (WIT
// `flows.flow.serve`), shared by the HTTP pipeline every adapter runs
// (http/pipeline.js) and by guard.serve(). The flow decides everything
// (admission, claim, capture, finish, the answer and what a store failure
// means); this performs what it asks for: an asynchronous store's operations
// (a synchronous store's run inside the component), the pause before a
// completion is tried again, the watch of a retry that waits for the first
// attempt (op `watch`: the core decides how long and what follows), the
// handler's outcome, the reports, the background release of a claim whose
// insert failed (the flow's `served.unreleased`) and the request's telemetry
// (a span and metrics, in the core's vocabulary).
import { IntentkeyError } from '../errors.js';
import { bytesIn } from '../claims.js';
import { WaitAborted } from '../watching.js';

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
 * A server of requests over one serve-flow maker.
 * @param {{
 *   start: (request: object, probe: object | null) => { next: Function, perform: Function, drop: Function },
 *   endpoint: object,
 *   now: () => number,
 *   report: (error: unknown, context: object, log?: Function) => void,
 *   watch: (request: { key: string, ms: number }, signal?: AbortSignal) => Promise<object>,
 *   release: (request: { key: string, ownerToken: string }) => unknown,
 *   telemetry?: { begin: (profile: string) => object | null } | null,
 * }} host `watch` performs op `watch` (the WIT op-result `watched`; throws
 *   WaitAborted when `signal` aborted); `release` releases a claim whose
 *   insert failed in the background (the flow's `served.unreleased`);
 *   `telemetry` begins the probe (span and metrics) of each request
 */
export function servingFor({ start, endpoint, now, report, watch, release, telemetry = null }) {
  /**
   * Drives the core's serve flow from `step` until it needs the handler (op
   * `effect`: { tag: 'owned', step }) or ends ({ tag: 'served', served }).
   * An asynchronous store's operations are performed here, one awaited at a
   * time; a failure goes to the flow, which decides (503 or 500 before the
   * claim; tried again after the pause it asks for, op `wait`, while
   * finishing), and is reported as it happens. A synchronous store's
   * operations run inside the component (next), and the failures it met
   * are reported from the flow's output. A retry that finds its key in
   * flight may be asked to watch the record (op `watch`) and claims again
   * after; when `signal` aborts meanwhile (the client went away) this throws
   * WaitAborted: the waiter owns nothing, so the flow is abandoned.
   */
  async function drive(flow, step, key, signal, probe = null) {
    // Before the handler (no key yet) the flow claims; after it, it finishes.
    const phase = key === null ? 'claim' : 'complete';
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
      if (op.tag === 'watch') {
        if (failed !== null) report(failed, { phase, key });
        failed = null;
        probe?.sawKey(op.val.key, false);
        step = flow.next(await watch(op.val, signal));
        continue;
      }
      // A failure the flow answered with another operation (the release of
      // an insert whose answer was lost): reported now.
      if (failed !== null) report(failed, { phase, key });
      const { result, error } = await flow.perform(op);
      if (error !== null) seen++;
      failed = error;
      step = flow.next(result);
    }
    const out = step.val.val;
    // A claim whose insert failed (its answer may have been lost; its handler
    // never ran): released in the background, so a retry runs.
    if (out.unreleased !== undefined && out.unreleased !== null) release(out.unreleased);
    if (failed !== null) report(failed, { phase, key });
    if (seen === 0) {
      if (out.claimFailure !== undefined && out.claimFailure !== null) report(failureError(out.claimFailure), { phase: 'claim', key });
      (out.finishFailures ?? []).forEach((f, i) =>
        report(failureError(f), { phase: 'complete', key, ...(i < waits.length ? { retryInMs: waits[i] } : {}) }),
      );
    }
    return { tag: 'served', served: out };
  }

  /**
   * Serves `request` up to its handler: { tag: 'reply', path, reply, waitedMs }
   * (refused, a replay, 409, the payload conflict, 503 or 500 when the store
   * failed), { tag: 'unguarded' }, { tag: 'owned', ticket, waitedMs } or, when
   * `signal` aborted while the request waited for the first attempt,
   * { tag: 'aborted', reply } (the core's 409, for an adapter that must answer
   * something; the client is gone). On a synchronous store (memory, SQLite)
   * that is one component call, unless the request waits.
   */
  async function serveRequest(request, signal) {
    // The request's span and metrics (null when nothing records them).
    const probe = telemetry === null ? null : telemetry.begin(endpoint.profile);
    let flow;
    let end;
    try {
      flow = start(request, probe);
      end = await drive(flow, flow.next(undefined), null, signal, probe);
    } catch (e) {
      flow?.drop();
      if (e instanceof WaitAborted) {
        probe?.abandoned();
        return { tag: 'aborted', reply: endpoint.answer({ tag: 'in-flight' }, now()) };
      }
      probe?.failed(e);
      throw e;
    }
    if (end.tag === 'owned') {
      const key = end.step.val.val;
      probe?.sawKey(key, true);
      return { tag: 'owned', ticket: ticketFor(flow, key, request.tenantId, probe) };
    }
    flow.drop();
    const out = end.served;
    probe?.served(out.path, out.finished, out.waitedMs);
    if (out.path === 'unguarded') return { tag: 'unguarded' };
    return { tag: 'reply', path: out.path, reply: out.reply, waitedMs: out.waitedMs ?? 0 };
  }

  /** An owned request in progress: what the adapter hands the handler's outcome to. */
  function ticketFor(flow, key, tenantId, probe) {
    let settled = false;
    const once = () => {
      if (settled) throw new Error('intentkey: this request was already finished (a bug in the adapter)');
      settled = true;
    };
    const result = (out) => {
      probe?.served(out.path, out.finished, out.waitedMs);
      return {
        path: out.path,
        reply: out.reply ?? null,
        finished: out.finished ?? null,
        finishRetries: out.finishRetries,
      };
    };
    /** What the adapter does when the flow itself broke (a bug): report; 500 for a failure, else send the answer. */
    function broken(e, handled) {
      flow.drop();
      probe?.failed(e);
      report(e, { phase: 'complete', key });
      return handled.tag === 'answered'
        ? { path: 'handler', reply: null, finished: null, finishRetries: 0 }
        : { path: 'failed', reply: endpoint.failed(now()), finished: null, finishRetries: 0 };
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
      return drive(flow, step, key, undefined, probe).then(
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

  return Object.freeze({ serve: serveRequest });
}
