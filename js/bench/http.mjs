#!/usr/bin/env node
// npm run bench:http [-- --rounds N --per-round M --warmup W --no-pg --no-redis --only WORDS --server-cpu-prof DIR]
//
// What the idempotency middleware costs an Express 5 app, over real HTTP, next to
// the store's floor and to two other libraries: the same handler (POST /orders,
// JSON body {"sku":"A1","qty":2}, answered 201 with a Location and a small JSON
// body), served by several apps from ONE server process, each on its own port:
//   - bare: express.json(), the handler;
//   - intentkey over memoryStore(), await pgStore(pool) (a fresh schema, dropped
//     at the end) and await redisStore({ client }) (a fresh prefix, deleted at
//     the end): idempotency({ secret, store }) before express.json() (its
//     recommended place: it reads the raw bytes and gives them back to the
//     parser), the handler, guarded.onError;
//   - the floors, in the same server: PostgreSQL's two commits (a bare INSERT …
//     ON CONFLICT DO NOTHING, the handler, a bare UPDATE by key, each its own
//     commit, prepared, from node-postgres, into a table made by the store's own
//     schema in a second fresh schema) and its replay, one round trip (a SELECT
//     of the stored answer by key); Redis's SET … NX, the handler, SET … XX from
//     ioredis, and its replay, one GET. A floor has no fingerprint, no fence, no
//     index, no tenant: it is the store's least work for an answer kept;
//   - express-idempotency 1.0.6 over its memory adapter and over
//     express-idempotency-redis-adapter 1.0.8 (@redis/client, logical database 9,
//     its keys deleted at the end), after express.json(), the handler returning
//     on isHit() as its README says. It looks the key up, then creates it (two
//     round trips, no atomic claim), and stores the answer after sending it;
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
// (first: 201, a Location, not marked replayed; replay: 201, the stored body,
// marked replayed where the library marks it), and at the end the server's
// handler counts: each first key ran the handler once, a replay never. Any
// failure exits 1. The targets (overheads over bare, p50) are printed last.
//
// Defaults: 20 rounds × 200 requests per method after 2 warm-up rounds, about
// 2 minutes here. Method and results: bench/HTTP.md.
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

/** What the server made and must remove (schemas, keys), undone on close or on a failed start. */
const closers = [];

if (has('--serve')) {
  try {
    await serve();
  } catch (e) {
    for (const close of closers) await close().catch(() => {});
    throw e;
  }
} else await drive();

// ---------------------------------------------------------------- the server

