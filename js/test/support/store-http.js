// HTTP on a real store (PostgreSQL, MySQL): intentkey/express on node:http
// (serveNodeHttp) over the store, the same round trip for each, asked of the
// store's own tables where the test must see inside.
import assert from 'node:assert/strict';
import { createEndpoint } from '../../src/index.js';
import { idempotency } from '../../src/adapters/express.js';
import { BINARY, SECRET, T, httpClient, newState, serveNodeHttp } from './adapter-suite.js';

/**
 * Owned, then replayed byte for byte (a binary body: in response_body_bytes,
 * NULL in the legacy text column), the core's 422 and 400, a 409 while the
 * owner is held in flight, a 503 released and run again.
 * @param {{ store: any, rows: (sql: string) => Promise<object[]> }} o the store,
 *   and the rows of a query on its tables
 */
export async function httpRoundTrip({ store, rows }) {
  const state = newState();
  const guarded = idempotency({ secret: SECRET, store, now: () => T, tenant: 'tenant-1', onError: () => {} });
  const server = await serveNodeHttp(guarded, state, { errorStatus: 599 });
  const core = createEndpoint({ secret: SECRET });
  const send = (key, body) =>
    httpClient(server.port, { headers: ['content-type', 'application/json', ...(key ? ['idempotency-key', `"${key}"`] : [])], body });
  try {
    const first = await send('http-1', '{"mode":"binary"}');
    assert.deepEqual(first.body, BINARY);
    const again = await send('http-1', '{ "mode" : "binary" }');
    assert.deepEqual([again.status, again.header('idempotent-replayed'), again.header('location')], [200, 'true', '/files/1']);
    assert.deepEqual(again.body, BINARY);
    const conflict = await send('http-1', '{"mode":"other"}');
    assert.equal(conflict.status, 422);
    assert.deepEqual(conflict.body, core.answer('payload-conflict', T).body);
    const missing = await send(undefined, '{}');
    assert.equal(missing.status, 400);
    let open;
    state.gate = new Promise((r) => {
      open = r;
    });
    const slow = send('http-2', '{}');
    while ((await rows("SELECT 1 FROM intentkey_records WHERE status = 'in_flight'")).length === 0) {
      await new Promise((r) => setTimeout(r, 2));
    }
    const busy = await send('http-2', '{}');
    assert.deepEqual([busy.status, busy.header('retry-after')], [409, '1']);
    open();
    assert.equal((await slow).status, 201);
    state.gate = null;
    state.unavailable = 1;
    assert.equal((await send('http-3', '{"mode":"unavailable"}')).status, 503);
    assert.equal((await send('http-3', '{"mode":"unavailable"}')).status, 201);
    assert.equal(state.runs, 4);
    const row = (await rows('SELECT response_body, response_body_bytes FROM intentkey_records WHERE response_status = 200'))[0];
    assert.equal(row.response_body, null);
    assert.deepEqual(new Uint8Array(row.response_body_bytes), BINARY);
  } finally {
    await server.close();
  }
}
