// A race contender in a child process: node redis-contender.js URL EFFECTS ID KEYS.
// Prints "ready", waits for a line on stdin, races, prints its report as JSON.
// Effects go to the Redis list EFFECTS as "key contender".
import { once } from 'node:events';
import { createGuard } from '../../src/index.js';
import { redisStore } from '../../src/stores/redis.js';
import { contend, raceKeys } from './race.js';

const [url, effects, idText, countText] = process.argv.slice(2);
const id = Number(idText);
const store = await redisStore({ url });
const guard = createGuard({ store });
process.stdout.write('ready\n');
await once(process.stdin, 'data');
process.stdin.pause();
const report = await contend({
  guard,
  id,
  keys: raceKeys(Number(countText)),
  recordEffect: async (key, who) => {
    await store.client.rpush(effects, `${key} ${who}`);
    // The destination call takes a moment: the others catch up and contend for
    // the next keys instead of trailing behind one leader.
    await new Promise((resolve) => setTimeout(resolve, 2));
  },
});
await store.close();
process.stdout.write(`${JSON.stringify(report)}\n`);
