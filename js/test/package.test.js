// Every subpath of the package works in a fresh project, as a new user gets it:
// `npm pack`, then, per subpath listed in package.json `exports`, an empty
// project with the tarball and only that subpath's documented peers installed
// (from the npm cache, else the registry), where a minimal README example
// imports the subpath and runs. A subpath that needs a package it does not
// declare (as intentkey/fastify once needed fastify-plugin, a devDependency)
// fails here with ERR_MODULE_NOT_FOUND. A subpath in `exports` without an
// example here fails too: nothing is skipped without a word.
//
// The tarball is packed without rebuilding vendor/ (the build test checks it is
// current; run `npm run build` first). better-sqlite3's native addon is copied
// from this repository's install (the same pinned version) instead of being
// compiled again. The PostgreSQL, Redis, MySQL and DynamoDB examples use the test
// servers, each in a schema, key prefix, database or table of its own, and are skipped with a
// SKIPPED line (counted by the skips reporter) outside CI when a server is
// unreachable.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { freshSchema, pgAvailability } from './support/pg.js';
import { freshPrefix, redisAvailability } from './support/redis.js';
import { freshDatabase, mysqlAvailability } from './support/mysql.js';
import { dynamoAvailability, freshTable } from './support/dynamo.js';

const run = promisify(execFile);
const pkgDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'));
/** A peer at the version this repository tests with (its devDependency). */
const peer = (name) => `${name}@${pkg.devDependencies[name]}`;

const SECRET = "'ab'.repeat(32)";

