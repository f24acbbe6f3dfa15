// Telemetry in the core's vocabulary, through @opentelemetry/api (Node only;
// the browser and workerd entries report nothing). The core names every
// decision once (WIT `flows`: served-decisions, ran-decisions,
// release-decision, key-digest, telemetry-names); this file only hands them
// to the OpenTelemetry API:
//   - one span per guarded HTTP request and per run (guard.run, a journal's
//     step or tool call, a queue delivery, a recovery), named by the core, with
//     the primary decision, the profile (or the run's kind), the store's kind,
//     a digest of the storage key (never the client's key, the secret or the
//     payload), the milliseconds waited for the first attempt and spent in
//     store calls;
//   - the decision counter (each decision of a request or run, by decision
//     and store), the store call and wait histograms (ms);
//   - observeRecords(store): an observable gauge of the records in flight and
//     in needs_reconciliation, from the store's cheap count, read only when
//     an SDK collects it.
// Without a registered SDK the API is a no-op: a request then costs one
// non-recording span and nothing else (no decision, digest or timing is
// computed).
import { IntentkeyError } from './errors.js';
import { checkTelemetry } from './guard.js';
import { TRUSTED } from './stores/trusted.js';

/**
 * @opentelemetry/api is an optional peer dependency: a service that installs
 * it (and registers an SDK) gets the spans and metrics; without it nothing is
 * reported and nothing is computed.
 */
const otel = await import('@opentelemetry/api').catch(() => null);

/** The instrumentation scope every span and instrument is made under. */
export const SCOPE = 'intentkey';

const NOOP_METER = otel ? otel.createNoopMeter() : Object.freeze({});
const SpanStatusCode = otel ? otel.SpanStatusCode : Object.freeze({ ERROR: 2 });
const NOOP_SPAN = Object.freeze({
  isRecording: () => false,
  end() {},
  setAttribute() {},
  setAttributes() {},
  setStatus() {},
  recordException() {},
});
const metrics = otel
  ? otel.metrics
  : Object.freeze({
      getMeterProvider: () => NO_PROVIDER,
      getMeter: () => {
        throw new IntentkeyError(
          'invalid-argument',
          'observeRecords: @opentelemetry/api is not installed: install it (npm install @opentelemetry/api) or pass options.meter',
          'meter',
        );
      },
    });
const NO_PROVIDER = Object.freeze({ getMeter: () => NOOP_METER });
const trace = otel ? otel.trace : Object.freeze({ getTracer: () => Object.freeze({ startSpan: () => NOOP_SPAN }) });

/** The store kinds telemetry names (the core's `intentkey.store` values); any other store is `custom`. */
const KINDS = new Map([
  ['memory', 'memory'],
  ['sqlite', 'sqlite'],
  ['pg', 'postgres'],
  ['mysql', 'mysql'],
  ['redis', 'redis'],
  ['dynamodb', 'dynamodb'],
]);

/** The kind telemetry names a store by: the package's own stores by their kind, any other `custom`. */
export function storeKind(store) {
  if (store === null || typeof store !== 'object' || store[TRUSTED] !== true) return 'custom';
  return KINDS.get(store.kind) ?? 'custom';
}

/** The statuses the records gauge reports, in WIT and stored spelling. */
const GAUGED = Object.freeze([
  ['in-flight', 'in_flight'],
  ['needs-reconciliation', 'needs_reconciliation'],
]);

/**
 * The WIT `recovered` a run outcome carries or stands for: a run that took a
 * stale record over and ran the effect again (an applied re-execute), one
 * that recorded the destination's answer and replayed it (an applied
 * record-done), or the recovery an in-flight or recovery-only run made.
 */
function recoveredOf(outcome) {
  switch (outcome.tag) {
    case 'ran':
      return outcome.val.recovered ? { tag: 'applied', val: { tag: 're-execute' } } : undefined;
    case 'replayed':
      return outcome.val.recovered ? { tag: 'applied', val: { tag: 'record-done', val: outcome.val.response } } : undefined;
    case 'in-flight':
    case 'recovery':
      return outcome.val ?? undefined;
    default:
      return undefined;
  }
}

/** The instruments made on each meter (made once per meter). */
const madeOn = new WeakMap();

function instrumentsOf(meter, names) {
  let made = madeOn.get(meter);
  if (made === undefined) {
    made = {
      decisions: meter.createCounter(names.decisions, { description: 'intentkey decisions, by kind' }),
      storeDuration: meter.createHistogram(names.storeDuration, { unit: 'ms', description: 'intentkey store calls' }),
      waitDuration: meter.createHistogram(names.waitDuration, { unit: 'ms', description: "waits for the first attempt's answer" }),
    };
    madeOn.set(meter, made);
  }
  return made;
}

