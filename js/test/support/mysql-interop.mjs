// The Node side of the Rust/Node interop test (the MySQL store shared by Rust
// and Node): node mysql-interop.mjs URL KEY BODY.
// Runs one guarded effect answering BODY on the MySQL store at URL and prints
// { outcome, replayed, status, body } as JSON.
import { createGuard } from '../../src/index.js';
import { mysqlStore } from '../../src/stores/mysql.js';

const [url, key, body] = process.argv.slice(2);
const store = await mysqlStore({ url });
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
