// The npm package's Express middleware on PostgreSQL, for the test that
// shares one database between a Node service and a Rust (axum) service
// (host/axum/tests/node_shared.rs). It serves POST /orders with the same
// secret, profile, tenant header and route as the Rust side, prints
// {"port": N} once listening, and answers GET /runs with its handler runs.
//
// Environment: SECRET (hex), SCHEMA (the PostgreSQL schema), PGHOST, PGPORT,
// PGUSER, PGDATABASE (defaults: 127.0.0.1, 5432, postgres, test), DELAY_MS
// (how long the handler takes).
import { createRequire } from 'node:module';

const js = new URL('../../../../js/', import.meta.url);
const require = createRequire(new URL('package.json', js));
const express = require('express');
const { idempotency, init } = await import(new URL('src/adapters/express.js', js));
const { pgStore } = await import(new URL('src/stores/pg.js', js));

await init();
const store = await pgStore(
  {
    host: process.env.PGHOST ?? '127.0.0.1',
    port: Number(process.env.PGPORT ?? 5432),
    user: process.env.PGUSER ?? 'postgres',
    database: process.env.PGDATABASE ?? 'test',
    max: 4,
  },
  { schema: process.env.SCHEMA },
);
const delay = Number(process.env.DELAY_MS ?? 0);
let runs = 0;

const app = express();
const guarded = idempotency({
  secret: process.env.SECRET,
  store,
  tenant: (req) => req.headers['x-tenant'] ?? 'default',
});
app.use(guarded);
app.use(express.json());
app.post('/orders', async (req, res) => {
  runs++;
  const id = `node_${runs}`;
  if (delay > 0) await new Promise((r) => setTimeout(r, delay));
  res.status(201).location(`/orders/${id}`).json({ id, served_by: 'node', sku: req.body.sku });
});
app.get('/runs', (req, res) => res.json({ runs }));
app.use(guarded.onError);

const server = app.listen(0, '127.0.0.1', () => {
  console.log(JSON.stringify({ port: server.address().port }));
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
