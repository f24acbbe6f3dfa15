// The Node side of the Rust/Node interop test (host/store/tests/stores.rs,
// redis_node_and_rust_share_records): node redis-interop.mjs URL KEY BODY.
// Runs one guarded effect answering BODY on the Redis store at URL and prints
// { outcome, replayed, status, body } as JSON.
import { createGuard } from '../../src/index.js';
import { redisStore } from '../../src/stores/redis.js';

const [url, key, body] = process.argv.slice(2);
const store = await redisStore({ url });
try {
  const guard = createGuard({ store });
  const r = await guard.run({ key, fingerprint: 'fp', tenantId: 't1', actionType: 'pix.send' }, async () => ({
    status: 201,
    contentType: 'text/plain',
    body,
  }));
  const text = new TextDecoder().decode(r.response.body);
  process.stdout.write(`${JSON.stringify({ outcome: r.outcome, replayed: r.replayed, status: r.response.status, body: text })}\n`);
} finally {
  await store.close();
}
