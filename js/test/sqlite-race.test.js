// The race on better-sqlite3 across processes: 16 child processes share one
// database file (WAL, busy timeout) and run the guard over the same 1000 keys,
// in the same order, released at once. Exactly one owner per key, no lost record,
// each effect once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { CONTENDERS, KEYS, checkRace, raceKeys } from './support/race.js';

const contender = fileURLToPath(new URL('./support/sqlite-contender.js', import.meta.url));

function start(path, id) {
  const child = spawn(process.execPath, [contender, path, String(id), String(KEYS)], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (c) => (stderr += c));
  const lines = createInterface({ input: child.stdout });
  const queue = [];
  const waiting = [];
  lines.on('line', (l) => (waiting.length ? waiting.shift().resolve(l) : queue.push(l)));
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  exited.then(({ code, signal }) => {
    const e = new Error(`contender ${id} exited (${code ?? signal}) early: ${stderr}`);
    while (waiting.length) waiting.shift().reject(e);
  });
  const next = () =>
    queue.length ? Promise.resolve(queue.shift()) : new Promise((resolve, reject) => waiting.push({ resolve, reject }));
  return { child, next, exited, stderr: () => stderr };
}

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
      const rows = db.prepare('SELECT key, status, response_body FROM intentkey_records').all();
      const effects = db.prepare('SELECT key, contender FROM ik_effects').all();
      t.diagnostic(checkRace(reports, raceKeys(), rows, effects));
      assert.equal(db.pragma('user_version', { simple: true }), 1);
      assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
    } finally {
      db.close();
    }
  } finally {
    for (const c of children) c.child.kill();
    rmSync(dir, { recursive: true, force: true });
  }
});
