// The race: many contenders run the guard over the same keys, in the same order,
// at the same time. Each records its effects where the test can count them.
import assert from 'node:assert/strict';
import { createGuard } from '../../src/index.js';

export const CONTENDERS = 16;

/** A stored body (a response's bytes, or a row's response_body_bytes) as JSON. */
const json = (bytes) => JSON.parse(new TextDecoder().decode(bytes));

/** The JSON a row's response holds: in response_body_bytes (version 3), never in the legacy text column. */
function rowJson(row) {
  assert.equal(row.response_body, null, `record ${row.key}: the legacy text column stays NULL`);
  return json(row.response_body_bytes);
}
export const KEYS = 1000;

/**
 * A store's records of every status (its own `list`), as the rows checkRace
 * and checkRecoveryRace read: for a store whose records are not SQL rows.
 * @param {{ list: (status: string, limit: number) => Promise<any[]> }} store
 * @param {number} limit at most this many of each status
 */
export async function storeRows(store, limit) {
  const rows = [];
  for (const status of ['in-flight', 'done', 'needs-reconciliation']) {
    for (const r of await store.list(status, limit)) {
      rows.push({ key: r.key, status, response_body: null, response_body_bytes: r.response?.body });
    }
  }
  return rows;
}

export const raceKeys = (n = KEYS) => Array.from({ length: n }, (_, i) => `race-${String(i).padStart(4, '0')}`);

/**
 * One contender's run over every key.
 * @param {{ guard: any, id: number, keys: string[], recordEffect: (key: string, id: number) => unknown }} o
 */
export async function contend({ guard, id, keys, recordEffect }) {
  const report = { id, owned: [], replays: {}, inFlight: 0, other: [] };
  for (const key of keys) {
    const r = await guard.run({ key, fingerprint: 'fp-race', tenantId: 'race', actionType: 'race.pay' }, async (k) => {
      await recordEffect(k, id);
      return { status: 201, contentType: 'application/json', body: JSON.stringify({ key: k, contender: id }) };
    });
    if (r.outcome === 'owned' && r.finished === 'stored') report.owned.push(key);
    else if (r.outcome === 'done') report.replays[key] = json(r.response.body).contender;
    else if (r.outcome === 'in-flight') report.inFlight++;
    else report.other.push([key, r.outcome]);
  }
  return report;
}

/**
 * Checks the race: exactly one owner per key, replays name that owner, every
 * record is done with the owner's response, and each effect ran exactly once.
 * @param {object[]} reports one per contender
 * @param {{ key: string, status: string, response_body: null, response_body_bytes: Uint8Array }[]} rows the record table
 * @param {{ key: string, contender: number }[]} effects the effects table
 * @returns {string} a summary line
 */
export function checkRace(reports, keys, rows, effects) {
  const owners = new Map(keys.map((k) => [k, []]));
  let replays = 0;
  let inFlight = 0;
  for (const r of reports) {
    assert.deepEqual(r.other, [], `contender ${r.id}: unexpected outcomes`);
    for (const key of r.owned) owners.get(key).push(r.id);
    inFlight += r.inFlight;
    replays += Object.keys(r.replays).length;
    assert.equal(r.owned.length + Object.keys(r.replays).length + r.inFlight, keys.length, `contender ${r.id} answered every key`);
  }
  for (const [key, who] of owners) assert.equal(who.length, 1, `key ${key} had owners ${JSON.stringify(who)}`);
  for (const r of reports) {
    for (const [key, contender] of Object.entries(r.replays)) {
      assert.equal(contender, owners.get(key)[0], `contender ${r.id} replayed ${key} from ${contender}`);
    }
  }
  assert.equal(rows.length, keys.length, 'one record per key, none lost');
  for (const row of rows) {
    assert.equal(row.status, 'done', `record ${row.key}`);
    assert.equal(rowJson(row).contender, owners.get(row.key)[0], `record ${row.key} holds its owner's response`);
  }
  assert.equal(effects.length, keys.length, 'each effect ran exactly once');
  assert.equal(new Set(effects.map((e) => e.key)).size, keys.length);
  for (const e of effects) assert.equal(Number(e.contender), owners.get(e.key)[0], `effect ${e.key}`);
  const perContender = reports.map((r) => r.owned.length);
  return (
    `${reports.length} contenders × ${keys.length} keys: ${keys.length} keys with exactly 1 owner each ` +
    `(owned per contender ${Math.min(...perContender)}..${Math.max(...perContender)}), ${replays} replays, ` +
    `${inFlight} in-flight 409s, ${rows.length} records all done, ${effects.length} effects`
  );
}

/** The stale record every recoverer fights over: claimed at T0 by an owner whose effect failed. */
export const STALE_AT = 1_700_000_000;
export const RECOVER_AT = STALE_AT + 3600;

/** Claims `keys` and fails each effect, leaving them in flight at STALE_AT. */
export async function strand(guard, keys) {
  for (const key of keys) {
    await guard
      .run({ key, fingerprint: 'fp-race', tenantId: 'race', actionType: 'race.pay' }, async () => {
        throw new Error('crashed');
      })
      .then(
        () => {
          throw new Error(`strand: ${key} was not claimed`);
        },
        (e) => {
          if (e.message !== 'crashed') throw e;
        },
      );
  }
}

