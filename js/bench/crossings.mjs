#!/usr/bin/env node
// npm run bench:crossings [-- memory pg redis --requests N]
//
// What one HTTP request asks of the component, counted (not timed): the
// Express middleware over a store, in this process, answering POST /orders
// from an undici client, N first requests then N replays of one key. For each,
// per request:
//   - the calls into the component (its exports, each a JS-to-wasm call; the
//     canonical ABI's post-return calls apart), by name;
//   - the calls out of it (the store import, the flow resource's constructor
//     and destructor), by name;
//   - the guest allocations made to lower arguments into it (each a
//     `cabi_realloc` call, itself a call into the component) and their bytes.
// It wraps WebAssembly.Instance before the package compiles the component, so
// it sees every crossing the package's glue makes. PostgreSQL (a fresh
// schema) and Redis (a fresh prefix) as the tests reach them; what they wrote
// is removed at the end.
import { once } from 'node:events';

const argv = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 && i + 1 < argv.length ? Number(argv[i + 1]) : fallback;
};
const N = flag('--requests', 200);
const stores = argv.filter((a) => ['memory', 'pg', 'redis'].includes(a));
if (stores.length === 0) stores.push('memory', 'pg', 'redis');

const counts = { into: new Map(), post: 0, out: new Map(), allocations: 0, bytes: 0 };
const bump = (m, k) => m.set(k, (m.get(k) ?? 0) + 1);
/** The import each of jco's shim slots stands for ('6' → 'intentkey:core/store#insert'), read from the main module's imports. */
const slots = new Map();
/** The main instance's exports as wrapped here, to their originals (what the shim calls guest to guest). */
const guestOf = new WeakMap();
const Instance = WebAssembly.Instance;
WebAssembly.Instance = function CountingInstance(module, importObject = {}) {
  const exportNames = WebAssembly.Module.exports(module).map((e) => e.name);
  const main = exportNames.includes('cabi_realloc');
  const shim = Object.hasOwn(importObject, 'actual');
  if (!main && !shim) return new Instance(module, importObject);
  const imports = {};
  for (const [ns, fns] of Object.entries(importObject)) {
    imports[ns] = {};
    for (const [name, f] of Object.entries(fns)) {
      const label = `${ns.replace(/^intentkey:core\//, '').replace(/@[0-9.]+$/, '')}#${name}`;
      if (typeof f !== 'function') imports[ns][name] = f;
      else if (guestOf.has(f)) {
        // A guest function the shim calls (a resource's destructor): no crossing to JavaScript.
        imports[ns][name] = guestOf.get(f);
      } else if (/^[0-9]+$/.test(f.name)) {
        // A wasm function (its name is its index): a slot of jco's shim, whose
        // crossing is counted where the shim calls out, or a guest function
        // the shim calls (a resource's destructor): no crossing to JavaScript.
        if (main) slots.set(f.name, label);
        imports[ns][name] = f;
      } else {
        const as = shim ? () => slots.get(name) ?? `shim slot ${name}` : () => label;
        imports[ns][name] = function countedImport(...args) {
          bump(counts.out, as());
          return f.apply(this, args);
        };
      }
    }
  }
  const instance = new Instance(module, imports);
  if (!main) return instance;
  const exports = {};
  for (const [name, v] of Object.entries(instance.exports)) {
    if (typeof v !== 'function') exports[name] = v;
    else if (name === 'cabi_realloc') {
      exports[name] = (ptr, oldSize, align, size) => {
        counts.allocations++;
        counts.bytes += size;
        return v(ptr, oldSize, align, size);
      };
    } else if (name.startsWith('cabi_post_')) {
      exports[name] = (...args) => {
        counts.post++;
        return v(...args);
      };
    } else {
      const label = name.replace(/intentkey:core\//, '').replace(/@[0-9.]+/, '');
      exports[name] = (...args) => {
        bump(counts.into, label);
        return v(...args);
      };
      guestOf.set(exports[name], v);
    }
  }
  return { exports };
};

const { default: express } = await import('express');
const { request } = await import('undici');
const { idempotency } = await import('../src/adapters/express.js');
const { memoryStore } = await import('../src/index.js');

async function storeOf(kind) {
  if (kind === 'memory') return { store: memoryStore(), close: async () => {} };
  if (kind === 'pg') {
    const { default: pg } = await import('pg');
    const { pgStore } = await import('../src/stores/pg.js');
    const { freshSchema } = await import('../test/support/pg.js');
    const schema = await freshSchema();
    const pool = new pg.Pool({ ...schema.config, max: 4 });
    try {
      return { store: await pgStore(pool), close: async () => (await pool.end(), await schema.drop()) };
    } catch (e) {
      await pool.end();
      await schema.drop();
      throw e;
    }
  }
  const { redisStore } = await import('../src/stores/redis.js');
  const { freshPrefix } = await import('../test/support/redis.js');
  const fresh = await freshPrefix();
  return { store: await redisStore({ client: fresh.client, prefix: fresh.prefix }), close: () => fresh.drop() };
}

const per = (n) => (n / N).toFixed(n % N === 0 ? 0 : 2);
const named = (m) =>
  [...m]
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ×${per(v)}`)
    .join(', ');
const sum = (m) => [...m.values()].reduce((a, b) => a + b, 0);
const rows = [];

for (const kind of stores) {
  const { store, close } = await storeOf(kind);
  const app = express();
  app.use(idempotency({ secret: new Uint8Array(32).fill(7), store }));
  app.use(express.json());
  let orders = 0;
  app.post('/orders', (req, res) => {
    orders++;
    res.status(201).location(`/orders/ord_${orders}`).json({ id: `ord_${orders}`, sku: req.body.sku, qty: req.body.qty });
  });
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${server.address().port}/orders`;
  const send = async (key) => {
    const r = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': `"${key}"` },
      body: '{"sku":"A1","qty":2}',
    });
    await r.body.text();
    if (r.statusCode !== 201) throw new Error(`${kind}: ${key} answered ${r.statusCode}`);
    return r.headers['idempotent-replayed'] === 'true';
  };
  try {
    for (let i = 0; i < 20; i++) await send(`warm-${i}`);
    for (const [what, keyOf, replayed] of [
      ['first request', (i) => `first-${i}`, false],
      ['replay', () => 'first-0', true],
    ]) {
      counts.into.clear();
      counts.out.clear();
      counts.post = 0;
      counts.allocations = 0;
      counts.bytes = 0;
      const before = orders;
      for (let i = 0; i < N; i++) {
        if ((await send(keyOf(i))) !== replayed) throw new Error(`${kind} ${what}: the answer was${replayed ? ' not' : ''} a replay`);
      }
      if (orders - before !== (replayed ? 0 : N)) throw new Error(`${kind} ${what}: the handler ran ${orders - before} times`);
      rows.push([
        `${kind}, ${what}`,
        per(sum(counts.into)),
        named(counts.into),
        per(counts.post),
        per(sum(counts.out)),
        named(counts.out),
        per(counts.allocations),
        Math.round(counts.bytes / N),
      ]);
    }
  } finally {
    server.close();
    await close();
  }
}

console.log(`per request, over ${N} first requests and ${N} replays of one key (Express 5, the ietf profile's defaults)\n`);
console.log('| request | calls in | which | post-returns | calls out | which | allocations | bytes lowered |');
console.log('|---|---|---|---|---|---|---|---|');
for (const r of rows) console.log(`| ${r.join(' | ')} |`);
