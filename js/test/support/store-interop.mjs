// The Node side of the Rust/Node interop tests (host/store/tests/stores.rs,
// node_and_rust_share_records), shared by redis-interop.mjs,
// mysql-interop.mjs and dynamo-interop.mjs, which run it with their store:
// node <script> URL KEY BODY.
import { createGuard } from '../../src/index.js';

/**
 * Runs one guarded effect answering BODY on the store `open(URL)` gives (URL,
 * KEY and BODY from the command line) and prints { outcome, replayed, status,
 * body } as JSON; closes the store.
 * @param {(url: string) => Promise<{ close(): Promise<void> }>} open
 */
export async function storeInterop(open) {
  const [url, key, body] = process.argv.slice(2);
  const store = await open(url);
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
}
