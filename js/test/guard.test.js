// The guard on the in-process stores: memory and better-sqlite3 (a fresh file
// per test), both plugged into the component's `store` import. The same suite
// runs on PostgreSQL in pg.test.js. Then what only synchronous stores have (the
// import itself, recoverSync over the gateway import) and the SQLite schema.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { T0, bytes, claimOf, clock, storeSuite, text } from './support/store-suite.js';
import {
  IntentkeyError,
  IntentkeyTrapError,
  createGuard,
  createKeyer,
  jsonResponse,
  memoryStore,
  sqliteStore,
} from '../src/index.js';
import { internal } from '../src/node-core.js';
import { coreSchema } from '../src/stores/schema.js';

storeSuite('memory', {
  async open() {
    return { store: memoryStore(), close: async () => {} };
  },
});

function tempDb() {
  const dir = mkdtempSync(join(tmpdir(), 'intentkey-sqlite-'));
  return { path: join(dir, 'records.db'), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

storeSuite('better-sqlite3', {
  async open() {
    const { path, remove } = tempDb();
    const store = sqliteStore(path);
    return {
      store,
      async close() {
        store.close();
        remove();
      },
    };
  },
});

const failing = (message) => async () => {
  throw new Error(message);
};

for (const [label, open] of [
  ['memory', () => ({ store: memoryStore(), close() {} })],
  [
    'better-sqlite3',
    () => {
      const { path, remove } = tempDb();
      const store = sqliteStore(path);
      return {
        store,
        close() {
          store.close();
          remove();
        },
      };
    },
  ],
]) {
  describe(`synchronous store ${label}: the component's store and gateway imports`, () => {
    const it = (name, fn) =>
      test(name, async () => {
        const { store, close } = open();
        try {
          await fn(store);
        } finally {
          close();
        }
      });

    it('run() goes through the store import: the component calls each operation, from inside the guest', async (store) => {
      const calls = [];
      const spied = { kind: 'spied', synchronous: true };
      for (const op of ['insert', 'get', 'complete', 'replace', 'release', 'list', 'purge']) {
        spied[op] = (...args) => {
          const stack = new Error().stack;
          calls.push([op, /wasm/.test(stack)]);
          return store[op](...args);
        };
      }
      const guard = createGuard({ store: spied, now: clock().now });
      await guard.run(claimOf('imp-1'), async () => jsonResponse(201, {}));
      await guard.run(claimOf('imp-1'), failing('must not run'));
      await guard.run(claimOf('imp-2'), async () => jsonResponse(429, {}));
      assert.deepEqual(calls, [
        ['insert', true],
        ['complete', true],
        ['insert', true],
        ['get', true],
        ['insert', true],
        ['release', true],
      ]);
    });

    it('recoverSync: the look-up goes through the gateway import; unknown never runs the effect', async (store) => {
      const c = clock();
      const guard = createGuard({ store, now: c.now, staleAfterSeconds: 60 });
      await assert.rejects(guard.run(claimOf('rs-1'), failing('lost')));
      let asked = 0;
      let ran = 0;
      const effect = () => {
        ran++;
        return jsonResponse(201, { again: true });
      };
      const lookup = (key) => {
        asked++;
        assert.match(new Error().stack, /wasm/, 'asked from inside the guest');
        assert.equal(key, 'rs-1');
        return 'unknown';
      };
      assert.deepEqual(guard.recoverSync({ key: 'rs-1', lookup, readYourWrites: true, effect }), {
        outcome: 'not-due',
        key: 'rs-1',
        dueAt: T0 + 60,
      });
      c.t += 60;
      const r = guard.recoverSync({ key: 'rs-1', lookup, readYourWrites: true, effect });
      assert.deepEqual(r, { outcome: 'applied', key: 'rs-1', action: 'check-later', lookups: 1, nextLookupAt: c.t + 60 });
      assert.deepEqual([asked, ran], [1, 0]);
      // A throwing look-up could not tell: unknown.
      c.t += 60;
      const thrown = guard.recoverSync({ key: 'rs-1', lookup: () => {
        throw new Error('timeout');
      } });
      assert.equal(thrown.action, 'check-later');
      // Absent from a read-your-writes destination: taken over and re-run synchronously, same key.
      c.t += 120;
      const again = guard.recoverSync({ key: 'rs-1', lookup: () => 'absent', readYourWrites: true, effect });
      assert.deepEqual([again.outcome, again.action, again.finished], ['applied', 're-execute', 'stored']);
      assert.deepEqual(again.response, jsonResponse(201, { again: true }));
      assert.equal(ran, 1);
      assert.equal((await guard.run(claimOf('rs-1'), failing('must not run'))).outcome, 'done');
    });

    it('recoverSync refuses what it cannot do synchronously, and says what it did', async (store) => {
      const c = clock();
      const guard = createGuard({ store, now: c.now, staleAfterSeconds: 0 });
      await assert.rejects(guard.run(claimOf('rs-2'), failing('lost')));
      assert.throws(
        () => guard.recoverSync({ key: 'rs-2', lookup: async () => 'absent' }),
        /returned a promise; it was counted as unknown/,
      );
      assert.equal((await guard.inspect('rs-2')).lookups, 1);
      c.t += 60;
      assert.throws(
        () => guard.recoverSync({ key: 'rs-2', lookup: () => 'absent', readYourWrites: true, effect: async () => jsonResponse(200, {}) }),
        /effect returned a promise/,
      );
      const record = await guard.inspect('rs-2');
      assert.equal(record.status, 'in_flight', 'an effect whose outcome is unknown leaves the record in flight');
      assert.equal(record.lookups, 0, 'taken over by the recovery');
    });
  });
}

describe('run flows are kept and started again (rerun)', () => {
  test('40 runs at once on two stores (more than the 16 kept), then their replays: each answers its own key, effect and record', async () => {
    const stores = [memoryStore(), memoryStore()];
    const guards = stores.map((store) => createGuard({ store }));
    const ran = new Map();
    const effectOf = (key) => async () => {
      ran.set(key, (ran.get(key) ?? 0) + 1);
      await new Promise((r) => setTimeout(r, 1 + (key.length % 3)));
      return jsonResponse(201, { key });
    };
    const keys = Array.from({ length: 40 }, (_, i) => `rerun-${i}`);
    const guardOf = (i) => guards[i % 2];
    const firsts = await Promise.all(keys.map((key, i) => guardOf(i).run(claimOf(key), effectOf(key))));
    firsts.forEach((r, i) => {
      assert.equal(r.outcome, 'owned', keys[i]);
      assert.deepEqual(JSON.parse(text(r.response.body)), { key: keys[i] });
    });
    for (let round = 0; round < 3; round++) {
      const replays = await Promise.all(keys.map((key, i) => guardOf(i).run(claimOf(key), effectOf(key))));
      replays.forEach((r, i) => {
        assert.equal(r.outcome, 'done', keys[i]);
        assert.equal(r.replayed, true);
        assert.deepEqual(JSON.parse(text(r.response.body)), { key: keys[i] });
      });
    }
    // The same key on the other store is a first run there: nothing of the kept flows leaks across.
    const other = await guards[1].run(claimOf('rerun-0'), effectOf('rerun-0'));
    assert.equal(other.outcome, 'owned');
    const conflict = await guards[0].run(claimOf('rerun-0', 'fp-b'), effectOf('rerun-0'));
    assert.equal(conflict.outcome, 'payload-conflict');
    assert.deepEqual([...ran.values()], [...keys.map((k) => (k === 'rerun-0' ? 2 : 1))]);
    for (const [i, store] of stores.entries()) {
      assert.equal(store.count('done').count, i === 1 ? 21 : 20);
      assert.equal(store.count('in-flight').count, 0);
    }
  });
});

describe('the imports serve only what is active', () => {
  test('no store active: the store import fails loudly (a bug in the package), never answers', () => {
    const attempt = { key: 'x', fingerprint: 'f', tenantId: 't', actionType: 'a' };
    assert.throws(
      () => internal.driving(null, null, (g) => g.claim(attempt, 0n)),
      (e) => e instanceof IntentkeyTrapError && /no store was active/.test(e.message),
    );
  });

  test('no look-up active: the gateway import fails loudly, never answers unknown', () => {
    const store = memoryStore();
    const guard = createGuard({ store, now: () => 100, staleAfterSeconds: 0 });
    return assert.rejects(guard.run(claimOf('g-1'), failing('lost'))).then(() => {
      const rules = { staleAfter: 0n, readYourWrites: false, ttlSeconds: 60n };
      assert.throws(
        () => internal.driving(store, null, (g) => g.recover('g-1', 200n, rules)),
        (e) => e instanceof IntentkeyTrapError && /no synchronous look-up/.test(e.message),
      );
      return guard.inspect('g-1').then((r) => assert.equal(r.lookups, 0, 'nothing was written'));
    });
  });

  test('a store failure is the core’s store-unavailable or store-failed, with the store’s error as the cause', async () => {
    const busy = Object.assign(new Error('database is locked'), { payload: { tag: 'unavailable', val: 'sqlite: busy' } });
    const store = {
      kind: 'flaky',
      synchronous: true,
      insert() {
        throw busy;
      },
      get: () => undefined,
      complete: () => true,
      replace: () => true,
      release: () => true,
      list: () => [],
      purge: () => 0,
    };
    const guard = createGuard({ store });
    await assert.rejects(guard.run(claimOf('f-1'), failing('must not run')), (e) => {
      assert.ok(e instanceof IntentkeyError);
      assert.equal(e.code, 'store-unavailable');
      assert.equal(e.message, 'sqlite: busy');
      assert.equal(e.cause, busy);
      return true;
    });
    store.insert = () => {
      throw new Error('disk I/O error');
    };
    await assert.rejects(guard.run(claimOf('f-1'), failing('must not run')), (e) => e.code === 'store-failed');
    // A synchronous store that answers a promise is refused, not read as "inserted".
    store.insert = async () => true;
    await assert.rejects(guard.run(claimOf('f-1'), failing('must not run')), (e) => e.code === 'store-failed' && /promise/.test(e.message));
    // The key API still works: none of this trapped.
    assert.match(createKeyer({ secret: '11'.repeat(32) }).intentKey('t', 'i'), /^[0-9a-f]{64}$/);
  });

  test('an asynchronous store of the user’s gets an AbortSignal with each operation, aborted when the store deadline passes', async () => {
    const signals = [];
    const store = {
      kind: 'slow',
      insert(record, signal) {
        signals.push(signal);
        return new Promise((resolve) => setTimeout(() => resolve(true), 300));
      },
      get: async () => undefined,
      complete: async () => true,
      replace: async () => true,
      release: async () => true,
      list: async () => [],
      purge: async () => 0,
    };
    const guard = createGuard({ store, storeDeadlineMs: 100 });
    await assert.rejects(guard.run(claimOf('slow-1'), failing('must not run')), (e) => e.code === 'store-unavailable');
    assert.ok(signals[0] instanceof AbortSignal, 'a real AbortSignal');
    assert.equal(signals[0].aborted, true, 'aborted at the deadline');
  });

  test('a closed SQLite database is a store error, not a trap', async () => {
    const { path, remove } = tempDb();
    try {
      const store = sqliteStore(path);
      const guard = createGuard({ store });
      store.close();
      await assert.rejects(guard.run(claimOf('closed'), failing('must not run')), (e) => e instanceof IntentkeyError && e.code === 'store-failed');
    } finally {
      remove();
    }
  });

  test('bodies cross the boundary byte for byte: text given as a string comes back as its UTF-8 bytes, binary as is', async () => {
    const guard = createGuard({ store: memoryStore() });
    for (const body of ['\ufeff{"a":1}', 'ção 🙂 \u2028', 'x'.repeat(10_000), `${'x'.repeat(100)}ç`, 'ç🙂'.repeat(3000), '']) {
      const key = `b-${body.length}-${body.charCodeAt(0)}`;
      const answer = { status: 200, contentType: 'text/plain; charset=utf-8', headers: [], body };
      const first = await guard.run(claimOf(key), async () => answer);
      assert.deepEqual(first.response, { ...answer, body: bytes(body) });
      const again = await guard.run(claimOf(key), failing('must not run'));
      assert.deepEqual(again.response, { ...answer, body: bytes(body) });
      assert.equal(text(again.response.body), body);
    }
    // Binary (not UTF-8), from a Uint8Array, a Buffer or an ArrayBuffer: replayed byte for byte, as a plain Uint8Array.
    const binary = new Uint8Array(1000).map((_, i) => (i * 7919) % 256);
    for (const [label, body] of [
      ['u8', binary],
      ['buffer', Buffer.from(binary)],
      ['arraybuffer', binary.slice().buffer],
    ]) {
      const key = `bin-${label}`;
      await guard.run(claimOf(key), async () => ({ status: 200, contentType: 'application/octet-stream', body }));
      const again = await guard.run(claimOf(key), failing('must not run'));
      assert.equal(Object.getPrototypeOf(again.response.body), Uint8Array.prototype);
      assert.deepEqual(again.response.body, binary);
    }
  });
});

describe('better-sqlite3 store: schema', () => {
  const withDb = async (fn) => {
    const { path, remove } = tempDb();
    try {
      return await fn(path);
    } finally {
      remove();
    }
  };
  const COLUMNS = [
    ['key', 'TEXT', 0, 1],
    ['fingerprint', 'TEXT', 1, 0],
    ['tenant_id', 'TEXT', 1, 0],
    ['action_type', 'TEXT', 1, 0],
    ['status', 'TEXT', 1, 0],
    ['response_status', 'INTEGER', 0, 0],
    ['response_content_type', 'TEXT', 0, 0],
    ['response_body', 'TEXT', 0, 0],
    ['created_at', 'BIGINT', 1, 0],
    ['expires_at', 'BIGINT', 0, 0],
    ['lookups', 'INTEGER', 1, 0],
    ['next_lookup_at', 'BIGINT', 0, 0],
    ['owner_token', 'TEXT', 1, 0],
    ['response_headers', 'TEXT', 0, 0],
    ['response_body_bytes', 'BYTEA', 0, 0],
  ];

  test('version 3, made only from the component’s DDL, in PRAGMA user_version; WAL, synchronous=FULL, busy timeout', () =>
    withDb((path) => {
      const { migrations, schemaVersion } = coreSchema();
      assert.equal(schemaVersion, 3);
      assert.deepEqual(migrations.map((m) => m.version), [1, 2, 3]);
      const store = sqliteStore(path, { busyTimeoutMs: 1234 });
      const { db } = store;
      assert.equal(db.pragma('user_version', { simple: true }), 3);
      assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
      assert.equal(db.pragma('synchronous', { simple: true }), 2); // FULL
      assert.equal(db.pragma('busy_timeout', { simple: true }), 1234);
      assert.deepEqual(
        db.prepare('PRAGMA table_info(intentkey_records)').all().map((c) => [c.name, c.type, c.notnull, c.pk]),
        COLUMNS,
      );
      // The table is exactly what the component's statements make: apply them to a
      // fresh database by hand and compare sqlite_master.
      const reference = new Database(':memory:');
      for (const m of migrations) for (const s of m.statements) reference.exec(s);
      const shape = (d) =>
        d.prepare("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name").all();
      assert.deepEqual(shape(db), shape(reference));
      assert.deepEqual(shape(db).map((r) => r.name), [
        'intentkey_records',
        'intentkey_records_expiry',
        'intentkey_records_status',
      ]);
      reference.close();
      // The CHECK constraint is the schema's.
      assert.throws(() =>
        db.prepare("INSERT INTO intentkey_records (key, fingerprint, tenant_id, action_type, status, created_at) VALUES ('x','f','t','a','bogus',0)").run(),
      );
      store.close();
      // Opening again changes nothing; an open Database is kept open by close().
      const again = new Database(path);
      const second = sqliteStore(again);
      assert.equal(again.pragma('user_version', { simple: true }), 3);
      second.close();
      assert.equal(again.open, true);
      again.close();
    }));

  test('a newer schema version is refused', () =>
    withDb((path) => {
      const db = new Database(path);
      db.pragma('user_version = 4');
      db.close();
      assert.throws(() => sqliteStore(path), /schema version 4; this package knows version 3/);
    }));

  test('a version 1 database (the earlier schema, with records) is migrated to version 3 and served', () =>
    withDb(async (path) => {
      const { migrations } = coreSchema();
      const db = new Database(path);
      for (const s of migrations[0].statements) db.exec(s);
      db.exec(`INSERT INTO intentkey_records (key, fingerprint, tenant_id, action_type, status, response_status,
        response_content_type, response_body, created_at, expires_at, lookups)
        VALUES ('from-v1', 'fp', 't', 'a', 'done', 201, 'application/json', '{"id":1}', 100, 100000, 0),
               ('stuck-v1', 'fp', 't', 'a', 'in_flight', NULL, NULL, NULL, 100, NULL, 0);
        PRAGMA user_version = 1;`);
      db.close();
      const store = sqliteStore(path);
      assert.equal(store.db.pragma('user_version', { simple: true }), 3);
      const guard = createGuard({ store, now: () => 200, staleAfterSeconds: 0 });
      const r = await guard.run({ key: 'from-v1', fingerprint: 'fp', tenantId: 't', actionType: 'a' }, failing('must not run'));
      assert.deepEqual([r.outcome, r.replayed, r.response.body, r.response.headers], ['done', true, bytes('{"id":1}'), []]);
      // A claim from before fencing has the empty token: recovery can still settle it.
      assert.equal((await guard.inspect('stuck-v1')).ownerToken, '');
      const rec = await guard.recover({ key: 'stuck-v1', lookup: async () => ({ found: jsonResponse(200, { late: true }) }) });
      assert.deepEqual([rec.outcome, rec.action], ['applied', 'record-done']);
      store.close();
    }));

  test('a version 2 database: its text bodies are read as UTF-8 bytes; every new write puts bytes in response_body_bytes and NULL in response_body', () =>
    withDb(async (path) => {
      const { migrations } = coreSchema();
      const db = new Database(path);
      for (const m of migrations.slice(0, 2)) for (const s of m.statements) db.exec(s);
      db.exec(`INSERT INTO intentkey_records (key, fingerprint, tenant_id, action_type, status, owner_token, response_status,
        response_content_type, response_headers, response_body, created_at, expires_at, lookups)
        VALUES ('from-v2', 'fp', 't', 'a', 'done', '', 201, 'text/plain; charset=utf-8', '[["Location","/x"]]', 'chá 🙂', 100, 100000, 0);
        PRAGMA user_version = 2;`);
      db.close();
      const store = sqliteStore(path);
      assert.equal(store.db.pragma('user_version', { simple: true }), 3);
      const guard = createGuard({ store, now: () => 200 });
      const old = await guard.run({ key: 'from-v2', fingerprint: 'fp', tenantId: 't', actionType: 'a' }, failing('must not run'));
      assert.deepEqual(old.response, { status: 201, contentType: 'text/plain; charset=utf-8', headers: [['Location', '/x']], body: bytes('chá 🙂') });
      const binary = new Uint8Array([0xff, 0, 0xc3, 0x28]);
      await guard.run({ key: 'new-v3', fingerprint: 'fp', tenantId: 't', actionType: 'a' }, async () => ({
        status: 200,
        contentType: 'application/octet-stream',
        body: binary,
      }));
      const row = store.db.prepare("SELECT response_body, response_body_bytes FROM intentkey_records WHERE key = 'new-v3'").get();
      assert.equal(row.response_body, null);
      assert.deepEqual(new Uint8Array(row.response_body_bytes), binary);
      assert.deepEqual((await guard.inspect('new-v3')).response.body, binary);
      store.close();
    }));
});