async function serve() {
  const { default: express } = await import('express');
  const { idempotency, init } = await import('../src/adapters/express.js');
  const { memoryStore } = await import('../src/stores/memory.js');
  const { idempotencyAsMiddleware, StorageAdapterEnum } = await import('./node-idempotency-express.mjs');
  const { default: ei } = await import('express-idempotency');

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
  /** The handler, guarded by intentkey's Express middleware over `store`. */
  function intentkeyApp(name, store) {
    const app = express();
    const guarded = idempotency({ secret: SECRET, store });
    app.use(guarded);
    app.use(express.json());
    app.post('/orders', handlerFor(name));
    app.use(guarded.onError);
    apps[name] = app;
  }
  /** The order the handler answers, as the floors store and replay it. */
  const answerOf = (res, body) => ({ status: 201, location: res.get('location'), body });
  function floorApps(name, { claim, complete, read }) {
    // First requests: the claim, the handler (its answer captured, not sent), the completion, then the answer.
    const first = express();
    first.use(express.json());
    const handle = handlerFor(name);
    first.post('/orders', async (req, res, next) => {
      try {
        const key = req.headers['idempotency-key'];
        if (!(await claim(key))) throw new Error(`${name}: the floor's claim lost on a new key`);
        const json = res.json.bind(res);
        let sent = null;
        res.json = (body) => {
          sent = body;
          return res;
        };
        handle(req, res);
        res.json = json;
        const stored = answerOf(res, sent);
        await complete(key, JSON.stringify(stored));
        res.status(stored.status).json(sent);
      } catch (e) {
        next(e);
      }
    });
    apps[name] = first;
    // Replays: one round trip reads the stored answer.
    const replay = express();
    replay.post('/orders', async (req, res, next) => {
      try {
        const stored = JSON.parse(await read(req.headers['idempotency-key']));
        res.status(stored.status).location(stored.location).json(stored.body);
      } catch (e) {
        next(e);
      }
    });
    apps[`${name}-read`] = replay;
  }

  intentkeyApp('intentkey-memory', memoryStore());

  if (!has('--no-pg')) {
    const { default: pg } = await import('pg');
    const { pgStore } = await import('../src/stores/pg.js');
    const { freshSchema, PG_CONFIG } = await import('../test/support/pg.js');
    let schema;
    let floorSchema;
    try {
      schema = await freshSchema();
      floorSchema = await freshSchema();
    } catch (e) {
      throw new Error(
        `PostgreSQL at ${PG_CONFIG.host}:${PG_CONFIG.port}/${PG_CONFIG.database} is unreachable (${e.message}): ` +
          'start it, or run with --no-pg to leave the PostgreSQL rows out',
      );
    }
    const pool = new pg.Pool({ ...schema.config, max: 4 });
    const floorPool = new pg.Pool({ ...floorSchema.config, max: 4 });
    // The floor's table: the store's own schema, applied by a store on the floor's schema.
    await pgStore(floorPool);
    closers.push(async () => {
      await pool.end();
      await floorPool.end();
      await schema.drop();
      await floorSchema.drop();
    });
    intentkeyApp('intentkey-pg', await pgStore(pool));
    const token = '0123456789abcdef0123456789abcdef';
    floorApps('floor-pg', {
      claim: async (key) =>
        (
          await floorPool.query({
            name: 'floor-insert',
            text:
              'INSERT INTO intentkey_records (key, fingerprint, tenant_id, action_type, status, owner_token, created_at, lookups) ' +
              "VALUES ($1, 'fp', 't', 'a', 'in_flight', $2, $3, 0) ON CONFLICT (key) DO NOTHING",
            values: [key, token, Math.floor(Date.now() / 1000)],
          })
        ).rowCount === 1,
      complete: async (key, answer) => {
        await floorPool.query({
          name: 'floor-update',
          text:
            "UPDATE intentkey_records SET status = 'done', response_status = 201, response_content_type = 'application/json', " +
            'response_headers = NULL, response_body = $2, expires_at = $3, next_lookup_at = NULL WHERE key = $1',
          values: [key, Buffer.from(answer), Math.floor(Date.now() / 1000) + 86400],
        });
      },
      read: async (key) =>
        String(
          (
            await floorPool.query({
              name: 'floor-read',
              text: 'SELECT response_body FROM intentkey_records WHERE key = $1',
              values: [key],
            })
          ).rows[0].response_body,
        ),
    });
  }

  if (!has('--no-redis')) {
    const { default: Redis } = await import('ioredis');
    const { redisStore } = await import('../src/stores/redis.js');
    const { freshPrefix, REDIS_URL } = await import('../test/support/redis.js');
    let fresh;
    try {
      fresh = await freshPrefix();
      await fresh.client.ping();
    } catch (e) {
      throw new Error(`Redis at ${REDIS_URL} is unreachable (${e.message}): start it, or run with --no-redis to leave the Redis rows out`);
    }
    const client = new Redis(REDIS_URL);
    const floor = new Redis(REDIS_URL);
    intentkeyApp('intentkey-redis', await redisStore({ client, prefix: fresh.prefix }));
    const floorKey = (key) => `${fresh.prefix}:floor:${key}`;
    floorApps('floor-redis', {
      claim: async (key) => (await floor.set(floorKey(key), 'ik1 in_flight 0123456789abcdef0123456789abcdef 1700000000 0 - -', 'NX')) === 'OK',
      complete: async (key, answer) => {
        if ((await floor.set(floorKey(key), answer, 'XX')) !== 'OK') throw new Error('the floor lost its record');
      },
      read: (key) => floor.get(floorKey(key)),
    });

    // express-idempotency over its Redis adapter, in a database of its own: its keys are the clients' keys, unprefixed.
    const { createClient } = await import('@redis/client');
    const adapterModule = await import('express-idempotency-redis-adapter');
    const RedisAdapter = adapterModule.default.default ?? adapterModule.default;
    const eiUrl = `${REDIS_URL.replace(/\/\d+$/, '')}/9`;
    const eiClient = createClient({ url: eiUrl });
    const adapter = new RedisAdapter({ connectionInstance: eiClient });
    await adapter.connect();
    expressIdempotencyApp('express-idempotency-redis', adapter);
    closers.push(async () => {
      // Only the keys this run sent: a quoted key (Idempotency-Key: "<uuid>").
      for await (const keys of eiClient.scanIterator({ MATCH: '"*"', COUNT: 1000 })) {
        const batch = Array.isArray(keys) ? keys : [keys];
        if (batch.length > 0) await eiClient.del(batch);
      }
      await adapter.disconnect();
      await client.quit();
      await floor.quit();
      await fresh.drop();
    });
  }

  /** express-idempotency after express.json(), the handler returning on a hit (its README). */
  function expressIdempotencyApp(name, dataAdapter) {
    const app = express();
    app.use(express.json());
    app.post('/orders', ei.idempotency(dataAdapter === undefined ? undefined : { dataAdapter }));
    const service = ei.getSharedIdempotencyService();
    const handle = handlerFor(name);
    app.post('/orders', (req, res) => {
      if (service.isHit(req)) return;
      handle(req, res);
    });
    apps[name] = app;
  }
  expressIdempotencyApp('express-idempotency-memory');
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
      for (const close of closers) await close();
      process.send({ type: 'closed' }, () => process.exit(0));
    }
  });
  // The client died without closing: drop the schema and go.
  process.on('disconnect', () => {
    if (closing) return;
    (async () => {
      for (const close of closers) await close().catch(() => {});
    })().finally(() => process.exit(1));
  });
  process.send({ type: 'ready', ports, node: process.version });
}