/** Every subpath: the peers its README section names, and a minimal example that prints `ok`. */
const SUBPATHS = {
  '.': {
    peers: [],
    example: guardExample(`import { memoryStore } from 'intentkey';`, 'memoryStore()'),
  },
  './express': {
    peers: ['express'],
    example: `
import express from 'express';
import { idempotency } from 'intentkey/express';
import { memoryStore } from 'intentkey/stores/memory';
const app = express();
const guarded = idempotency({ secret: ${SECRET}, store: memoryStore() });
let runs = 0;
app.post('/orders', guarded, express.json(), (req, res) => res.status(201).json({ id: 'ord_' + ++runs }));
app.use(guarded.onError);
const server = app.listen(0, '127.0.0.1');
await new Promise((r) => server.once('listening', r));
const send = () => fetch('http://127.0.0.1:' + server.address().port + '/orders', { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': 'k-1' }, body: '{"sku":"A1"}' });
const a = await send();
const b = await send();
server.close();
if (a.status !== 201 || b.headers.get('idempotent-replayed') !== 'true' || runs !== 1) throw new Error(a.status + ' ' + runs);
console.log('ok');`,
  },
  './fastify': {
    peers: ['fastify'],
    example: `
import Fastify from 'fastify';
import intentkey from 'intentkey/fastify';
import { memoryStore } from 'intentkey/stores/memory';
const app = Fastify();
await app.register(intentkey, { secret: ${SECRET}, store: memoryStore() });
let runs = 0;
app.post('/orders', async (request, reply) => { reply.code(201); return { id: 'ord_' + ++runs }; });
const send = () => app.inject({ method: 'POST', url: '/orders', headers: { 'content-type': 'application/json', 'idempotency-key': 'k-1' }, payload: '{"sku":"A1"}' });
const a = await send();
const b = await send();
await app.close();
if (a.statusCode !== 201 || b.headers['idempotent-replayed'] !== 'true' || runs !== 1) throw new Error(a.statusCode + ' ' + runs);
console.log('ok');`,
  },
  './fetch': {
    peers: ['hono'],
    example: `
import { Hono } from 'hono';
import { idempotency, withIdempotency } from 'intentkey/fetch';
import { memoryStore } from 'intentkey/stores/memory';
const app = new Hono();
let runs = 0;
app.post('/orders', idempotency({ secret: ${SECRET}, store: memoryStore() }), (c) => c.json({ id: 'ord_' + ++runs }, 201));
const wrapped = withIdempotency(async () => Response.json({ id: 'w_' + ++runs }, { status: 201 }), { secret: ${SECRET}, store: memoryStore() });
const req = () => new Request('http://localhost/orders', { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': 'k-1' }, body: '{"sku":"A1"}' });
const a = await app.request(req());
const b = await app.request(req());
const c = await wrapped(req());
const d = await wrapped(req());
if (a.status !== 201 || b.headers.get('idempotent-replayed') !== 'true' || d.headers.get('idempotent-replayed') !== 'true' || runs !== 2) throw new Error(a.status + ' ' + runs);
console.log('ok');`,
  },
  './bullmq': {
    peers: ['bullmq'],
    example: `
import { createGuard, createKeyer, memoryStore } from 'intentkey';
import { idempotentProcessor } from 'intentkey/bullmq';
const guard = createGuard({ store: memoryStore(), keyer: createKeyer({ secret: ${SECRET} }) });
const payments = new Map();
const processor = idempotentProcessor({
  guard,
  intent: (job) => ({ tenantId: job.data.shop, intentId: job.data.paymentId, actionType: 'pix.send', payload: job.data.pix }),
  effect: async (key, job) => { payments.set(key, { id: 'pay_' + (payments.size + 1) }); return payments.get(key); },
});
const data = { shop: 'shop-1', paymentId: 'pmt_7f3a', pix: { creditor_key: 'a@b.c', amount: '10.50', currency: 'BRL' } };
const job = (id) => ({ id, name: 'payments', data, attemptsMade: 0, opts: {}, moveToDelayed: async () => {} });
const first = await processor(job('job-1'), 'token-1');
const again = await processor(job('job-2'), 'token-2');
if (first.id !== 'pay_1' || again.id !== 'pay_1' || payments.size !== 1) throw new Error(JSON.stringify([first, again]));
console.log('ok');`,
  },
  './pg-boss': {
    peers: ['pg-boss'],
    example: `
import { createGuard, createKeyer, memoryStore } from 'intentkey';
import { idempotentHandler } from 'intentkey/pg-boss';
const guard = createGuard({ store: memoryStore(), keyer: createKeyer({ secret: ${SECRET} }) });
const payments = new Map();
const handler = idempotentHandler({
  guard,
  intent: (job) => ({ tenantId: job.data.shop, intentId: job.data.paymentId, actionType: 'pix.send', payload: job.data.pix }),
  effect: async (key, job) => { payments.set(key, { id: 'pay_' + (payments.size + 1), amount: job.data.pix.amount }); return payments.get(key); },
  lookup: async (key) => (payments.has(key) ? { found: payments.get(key) } : 'absent'),
  readYourWrites: true,
});
const data = { shop: 'shop-1', paymentId: 'pmt_7f3a', pix: { creditor_key: 'a@b.c', amount: '10.50', currency: 'BRL' } };
const first = await handler([{ id: 'job-1', name: 'payments', data }]);
const again = await handler([{ id: 'job-2', name: 'payments', data }]);
if (first.id !== 'pay_1' || again.id !== 'pay_1' || payments.size !== 1) throw new Error(JSON.stringify([first, again]));
console.log('ok');`,
  },
  './stores/memory': {
    peers: [],
    example: guardExample(`import { memoryStore } from 'intentkey/stores/memory';`, 'memoryStore()'),
  },
  './stores/sqlite': {
    peers: ['better-sqlite3'],
    example: guardExample(`import { sqliteStore } from 'intentkey/stores/sqlite';`, "sqliteStore(':memory:')"),
  },
  './stores/pg': {
    peers: ['pg'],
    server: 'pg',
    example: guardExample(
      `import { pgStore } from 'intentkey/stores/pg';`,
      'await pgStore(JSON.parse(process.env.IK_PG_CONFIG))',
    ),
  },
  './stores/redis': {
    peers: ['ioredis'],
    server: 'redis',
    example: guardExample(`import { redisStore } from 'intentkey/stores/redis';`, 'await redisStore({ url: process.env.IK_REDIS_URL })'),
  },
  './stores/mysql': {
    peers: ['mysql2'],
    server: 'mysql',
    example: guardExample(`import { mysqlStore } from 'intentkey/stores/mysql';`, 'await mysqlStore({ url: process.env.IK_MYSQL_URL })'),
  },
  './stores/dynamodb': {
    peers: ['@aws-sdk/client-dynamodb'],
    server: 'dynamodb',
    example: guardExample(`import { dynamoStore } from 'intentkey/stores/dynamodb';`, 'await dynamoStore({ url: process.env.IK_DYNAMODB_URL })'),
  },
};

