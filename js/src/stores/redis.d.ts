// intentkey/stores/redis: records in Redis through ioredis 5. Node only.
import type { RedisStore } from './types.js';

export type { RedisStore, Store, WitRecord, WitResponse, WitCompletion, WitReplacement } from './types.js';

/**
 * Records in Redis through ioredis 5: a connected ioredis client (the caller
 * keeps it) or a URL (`redis://host:port/db[?prefix=P]`; the store makes the
 * client and close() quits it). The layout and Lua scripts are the core's (the
 * component's `schema` export), the same the Rust store runs. Every key starts
 * with `prefix` (default `intentkey`). Resolves once Redis answers a PING.
 */
export function redisStore(options: { client?: any; url?: string; prefix?: string }): Promise<RedisStore>;

/** Compiles the component ahead of the first request (the main entry's init). */
export function init(): Promise<void>;