/**
 * Telemetry over one API's component (the Node entry's).
 * @param {{ rawFlows: (fn: (flows: any) => any) => any }} internal
 */
export function telemetryFactory(internal) {
  let names = null;
  /** The core's span, attribute and metric names (asked once). */
  const labels = () => (names ??= internal.rawFlows((f) => f.telemetryNames()));

  /** The instruments of the global meter provider's `intentkey` meter; null while it is a no-op. */
  let lastProvider = null;
  let lastInstruments = null;
  function globalInstruments() {
    const provider = metrics.getMeterProvider();
    if (provider !== lastProvider) {
      const meter = provider.getMeter(SCOPE);
      lastInstruments = meter === NOOP_METER ? null : instrumentsOf(meter, labels());
      lastProvider = provider;
    }
    return lastInstruments;
  }

  /**
   * What one request or run reports: its span (started at creation) and what
   * it measured. The host calls storeCall for each store call, sawKey for the
   * storage key, then one of served, ran, failed or abandoned.
   */
  class Probe {
    constructor(tel, profile, instruments) {
      this.tel = tel;
      this.instruments = instruments;
      const n = labels();
      this.span = tel.tracer().startSpan(n.span, { attributes: { [n.profile]: profile, [n.store]: tel.kind } });
      this.key = null;
      this.keyFirm = false;
      this.storeMs = 0;
      this.ended = false;
    }

    /** One store call of `ms` milliseconds. */
    storeCall(ms) {
      this.storeMs += ms;
      this.instruments?.storeDuration.record(ms, this.tel.attributes);
    }

    /** The storage key of the request: an insert's (`firm`) wins over the key of any other call. */
    sawKey(key, firm) {
      if (this.keyFirm || typeof key !== 'string') return;
      if (firm) {
        this.key = key;
        this.keyFirm = true;
      } else if (this.key === null) {
        this.key = key;
      }
    }

    /** How a served request ended (its WIT serve-path, what finishing did, how long it waited). */
    served(path, finished, waitedMs) {
      if (this.ended) return;
      const waited = waitedMs ?? 0;
      this.settle(() => internal.rawFlows((f) => f.servedDecisions(path, finished ?? undefined, waited)), waited);
    }

    /** Ends the probe with the decisions `decide()` answers; telemetry never breaks a request. */
    settle(decide, waited) {
      try {
        this.end(decide(), waited);
      } catch {
        if (!this.ended) {
          this.ended = true;
          this.span.end();
        }
      }
    }

    /**
     * How a run ended (its WIT run-outcome, how long it waited): the core's
     * decisions of the run, and of the recovery it made, if any (the core's
     * recovered-decision). `recovery`: the run is a recovery (guard.recover),
     * whose span carries the recovery's decision.
     */
    ran(outcome, waitedMs, recovery = false) {
      if (this.ended) return;
      const waited = Math.min(Math.max(Math.round(waitedMs), 0), 0xffffffff);
      this.settle(() => {
        const decisions = internal.rawFlows((f) => f.ranDecisions(outcome, waited));
        const recovered = recoveredOf(outcome);
        const decided = recovered === undefined ? undefined : internal.rawFlows((f) => f.recoveredDecision(recovered));
        if (decided === undefined || decided === null) return decisions;
        if (recovery) return { primary: decided, all: [decided] };
        return decisions.all.includes(decided) ? decisions : { primary: decisions.primary, all: [...decisions.all, decided] };
      }, waited);
    }

    end(decisions, waitedMs) {
      const keyDigest = this.key !== null && this.span.isRecording() ? internal.rawFlows((f) => f.keyDigest(this.key)) : null;
      this.ended = true;
      const n = labels();
      const { span } = this;
      if (span.isRecording()) {
        const attributes = { [n.decision]: decisions.primary, [n.waitMs]: waitedMs, [n.storeMs]: this.storeMs };
        if (keyDigest !== null) attributes[n.keyDigest] = keyDigest;
        span.setAttributes(attributes);
      }
      span.end();
      const made = this.instruments;
      if (made !== null) {
        for (const d of decisions.all) made.decisions.add(1, { [n.decision]: d, [n.store]: this.tel.kind });
        if (waitedMs > 0) made.waitDuration.record(waitedMs, this.tel.attributes);
      }
    }

    /** The request or run failed without a decision of the core (a store failure, a bug): the span says so, by code only. */
    failed(error) {
      if (this.ended) return;
      this.ended = true;
      const code = error instanceof IntentkeyError ? error.code : 'error';
      this.span.setStatus({ code: SpanStatusCode.ERROR, message: code });
      this.span.end();
    }

    /** The request was abandoned (its client went away while it waited): no decision. */
    abandoned() {
      if (this.ended) return;
      this.ended = true;
      this.span.end();
    }
  }

  /**
   * The telemetry of one guard over `store`: the given `tracer` and `meter`,
   * or the global ones of @opentelemetry/api.
   */
  return function telemetryFor({ tracer, meter, store }) {
    const kind = storeKind(store);
    const fixedTracer = tracer ?? null;
    const fixedMeter = meter ?? null;
    let globalTracer = null;
    const tel = {
      kind,
      attributes: null,
      tracer: () => fixedTracer ?? (globalTracer ??= trace.getTracer(SCOPE)),
      /** The instruments to record on; null when no meter records. */
      instruments() {
        if (fixedMeter === null) return globalInstruments();
        return fixedMeter === NOOP_METER ? null : instrumentsOf(fixedMeter, labels());
      },
      /**
       * The probe of a request or run of `profile` (an HTTP profile, or the
       * run's kind), or null when nothing would record it (no SDK).
       */
      begin(profile) {
        let probe;
        try {
          const instruments = tel.instruments();
          probe = new Probe(tel, profile, instruments);
          if (instruments === null && !probe.span.isRecording()) {
            probe.span.end();
            return null;
          }
        } catch {
          return null; // telemetry never breaks a request
        }
        return probe;
      },
      /** One decision outside a request (the background release of a claim). */
      count(decision) {
        const made = tel.instruments();
        if (made !== null) made.decisions.add(1, { [labels().decision]: decision, [labels().store]: kind });
      },
      /** One store call outside a request. */
      storeCall(ms) {
        tel.instruments()?.storeDuration.record(ms, tel.attributes);
      },
      /** The decision of a background release's `finished`. */
      releaseDecision: (finished) => internal.rawFlows((f) => f.releaseDecision(finished)),
    };
    tel.attributes = Object.freeze({ [labels().store]: kind });
    return tel;
  };
}

