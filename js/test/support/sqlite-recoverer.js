// A recovery contender in a child process: node sqlite-recoverer.js DB ID KEYS.
// Prints "ready", waits for a line on stdin, recovers every stale key, prints its
// report as JSON.
import { once } from 'node:events';
import { createGuard, sqliteStore } from '../../src/index.js';
import { RECOVER_AT, raceKeys, recoverContend } from './race.js';

const [path, idText, countText] = process.argv.slice(2);
const id = Number(idText);
const store = sqliteStore(path);
const guard = createGuard({ store, now: () => RECOVER_AT, staleAfterSeconds: 60 });
const record = store.db.prepare('INSERT INTO ik_effects (key, contender) VALUES (?, ?)');
process.stdout.write('ready\n');
await once(process.stdin, 'data');
process.stdin.pause();
const report = await recoverContend({
  guard,
  id,
  keys: raceKeys(Number(countText)),
  recordEffect: async (key, who) => {
    record.run(key, who);
    await new Promise((resolve) => setTimeout(resolve, 1));
  },
});
store.close();
process.stdout.write(`${JSON.stringify(report)}\n`);
