// The Node side of the Rust/Node interop test (host/store/tests/stores.rs,
// redis_node_and_rust_share_records): node redis-interop.mjs URL KEY BODY.
// Runs one guarded effect answering BODY on the Redis store at URL and prints
// { outcome, replayed, status, body } as JSON (see store-interop.mjs).
import { redisStore } from '../../src/stores/redis.js';
import { storeInterop } from './store-interop.mjs';

await storeInterop((url) => redisStore({ url }));
