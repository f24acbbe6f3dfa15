// The guard on DynamoDB (a local endpoint: dynalite, see support/dynamo.js)
// through @aws-sdk/client-dynamodb, driven through the core's `flows`
// resource: the shared store suite; the table, its indexes and every item as
// the core writes them (asked of the component, never written out here); list
// and purge across the 16 buckets, page by page; the 400 KB item limit
// (`response-too-large`, nothing sent); the options and their refusals; how
// failures are classified; the race (16 contenders on 16 clients × 1000 keys),
// 16 recoverers on 16 clients over the same stale records, kill trials (an
// owner killed between its effect and its completion, then recovery), and the
// interop script the Rust tests run. Every test has a table of its own and
// deletes it. Unreachable endpoint: fails with CI=true, skipped (with a
// SKIPPED: line) otherwise.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { DeleteTableCommand, DescribeTableCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { IntentkeyError, createGuard, dynamoStore, jsonResponse } from '../src/index.js';
import { dynamoStore as dynamoOnly } from '../src/stores/dynamodb.js';
import { dynamoLayout } from '../src/stores/schema.js';
import {
  DYNAMODB,
  dynamoAvailability,
  dynamoKillTrials,
  effectsFile,
  endpointClient,
  freshTable,
  freshTableName,
  rawItem,
} from './support/dynamo.js';
import { freshStore, storeSuite, witRecord } from './support/store-suite.js';
import { CONTENDERS, KEYS, ownerRace, recoveryRace, storeRows } from './support/race.js';

const { skip } = await dynamoAvailability('dynamodb.test.js');
const run = promisify(execFile);

const T0 = 1_700_000_000;
const A = 'a'.repeat(32);
const B = 'b'.repeat(32);
const claimOf = (key) => ({ key, fingerprint: 'fp', tenantId: 't1', actionType: 'pix.send' });

/** A store from the URL of a fresh table (the store owns its client): { store, place: the table, close }. */
const openStore = freshStore(freshTable, (t) => dynamoStore({ url: t.url }));

/** Runs fn with a fresh table (not made yet: the store makes it), then deletes it. */
async function withTable(fn) {
  const t = await freshTable();
  try {
    return await fn(t);
  } finally {
    await t.drop();
  }
}

/** Runs fn with a store from openStore() and its table, then closes the store and deletes the table. */
async function withStore(fn) {
  const { store, place, close } = await openStore();
  try {
    return await fn({ store, table: place });
  } finally {
    await close();
  }
}

/**
 * A client that sends through `client` and records the action of every
 * command (`sent`); `hook(command)` may change a command first, or answer
 * (or throw) in its place by returning a promise.
 */
function watched(client, hook = () => undefined) {
  const sent = [];
  return {
    sent,
    client: {
      async send(command) {
        sent.push(command.constructor.name.replace(/Command$/, ''));
        const instead = hook(command);
        return instead === undefined ? client.send(command) : instead;
      },
      destroy: () => client.destroy(),
    },
  };
}

/** An error shaped as the SDK's for what DynamoDB answered: `name`, and the HTTP status in $metadata. */
const serviceError = (name, status = 400) => Object.assign(new Error(`${name} (test)`), { name, $fault: 'client', $metadata: { httpStatusCode: status } });

/** The core's item for `record` (its PutItem), as the SDK reads it back: DynamoDB's JSON with bytes for "B". */
function coreItem(table, record) {
  const item = JSON.parse(dynamoLayout.insert(table, record).input).Item;
  for (const v of Object.values(item)) if (typeof v.B === 'string') v.B = new Uint8Array(Buffer.from(v.B, 'base64'));
  return item;
}

/** Deletes table `name` (one a test made through a store of its own). */
async function dropTable(name) {
  const client = endpointClient();
  try {
    await client.send(new DeleteTableCommand({ TableName: name }));
  } finally {
    client.destroy();
  }
}

/** A local port nothing listens on. */
async function closedPort() {
  const server = net.createServer();
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address();
  await new Promise((r) => server.close(r));
  return port;
}

