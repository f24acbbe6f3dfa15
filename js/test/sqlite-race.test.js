// The races on better-sqlite3 across processes: 16 child processes share one
// database file (WAL, busy timeout), released at once.
//   - claims: the guard over the same 1000 keys, in the same order. Exactly one
//     owner per key, no lost record, each effect once.
//   - recovery: 200 stale in-flight records, every process recovering each of them
//     (a read-your-writes destination says absent, so the core re-executes).
//     Exactly one recoverer takes each record over and re-runs its effect.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { CONTENDERS, KEYS, STALE_AT, checkRace, checkRecoveryRace, raceKeys, strand } from './support/race.js';
import { createGuard, sqliteStore } from '../src/index.js';
import { lineChild } from './support/line-child.js';

const contender = fileURLToPath(new URL('./support/sqlite-contender.js', import.meta.url));
const recoverer = fileURLToPath(new URL('./support/sqlite-recoverer.js', import.meta.url));

const start = (path, id, script = contender, keys = KEYS) =>
  lineChild(script, [path, String(id), String(keys)], `contender ${id}`);

test(`race on better-sqlite3: ${CONTENDERS} child processes × ${KEYS} keys, exactly one owner per key`, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'intentkey-race-'));
  const path = join(dir, 'race.db');
  const children = [];
  try {
    // The effects table only; the contenders apply the schema themselves, at once.
    const setup = new Database(path);
    setup.pragma('journal_mode = WAL');
    setup.exec('CREATE TABLE ik_effects (key TEXT NOT NULL, contender INTEGER NOT NULL)');
    setup.close();

    for (let id = 0; id < CONTENDERS; id++) children.push(start(path, id));
    for (const c of children) assert.equal(await c.next(), 'ready', c.stderr());
    for (const c of children) c.child.stdin.end('go\n');
    const reports = [];
    for (const c of children) reports.push(JSON.parse(await c.next()));
    for (const c of children) {
      const { code } = await c.exited;
      assert.equal(code, 0, c.stderr());
    }

    const db = new Database(path, { readonly: true });
    try {
      const rows = db.prepare('SELECT key, status, response_body, response_body_bytes FROM intentkey_records').all();
      const effects = db.prepare('SELECT key, contender FROM ik_effects').all();
      t.diagnostic(checkRace(reports, raceKeys(), rows, effects));
      assert.equal(db.pragma('user_version', { simple: true }), 3);
      assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
    } finally {
      db.close();
    }
  } finally {
    for (const c of children) c.child.kill();
    rmSync(dir, { recursive: true, force: true });
  }
});

const STALE = 200;

test(`recovery race on better-sqlite3: ${CONTENDERS} child processes × ${STALE} stale records, exactly one re-execution each`, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'intentkey-recover-'));
  const path = join(dir, 'race.db');
  const children = [];
  try {
    const store = sqliteStore(path);
    store.db.exec('CREATE TABLE ik_effects (key TEXT NOT NULL, contender INTEGER NOT NULL)');
    const keys = raceKeys(STALE);
    await strand(createGuard({ store, now: () => STALE_AT }), keys);
    assert.equal(store.db.prepare("SELECT count(*) AS n FROM intentkey_records WHERE status = 'in_flight'").get().n, STALE);
    store.close();

    for (let id = 0; id < CONTENDERS; id++) children.push(start(path, id, recoverer, STALE));
    for (const c of children) assert.equal(await c.next(), 'ready', c.stderr());
    for (const c of children) c.child.stdin.end('go\n');
    const reports = [];
    for (const c of children) reports.push(JSON.parse(await c.next()));
    for (const c of children) {
      const { code } = await c.exited;
      assert.equal(code, 0, c.stderr());
    }
    const db = new Database(path, { readonly: true });
    try {
      const rows = db.prepare('SELECT key, status, response_body, response_body_bytes FROM intentkey_records').all();
      const effects = db.prepare('SELECT key, contender FROM ik_effects').all();
      t.diagnostic(checkRecoveryRace(reports, keys, rows, effects));
    } finally {
      db.close();
    }
  } finally {
    for (const c of children) c.child.kill();
    rmSync(dir, { recursive: true, force: true });
  }
});
