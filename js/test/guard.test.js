// The guard on the in-process stores: memory and better-sqlite3 (a fresh file
// per test). The same suite runs on PostgreSQL in pg.test.js.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { storeSuite } from './support/store-suite.js';
import Database from 'better-sqlite3';
import { createGuard, memoryStore, sqliteStore } from '../src/index.js';

storeSuite('memory', {
  async open() {
    return { store: memoryStore(), close: async () => {} };
  },
});

storeSuite('better-sqlite3', {
  async open() {
    const dir = mkdtempSync(join(tmpdir(), 'intentkey-sqlite-'));
    const store = sqliteStore(join(dir, 'records.db'));
    return {
      store,
      async close() {
        store.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
});

describe('better-sqlite3 store: schema', () => {
  const withDb = async (fn) => {
    const dir = mkdtempSync(join(tmpdir(), 'intentkey-sqlite-'));
    try {
      return await fn(join(dir, 'r.db'));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };

  test('version 1 in PRAGMA user_version, WAL, synchronous=FULL, busy timeout; the columns of docs/store-schema.md', () =>
    withDb((path) => {
      const store = sqliteStore(path, { busyTimeoutMs: 1234 });
      const { db } = store;
      assert.equal(db.pragma('user_version', { simple: true }), 1);
      assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
      assert.equal(db.pragma('synchronous', { simple: true }), 2); // FULL
      assert.equal(db.pragma('busy_timeout', { simple: true }), 1234);
      assert.deepEqual(
        db.prepare('PRAGMA table_info(intentkey_records)').all().map((c) => [c.name, c.type, c.notnull, c.pk]),
        [
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
        ],
      );
      assert.deepEqual(
        db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%'").all(),
        [{ name: 'intentkey_records_expiry' }],
      );
      store.close();
      // Opening again changes nothing; an open Database is kept open by close().
      const again = new Database(path);
      const second = sqliteStore(again);
      assert.equal(again.pragma('user_version', { simple: true }), 1);
      second.close();
      assert.equal(again.open, true);
      again.close();
    }));

  test('a newer schema version is refused', () =>
    withDb((path) => {
      const db = new Database(path);
      db.pragma('user_version = 2');
      db.close();
      assert.throws(() => sqliteStore(path), /schema version 2/);
    }));

  test('a database the Rust host made (its DDL, user_version 1) is used as it is', () =>
    withDb(async (path) => {
      const db = new Database(path);
      db.exec(`
CREATE TABLE IF NOT EXISTS intentkey_records (
    key                   TEXT PRIMARY KEY,
    fingerprint           TEXT NOT NULL,
    tenant_id             TEXT NOT NULL,
    action_type           TEXT NOT NULL,
    status                TEXT NOT NULL CHECK (status IN ('in_flight', 'done', 'needs_reconciliation')),
    response_status       INTEGER,
    response_content_type TEXT,
    response_body         TEXT,
    created_at            BIGINT NOT NULL,
    expires_at            BIGINT,
    lookups               INTEGER NOT NULL DEFAULT 0,
    next_lookup_at        BIGINT
);
CREATE INDEX IF NOT EXISTS intentkey_records_expiry ON intentkey_records (expires_at);
INSERT INTO intentkey_records (key, fingerprint, tenant_id, action_type, status, response_status,
  response_content_type, response_body, created_at, expires_at, lookups)
  VALUES ('from-rust', 'fp', 't', 'a', 'done', 201, 'application/json', '{"id":1}', 100, 1000, 0);
PRAGMA user_version = 1;`);
      db.close();
      const store = sqliteStore(path);
      const guard = createGuard({ store, now: () => 200 });
      const r = await guard.run({ key: 'from-rust', fingerprint: 'fp', tenantId: 't', actionType: 'a' }, async () => {
        throw new Error('must not run');
      });
      assert.deepEqual([r.outcome, r.replayed, r.response.body], ['done', true, '{"id":1}']);
      store.close();
    }));
});
