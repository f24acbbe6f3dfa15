// One schema, two runtimes: a PostgreSQL database migrated by the Rust tool is
// served by the npm package's pgStore, and one migrated by pgStore is served by
// the Rust tool; each replays and fences what the other claimed. Both apply the
// same statements (the core's schema file), so the two schemas are identical.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createGuard, pgStore } from '../src/index.js';
import { PG_CONFIG, freshSchema, pgAvailability } from './support/pg.js';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const availability = await pgAvailability('cross-runtime.test.js');

function rustBinary() {
  const targetDir = process.env.CARGO_TARGET_DIR ?? join(repo, 'target');
  return ['debug', 'release'].map((profile) => join(targetDir, profile, 'intentkey')).find((path) => existsSync(path));
}

const rust = rustBinary();

function storeUrl(schema) {
  const { user, host, port, database } = PG_CONFIG;
  return `postgres://${user}@${host}:${port}/${database}?options=-csearch_path%3D${schema}`;
}

/** Runs the Rust tool; returns its one JSON object. */
function intentkey(args) {
  const r = spawnSync(rust, args, { encoding: 'utf8' });
  assert.equal(r.status, 0, `intentkey ${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

const claimArgs = (url, key, fingerprint = 'fp') => [
  'claim', '--store', url, '--tenant', 't1', '--action', 'pix.send', '--key', key, '--fingerprint', fingerprint,
];

const text = (bytes) => new TextDecoder().decode(bytes);

const attempt = (key, fingerprint = 'fp') => ({ key, fingerprint, tenantId: 't1', actionType: 'pix.send' });

/** The schema as PostgreSQL describes it: columns, indexes, constraints, versions. */
async function describe(schema) {
  const c = new pg.Client(PG_CONFIG);
  await c.connect();
  try {
    const columns = await c.query(
      'SELECT table_name, column_name, data_type, is_nullable, column_default FROM information_schema.columns ' +
        'WHERE table_schema = $1 ORDER BY table_name, column_name',
      [schema],
    );
    const indexes = await c.query(
      'SELECT indexname, replace(indexdef, $1 || \'.\', \'\') AS def FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname',
      [schema],
    );
    const constraints = await c.query(
      'SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE connamespace = $1::regnamespace ORDER BY conname',
      [schema],
    );
    const versions = await c.query(`SELECT version FROM ${schema}.intentkey_schema_migrations ORDER BY version`);
    return {
      columns: columns.rows,
      indexes: indexes.rows,
      constraints: constraints.rows,
      versions: versions.rows.map((r) => Number(r.version)),
    };
  } finally {
    await c.end();
  }
}

test('PostgreSQL shared by the Rust tool and the npm package, migrated by either', { skip: availability.skip }, async (t) => {
  if (!rust) {
    assert.notEqual(process.env.CI, 'true', 'CI=true but the Rust tool is not built (cargo build -p intentkey-cli)');
    t.skip('the Rust tool is not built (cargo build -p intentkey-cli)');
    return;
  }
  const byRust = await freshSchema();
  const byJs = await freshSchema();
  let jsOnRust;
  let jsOwn;
  try {
    // 1. Rust migrates and claims; the npm package serves the same table.
    const urlR = storeUrl(byRust.name);
    const owned = intentkey(claimArgs(urlR, 'k1'));
    assert.equal(owned.outcome, 'owned');
    jsOnRust = await pgStore({ ...byRust.config, max: 4 });
    const guardR = createGuard({ store: jsOnRust });
    let ran = 0;
    const effect = async () => {
      ran++;
      return { status: 201, contentType: 'application/json', body: '{"id":"pay_js"}' };
    };
    assert.equal((await guardR.run(attempt('k1'), effect)).outcome, 'in-flight', 'a Rust claim blocks a JS repeat');
    assert.equal((await guardR.run(attempt('k1', 'other'), effect)).outcome, 'payload-conflict');
    // Only the Rust owner's token completes it; then JS replays Rust's answer.
    const finished = intentkey([
      'complete', '--store', urlR, '--key', 'k1', '--owner-token', owned.owner_token, '--status', '201', '--body', '{"id":"pay_rust"}',
    ]);
    assert.equal(finished.finished, 'stored');
    const replay = await guardR.run(attempt('k1'), effect);
    assert.equal(replay.outcome, 'done');
    assert.equal(text(replay.response.body), '{"id":"pay_rust"}');
    // JS claims and completes; Rust replays JS's answer.
    assert.equal((await guardR.run(attempt('k2'), effect)).outcome, 'owned');
    const rustReplay = intentkey(claimArgs(urlR, 'k2'));
    assert.equal(rustReplay.outcome, 'done');
    assert.equal(rustReplay.response.body, '{"id":"pay_js"}');
    assert.equal(ran, 1);

    // 2. The npm package migrates and claims; the Rust tool serves the same table.
    jsOwn = await pgStore({ ...byJs.config, max: 4 });
    const guardJ = createGuard({ store: jsOwn });
    // The JS owner's effect waits while the Rust tool meets its claim.
    let release;
    const gate = new Promise((resolve) => {
      release = resolve;
    });
    let started;
    const running = new Promise((resolve) => {
      started = resolve;
    });
    const owner = guardJ.run(attempt('k3'), async () => {
      started();
      await gate;
      return { status: 201, contentType: 'application/json', body: '{"id":"pay_js3"}' };
    });
    await running;
    const urlJ = storeUrl(byJs.name);
    assert.equal(intentkey(claimArgs(urlJ, 'k3')).outcome, 'in-flight', 'a JS claim blocks a Rust repeat');
    // A token that is not the owner's is refused; the JS owner's completion stands.
    const intruder = intentkey([
      'complete', '--store', urlJ, '--key', 'k3', '--owner-token', '0'.repeat(32), '--status', '200', '--body', '{}',
    ]);
    assert.equal(intruder.finished, 'superseded');
    release();
    const done = await owner;
    assert.equal(done.finished, 'stored');
    const rustSees = intentkey(claimArgs(urlJ, 'k3'));
    assert.equal(rustSees.outcome, 'done');
    assert.equal(rustSees.response.body, '{"id":"pay_js3"}');

    // 3. The two migrations made the same schema.
    const [a, b] = [await describe(byRust.name), await describe(byJs.name)];
    assert.deepEqual(a.versions, [1, 2, 3]);
    assert.ok(a.columns.some((c) => c.column_name === 'response_body_bytes'), 'version 3 adds the body bytes');
    assert.ok(a.columns.some((c) => c.column_name === 'owner_token'), 'version 2 adds the owner token');
    assert.ok(a.constraints.some((c) => c.def.includes('needs_reconciliation')), 'the status check is there');
    assert.equal(a.indexes.length, 4, "two primary keys, the expiry and the status index");
    assert.deepEqual(a, b);
  } finally {
    await jsOnRust?.close();
    await jsOwn?.close();
    await byRust.drop();
    await byJs.drop();
  }
});