/**
 * One recoverer's run over every stale key: a read-your-writes destination says
 * absent, so the core decides to re-execute; the store's fenced write lets one
 * recoverer take each record over.
 */
export async function recoverContend({ guard, id, keys, recordEffect }) {
  const report = { id, applied: [], outcomes: {} };
  for (const key of keys) {
    const r = await guard.recover({
      key,
      lookup: async () => 'absent',
      readYourWrites: true,
      effect: async (k) => {
        await recordEffect(k, id);
        return { status: 201, contentType: 'application/json', body: JSON.stringify({ key: k, recoverer: id }) };
      },
    });
    const label = r.action === undefined ? r.outcome : `${r.outcome} ${r.action}`;
    report.outcomes[label] = (report.outcomes[label] ?? 0) + 1;
    if (r.outcome === 'applied') {
      if (r.action !== 're-execute' || r.finished !== 'stored') throw new Error(`recoverer ${id}: ${JSON.stringify(r)}`);
      report.applied.push(key);
    }
  }
  return report;
}

/**
 * Checks a recovery race: each stale record re-executed exactly once (one
 * recoverer applied, one effect), the record done with that recoverer's answer.
 */
export function checkRecoveryRace(reports, keys, rows, effects) {
  const winners = new Map(keys.map((k) => [k, []]));
  const outcomes = {};
  for (const r of reports) {
    for (const key of r.applied) winners.get(key).push(r.id);
    for (const [label, n] of Object.entries(r.outcomes)) outcomes[label] = (outcomes[label] ?? 0) + n;
  }
  for (const [key, who] of winners) assert.equal(who.length, 1, `key ${key} was re-executed by ${JSON.stringify(who)}`);
  assert.equal(effects.length, keys.length, 'each stale record re-executed exactly once');
  for (const e of effects) assert.equal(Number(e.contender), winners.get(e.key)[0], `effect ${e.key}`);
  assert.equal(rows.length, keys.length);
  for (const row of rows) {
    assert.equal(row.status, 'done', `record ${row.key}`);
    assert.equal(rowJson(row).recoverer, winners.get(row.key)[0], `record ${row.key}`);
  }
  const summary = Object.entries(outcomes)
    .sort()
    .map(([label, n]) => `${label} ${n}`)
    .join(', ');
  return `${reports.length} recoverers × ${keys.length} stale records: exactly 1 re-execution each (${summary})`;
}

/**
 * How a race runs on one server: `connect()` opens a connection of a
 * contender's own (with end()), `storeOn(c)` opens a store on it,
 * `recordEffect(c, key, who)` records an effect on it, and `tables()` reads the
 * record and effect tables ({ rows, effects }, as checkRace reads them).
 * @typedef {{
 *   connect: () => any,
 *   storeOn: (c: any) => Promise<any>,
 *   recordEffect: (c: any, key: string, who: number) => unknown,
 *   tables: () => Promise<{ rows: object[], effects: object[] }>,
 * }} Rig
 */

/**
 * CONTENDERS connections, a guard (with `guardOptions`) on each; every guard
 * runs `contender` (contend or recoverContend) over all of `keys` at once, each
 * recording its effects on its own connection. Then the tables are read and
 * every connection is ended.
 * @param {Rig} rig
 */
async function raceOn(rig, contender, keys, guardOptions = {}) {
  const connections = await Promise.all(Array.from({ length: CONTENDERS }, () => rig.connect()));
  try {
    const guards = await Promise.all(connections.map(async (c) => createGuard({ store: await rig.storeOn(c), ...guardOptions })));
    const reports = await Promise.all(
      guards.map((guard, id) => contender({ guard, id, keys, recordEffect: (key, who) => rig.recordEffect(connections[id], key, who) })),
    );
    return { reports, ...(await rig.tables()) };
  } finally {
    await Promise.all(connections.map((c) => c.end()));
  }
}

/**
 * The race: CONTENDERS contenders on connections of their own × KEYS keys,
 * checked by checkRace.
 * @param {Rig} rig
 * @returns {Promise<{ summary: string, rows: object[] }>} checkRace's summary line, and the records
 */
export async function ownerRace(rig) {
  const keys = raceKeys();
  const { reports, rows, effects } = await raceOn(rig, contend, keys);
  return { summary: checkRace(reports, keys, rows, effects), rows };
}

/**
 * The recovery race: 200 records stranded in flight at STALE_AT (through a
 * guard on `store`), then CONTENDERS recoverers on connections of their own at
 * RECOVER_AT (stale after 60 s), checked by checkRecoveryRace.
 * @param {Rig} rig
 * @returns {Promise<string>} checkRecoveryRace's summary line
 */
export async function recoveryRace(rig, store) {
  const keys = raceKeys(200);
  await strand(createGuard({ store, now: () => STALE_AT }), keys);
  const { reports, rows, effects } = await raceOn(rig, recoverContend, keys, { now: () => RECOVER_AT, staleAfterSeconds: 60 });
  return checkRecoveryRace(reports, keys, rows, effects);
}
