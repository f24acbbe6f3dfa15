// The owner the DynamoDB kill trials kill: node dynamo-fault-child.js URL EFFECTS KEY PAUSE_MS.
// Runs one guarded payment whose effect is the line "KEY owner" appended to the
// file EFFECTS, then pauses PAUSE_MS between the effect and its completion;
// the parent kills it at a random moment.
import { appendFileSync } from 'node:fs';
import { createGuard } from '../../src/index.js';
import { dynamoStore } from '../../src/stores/dynamodb.js';

const [url, effects, key, pauseText] = process.argv.slice(2);
const store = await dynamoStore({ url });
const guard = createGuard({ store, now: () => 1_700_000_000 });
await guard.run({ key, fingerprint: 'fp', tenantId: 't1', actionType: 'pix.send' }, async (k) => {
  appendFileSync(effects, `${k} owner\n`);
  await new Promise((resolve) => setTimeout(resolve, Number(pauseText)));
  return { status: 201, contentType: 'application/json', body: '{}' };
});
await store.close();