// ---------------------------------------------------------------- the client


async function drive() {
  const ROUNDS = Number(arg('--rounds', 20));
  const PER_ROUND = Number(arg('--per-round', 200));
  const WARMUP_ROUNDS = Number(arg('--warmup', 2));
  const withPg = !has('--no-pg');
  const withRedis = !has('--no-redis');
  const profDir = arg('--server-cpu-prof', null);
  const { Client } = await import('undici');

  const execArgv = profDir === null ? [] : ['--cpu-prof', '--cpu-prof-interval=200', `--cpu-prof-dir=${profDir}`];
  const serverArgs = ['--serve', ...(withPg ? [] : ['--no-pg']), ...(withRedis ? [] : ['--no-redis'])];
  const child = fork(fileURLToPath(import.meta.url), serverArgs, { execArgv, stdio: 'inherit' });
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

  // The replay key is answered once per app (the bare app just runs it); a
  // floor's replay app reads what its first-request app stored.
  const stored = {};
  const writerOf = (app) => app.replace(/-read$/, '');
  for (const app of Object.keys(ports).filter((a) => writerOf(a) === a)) {
    const r = await post(app, REPLAY_KEY);
    firstsSent[app]++;
    if (r.status !== 201) throw new Error(`${app}: the seeding request got ${r.status}: ${r.text}`);
    stored[app] = { json: JSON.parse(r.text), location: r.headers.location };
  }
  for (const app of Object.keys(ports)) stored[app] = stored[writerOf(app)];
  await new Promise((r) => setTimeout(r, 50)); // node-idempotency and express-idempotency store their answer without awaiting it

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
  const checkReplay = (method, app, r, marks) => {
    const seen = (replays[method] ??= { n: 0, location: 0, marker: new Set() });
    seen.n++;
    if (r.headers.location === stored[app].location) seen.location++;
    if (r.status !== 201) fail(`${method}: status ${r.status} (201 expected): ${r.text.slice(0, 200)}`);
    else if (marks && r.headers['idempotent-replayed'] === undefined) fail(`${method}: no Idempotent-Replayed header`);
    else if (!isDeepStrictEqual(parse(r.text), stored[app].json)) fail(`${method}: replayed ${r.text}, stored ${JSON.stringify(stored[app].json)}`);
    seen.marker.add(String(r.headers['idempotent-replayed']));
  };

  const pair = (label, app, replayApp = app, marks = true) => [
    { name: `${label}, first`, app, kind: 'first' },
    { name: `${label}, replay`, app: replayApp, kind: 'replay', marks },
  ];
  const all = [
    { name: 'bare Express', app: 'bare', kind: 'first' },
    ...pair('intentkey memory', 'intentkey-memory'),
    ...pair('express-idempotency memory', 'express-idempotency-memory', undefined, false),
    ...pair('node-idempotency memory', 'node-idempotency'),
    ...(withPg ? [...pair('intentkey PostgreSQL', 'intentkey-pg'), ...pair('floor PostgreSQL', 'floor-pg', 'floor-pg-read', false)] : []),
    ...(withRedis
      ? [
          ...pair('intentkey Redis', 'intentkey-redis'),
          ...pair('floor Redis', 'floor-redis', 'floor-redis-read', false),
          ...pair('express-idempotency Redis', 'express-idempotency-redis', undefined, false),
        ]
      : []),
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
      const { name, app, kind, marks } = methods[(j + round) % methods.length];
      const mine = [];
      for (let i = 0; i < PER_ROUND; i++) {
        const key = kind === 'first' ? randomUUID() : REPLAY_KEY;
        const r = await post(app, key);
        if (kind === 'first') {
          firstsSent[app]++;
          checkFirst(name, app, r);
        } else {
          checkReplay(name, app, r, marks);
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
    process.stderr.write(`round ${round + 1} of ${WARMUP_ROUNDS + ROUNDS}${round < WARMUP_ROUNDS ? ' (warm-up)' : ''}\r`);
  }
  process.stderr.write('\n');
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

  // Each target: intentkey's overhead over bare against an anchor's (a floor's or a library's), p50.
  const targets = [
    ['PostgreSQL, first request', 'intentkey PostgreSQL, first', 'floor PostgreSQL, first', 1.15, 'two commits'],
    ['PostgreSQL, replay', 'intentkey PostgreSQL, replay', 'floor PostgreSQL, replay', 1.2, 'one round trip'],
    ['Redis, first request', 'intentkey Redis, first', 'floor Redis, first', 1.15, 'SET NX + SET XX'],
    ['Redis, first request', 'intentkey Redis, first', 'express-idempotency Redis, first', 1.0, 'express-idempotency'],
    ['Redis, replay', 'intentkey Redis, replay', 'floor Redis, replay', null, 'one GET'],
    ['Redis, replay', 'intentkey Redis, replay', 'express-idempotency Redis, replay', 1.0, 'express-idempotency'],
    ['memory, first request', 'intentkey memory, first', 'express-idempotency memory, first', 0.8, 'express-idempotency'],
    ['memory, first request', 'intentkey memory, first', 'node-idempotency memory, first', 1.0, '@node-idempotency'],
    ['memory, replay', 'intentkey memory, replay', 'express-idempotency memory, replay', 1.0, 'express-idempotency'],
    ['memory, replay', 'intentkey memory, replay', 'node-idempotency memory, replay', 1.0, '@node-idempotency'],
  ].filter(([, ik, anchor]) => stats[ik] !== undefined && stats[anchor] !== undefined);
  console.log('\nintentkey against the floors and the other libraries (overheads over bare, p50):\n');
  console.log("| case | against | intentkey overhead | its overhead | ratio | rounds where intentkey's p50 is lower | target |");
  console.log('|---|---|---|---|---|---|---|');
  let met = 0;
  let total = 0;
  for (const [label, ik, anchor, limit, what] of targets) {
    const a = stats[ik].p50 - bare;
    const b = stats[anchor].p50 - bare;
    const ratio = b > 0 ? a / b : Infinity;
    const wins = roundP50[ik].filter((x, i) => x < roundP50[anchor][i]).length;
    let verdict = 'recorded';
    if (limit !== null) {
      total++;
      const ok = ratio <= limit;
      if (ok) met++;
      verdict = `≤ ${limit.toFixed(2)}: ${ok ? 'met' : 'NOT met'}`;
    }
    console.log(`| ${label} | ${what} | ${us(a)} | ${us(b)} | ${Number.isFinite(ratio) ? ratio.toFixed(2) : 'n/a'} | ${wins} of ${roundP50[ik].length} | ${verdict} |`);
  }
  console.log('\nreplays (the stored answer):');
  for (const [name, r] of Object.entries(replays)) {
    console.log(`- ${name}: Idempotent-Replayed: ${[...r.marker].join(', ')}; Location replayed in ${r.location} of ${r.n}`);
  }
  console.log(`\n${met} of ${total} targets met in this run`);
}

function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}
