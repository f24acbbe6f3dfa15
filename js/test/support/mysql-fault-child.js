// The owner the MySQL kill trials kill: node mysql-fault-child.js URL KEY PAUSE_MS [naive].
// Runs one guarded payment whose effect is a row (KEY, 'owner') in the table
// ik_effects of the database at URL (the parent creates it), written on a pool
// of its own with autocommit, then pauses PAUSE_MS between the effect and its
// completion; the parent kills it at a random moment.
// With `naive` there is no intentkey: the plain "check a row, then act"
// processor (ik_done holds the keys already processed), for the negative control.
import mysql from 'mysql2/promise';
import { createGuard } from '../../src/index.js';
import { mysqlStore } from '../../src/stores/mysql.js';

const [url, key, pauseText, mode] = process.argv.slice(2);
const effects = mysql.createPool({ uri: url, connectionLimit: 1 });
const pause = () => new Promise((resolve) => setTimeout(resolve, Number(pauseText)));
if (mode === 'naive') {
  const [seen] = await effects.execute('SELECT 1 FROM ik_done WHERE `key` = ?', [key]);
  if (seen.length === 0) {
    await effects.execute("INSERT INTO ik_effects (`key`, who) VALUES (?, 'owner')", [key]);
    await pause();
    await effects.execute('INSERT INTO ik_done (`key`) VALUES (?)', [key]);
  }
} else {
  const store = await mysqlStore({ url });
  const guard = createGuard({ store, now: () => 1_700_000_000 });
  await guard.run({ key, fingerprint: 'fp', tenantId: 't1', actionType: 'pix.send' }, async (k) => {
    await effects.execute("INSERT INTO ik_effects (`key`, who) VALUES (?, 'owner')", [k]);
    await pause();
    return { status: 201, contentType: 'application/json', body: '{}' };
  });
  await store.close();
}
await effects.end();
