#!/usr/bin/env node
// npm run bench:http [-- --rounds N --per-round M --warmup W --no-pg --only WORDS --server-cpu-prof DIR]
//
// What the idempotency middleware costs an Express 5 app, over real HTTP: the
// same app and handler (POST /orders, JSON body {"sku":"A1","qty":2}, answered
// 201 with a Location and a small JSON body), served four times from ONE server
// process, each app on its own port:
//   - bare: express.json(), the handler;
//   - intentkey, memory store: idempotency({ secret, store: memoryStore() })
//     before express.json() (its recommended place: it reads the raw bytes and
//     gives them back to the parser), the handler, guarded.onError;
//   - intentkey, PostgreSQL store: the same over await pgStore(pool) (a fresh
//     schema per run, dropped at the end);
//   - @node-idempotency: express.json() then its Express middleware
//     (bench/node-idempotency-express.mjs, a transcription of
//     @node-idempotency/express, which is not on npm) over @node-idempotency/core
//     1.0.11 and its memory storage, as its README sets it up.
// This process is the client (undici Client, keep-alive, one request in flight
// at a time), so the client's cost is the same for every app. A request is timed
// from before client.request() to its body read (process.hrtime.bigint()).
//
// A "first" request carries a new Idempotency-Key each time; a "replay" repeats
// one key seen (and answered) before. Every app gets the same request bytes
// (bare included). The methods alternate round after round, their order rotated
// each round, so that a noisy moment hits them all. Every answer is checked
// (first: 201, a Location, not marked replayed; replay: 201, marked replayed, the
// stored body), and at the end the server's handler counts: each first key ran
// the handler once, a replay never. Any failure exits 1.
//
// Defaults: 30 rounds × 300 requests per method after 3 warm-up rounds, about 45 s
// here. Method and results: bench/HTTP.md.
import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import { answerOf } from './ipc.mjs';

const argv = process.argv.slice(2);
const has = (name) => argv.includes(name);
const arg = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : fallback;
};

const SECRET = '5c'.repeat(32);
const BODY = '{"sku":"A1","qty":2}';
const REPLAY_KEY = randomUUID();

if (has('--serve')) await serve();
else await drive();

// ---------------------------------------------------------------- the server

