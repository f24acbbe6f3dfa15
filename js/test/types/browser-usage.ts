// Compiled (never run) by types.test.js under the `browser` condition: the
// browser entry's types declare what it exports (the pure component's API) and
// nothing it does not (the guard and the SQL stores are Node only).
import { createEndpoint, createKeyer, claims, init, type Reply } from 'intentkey';
import * as browser from 'intentkey';
import { withIdempotency } from 'intentkey/fetch';
import { memoryStore } from 'intentkey/stores/memory';

await init();
const reply: Reply = createEndpoint({ secret: 'ab'.repeat(32) }).failed();
console.log(reply, createKeyer, claims.defaultRules(), withIdempotency, memoryStore());
// @ts-expect-error the guard is Node only
browser.createGuard;
// @ts-expect-error the SQL stores are Node only
browser.sqliteStore;
