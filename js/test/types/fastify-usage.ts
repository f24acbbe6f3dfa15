// Compiled (never run) by types.test.js with its own project: Fastify's types
// need @types/node, which this package does not install, so lib checks are
// skipped there; the plugin's options and its request decoration are checked.
import Fastify from 'fastify';
import intentkey, { init } from 'intentkey/fastify';
import { memoryStore } from 'intentkey/stores/memory';

const app = Fastify();
await init();
await app.register(intentkey, {
  secret: 'ab'.repeat(32),
  store: memoryStore(),
  profile: 'stripe',
  tenant: (request) => String(request.headers['x-tenant']),
  wait: { maxMs: 5000 },
});
app.post('/orders/:id', async (request) => {
  const key: string | undefined = request.idempotency?.key;
  return { key, header: app.intentkey.endpoint.headerName };
});
app.post('/open', { config: { idempotency: false } }, async () => ({}));
// @ts-expect-error the secret is required
await app.register(intentkey, { store: memoryStore() });
await app.register(intentkey, {
  keyring: { secrets: [{ id: '2026-12', activeFrom: 0, secret: 'ab'.repeat(32) }] },
  store: memoryStore(),
});
