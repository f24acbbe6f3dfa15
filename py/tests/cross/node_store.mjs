// One operation of the npm package's guard over a PostgreSQL, MySQL, Redis or
// DynamoDB store, for the Python tests that share one schema / database / prefix
// between Python, Node and Rust. Prints one JSON line on stdout.
//
//   node node_store.mjs STORE OP KEY FINGERPRINT [BODY]
//
// STORE: pg:CONNINFO_JSON:SCHEMA (a pg Pool config as JSON), mysql:URL
//        (mysql:mysql://root@127.0.0.1:3306/ik_py_x) or redis:URL:PREFIX
//        (split at the last colon: redis:redis://127.0.0.1:6379/0:ik_py_x, or a
//        cluster: redis:redis+cluster://127.0.0.1:7000:ik_py_x), or
//        dynamodb:URL (dynamodb:dynamodb://127.0.0.1:4567/ik-py-x).
// OP:    run      the effect answers 201 with BODY (application/json)
//        fail     the effect throws: the record stays in flight
//        inspect  the record under KEY
import { createGuard, pgStore, redisStore } from '../../../js/src/index.js';

const [spec, op, key, fingerprint, body = '{}'] = process.argv.slice(2);

async function openStore() {
  if (spec.startsWith('pg:')) {
    const rest = spec.slice(3);
    const cut = rest.lastIndexOf(':');
    return pgStore(JSON.parse(rest.slice(0, cut)), { schema: rest.slice(cut + 1) });
  }
  if (spec.startsWith('mysql:')) {
    // Imported only here: the PostgreSQL and Redis cases need no mysql2.
    const { mysqlStore } = await import('../../../js/src/stores/mysql.js');
    return mysqlStore({ url: spec.slice(6) });
  }
  if (spec.startsWith('redis:')) {
    const rest = spec.slice(6);
    const cut = rest.lastIndexOf(':');
    return redisStore({ url: rest.slice(0, cut), prefix: rest.slice(cut + 1) });
  }
  if (spec.startsWith('dynamodb:')) {
    // Imported only here: the other cases need no @aws-sdk/client-dynamodb.
    const { dynamoStore } = await import('../../../js/src/stores/dynamodb.js');
    return dynamoStore({ url: spec.slice('dynamodb:'.length) });
  }
  throw new Error(`unknown store ${spec}`);
}

const text = (bytes) => (bytes == null ? null : Buffer.from(bytes).toString('utf8'));

const store = await openStore();
try {
  const guard = createGuard({ store });
  const input = { key, fingerprint, tenantId: 'tenant-acme', actionType: 'pix.send' };
  let out;
  if (op === 'run') {
    const r = await guard.run(input, () => ({ status: 201, contentType: 'application/json', body }));
    out = { outcome: r.outcome, status: r.response.status, body: text(r.response.body), replayed: r.replayed, finished: r.finished ?? null };
  } else if (op === 'fail') {
    try {
      const r = await guard.run(input, () => {
        throw new Error('the destination timed out');
      });
      out = { outcome: r.outcome, status: r.response.status, body: text(r.response.body) };
    } catch (e) {
      out = { outcome: 'owned', threw: String(e.message) };
    }
  } else if (op === 'inspect') {
    const r = await guard.inspect(key);
    out = r === null ? { record: null } : { record: { status: r.status, fingerprint: r.fingerprint, ownerToken: r.ownerToken, responseStatus: r.response?.status ?? null, body: text(r.response?.body) } };
  } else {
    throw new Error(`unknown op ${op}`);
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
} finally {
  await store.close();
}