/** Runs fn with the AWS variables set as `vars` (undefined: unset), then restores them. */
async function withAwsEnv(vars, fn) {
  const names = ['AWS_REGION', 'AWS_DEFAULT_REGION', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN'];
  const saved = Object.fromEntries(names.map((n) => [n, process.env[n]]));
  try {
    for (const n of names) {
      if (vars[n] === undefined) delete process.env[n];
      else process.env[n] = vars[n];
    }
    return await fn();
  } finally {
    for (const n of names) {
      if (saved[n] === undefined) delete process.env[n];
      else process.env[n] = saved[n];
    }
  }
}

storeSuite('DynamoDB (dynalite)', { skip, open: openStore });

describe('DynamoDB store', { skip }, () => {
  test('the table is the core’s CreateTable: made on open, once, by 8 stores opening at once; a second open only describes it', async () => {
    await withTable(async (t) => {
      const stores = await Promise.all(Array.from({ length: 8 }, () => dynamoStore({ url: t.url })));
      await Promise.all(stores.map((s) => s.close()));
      const { Table } = await t.client.send(new DescribeTableCommand({ TableName: t.name }));
      const want = JSON.parse(dynamoLayout.createTable(t.name).input);
      assert.equal(Table.TableStatus, 'ACTIVE');
      assert.deepEqual(Table.KeySchema, want.KeySchema);
      const sortBy = (xs, k) => [...xs].sort((a, b) => (a[k] < b[k] ? -1 : 1));
      assert.deepEqual(sortBy(Table.AttributeDefinitions, 'AttributeName'), sortBy(want.AttributeDefinitions, 'AttributeName'));
      const indexes = (xs) => sortBy(xs, 'IndexName').map((i) => ({ IndexName: i.IndexName, KeySchema: i.KeySchema, Projection: i.Projection }));
      assert.deepEqual(indexes(Table.GlobalSecondaryIndexes), indexes(want.GlobalSecondaryIndexes));
      assert.deepEqual(Table.GlobalSecondaryIndexes.map((i) => i.IndexName).sort(), ['by_expiry', 'by_status']);
      assert.equal(Table.BillingModeSummary?.BillingMode ?? want.BillingMode, 'PAY_PER_REQUEST');
      // Open again, on a caller's client: DescribeTable only, and close() leaves the client to its caller.
      const own = endpointClient();
      const w = watched(own);
      const again = await dynamoOnly({ client: w.client, table: t.name });
      assert.deepEqual(w.sent, ['DescribeTable']);
      assert.equal(again.table, t.name);
      await again.close();
      await own.send(new DescribeTableCommand({ TableName: t.name })); // still usable
      own.destroy();
    });
  });

  test('opening waits until the table and both indexes are ACTIVE (DescribeTable polled)', async () => {
    await withTable(async (t) => {
      const own = endpointClient();
      let describes = 0;
      // The first three DescribeTables after the CreateTable see the indexes still being made.
      const w = watched(own, (command) => {
        if (!(command instanceof DescribeTableCommand) || !w.sent.includes('CreateTable')) return undefined;
        describes++;
        if (describes > 3) return undefined;
        return own.send(command).then((out) => ({
          ...out,
          Table: { ...out.Table, GlobalSecondaryIndexes: out.Table.GlobalSecondaryIndexes.map((i) => ({ ...i, IndexStatus: 'CREATING' })) },
        }));
      });
      try {
        const store = await dynamoOnly({ client: w.client, table: t.name });
        assert.deepEqual(w.sent, ['DescribeTable', 'CreateTable', 'DescribeTable', 'DescribeTable', 'DescribeTable', 'DescribeTable']);
        assert.equal(await store.insert(witRecord('ready', A, T0)), true);
      } finally {
        own.destroy();
      }
    });
  });

  test('items are the core’s: the PutItem’s item is stored as it is (bytes for "B"), and read back to the same record', async () => {
    await withStore(async ({ store, table }) => {
      const record = witRecord('item-1', A, T0);
      assert.equal(await store.insert(record), true);
      assert.deepEqual(await rawItem(table.client, table.name, 'item-1'), coreItem(table.name, record));
      const body = new Uint8Array(256).map((_, i) => i);
      const response = { status: 200, contentType: 'application/octet-stream', headers: [['X-A', '1']], body };
      assert.equal(await store.complete({ key: 'item-1', ownerToken: A, response, expiresAt: BigInt(T0 + 60), fast: false }), true);
      const done = witRecord('item-1', A, T0, { status: 'done', response, expiresAt: BigInt(T0 + 60) });
      const raw = await rawItem(table.client, table.name, 'item-1');
      assert.ok(raw.body.B instanceof Uint8Array, 'the body is a binary attribute');
      assert.deepEqual(new Uint8Array(raw.body.B), body);
      assert.deepEqual(raw, coreItem(table.name, done));
      assert.deepEqual(await store.get('item-1'), done);
      // An item intentkey did not write is a failed store error, not a crash.
      await table.client.send(new PutItemCommand({ TableName: table.name, Item: { key: { S: 'junk' }, status: { S: 'in_flight' } } }));
      await assert.rejects(store.get('junk'), (e) => e.payload?.tag === 'failed' && /written by something other than intentkey/.test(e.message));
    });
  });

  test('list and purge across the 16 buckets: oldest first (created_at, then key), at most limit; purge deletes only expired done records; page by page alike', async () => {
    await withStore(async ({ store, table }) => {
      // 48 records: in flight, done expiring soon, done expiring late, needing reconciliation.
      const records = [];
      for (let i = 0; i < 48; i++) {
        const key = `b-${String(i).padStart(2, '0')}`;
        const createdAt = T0 + ((i * 7) % 10); // ties: then by key
        await store.insert(witRecord(key, A, createdAt));
        let r = witRecord(key, A, createdAt);
        if (i % 4 === 1 || i % 4 === 2) {
          const expiresAt = BigInt(i % 4 === 1 ? T0 + 100 + i : T0 + 10_000);
          const response = { status: 201, contentType: 'application/json', headers: [], body: new TextEncoder().encode(`{"i":${i}}`) };
          assert.equal(await store.complete({ key, ownerToken: A, response, expiresAt, fast: false }), true);
          r = { ...r, status: 'done', response, expiresAt };
        } else if (i % 4 === 3) {
          const next = { ...r, status: 'needs-reconciliation', lookups: 4 };
          assert.equal(await store.replace({ expectedToken: A, expectedLookups: 0, record: next }), true);
          r = next;
        }
        records.push(r);
      }
      // Spread over the buckets (each record's index partition, as the core wrote it).
      const partitions = new Set();
      for (const r of records) partitions.add((await rawItem(table.client, table.name, r.key)).list_pk.S);
      assert.ok(partitions.size >= 12, `records in ${partitions.size} partitions`);
      const order = (a, b) => (a.createdAt !== b.createdAt ? (a.createdAt < b.createdAt ? -1 : 1) : a.key < b.key ? -1 : 1);
      const expected = (status) => records.filter((r) => r.status === status).sort(order);
      const check = async (s) => {
        for (const status of ['in-flight', 'done', 'needs-reconciliation']) {
          assert.deepEqual(await s.list(status, 100), expected(status), status);
          assert.deepEqual(await s.list(status, 5), expected(status).slice(0, 5), `${status}, limit 5`);
        }
        assert.deepEqual(await s.list('done', 0), []);
      };
      await check(store);
      // The same through a client on which every Query answers one item a page.
      const paging = endpointClient();
      let queries = 0;
      const w = watched(paging, (command) => {
        if (command.constructor.name === 'QueryCommand') {
          queries++;
          command.input.Limit = 1;
        }
        return undefined;
      });
      try {
        const paged = await dynamoOnly({ client: w.client, table: table.name });
        await check(paged);
        // Each of the 2 × 3 listings sends the core's queries, and each record takes a page of its own.
        const unpaged = 6 * dynamoLayout.list(table.name, 'done', 1).length;
        assert.ok(queries >= unpaged + records.length, `${queries} queries: the pages were followed`);
        // Purge: the done records that expired by `now`, nothing else, page by page too.
        const now = T0 + 100 + 20;
        const expired = records.filter((r) => r.status === 'done' && r.expiresAt <= BigInt(now));
        assert.ok(expired.length > 3);
        assert.equal(Number(await paged.purge(BigInt(T0 + 99))), 0);
        assert.equal(Number(await paged.purge(BigInt(now))), expired.length);
        assert.equal(Number(await paged.purge(BigInt(now))), 0, 'nothing left to purge');
        const left = records.filter((r) => !expired.includes(r));
        for (const status of ['in-flight', 'done', 'needs-reconciliation']) {
          assert.deepEqual(await store.list(status, 100), left.filter((r) => r.status === status).sort(order), status);
        }
        for (const r of expired) assert.equal(await store.get(r.key), undefined);
        // Ten years later: the late done records go; in-flight and needs-reconciliation never do.
        const late = left.filter((r) => r.status === 'done').length;
        assert.equal(Number(await store.purge(BigInt(T0 + 10 * 365 * 86_400))), late);
        assert.equal((await storeRows(store, 100)).length, records.length - expired.length - late);
      } finally {
        paging.destroy();
      }
    });
  });

  test('purge: a record the expiry index still names but that is no longer done and expired (an index lags) is left alone and not counted', async () => {
    await withStore(async ({ store, table }) => {
      assert.equal(await store.insert(witRecord('old', A, T0)), true);
      const response = { status: 200, contentType: 'text/plain', headers: [], body: new Uint8Array([1]) };
      assert.equal(await store.complete({ key: 'old', ownerToken: A, response, expiresAt: BigInt(T0 + 10), fast: false }), true);
      assert.equal(await store.insert(witRecord('held', A, T0)), true);
      const own = endpointClient();
      // Every bucket's first purge page also names `held`, as a lagging index could.
      const lagging = (command) =>
        command.constructor.name === 'QueryCommand' && command.input.IndexName === 'by_expiry' && command.input.ExclusiveStartKey === undefined
          ? own.send(command).then((out) => ({ ...out, Items: [...(out.Items ?? []), { key: { S: 'held' } }] }))
          : undefined;
      const w = watched(own, lagging);
      try {
        const s = await dynamoOnly({ client: w.client, table: table.name });
        const buckets = dynamoLayout.purge(table.name, T0).length;
        assert.equal(Number(await s.purge(BigInt(T0 + 100))), 1);
        assert.equal(w.sent.filter((a) => a === 'DeleteItem').length, buckets + 1, 'each was asked, under its condition');
        assert.equal(await store.get('old'), undefined);
        assert.deepEqual(await store.get('held'), witRecord('held', A, T0));
      } finally {
        own.destroy();
      }
    });
  });

  test('a response over the 400 KB item limit is response-too-large with nothing sent: the record stays in flight, untouched; 300 KB fits', async () => {
    await withTable(async (t) => {
      const own = endpointClient();
      const w = watched(own);
      try {
        const store = await dynamoOnly({ client: w.client, table: t.name });
        const guard = createGuard({ store, now: () => T0 });
        let runs = 0;
        const big = new Uint8Array(401 * 1024).fill(7);
        const effect = (body) => async () => {
          runs++;
          return { status: 200, contentType: 'application/octet-stream', headers: [], body };
        };
        // The claim goes out; the completion cannot fit, so it is never sent.
        const before = w.sent.length;
        await assert.rejects(guard.run(claimOf('too-big'), effect(big)), (e) => {
          assert.ok(e instanceof IntentkeyError, String(e));
          assert.deepEqual([e.code, e.field], ['response-too-large', 'response']);
          assert.match(e.message, /over DynamoDB's item limit/);
          return true;
        });
        assert.equal(runs, 1);
        assert.deepEqual(w.sent.slice(before), ['PutItem'], 'no UpdateItem was sent');
        const held = await rawItem(own, t.name, 'too-big');
        assert.equal(held.status.S, 'in_flight');
        assert.equal(held.response, undefined);
        assert.equal(held.body, undefined);
        assert.deepEqual(held, coreItem(t.name, { ...(await store.get('too-big')) }), 'the item is the claim as written');
        // A retry is 409 (in flight), never a second effect.
        const again = await guard.run(claimOf('too-big'), effect(big));
        assert.deepEqual([again.outcome, again.response.status, runs], ['in-flight', 409, 1]);
        // A record that cannot fit is refused at insert and replace too: nothing sent, nothing written.
        const bigResponse = { status: 200, contentType: 'application/octet-stream', headers: [], body: big };
        const tooLarge = (e) => e instanceof IntentkeyError && e.code === 'response-too-large';
        const sentBefore = w.sent.length;
        await assert.rejects(store.insert(witRecord('big-insert', A, T0, { status: 'done', response: bigResponse, expiresAt: BigInt(T0 + 60) })), tooLarge);
        const heldRecord = await store.get('too-big');
        await assert.rejects(
          store.replace({ expectedToken: heldRecord.ownerToken, expectedLookups: 0, record: { ...heldRecord, status: 'done', response: bigResponse, expiresAt: BigInt(T0 + 60) } }),
          tooLarge,
        );
        assert.deepEqual(w.sent.slice(sentBefore), ['GetItem'], 'only the read went out');
        assert.equal(await store.get('big-insert'), undefined);
        assert.deepEqual(await rawItem(own, t.name, 'too-big'), held);
        // 300 KB fits: stored and replayed byte for byte.
        const fits = new Uint8Array(300 * 1024).map((_, i) => (i * 31) & 0xff);
        const ok = await guard.run(claimOf('fits'), effect(fits));
        assert.deepEqual([ok.outcome, ok.finished], ['owned', 'stored']);
        const replay = await guard.run(claimOf('fits'), effect(fits));
        assert.deepEqual([replay.outcome, replay.replayed], ['done', true]);
        assert.deepEqual(replay.response.body, fits);
        assert.equal(runs, 2);
      } finally {
        own.destroy();
      }
    });
  });

  test('options: an unknown option, in the object or the URL’s query, is refused by name; url, client, table and region are checked', async () => {
    const refusedAs = (field, pattern) => (e) => {
      assert.ok(e instanceof IntentkeyError, String(e));
      assert.deepEqual([e.code, e.field], ['invalid-argument', field]);
      if (pattern) assert.match(e.message, pattern);
      return true;
    };
    const url = `${DYNAMODB}/${freshTableName()}`;
    await assert.rejects(dynamoStore({ url, tabel: 'x' }), refusedAs('tabel', /dynamoStore: `tabel` is not an option; the options are url, client, table/));
    await assert.rejects(dynamoStore({ url, region: 'eu-west-1' }), refusedAs('region', /not an option/));
    await assert.rejects(dynamoStore({ url: `${url}?regoin=eu-west-1` }), refusedAs('regoin', /URL's query is not an option; the URL takes region/));
    await assert.rejects(dynamoStore({ url: `${url}?region=us-east-1&endpoint=x` }), refusedAs('endpoint'));
    await assert.rejects(dynamoStore({ url: `${url}?region=` }), refusedAs('region', /empty/));
    await assert.rejects(dynamoStore({ url: `${url}?region=%E0%A4%A` }), refusedAs('url', /percent-encoded/));
    await assert.rejects(dynamoStore({}), refusedAs('url', /either \{ url \} or \{ client, table \}/));
    await assert.rejects(dynamoStore(), refusedAs('url'));
    await assert.rejects(dynamoStore(null), refusedAs('options'));
    await assert.rejects(dynamoStore({ url, client: endpointClient() }), refusedAs('client', /not both/));
    await assert.rejects(dynamoStore({ url, table: 'other' }), refusedAs('table', /goes in the URL/));
    await assert.rejects(dynamoStore({ url: 42 }), refusedAs('url'));
    await assert.rejects(dynamoStore({ url: 'redis://127.0.0.1:6379/x' }), refusedAs('url', /must start with dynamodb:\/\//));
    await assert.rejects(dynamoStore({ url: 'dynamodb:///table' }), refusedAs('url', /names no endpoint/));
    await assert.rejects(dynamoStore({ url: 'dynamodb://127.0.0.1:bad/table' }), refusedAs('url', /HOST:PORT/));
    await assert.rejects(dynamoStore({ url: 'dynamodb://AKIA:hunter2-secret@127.0.0.1:4567/table' }), (e) => {
      refusedAs('url', /holds credentials/)(e);
      assert.ok(!JSON.stringify({ m: e.message, s: e.stack }).includes('hunter2'));
      return true;
    });
    await assert.rejects(dynamoStore({ client: {} }), refusedAs('client', /DynamoDBClient/));
    await assert.rejects(dynamoStore({ client: endpointClient(), table: 7 }), refusedAs('table'));
    // A table name DynamoDB refuses: the core's check, before anything is sent.
    await assert.rejects(dynamoStore({ client: endpointClient(), table: '' }), refusedAs('table'));
    for (const bad of ['ab', 'has space', 'a/b/c', 'ünïcode', 'x'.repeat(256)]) {
      await assert.rejects(dynamoStore({ url: `${DYNAMODB}/${bad}` }), refusedAs('table', /must be 3 to 255 of a-z, A-Z, 0-9, _, \. and -/), bad);
      const w = watched(endpointClient());
      await assert.rejects(dynamoStore({ client: w.client, table: bad }), refusedAs('table'), bad);
      assert.deepEqual(w.sent, [], 'nothing sent');
      w.client.destroy();
    }
    // AWS: the region from the URL or the AWS variables, else an error naming it; credentials from the variables.
    await withAwsEnv({}, async () => {
      await assert.rejects(dynamoStore({ url: 'dynamodb://aws/ik-table' }), refusedAs('region', /AWS_REGION/));
      await assert.rejects(dynamoStore({ url: 'dynamodb://aws/ik-table?region=eu-west-1' }), refusedAs('credentials', /AWS_ACCESS_KEY_ID/));
    });
    await withAwsEnv({ AWS_DEFAULT_REGION: 'eu-west-1' }, async () => {
      await assert.rejects(dynamoStore({ url: 'dynamodb://aws/ik-table' }), refusedAs('credentials'));
    });
  });

  test('the default table is the core’s; a local endpoint needs no AWS variables, and uses them when set (never in a message)', async () => {
    const secret = 'hunter2-secret';
    await withAwsEnv({ AWS_REGION: 'eu-west-1', AWS_ACCESS_KEY_ID: 'AKIATEST', AWS_SECRET_ACCESS_KEY: secret, AWS_SESSION_TOKEN: 'tok' }, async () => {
      const port = await closedPort();
      await assert.rejects(dynamoStore({ url: `dynamodb://127.0.0.1:${port}` }), (e) => {
        assert.ok(e instanceof IntentkeyError, String(e));
        assert.equal(e.code, 'store-unavailable');
        assert.match(e.message, /DescribeTable: no answer/);
        assert.ok(!JSON.stringify({ m: e.message, s: e.stack, c: String(e.cause?.message) }).includes(secret));
        return true;
      });
      const store = await dynamoStore({ url: `${DYNAMODB}/${freshTableName()}` });
      try {
        assert.equal(await store.client.config.region(), 'eu-west-1');
        assert.equal((await store.client.config.credentials()).secretAccessKey, secret);
      } finally {
        await store.close();
        await dropTable(store.table);
      }
    });
    await withAwsEnv({}, async () => {
      const own = endpointClient();
      const w = watched(own, (command) => {
        // No table is made: the default table's name is what the store asks for.
        if (command instanceof DescribeTableCommand) {
          return Promise.resolve({ Table: { TableName: command.input.TableName, TableStatus: 'ACTIVE', GlobalSecondaryIndexes: [{ IndexStatus: 'ACTIVE' }, { IndexStatus: 'ACTIVE' }] } });
        }
        return undefined;
      });
      const store = await dynamoOnly({ client: w.client });
      assert.equal(store.table, dynamoLayout.defaultTable());
      const local = await dynamoStore({ url: `${DYNAMODB}/${freshTableName()}` });
      assert.equal(await local.client.config.region(), 'us-east-1');
      await local.close();
      await dropTable(local.table);
      own.destroy();
    });
  });

  test('failures: by the core’s table of error names (throttling retryable, the rest failed), a 5xx or no answer retryable; a deleted table is store-failed', async () => {
    await withStore(async ({ store, table }) => {
      const own = endpointClient();
      let fail;
      const w = watched(own, (command) => (command instanceof DescribeTableCommand || fail === undefined ? undefined : Promise.reject(fail)));
      try {
        const s = await dynamoOnly({ client: w.client, table: table.name });
        const cases = [
          [serviceError('ThrottlingException'), 'unavailable', /PutItem: ThrottlingException/],
          [serviceError('ProvisionedThroughputExceededException'), 'unavailable', /ProvisionedThroughputExceededException/],
          [serviceError('InternalServerError', 500), 'unavailable', /InternalServerError/],
          [serviceError('BadGateway', 502), 'unavailable', /PutItem: BadGateway/],
          [serviceError('AccessDeniedException'), 'failed', /PutItem: AccessDeniedException/],
          [serviceError('ValidationException'), 'failed', /ValidationException/],
          [Object.assign(new Error('socket hang up'), { code: 'ECONNRESET', $metadata: { attempts: 3 } }), 'unavailable', /PutItem: no answer: socket hang up/],
          [Object.assign(new Error('timed out'), { name: 'TimeoutError' }), 'unavailable', /no answer: timed out/],
          [new TypeError('a bug on this side'), 'failed', /PutItem: a bug on this side/],
        ];
        for (const [error, tag, message] of cases) {
          fail = error;
          await assert.rejects(s.insert(witRecord('f-1', A, T0)), (e) => {
            assert.deepEqual([e.payload?.tag, e.cause], [tag, error], error.name);
            assert.match(e.message, message);
            return true;
          });
          const code = tag === 'unavailable' ? 'store-unavailable' : 'store-failed';
          await assert.rejects(createGuard({ store: s }).run(claimOf('f-2'), async () => jsonResponse(200, {})), (e) => e.code === code);
        }
        // A failed condition is "not written", never an error.
        fail = serviceError('ConditionalCheckFailedException');
        assert.equal(await s.insert(witRecord('f-3', A, T0)), false);
        assert.equal(await s.release({ key: 'f-3', ownerToken: A }), false);
      } finally {
        own.destroy();
      }
      // The table deleted under a store: ResourceNotFoundException, store-failed.
      assert.equal(await store.insert(witRecord('gone-1', A, T0)), true);
      await table.drop();
      await assert.rejects(store.insert(witRecord('gone-2', A, T0)), (e) => e.payload?.tag === 'failed' && /ResourceNotFoundException/.test(e.message));
      await assert.rejects(createGuard({ store }).run(claimOf('gone-3'), async () => jsonResponse(200, {})), (e) => e.code === 'store-failed');
    });
  });

  test('a duplicate key is never an error: insert answers false; 16 concurrent runs of one key on 16 stores give one owner', async () => {
    await withStore(async ({ store, table }) => {
      assert.equal(await store.insert(witRecord('dup', A, 1)), true);
      assert.equal(await store.insert(witRecord('dup', B, 2)), false);
      assert.equal((await store.get('dup')).ownerToken, A);
      // Keys compare exactly: case and trailing spaces make other keys.
      for (const key of ['Dup', 'DUP', 'düp', 'dup ']) assert.equal(await store.insert(witRecord(key, B, 3)), true, key);
      const stores = await Promise.all(Array.from({ length: 16 }, () => dynamoStore({ url: table.url })));
      try {
        let runs = 0;
        const results = await Promise.all(
          stores.map((s) =>
            createGuard({ store: s }).run(claimOf('one'), async () => {
              runs++;
              await new Promise((r) => setTimeout(r, 50));
              return jsonResponse(201, {});
            }),
          ),
        );
        assert.equal(runs, 1);
        assert.equal(results.filter((r) => r.outcome === 'owned').length, 1);
        assert.ok(results.every((r) => ['owned', 'in-flight', 'done'].includes(r.outcome)), JSON.stringify(results.map((r) => r.outcome)));
      } finally {
        await Promise.all(stores.map((s) => s.close()));
      }
    });
  });

  test('the README’s DynamoDB example runs as written and prints what it says', async () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const heading = '### DynamoDB';
    assert.ok(readme.includes(heading), `the README has no section ${heading}`);
    const code = /```js\n([\s\S]*?)```/.exec(readme.slice(readme.indexOf(heading)))[1];
    const expected = /\/\/ -> (.*)/.exec(code)[1];
    await withTable(async (t) => {
      const { stdout } = await run(process.execPath, ['--input-type=module', '-e', code], {
        cwd: fileURLToPath(new URL('..', import.meta.url)),
        env: { ...process.env, DYNAMODB_STORE_URL: t.url },
      });
      assert.equal(stdout.trim(), expected);
    });
  });

  test('the Node side of the Rust/Node interop (support/dynamo-interop.mjs): owned, then replayed', async () => {
    await withTable(async (t) => {
      const script = fileURLToPath(new URL('./support/dynamo-interop.mjs', import.meta.url));
      const once = async (key, body) => JSON.parse((await run(process.execPath, [script, t.url, key, body])).stdout);
      assert.deepEqual(await once('interop-1', 'from node'), { outcome: 'owned', replayed: false, status: 201, body: 'from node' });
      assert.deepEqual(await once('interop-1', 'again'), { outcome: 'done', replayed: true, status: 201, body: 'from node' });
      // Held in flight by another process: a 409 there, and the record stays its owner's.
      const store = await dynamoStore({ url: t.url });
      try {
        assert.equal(await store.insert(witRecord('held', A, Math.floor(Date.now() / 1000))), true);
        const busy = await once('held', 'node');
        assert.deepEqual([busy.outcome, busy.status], ['in-flight', 409]);
        assert.equal((await store.get('held')).ownerToken, A);
      } finally {
        await store.close();
      }
    });
  });
});

/**
 * Runs fn with a fresh table, a store on it (the test's own) and the race's
 * rig: CONTENDERS clients of their own (each its own connections), a store on
 * each, effects recorded in memory as each contender's effect runs.
 */
async function withRace(fn) {
  await withStore(async ({ store, table }) => {
    const effects = [];
    const rig = {
      connect: () => {
        const client = endpointClient();
        return { client, end: async () => client.destroy() };
      },
      storeOn: (c) => dynamoStore({ client: c.client, table: table.name }),
      recordEffect: async (c, key, who) => {
        effects.push({ key, contender: who });
        // The destination call takes a moment: the others catch up and contend for the next keys.
        await new Promise((resolve) => setTimeout(resolve, 2));
      },
      tables: async () => ({ rows: await storeRows(store, KEYS * 2), effects }),
    };
    return fn({ store, rig });
  });
}

describe(`race on DynamoDB: ${CONTENDERS} contenders × ${KEYS} keys`, { skip }, () => {
  test(`${CONTENDERS} clients of their own: exactly one owner per key, exactly ${KEYS} records`, { timeout: 300_000 }, async (t) => {
    await withRace(async ({ rig }) => {
      const started = Date.now();
      const { summary, rows } = await ownerRace(rig);
      t.diagnostic(`${summary}; ${((Date.now() - started) / 1000).toFixed(1)} s`);
      assert.equal(rows.length, KEYS);
    });
  });
});

describe(`recovery race on DynamoDB: ${CONTENDERS} recoverers on ${CONTENDERS} clients`, { skip }, () => {
  test(`${CONTENDERS} clients recover the same 200 stale records: exactly one re-execution each`, { timeout: 300_000 }, async (t) => {
    await withRace(async ({ store, rig }) => {
      const started = Date.now();
      t.diagnostic(`${await recoveryRace(rig, store)}; ${((Date.now() - started) / 1000).toFixed(1)} s`);
    });
  });
});

const TRIALS = Number(process.env.IK_DYNAMO_KILL_TRIALS ?? 60);

describe(`kill trials on DynamoDB: ${TRIALS} owners killed at random moments, then recovery`, { skip }, () => {
  test('an owner killed between its effect and its completion: the record stays in flight (409), recovery settles it, never a second effect', { timeout: 300_000 }, async (t) => {
    await withStore(async ({ store, table }) => {
      const effects = effectsFile();
      try {
        await dynamoKillTrials(t, { trials: TRIALS, table, store, effects });
        assert.equal(effects.lines().length, TRIALS);
      } finally {
        effects.drop();
      }
    });
  });
});