async function serve() {
  const { default: express } = await import('express');
  const { idempotency, init } = await import('../src/adapters/express.js');
  const { memoryStore } = await import('../src/stores/memory.js');
  const { idempotencyAsMiddleware, StorageAdapterEnum } = await import('./node-idempotency-express.mjs');
  const withPg = !has('--no-pg');

  await init();
  const states = {};
  /** The one handler every app runs; it counts its runs per Idempotency-Key. */
  function handlerFor(name) {
    const state = { total: 0, runs: new Map() };
    states[name] = state;
    return function createOrder(req, res) {
      const key = req.headers['idempotency-key'];
      state.total++;
      state.runs.set(key, (state.runs.get(key) ?? 0) + 1);
      const id = `ord_${state.total}`;
      res.status(201).location(`/orders/${id}`).json({ id, sku: req.body.sku, qty: req.body.qty, status: 'accepted' });
    };
  }

  const apps = {};
  {
    const app = express();
    app.use(express.json());
    app.post('/orders', handlerFor('bare'));
    apps.bare = app;
  }
  {
    const app = express();
    const guarded = idempotency({ secret: SECRET, store: memoryStore() });
    app.use(guarded);
    app.use(express.json());
    app.post('/orders', handlerFor('intentkey-memory'));
    app.use(guarded.onError);
    apps['intentkey-memory'] = app;
  }
  let closePg = async () => {};
  if (withPg) {
    const { default: pg } = await import('pg');
    const { pgStore } = await import('../src/stores/pg.js');
    const { freshSchema, PG_CONFIG } = await import('../test/support/pg.js');
    let schema;
    try {
      schema = await freshSchema();
    } catch (e) {
      throw new Error(
        `PostgreSQL at ${PG_CONFIG.host}:${PG_CONFIG.port}/${PG_CONFIG.database} is unreachable (${e.message}): ` +
          'start it, or run with --no-pg to leave the PostgreSQL rows out',
      );
    }
    const pool = new pg.Pool({ ...schema.config, max: 4 });
    const store = await pgStore(pool);
    closePg = async () => {
      await pool.end();
      await schema.drop();
    };
    const app = express();
    const guarded = idempotency({ secret: SECRET, store });
    app.use(guarded);
    app.use(express.json());
    app.post('/orders', handlerFor('intentkey-pg'));
    app.use(guarded.onError);
    apps['intentkey-pg'] = app;
  }
  {
    const app = express();
    app.use(express.json());
    app.use(...(await idempotencyAsMiddleware({ storage: { adapter: StorageAdapterEnum.memory } })));
    app.post('/orders', handlerFor('node-idempotency'));
    apps['node-idempotency'] = app;
  }

  const servers = [];
  const ports = {};
  for (const [name, app] of Object.entries(apps)) {
    const server = await new Promise((resolve, reject) => {
      const s = app.listen(0, '127.0.0.1', (e) => (e ? reject(e) : resolve(s)));
    });
    server.keepAliveTimeout = 600_000;
    servers.push(server);
    ports[name] = server.address().port;
  }

  let closing = false;
  process.on('message', async (msg) => {
    if (msg.type === 'stats') {
      const out = {};
      for (const [name, { total, runs }] of Object.entries(states)) {
        let maxRuns = 0;
        for (const n of runs.values()) if (n > maxRuns) maxRuns = n;
        out[name] = { total, distinct: runs.size, maxRuns, runsOfKey: runs.get(msg.key) ?? 0 };
      }
      process.send({ type: 'stats', stats: out });
    } else if (msg.type === 'close') {
      closing = true;
      for (const s of servers) s.closeAllConnections?.();
      await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
      await closePg();
      process.send({ type: 'closed' }, () => process.exit(0));
    }
  });
  // The client died without closing: drop the schema and go.
  process.on('disconnect', () => {
    if (closing) return;
    closePg().finally(() => process.exit(1));
  });
  process.send({ type: 'ready', ports, node: process.version });
}

// ---------------------------------------------------------------- the client


