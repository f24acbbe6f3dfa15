// A race contender in a child process: node sqlite-contender.js DB ID KEYS.
// Prints "ready", waits for a line on stdin, races, prints its report as JSON.
import { once } from 'node:events';
import { createGuard, sqliteStore } from '../../src/index.js';
import { contend, raceKeys } from './race.js';

const [path, idText, countText] = process.argv.slice(2);
const id = Number(idText);
const store = sqliteStore(path); // the contenders migrate at once: BEGIN IMMEDIATE serializes them
const guard = createGuard({ store });
const record = store.db.prepare('INSERT INTO ik_effects (key, contender) VALUES (?, ?)');
process.stdout.write('ready\n');
await once(process.stdin, 'data');
process.stdin.pause();
const report = await contend({
  guard,
  id,
  keys: raceKeys(Number(countText)),
  recordEffect: async (key, who) => {
    record.run(key, who);
    // The destination call takes a moment (no lock held): the others catch up and
    // contend for the next keys instead of trailing behind one leader.
    await new Promise((resolve) => setTimeout(resolve, 2));
  },
});
store.close();
process.stdout.write(`${JSON.stringify(report)}\n`);
