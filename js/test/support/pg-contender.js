// A race contender in a worker thread, with its own PostgreSQL connection.
import { parentPort, workerData } from 'node:worker_threads';
import pg from 'pg';
import { createGuard, pgStore } from '../../src/index.js';
import { contend } from './race.js';

const { config, id, keys } = workerData;
const client = new pg.Client(config);
await client.connect();
try {
  const store = await pgStore(client); // 16 workers migrate at once: the advisory lock serializes them
  const guard = createGuard({ store });
  const go = new Promise((resolve) => parentPort.once('message', resolve));
  parentPort.postMessage({ ready: id });
  await go;
  const report = await contend({
    guard,
    id,
    keys,
    recordEffect: (key, who) => client.query('INSERT INTO ik_effects (key, contender) VALUES ($1, $2)', [key, who]),
  });
  parentPort.postMessage({ report });
} finally {
  await client.end();
}