async function drive() {
  const ROUNDS = Number(arg('--rounds', 30));
  const PER_ROUND = Number(arg('--per-round', 300));
  const WARMUP_ROUNDS = Number(arg('--warmup', 3));
  const withPg = !has('--no-pg');
  const profDir = arg('--server-cpu-prof', null);
  const { Client } = await import('undici');

  const execArgv = profDir === null ? [] : ['--cpu-prof', '--cpu-prof-interval=200', `--cpu-prof-dir=${profDir}`];
  const child = fork(fileURLToPath(import.meta.url), ['--serve', ...(withPg ? [] : ['--no-pg'])], { execArgv, stdio: 'inherit' });
  const { ports, node } = await answerOf(child, 'ready');

  const clients = {};
  for (const [name, port] of Object.entries(ports)) {
    clients[name] = new Client(`http://127.0.0.1:${port}`, { pipelining: 1, keepAliveTimeout: 600_000, keepAliveMaxTimeout: 600_000 });
  }

  /** One timed POST /orders; the checks happen after the clock stops. */
  async function post(app, key) {
    const client = clients[app];
    const headers = { 'content-type': 'application/json', 'idempotency-key': `"${key}"` };
    const t0 = process.hrtime.bigint();
    const res = await client.request({ path: '/orders', method: 'POST', headers, body: BODY });
    const text = await res.body.text();
    const t1 = process.hrtime.bigint();
    return { ns: Number(t1 - t0), status: res.statusCode, headers: res.headers, text };
  }

  const failures = [];
  const fail = (message) => {
    if (failures.length < 20) failures.push(message);
  };
  const firstsSent = Object.fromEntries(Object.keys(ports).map((name) => [name, 0]));

  // The replay key is answered once per app (the bare app just runs it).
  const stored = {};
  for (const app of Object.keys(ports)) {
    const r = await post(app, REPLAY_KEY);
    firstsSent[app]++;
    if (r.status !== 201) throw new Error(`${app}: the seeding request got ${r.status}: ${r.text}`);
    stored[app] = { json: JSON.parse(r.text), location: r.headers.location };
  }
  await new Promise((r) => setTimeout(r, 50)); // node-idempotency stores its answer without awaiting it

  const parse = (text) => {
    try {
      return JSON.parse(text);
    } catch {
      return undefined;
    }
  };
  const checkFirst = (method, app, r) => {
    const body = parse(r.text);
    if (r.status !== 201) fail(`${method}: status ${r.status} (201 expected): ${r.text.slice(0, 200)}`);
    else if (typeof r.headers.location !== 'string' || !r.headers.location.startsWith('/orders/ord_')) fail(`${method}: no Location`);
    else if (r.headers['idempotent-replayed'] !== undefined) fail(`${method}: a first request marked replayed`);
    else if (body?.sku !== 'A1' || body?.qty !== 2 || `/orders/${body?.id}` !== r.headers.location) fail(`${method}: body ${r.text}`);
  };
  const replays = {};
  const checkReplay = (method, app, r) => {
    const seen = (replays[method] ??= { n: 0, location: 0, marker: new Set() });
    seen.n++;
    if (r.headers.location === stored[app].location) seen.location++;
    if (r.status !== 201) fail(`${method}: status ${r.status} (201 expected): ${r.text.slice(0, 200)}`);
    else if (r.headers['idempotent-replayed'] === undefined) fail(`${method}: no Idempotent-Replayed header`);
    else if (!isDeepStrictEqual(parse(r.text), stored[app].json)) fail(`${method}: replayed ${r.text}, stored ${JSON.stringify(stored[app].json)}`);
    seen.marker.add(String(r.headers['idempotent-replayed']));
  };

  const all = [
    { name: 'bare Express', app: 'bare', kind: 'first' },
    { name: 'intentkey memory, first', app: 'intentkey-memory', kind: 'first' },
    { name: 'intentkey memory, replay', app: 'intentkey-memory', kind: 'replay' },
    ...(withPg
      ? [
          { name: 'intentkey PostgreSQL, first', app: 'intentkey-pg', kind: 'first' },
          { name: 'intentkey PostgreSQL, replay', app: 'intentkey-pg', kind: 'replay' },
        ]
      : []),
    { name: 'node-idempotency memory, first', app: 'node-idempotency', kind: 'first' },
    { name: 'node-idempotency memory, replay', app: 'node-idempotency', kind: 'replay' },
  ];
  // --only "intentkey memory|node-idempotency": the methods whose name contains one of
  // the words (bare Express always runs); for profiling, the table then misses rows.
  const only = arg('--only', null)?.split('|').map((w) => w.trim()).filter(Boolean) ?? null;
  const methods = all.filter((m) => only === null || m.app === 'bare' || only.some((w) => m.name.includes(w)));
  const samples = Object.fromEntries(methods.map((m) => [m.name, []]));
  const roundP50 = Object.fromEntries(methods.map((m) => [m.name, []]));
  const load = [loadavg()[0]];
  const started = Date.now();

  for (let round = 0; round < WARMUP_ROUNDS + ROUNDS; round++) {
    for (let j = 0; j < methods.length; j++) {
      const { name, app, kind } = methods[(j + round) % methods.length];
      const mine = [];
      for (let i = 0; i < PER_ROUND; i++) {
        const key = kind === 'first' ? randomUUID() : REPLAY_KEY;
        const r = await post(app, key);
        if (kind === 'first') {
          firstsSent[app]++;
          checkFirst(name, app, r);
        } else {
          checkReplay(name, app, r);
        }
        mine.push(r.ns);
      }
      if (round >= WARMUP_ROUNDS) {
        for (const ns of mine) samples[name].push(ns);
        roundP50[name].push(quantile(Float64Array.from(mine).sort(), 0.5));
      }
    }
    if (failures.length > 0) break;
    load.push(loadavg()[0]);
  }
  const seconds = (Date.now() - started) / 1000;

  const { stats: handlerRuns } = await answerOf(child, 'stats', { type: 'stats', key: `"${REPLAY_KEY}"` });
  for (const [app, s] of Object.entries(handlerRuns)) {
    // Once per key sent as a first request (the seeded replay key included: the
    // bare app only ever gets new keys), never for a replay.
    if (s.total !== firstsSent[app]) fail(`${app}: the handler ran ${s.total} times for ${firstsSent[app]} first requests`);
    if (s.maxRuns !== 1) fail(`${app}: a key ran the handler ${s.maxRuns} times`);
    if (s.runsOfKey !== 1) fail(`${app}: the replayed key ran the handler ${s.runsOfKey} times`);
    if (s.distinct !== firstsSent[app]) fail(`${app}: ${s.distinct} distinct keys ran the handler, ${firstsSent[app]} sent`);
  }

  for (const c of Object.values(clients)) await c.close();
  await answerOf(child, 'closed', { type: 'close' });

  if (failures.length > 0) {
    console.error('FAILED: a method did not behave; no figures are reported.');
    for (const f of failures) console.error(`  - ${f}`);
    process.exit(1);
  }

  // ------------------------------------------------------------ the report
  const us = (ns) => (ns / 1000).toFixed(1);
  const stats = Object.fromEntries(
    Object.entries(samples).map(([name, xs]) => {
      const sorted = Float64Array.from(xs).sort();
      return [name, { p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), n: sorted.length }];
    }),
  );
  const bare = stats['bare Express'].p50;
  console.log(
    `node ${node} (server and client), Express 5.3.0, undici 7.30.2; ${ROUNDS} rounds × ${PER_ROUND} requests per method ` +
      `(after ${WARMUP_ROUNDS} warm-up rounds), ${seconds.toFixed(0)} s; load average ${Math.min(...load).toFixed(1)} to ${Math.max(...load).toFixed(1)}; µs per request\n`,
  );
  console.log('| method | p50 | p99 | overhead (p50 − bare p50) |');
  console.log('|---|---|---|---|');
  for (const [name, s] of Object.entries(stats)) {
    console.log(`| ${name} | ${us(s.p50)} | ${us(s.p99)} | ${name === 'bare Express' ? '—' : us(s.p50 - bare)} |`);
  }

  console.log('\nintentkey (memory) against node-idempotency (memory):\n');
  console.log('| | intentkey overhead | node-idempotency overhead | ratio intentkey / node-idempotency | rounds where intentkey\'s p50 is lower | target |');
  console.log('|---|---|---|---|---|---|');
  let met = true;
  for (const kind of ['first', 'replay']) {
    if (stats[`intentkey memory, ${kind}`] === undefined || stats[`node-idempotency memory, ${kind}`] === undefined) {
      met = false;
      continue;
    }
    const ik = `intentkey memory, ${kind}`;
    const ni = `node-idempotency memory, ${kind}`;
    const a = stats[ik].p50 - bare;
    const b = stats[ni].p50 - bare;
    const wins = roundP50[ik].filter((x, i) => x < roundP50[ni][i]).length;
    const ok = a < b;
    met &&= ok;
    const ratio = b > 0 ? (a / b).toFixed(2) : 'n/a';
    console.log(`| ${kind} | ${us(a)} | ${us(b)} | ${ratio} | ${wins} of ${roundP50[ik].length} | below: ${ok ? 'met' : 'NOT met'} |`);
  }
  console.log('\nreplays (the stored answer):');
  for (const [name, r] of Object.entries(replays)) {
    console.log(`- ${name}: Idempotent-Replayed: ${[...r.marker].join(', ')}; Location replayed in ${r.location} of ${r.n}`);
  }
  console.log(`\n${met ? 'target met' : 'target NOT met'}: intentkey's memory-store overhead below node-idempotency's on first request and replay`);
}

function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}
