// Telemetry in the core's vocabulary through @opentelemetry/api: a scripted
// sequence on Express (memory, then PostgreSQL) goes through every decision
// an HTTP request or a recovery can take, with an OpenTelemetry SDK
// registered (InMemorySpanExporter, InMemoryMetricExporter): one span per
// request or recovery with its primary decision, the decision counter by
// decision, the store and wait histograms, and the records gauge
// (observeRecords) from the store's cheap count. No span or metric attribute
// carries the client's key, the secret (hex or raw), the storage key or the
// payload.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import express from 'express';
import { metrics, trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { IntentkeyError, createGuard, createJournal, createKeyer, jsonResponse, memoryStore, observeRecords, pgStore } from '../src/index.js';
import { idempotency } from '../src/adapters/express.js';
import { serve } from './support/http.js';
import { freshSchema, pgAvailability } from './support/pg.js';

const SECRET = randomBytes(32);
const SECRET_HEX = SECRET.toString('hex');
const CARD = '4111111111111111';
const T = 1_700_000_000;

const spans = new InMemorySpanExporter();
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
const exported = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
const reader = new PeriodicExportingMetricReader({ exporter: exported, exportIntervalMillis: 3_600_000 });
const meterProvider = new MeterProvider({ readers: [reader] });

before(() => {
  trace.setGlobalTracerProvider(tracerProvider);
  metrics.setGlobalMeterProvider(meterProvider);
});

after(async () => {
  await meterProvider.shutdown();
  await tracerProvider.shutdown();
  trace.disable();
  metrics.disable();
});

/** The metrics now, by name: [{ attributes, value }]. */
async function collect() {
  exported.reset();
  await reader.forceFlush();
  const out = new Map();
  for (const rm of exported.getMetrics()) {
    for (const sm of rm.scopeMetrics) {
      for (const m of sm.metrics) out.set(m.descriptor.name, m.dataPoints.map((p) => ({ attributes: p.attributes, value: p.value })));
    }
  }
  return out;
}

/** The decision counter's values for `store`, by decision. */
function counted(points, store) {
  const out = {};
  for (const p of points ?? []) {
    if (p.attributes['intentkey.store'] !== store) continue;
    out[p.attributes['intentkey.decision']] = (out[p.attributes['intentkey.decision']] ?? 0) + p.value;
  }
  return out;
}

const tally = (values) => {
  const out = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
};

/**
 * The scripted sequence on Express over `store`: owned, replayed, conflict,
 * in flight (409, no wait), waited and replayed, released (a 503), failed
 * (left in flight), and recoveries (found, absent, unknown until
 * needs_reconciliation). Answers what the test checks.
 */
async function scenario(store) {
  let clock = T;
  const now = () => clock;
  const keys = new Map(); // client key -> storage key
  let gate = null;
  const app = express();
  const errors = [];
  const options = { secret: SECRET, store, now, onError: (e, context) => errors.push([e, context]) };
  const guarded = idempotency(options);
  const waiting = idempotency({ ...options, wait: { maxMs: 5000 } });
  const handler = async (req, res) => {
    keys.set(req.get('idempotency-key'), req.idempotency.key);
    const mode = req.get('x-mode');
    if (mode === 'slow') await gate.promise;
    if (mode === 'fail') throw new Error(`the card ${CARD} was declined`);
    if (mode === 'busy') return res.status(503).json({ busy: true });
    res.status(201).json({ paid: true });
  };
  app.post('/pay', guarded, express.json(), handler);
  app.post('/wait', waiting, express.json(), handler);
  app.use(guarded.onError);
  const server = await serve(app);
  const post = async (path, key, { mode, body = { card: CARD, amount: 10 } } = {}) => {
    const r = await fetch(`http://127.0.0.1:${server.port}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key, ...(mode === undefined ? {} : { 'x-mode': mode }) },
      body: JSON.stringify(body),
    });
    await r.arrayBuffer();
    return r.status;
  };
  const opened = () => {
    let open;
    const promise = new Promise((resolve) => {
      open = resolve;
    });
    return { promise, open };
  };
  const statuses = [];
  try {
    statuses.push(await post('/pay', 'client-key-a')); // owned
    statuses.push(await post('/pay', 'client-key-a')); // replayed
    statuses.push(await post('/pay', 'client-key-a', { body: { card: CARD, amount: 11 } })); // conflict
    gate = opened();
    const slow = post('/pay', 'client-key-s', { mode: 'slow' });
    await waitFor(() => keys.has('client-key-s'));
    statuses.push(await post('/pay', 'client-key-s')); // in flight: 409 at once
    gate.open();
    statuses.push(await slow); // owned
    gate = opened();
    const first = post('/wait', 'client-key-w', { mode: 'slow' });
    await waitFor(() => keys.has('client-key-w'));
    const waiter = post('/wait', 'client-key-w');
    await new Promise((resolve) => setTimeout(resolve, 100));
    gate.open();
    statuses.push(await first, await waiter); // owned; waited, then replayed
    statuses.push(await post('/pay', 'client-key-b', { mode: 'busy' })); // released
    statuses.push(await post('/pay', 'client-key-f', { mode: 'fail' })); // left in flight
    statuses.push(await post('/pay', 'client-key-g', { mode: 'fail' }));
    statuses.push(await post('/pay', 'client-key-x', { mode: 'fail' }));
    statuses.push(await post('/pay', 'client-key-h', { mode: 'fail' }));
    const { guard } = guarded;
    const found = await guard.recover({ key: keys.get('client-key-f'), lookup: () => ({ found: jsonResponse(201, { paid: true }) }), staleAfterSeconds: 0 });
    const absent = await guard.recover({
      key: keys.get('client-key-g'),
      lookup: () => 'absent',
      readYourWrites: true,
      effect: () => jsonResponse(201, { paid: true }),
      staleAfterSeconds: 0,
    });
    const unknown = [];
    for (let i = 0; i < 4; i++) {
      unknown.push(await guard.recover({ key: keys.get('client-key-h'), lookup: () => 'unknown', staleAfterSeconds: 0 }));
      clock += 1000;
    }
    return { statuses, keys, found, absent, unknown, guard };
  } finally {
    await server.close();
  }
}

async function waitFor(check, ms = 5000) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Every attribute value of every exported span and metric point, as text. */
function everyAttribute(points) {
  const values = [];
  for (const s of spans.getFinishedSpans()) {
    values.push(s.name);
    for (const [k, v] of Object.entries(s.attributes)) values.push(k, String(v));
    if (s.status.message !== undefined) values.push(s.status.message);
    for (const e of s.events) values.push(e.name, JSON.stringify(e.attributes ?? {}));
  }
  for (const [name, list] of points) {
    values.push(name);
    for (const p of list) for (const [k, v] of Object.entries(p.attributes)) values.push(k, String(v));
  }
  return values;
}

const EXPECTED_COUNTS = {
  owned: 8,
  replayed: 2,
  conflict: 1,
  'in-flight': 1,
  waited: 1,
  released: 1,
  'recovered-found': 1,
  'recovered-absent': 1,
  'recovered-unknown': 4,
};

const EXPECTED_SPANS = {
  owned: 7,
  replayed: 2,
  conflict: 1,
  'in-flight': 1,
  released: 1,
  'recovered-found': 1,
  'recovered-absent': 1,
  'recovered-unknown': 4,
};

const pgSkip = (await pgAvailability('telemetry.test.js')).skip;

const STORES = [
  { name: 'memory', kind: 'memory', skip: false, open: async () => ({ store: memoryStore(), drop: async () => {} }) },
  {
    name: 'PostgreSQL',
    kind: 'postgres',
    skip: pgSkip,
    open: async () => {
      const schema = await freshSchema();
      const store = await pgStore({ ...schema.config, max: 4 });
      return {
        store,
        drop: async () => {
          await store.close();
          await schema.drop();
        },
      };
    },
  },
];

for (const s of STORES) {
  describe(`telemetry on Express over ${s.name}`, { skip: s.skip }, () => {
    test('every decision of the sequence: spans, the counter, the histograms, the records gauge; no key, secret or payload', async () => {
      const { store, drop } = await s.open();
      spans.reset();
      const stop = observeRecords(store);
      try {
        const r = await scenario(store);
        assert.deepEqual(r.statuses, [201, 201, 422, 409, 201, 201, 201, 503, 500, 500, 500, 500]);
        assert.equal(r.found.action, 'record-done');
        assert.equal(r.absent.action, 're-execute');
        assert.deepEqual(
          r.unknown.map((u) => u.action),
          ['check-later', 'check-later', 'check-later', 'reconcile'],
        );

        const finished = spans.getFinishedSpans();
        assert.ok(finished.every((span) => span.name === 'intentkey.request'), 'the core names the span');
        assert.deepEqual(tally(finished.map((span) => span.attributes['intentkey.decision'])), EXPECTED_SPANS);
        assert.ok(finished.every((span) => span.attributes['intentkey.store'] === s.kind));
        const http = finished.filter((span) => span.attributes['intentkey.profile'] === 'ietf');
        const recoveries = finished.filter((span) => span.attributes['intentkey.profile'] === 'effect');
        assert.equal(http.length, 12);
        assert.equal(recoveries.length, 6);
        for (const span of finished) {
          assert.match(String(span.attributes['intentkey.key_digest']), /^[0-9a-f]{12}$/, 'a digest of the storage key');
          assert.equal(typeof span.attributes['intentkey.store_ms'], 'number');
          assert.equal(typeof span.attributes['intentkey.wait_ms'], 'number');
        }
        // One key's spans share one digest: the owner, the replay and the conflict of client-key-a.
        assert.equal(new Set(http.slice(0, 3).map((span) => span.attributes['intentkey.key_digest'])).size, 1);
        const waited = http.filter((span) => span.attributes['intentkey.wait_ms'] > 0);
        assert.equal(waited.length, 1, 'the one request that waited');
        assert.equal(waited[0].attributes['intentkey.decision'], 'replayed');
        assert.ok(http.every((span) => span.attributes['intentkey.store_ms'] >= 0));

        const points = await collect();
        assert.deepEqual(counted(points.get('intentkey.decisions'), s.kind), EXPECTED_COUNTS);
        const storeCalls = (points.get('intentkey.store.duration') ?? []).filter((p) => p.attributes['intentkey.store'] === s.kind);
        assert.ok(storeCalls.length > 0 && storeCalls[0].value.count > 20, 'every store call is timed');
        const waits = (points.get('intentkey.wait.duration') ?? []).filter((p) => p.attributes['intentkey.store'] === s.kind);
        assert.equal(waits[0]?.value.count, 1, 'the one wait');
        assert.ok(waits[0].value.sum > 0);
        const gauge = (points.get('intentkey.records') ?? []).filter((p) => p.attributes['intentkey.store'] === s.kind);
        const byStatus = Object.fromEntries(gauge.map((p) => [p.attributes['intentkey.status'], p.value]));
        assert.deepEqual(byStatus, { in_flight: 1, needs_reconciliation: 1 });

        // Nothing a span or a metric carries is the client's key, the secret, the storage key or the payload.
        const values = everyAttribute(points).join('\n');
        for (const [clientKey, storageKey] of r.keys) {
          assert.ok(!values.includes(clientKey), `the client key ${clientKey}`);
          assert.ok(!values.includes(storageKey), 'the storage key');
        }
        for (const secret of [SECRET_HEX, SECRET.toString('base64'), SECRET.toString('latin1')]) assert.ok(!values.includes(secret), 'the secret');
        assert.ok(!values.includes(CARD), 'the payload');
      } finally {
        stop();
        await drop();
      }
    });
  });
}

describe('telemetry of runs', () => {
  test('guard.run and a journal step: one span each, named by their kind; a given tracer and meter are used', async () => {
    const ownSpans = new InMemorySpanExporter();
    const ownTracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(ownSpans)] }).getTracer('mine');
    const ownExported = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    const ownReader = new PeriodicExportingMetricReader({ exporter: ownExported, exportIntervalMillis: 3_600_000 });
    const ownMeterProvider = new MeterProvider({ readers: [ownReader] });
    const store = memoryStore();
    const keyer = createKeyer({ secret: SECRET });
    const guard = createGuard({ store, keyer, tracer: ownTracer, meter: ownMeterProvider.getMeter('mine') });
    const input = { key: 'k'.repeat(64), tenantId: 't', actionType: 'pay', fingerprint: 'f'.repeat(64) };
    const effect = async () => jsonResponse(201, { paid: true });
    assert.equal((await guard.run(input, effect)).outcome, 'owned');
    assert.equal((await guard.run(input, effect)).outcome, 'done');
    const journal = createJournal({ store, keyer, tracer: ownTracer, meter: ownMeterProvider.getMeter('mine') });
    const run = { tenantId: 't', intentId: 'run-1', intentEpoch: T };
    const planned = await journal.step(run, 'plan', () => ({ steps: 2 }));
    assert.deepEqual(await journal.step(run, 'plan', () => ({ steps: 3 })), planned);
    const finished = ownSpans.getFinishedSpans();
    assert.deepEqual(
      finished.map((span) => [span.attributes['intentkey.profile'], span.attributes['intentkey.decision']]),
      [
        ['effect', 'owned'],
        ['effect', 'replayed'],
        ['step', 'owned'],
        ['step', 'replayed'],
      ],
    );
    ownExported.reset();
    await ownReader.forceFlush();
    const decisions = ownExported.getMetrics().flatMap((rm) => rm.scopeMetrics.flatMap((sm) => sm.metrics)).find((m) => m.descriptor.name === 'intentkey.decisions');
    assert.deepEqual(
      Object.fromEntries(decisions.dataPoints.map((p) => [p.attributes['intentkey.decision'], p.value])),
      { owned: 2, replayed: 2 },
    );
    await ownMeterProvider.shutdown();
    assert.throws(() => createGuard({ store, tracer: {} }), (e) => e instanceof IntentkeyError && e.field === 'tracer');
    assert.throws(() => idempotency({ secret: SECRET, store, meter: 1 }), (e) => e instanceof IntentkeyError && e.field === 'meter');
    assert.throws(() => observeRecords({ kind: 'dynamodb' }), /no count/);
  });
});
