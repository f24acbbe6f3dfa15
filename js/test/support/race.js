// The race: many contenders run the guard over the same keys, in the same order,
// at the same time. Each records its effects where the test can count them.
import assert from 'node:assert/strict';

export const CONTENDERS = 16;
export const KEYS = 1000;

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
    if (r.outcome === 'owned' && r.recorded) report.owned.push(key);
    else if (r.outcome === 'done') report.replays[key] = JSON.parse(r.response.body).contender;
    else if (r.outcome === 'in-flight') report.inFlight++;
    else report.other.push([key, r.outcome]);
  }
  return report;
}

/**
 * Checks the race: exactly one owner per key, replays name that owner, every
 * record is done with the owner's response, and each effect ran exactly once.
 * @param {object[]} reports one per contender
 * @param {{ key: string, status: string, response_body: string }[]} rows the record table
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
    assert.equal(JSON.parse(row.response_body).contender, owners.get(row.key)[0], `record ${row.key} holds its owner's response`);
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
