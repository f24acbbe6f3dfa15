// The owner the kill trials kill: node redis-fault-child.js URL EFFECTS KEY PAUSE_MS.
// Runs one guarded payment whose effect is recorded in the Redis list EFFECTS,
// then pauses PAUSE_MS between the effect and its completion; the parent kills
// it at a random moment.
import { createGuard } from '../../src/index.js';
import { redisStore } from '../../src/stores/redis.js';

const [url, effects, key, pauseText] = process.argv.slice(2);
const store = await redisStore({ url });
const guard = createGuard({ store, now: () => 1_700_000_000 });
await guard.run({ key, fingerprint: 'fp', tenantId: 't1', actionType: 'pix.send' }, async (k) => {
  await store.client.rpush(effects, `${k} owner`);
  await new Promise((resolve) => setTimeout(resolve, Number(pauseText)));
  return { status: 201, contentType: 'application/json', body: '{}' };
});
await store.close();