/**
 * Makes `observeRecords` over one API's component.
 * @param {{ rawFlows: Function }} internal
 */
export function recordsGaugeFactory(internal) {
  /**
   * Registers the gauge `intentkey.records` (the core's name) of `store`: how
   * many records are in flight and in needs_reconciliation (attribute
   * `intentkey.status`, stored spelling, and `intentkey.store`), read with the
   * store's cheap count (its `count(status)`) each time a metric reader
   * collects, never otherwise. On the global meter provider's `intentkey`
   * meter (register the SDK first) or `options.meter`. Answers a function that
   * unregisters it.
   * @param {object} store a store with count(status): memory, SQLite, PostgreSQL, MySQL, Redis
   * @param {{ meter?: object }} [options]
   */
  return function observeRecords(store, options = {}) {
    if (store === null || typeof store !== 'object' || typeof store.count !== 'function') {
      throw new TypeError(
        'observeRecords(store): the store has no count(status) (memory, SQLite, PostgreSQL, MySQL and Redis stores do; DynamoDB has no cheap count)',
      );
    }
    if (options === null || typeof options !== 'object') throw new TypeError('observeRecords(store, options): options is { meter? }');
    for (const name of Object.keys(options)) {
      if (name !== 'meter') throw new IntentkeyError('invalid-argument', `observeRecords: \`${name}\` is not an option; the options are meter`, name);
    }
    checkTelemetry(options, 'observeRecords');
    const names = internal.rawFlows((f) => f.telemetryNames());
    const meter = options.meter ?? metrics.getMeter(SCOPE);
    const gauge = meter.createObservableGauge(names.records, {
      description: 'intentkey records by status (in flight, needing reconciliation)',
      unit: '{record}',
    });
    const kind = storeKind(store);
    const callback = async (result) => {
      await Promise.all(
        GAUGED.map(async ([wit, stored]) => {
          let counted;
          try {
            counted = await store.count(wit);
          } catch {
            return; // a store that cannot be reached now: no point this time
          }
          result.observe(counted.count, { [names.status]: stored, [names.store]: kind });
        }),
      );
    };
    gauge.addCallback(callback);
    return () => gauge.removeCallback(callback);
  };
}
