// Record stores: the seven operations of the WIT `store` interface over the one
// schema (version 3). Shared by the Node entry and the store subpaths.

export type MaybePromise<T> = T | Promise<T>;

/** A response as the WIT carries it: the body bytes. */
export interface WitResponse {
  status: number;
  contentType: string;
  headers: Array<[string, string]>;
  body: Uint8Array;
}

/** A record as the WIT carries it (and the stores hold it): WIT status spelling, bigint times. */
export interface WitRecord {
  key: string;
  fingerprint: string;
  tenantId: string;
  actionType: string;
  /** The WIT spelling (the store interface only; the public API's RecordStatus is `in_flight` …). */
  status: 'in-flight' | 'done' | 'needs-reconciliation';
  ownerToken: string;
  response: WitResponse | undefined;
  createdAt: bigint;
  expiresAt: bigint | undefined;
  lookups: number;
  nextLookupAt: bigint | undefined;
}

/** A fenced completion (WIT `completion`). */
export interface WitCompletion {
  key: string;
  ownerToken: string;
  response: WitResponse;
  expiresAt: bigint;
  fast: boolean;
}

/** A fenced recovery write (WIT `replacement`). */
export interface WitReplacement {
  expectedToken: string;
  expectedLookups: number;
  record: WitRecord;
}

/**
 * A record store: the seven operations of the WIT `store` interface, each one
 * atomic statement, every write after the claim fenced on the owner token.
 * Synchronous stores (`synchronous: true`) answer plain values and plug into the
 * component's store import; asynchronous ones answer promises and the guard
 * drives the core's flow over them, each call within the store deadline
 * (`storeDeadlineMs`): an asynchronous store's operation gets, after its
 * arguments, an AbortSignal that aborts when the guard gave up on the call,
 * so that a call not sent yet (waiting for a pooled connection) is never
 * sent. A failure is thrown with
 * `payload: { tag: 'unavailable' | 'failed', val: message }`.
 */
export interface Store {
  /** The package's stores: memory, sqlite, pg, mysql, redis, dynamodb (telemetry names pg `postgres`, any other store `custom`). */
  readonly kind: string;
  readonly synchronous: boolean;
  /** INSERT … ON CONFLICT (key) DO NOTHING: true when this call inserted. */
  insert(record: WitRecord, signal?: AbortSignal): MaybePromise<boolean>;
  get(key: string, signal?: AbortSignal): MaybePromise<WitRecord | undefined>;
  /** UPDATE … SET status = 'done', … WHERE key AND status = 'in_flight' AND owner_token. */
  complete(completion: WitCompletion, signal?: AbortSignal): MaybePromise<boolean>;
  /** Every mutable column, WHERE key AND status = 'in_flight' AND owner_token AND lookups. */
  replace(replacement: WitReplacement, signal?: AbortSignal): MaybePromise<boolean>;
  /** DELETE … WHERE key AND status = 'in_flight' AND owner_token. */
  release(request: { key: string; ownerToken: string }, signal?: AbortSignal): MaybePromise<boolean>;
  /** Records with `status`, oldest first (created_at, key), at most `limit`. */
  list(status: WitRecord['status'], limit: number, signal?: AbortSignal): MaybePromise<WitRecord[]>;
  /** DELETE … WHERE status = 'done' AND expires_at <= now: how many. */
  purge(now: bigint, signal?: AbortSignal): MaybePromise<number | bigint>;
  /**
   * Optional: how many records have `status`, and the oldest claim among
   * them (whole seconds; null when none or not read): the cheap count the
   * records gauge reads (observeRecords). The package's stores have it,
   * DynamoDB apart.
   */
  count?(status: WitRecord['status']): MaybePromise<RecordCount>;
  /**
   * Optional: resolves when the record of `key` changed (completed, released,
   * taken over), after `ms` milliseconds, or when `signal` aborts, whichever
   * is first; never rejects. A retry that waits for the first attempt calls
   * it between claims; without it, the host sleeps `ms` (polling).
   */
  watch?(key: string, ms: number, signal?: AbortSignal): Promise<void>;
  close?(): MaybePromise<void>;
}

/** What a store's count(status) answers. */
export interface RecordCount {
  count: number;
  oldest: number | null;
}

export interface MemoryStore extends Store {
  readonly kind: 'memory';
  readonly synchronous: true;
  count(status: WitRecord['status']): RecordCount;
  /** Woken by this store's own writes. */
  watch(key: string, ms: number, signal?: AbortSignal): Promise<void>;
  close(): void;
}

export interface SqliteStore extends Store {
  readonly kind: 'sqlite';
  readonly synchronous: true;
  /** The core's `count` statement (the status index only). */
  count(status: WitRecord['status']): RecordCount;
  /** The better-sqlite3 Database. */
  readonly db: any;
  /** Woken by this store's own writes (other processes': at the core's next re-check). */
  watch(key: string, ms: number, signal?: AbortSignal): Promise<void>;
  /** Closes the database if the store opened it (from a path). */
  close(): void;
}

export interface PgStore extends Store {
  readonly kind: 'pg';
  readonly synchronous: false;
  /** The core's `count` statement (the status index only). */
  count(status: WitRecord['status']): Promise<RecordCount>;
  /** The pg Pool or Client. */
  readonly db: any;
  /** Whether its writes that change a record send the core's `notify` statement now (see the `notify` option). */
  readonly notifying: boolean;
  /** Woken by this store's writes and by LISTEN on one connection of its own (started by the first call). */
  watch(key: string, ms: number, signal?: AbortSignal): Promise<void>;
  /** Ends the listening connection, and the pool if the store made it (from a config). */
  close(): Promise<void>;
}

export interface MysqlStore extends Store {
  readonly kind: 'mysql';
  readonly synchronous: false;
  /** The core's `count` statement (the status index only). */
  count(status: WitRecord['status']): Promise<RecordCount>;
  /** The mysql2/promise pool. */
  readonly db: any;
  /** Ends the pool if the store made it (from a URL). */
  close(): Promise<void>;
}

export interface RedisStore extends Store {
  readonly kind: 'redis';
  readonly synchronous: false;
  /** The sum of the ZCARDs of the layout's status indexes (`oldest` is null: not read). */
  count(status: WitRecord['status']): Promise<RecordCount>;
  /** The ioredis client (a Cluster on a cluster). */
  readonly client: any;
  /** The prefix of every key the store writes. */
  readonly prefix: string;
  /** Whether the records are in the cluster layout (hash-tagged buckets `{prefix:NN}`). */
  readonly cluster: boolean;
  /** Woken by this store's writes and by SSUBSCRIBE to the layout's change channels on one connection of its own (started by the first call). */
  watch(key: string, ms: number, signal?: AbortSignal): Promise<void>;
  /** Quits the subscriber, and the client if the store made it (from a URL). */
  close(): Promise<void>;
}

export interface DynamoStore extends Store {
  readonly kind: 'dynamodb';
  readonly synchronous: false;
  /** The DynamoDBClient (@aws-sdk/client-dynamodb). */
  readonly client: any;
  /** The table's name. */
  readonly table: string;
  /** Destroys the client if the store made it (from a URL). */
  close(): Promise<void>;
}