/** The README's claim example over one store: the effect runs once, the retry gets its answer. */
function guardExample(importLine, storeExpression) {
  return `
import { createGuard, createKeyer, jsonResponse } from 'intentkey';
${importLine}
const store = ${storeExpression};
const guard = createGuard({ store, keyer: createKeyer({ secret: ${SECRET} }) });
const intent = {
  tenantId: 'tenant-1',
  actionType: 'pix.send',
  payload: '{"creditor_key":"123.456.789-09","amount":"10.50","currency":"BRL"}',
  intentEpoch: 1_700_000_000,
};
let sent = 0;
const pay = async (key) => {
  sent++;
  return jsonResponse(201, { id: 'pay_1', idempotencyKey: key }, [['Location', '/payments/pay_1']]);
};
const first = await guard.run({ intent }, pay);
const again = await guard.run({ intent }, pay);
await store.close?.();
const seen = [first.outcome, first.finished, again.outcome, again.replayed, again.response.status, sent].join(' ');
if (seen !== 'owned stored done true 201 1') throw new Error(seen);
console.log('ok');`;
}

const subpaths = Object.keys(pkg.exports).filter((s) => s !== './package.json');
const servers = {
  pg: await pgAvailability('package.test.js'),
  redis: await redisAvailability('package.test.js'),
  mysql: await mysqlAvailability('package.test.js'),
  dynamodb: await dynamoAvailability('package.test.js'),
};

test('package.json exports only subpaths this test runs, and no vendor/ internals', () => {
  assert.deepEqual(subpaths.toSorted(), Object.keys(SUBPATHS).toSorted(), 'every exported subpath has an example here, and only those');
  assert.ok(!Object.keys(pkg.exports).some((s) => s.startsWith('./vendor')), 'vendor/ is internal: not an export');
});

test('npm pack, then every subpath imports and runs its README example in a fresh project with only its documented peers', { timeout: 240_000 }, async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'intentkey-pack-'));
  try {
    const { stdout } = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', root], { cwd: pkgDir });
    const packed = JSON.parse(stdout)[0];
    const files = packed.files.map((f) => f.path);
    for (const need of ['src/index.js', 'vendor/intentkey.core.wasm', 'vendor/pure/intentkey.core.wasm']) {
      assert.ok(files.includes(need), `the packed package lacks ${need} (run npm run build first)`);
    }
    const tarball = join(root, packed.filename);
    const sqliteAddon = join(pkgDir, 'node_modules', 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node');
    assert.ok(existsSync(sqliteAddon), `${sqliteAddon} is missing: npm ci in js/ first`);

    /** One project: install, then run its example. */
    async function project(subpath) {
      const { peers, example, server } = SUBPATHS[subpath];
      const dir = join(root, subpath === '.' ? 'root' : subpath.slice(2).replaceAll('/', '-'));
      mkdirSync(dir);
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'fresh-app', private: true, type: 'module' }));
      await run(
        'npm',
        ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--prefer-offline', '--no-package-lock', tarball, ...peers.map(peer)],
        { cwd: dir, maxBuffer: 1 << 24 },
      );
      if (peers.includes('better-sqlite3')) {
        const to = join(dir, 'node_modules', 'better-sqlite3', 'build', 'Release');
        mkdirSync(to, { recursive: true });
        copyFileSync(sqliteAddon, join(to, 'better_sqlite3.node'));
      }
      writeFileSync(join(dir, 'example.mjs'), example);
      const env = { ...process.env };
      let resource = null;
      if (server === 'pg') {
        resource = await freshSchema();
        env.IK_PG_CONFIG = JSON.stringify(resource.config);
      } else if (server === 'redis') {
        resource = await freshPrefix();
        env.IK_REDIS_URL = resource.url;
      } else if (server === 'mysql') {
        resource = await freshDatabase();
        env.IK_MYSQL_URL = resource.url;
      } else if (server === 'dynamodb') {
        resource = await freshTable();
        env.IK_DYNAMODB_URL = resource.url;
      }
      try {
        const out = await run(process.execPath, ['example.mjs'], { cwd: dir, env }).catch((e) => {
          throw new Error(`${subpath}: the example failed:\n${e.stderr || e.message}`);
        });
        assert.equal(out.stdout.trim(), 'ok', subpath);
      } finally {
        await resource?.drop();
      }
    }

    const results = await Promise.allSettled(
      subpaths.map(async (subpath) => {
        const { server } = SUBPATHS[subpath];
        if (server !== undefined && servers[server].skip) {
          t.diagnostic(`${subpath}: ${servers[server].skip}`);
          console.log(`SKIPPED: package.test.js ${subpath}: ${servers[server].skip}`);
          return;
        }
        await project(subpath);
      }),
    );
    const failures = results.flatMap((r, i) => (r.status === 'rejected' ? [`${subpaths[i]}: ${r.reason?.message ?? r.reason}`] : []));
    assert.deepEqual(failures, [], failures.join('\n\n'));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
