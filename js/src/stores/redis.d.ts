// intentkey/stores/redis: records in Redis or a Redis Cluster through ioredis 5. Node only.
import type { RedisStore } from './types.js';

export type { RedisStore, Store, WitRecord, WitResponse, WitCompletion, WitReplacement } from './types.js';

/** The store's own options, with a client or a URL. */
export interface RedisStoreSettings {
  /** Starts every key the store writes (default `intentkey`); on a cluster without `{` or `}`. */
  prefix?: string;
  /** Every write that wrote then waits (WAIT) for this many replicas (1 or more); fewer is store-unavailable. */
  wait?: number;
  /** How long WAIT waits, in milliseconds (1 or more; default 1000); only with `wait`. */
  waitTimeoutMs?: number;
}

/** What redisStore takes: a client the caller keeps, or a URL (the store makes the client and close() quits it). */
export type RedisStoreOptions = RedisStoreSettings &
  (
    | {
        /** A connected ioredis client or Cluster; a Cluster makes the store use the cluster layout. */
        client: any;
        url?: undefined;
      }
    | {
        /**
         * `redis://[user:password@]host:port[/db]` (one server) or
         * `redis+cluster://[user:password@]host:port[,host:port…]` (a cluster), with
         * `?prefix=P&wait=N&wait_timeout_ms=M`; any other query option is refused.
         */
        url: string;
        client?: undefined;
      }
  );

/**
 * Records in Redis through ioredis 5: a connected ioredis client or Cluster (the
 * caller keeps it) or a URL (the store makes the client and close() quits it).
 * The layout, every key name and the Lua scripts are the core's (the
 * component's `schema` export), the same the Rust store runs. On one server
 * every key starts with `prefix` (default `intentkey`); on a cluster each
 * record and its bucket's indexes share the hash tag `{prefix:NN}` (16
 * buckets). An unknown option, in the object or the URL's query, is an
 * IntentkeyError `invalid-argument` whose `field` names it. Resolves once
 * Redis answers a PING.
 */
export function redisStore(options: RedisStoreOptions): Promise<RedisStore>;

/** Compiles the component ahead of the first request (the main entry's init). */
export function init(): Promise<void>;
