// What every store shares: the one schema and every statement, from the
// component's `schema` export only (the core's crates/intentkey/schema/: the DDL
// intentkey.sql, the SQL statements sqlite.sql, postgres.sql and mysql.sql with
// their parameter order, bind order and row decoding, the Redis scripts), the
// files the Rust stores use too; and the store errors the WIT `store` interface
// reports. A SQL store is an executor: it prepares the core's statements, binds
// the parameters the core makes from a record and hands the rows back to the
// core (docs/stores.md).
import { internal } from '../node-core.js';

export { ABORTED_FLAG, CLOSING, TRUSTED, WAITING, closer } from './trusted.js';

let cached = null;
/**
 * The schema, from the component: { migrations: [{ version, statements }],
 * migrationsTable, schemaVersion, migrationLock (a bigint), redisScripts:
 * [{ name, source }], redisDefaultPrefix, redisBatch, redisClusterBuckets }.
 */
export function coreSchema() {
  if (cached === null) {
    cached = internal.rawSchema((s) =>
      Object.freeze({
        migrations: s.migrations(),
        migrationsTable: s.migrationsTable(),
        schemaVersion: s.schemaVersion(),
        migrationLock: s.migrationLock(),
        redisScripts: Object.freeze(s.redisScripts().map((x) => Object.freeze({ name: x.name, source: x.source }))),
        redisDefaultPrefix: s.redisDefaultPrefix(),
        redisBatch: s.redisBatch(),
        redisClusterBuckets: s.redisClusterBuckets(),
      }),
    );
  }
  return cached;
}

/**
 * The core's call of a Redis write script ({ script, keys, args }) for a store
 * operation on `layout` (WIT redis-layout: { prefix, cluster }): `insert` (a WIT
 * record), `complete` (a completion), `replace` (a replacement) or `release` (a
 * release request).
 */
export function redisCall(op, layout, value) {
  return internal.rawSchema((s) => {
    switch (op) {
      case 'insert':
        return s.redisInsert(layout, value);
      case 'claim':
        return s.redisClaim(layout, value);
      case 'complete':
        return s.redisComplete(layout, value);
      case 'replace':
        return s.redisReplace(layout, value);
      case 'release':
        return s.redisRelease(layout, value);
      default:
        throw new Error(`intentkey: no Redis call for ${op} (a bug)`);
    }
  });
}

/**
 * The core's Redis layout (docs/store-schema.md, "Redis"), for `layout` (WIT
 * redis-layout: { prefix, cluster }): where every key lives, on one server or
 * in the cluster's hash-tagged buckets. Each throws the core's IntentkeyError.
 *  - check(layout): invalid-argument (field prefix) for a prefix the layout cannot use;
 *  - recordKey(layout, key): the key a GET of record `key` reads;
 *  - list(layout, status, limit): the `list` script calls (one per bucket and status);
 *  - listed(limit, replies): the records of their replies, in one order (store-failed for a malformed reply);
 *  - purge(layout, now): the `purge` script calls, one per bucket;
 *  - checkReplicas(wanted, acked): store-unavailable when WAIT acknowledged fewer replicas than wanted;
 *  - channel(layout, key): the sharded pub/sub channel the writes of record `key` publish its key on;
 *  - channels(layout): every bucket's change channel (one on a single server), to SSUBSCRIBE once;
 *  - indexKeys(layout, status): the status index of every bucket: the sum of their ZCARDs counts the records.
 */
export const redisLayout = Object.freeze({
  check: (layout) => internal.rawSchema((s) => s.redisCheckLayout(layout)),
  recordKey: (layout, key) => internal.rawSchema((s) => s.redisRecordKey(layout, key)),
  list: (layout, status, limit) => internal.rawSchema((s) => s.redisList(layout, status, limit)),
  listed: (limit, replies) => internal.rawSchema((s) => s.redisListed(limit, replies)),
  purge: (layout, now) => internal.rawSchema((s) => s.redisPurge(layout, BigInt(now))),
  checkReplicas: (wanted, acked) => internal.rawSchema((s) => s.redisCheckReplicas(wanted, BigInt(acked))),
  channel: (layout, key) => internal.rawSchema((s) => s.redisChannel(layout, key)),
  channels: (layout) => internal.rawSchema((s) => s.redisChannels(layout)),
  indexKeys: (layout, status) => internal.rawSchema((s) => s.redisIndexKeys(layout, status)),
});

/** A stored Redis value as the WIT record under `key` (the core decodes; store-failed when malformed). */
export function redisDecode(key, value) {
  return internal.rawSchema((s) => s.redisDecode(key, value));
}

/**
 * The core's DynamoDB layout (docs/stores.md, "DynamoDB"): every request is the
 * input of one API action in DynamoDB's own JSON form, `{ action, input }` with
 * `input` a JSON string (binary values as base64 under "B"), for the SDK's
 * low-level client; every answer goes back as JSON text. Each throws the core's
 * IntentkeyError:
 *  - defaultTable(), checkTable(table): invalid-argument (field table) for a name DynamoDB refuses;
 *  - createTable(table), describeTable(table), tableReady(outputJson): the table and its two indexes;
 *  - insert(table, record), complete(table, completion), replace(table, replacement):
 *    response-too-large for an item over 400 KB (nothing may be sent);
 *  - get(table, key), release(table, releaseRequest);
 *  - decode(itemJson): the WIT record (store-failed for an item not in the layout);
 *  - list(table, status, limit): one Query per bucket and status; nextPage(request,
 *    outputJson, got, want | undefined): the next page's request, or undefined;
 *    listed(limit, pagesJson): the records of every page, in one order;
 *  - purge(table, now): one Query per bucket; purgeDeletes(table, now, pageJson):
 *    the conditional DeleteItem of each record a page names;
 *  - classifyError(name, httpStatus | undefined): 'condition-failed' | 'retryable' | 'failed'
 *    (a 5xx under a name the core does not list is retryable).
 */
export const dynamoLayout = Object.freeze({
  defaultTable: () => internal.rawSchema((s) => s.dynamoDefaultTable()),
  checkTable: (table) => internal.rawSchema((s) => s.dynamoCheckTable(table)),
  createTable: (table) => internal.rawSchema((s) => s.dynamoCreateTable(table)),
  describeTable: (table) => internal.rawSchema((s) => s.dynamoDescribeTable(table)),
  tableReady: (output) => internal.rawSchema((s) => s.dynamoTableReady(output)),
  insert: (table, record) => internal.rawSchema((s) => s.dynamoInsert(table, record)),
  get: (table, key) => internal.rawSchema((s) => s.dynamoGet(table, key)),
  complete: (table, completion) => internal.rawSchema((s) => s.dynamoComplete(table, completion)),
  replace: (table, replacement) => internal.rawSchema((s) => s.dynamoReplace(table, replacement)),
  release: (table, request) => internal.rawSchema((s) => s.dynamoRelease(table, request)),
  decode: (item) => internal.rawSchema((s) => s.dynamoDecode(item)),
  list: (table, status, limit) => internal.rawSchema((s) => s.dynamoList(table, status, limit)),
  nextPage: (request, output, got, want) => internal.rawSchema((s) => s.dynamoNextPage(request, output, got, want)),
  listed: (limit, pages) => internal.rawSchema((s) => s.dynamoListed(limit, pages)),
  purge: (table, now) => internal.rawSchema((s) => s.dynamoPurge(table, BigInt(now))),
  purgeDeletes: (table, now, page) => internal.rawSchema((s) => s.dynamoPurgeDeletes(table, BigInt(now), page)),
  classifyError: (name, httpStatus) => internal.rawSchema((s) => s.dynamoClassifyError(name, httpStatus)),
});

/**
 * The core's statements of `dialect` ('sqlite', 'postgres' or 'mysql') for the
 * records table in `schema` (the unqualified table when undefined; MySQL: the
 * database that qualifies it), by name: { insert, get, complete, replace,
 * release, list, purge, migration-lock, migrated-version, record-migration, and
 * for PostgreSQL claim and complete-fast, for MySQL migration-unlock }, each
 * { name, preparedName (short, unique per statement and table), text, params,
 * binds }. `binds` says which of the `sqlParams` values goes to each
 * placeholder of `text`, in text order: 0, 1, 2, … for numbered placeholders;
 * MySQL's positional `?` may take one value twice (`list` binds the status
 * twice). Bind `binds.map((i) => values[i])`.
 */
export function sqlStatements(dialect, schema) {
  const list = internal.rawSchema((s) => s.sqlStatements(dialect, schema));
  return Object.freeze(
    Object.fromEntries(list.map((x) => [x.name, Object.freeze({ ...x, binds: Object.freeze(Array.from(x.binds)) })])),
  );
}

/**
 * The server error code with which `dialect`'s `insert` reports an existing key
 * (MySQL: 1062, ER_DUP_ENTRY), which the store answers as "not inserted";
 * undefined for a dialect whose insert reports no row instead.
 */
export function sqlDuplicateKeyError(dialect) {
  return internal.rawSchema((s) => s.sqlDuplicateKeyError(dialect)) ?? undefined;
}

/**
 * What the server error `code` means under `dialect`, by the core's one table
 * (WIT sql-classify-error): 'duplicate-key', 'connection-lost' (retryable; close
 * the connection), 'retryable' (the connection is fine) or 'failed'. Every code of
 * a dialect without numbered errors is 'failed'.
 */
export function sqlErrorClass(dialect, code) {
  if (!Number.isInteger(code) || code < 0 || code > 0xffff) return 'failed';
  return internal.rawSchema((s) => s.sqlClassifyError(dialect, code));
}

/**
 * The core's parameters (WIT sql-values: { tag: 'null' | 'integer' | 'text' |
 * 'bytes', val }) of the statement for a store operation: `insert` (a WIT record),
 * `get` (a key), `complete` (a completion), `replace` (a replacement), `release`
 * (a release request), `list` (status, limit) or `purge` (now).
 */
export function sqlParams(op, ...args) {
  return internal.rawSchema((s) => {
    switch (op) {
      case 'insert':
        return s.sqlInsertParams(args[0]);
      case 'get':
        return s.sqlGetParams(args[0]);
      case 'complete':
        return s.sqlCompleteParams(args[0]);
      case 'replace':
        return s.sqlReplaceParams(args[0]);
      case 'release':
        return s.sqlReleaseParams(args[0]);
      case 'list':
        return s.sqlListParams(args[0], args[1]);
      case 'purge':
        return s.sqlPurgeParams(BigInt(args[0]));
      case 'count':
        return s.sqlCountParams(args[0]);
      default:
        throw new Error(`intentkey: no SQL statement for ${op} (a bug)`);
    }
  });
}

/**
 * A row of `get` or `list` (sql-values, in the core's column order) as the WIT
 * record; a row intentkey did not write is a `failed` store error.
 */
export function sqlDecodeRow(values) {
  try {
    return internal.rawSchema((s) => s.sqlDecodeRow(values));
  } catch (e) {
    throw storeError('failed', e instanceof Error ? e.message : String(e), e);
  }
}

/**
 * A claim's answer as a store's `claim` gives it to the guard: true (it
 * inserted), false (it lost to a record it could not see: the flow reads it),
 * or the record it lost to. `claimed` is the core's sql-claimed.
 */
function claimAnswer(claimed) {
  switch (claimed.tag) {
    case 'won':
      return true;
    case 'lost':
      return false;
    default:
      return claimed.val;
  }
}

/** The row of the core's `claim` statement (sql-values: inserted, then the record's columns) as a claim's answer. */
export function sqlDecodeClaim(values) {
  try {
    return claimAnswer(internal.rawSchema((s) => s.sqlDecodeClaim(values)));
  } catch (e) {
    throw storeError('failed', e instanceof Error ? e.message : String(e), e);
  }
}

/**
 * The reply to the core's Redis `claim` script call for record `key` (an
 * integer, a stored value, or null) as a claim's answer; a reply the script
 * does not give is a `failed` store error.
 */
export function redisClaimed(key, reply) {
  const wit =
    reply === null || reply === undefined
      ? { tag: 'nil' }
      : typeof reply === 'number'
        ? { tag: 'integer', val: BigInt(reply) }
        : { tag: 'bulk', val: String(reply) };
  try {
    return claimAnswer(internal.rawSchema((s) => s.redisClaimed(key, wit)));
  } catch (e) {
    throw storeError('failed', e instanceof Error ? e.message : String(e), e);
  }
}

/**
 * The rows of the core's `count` statement (sql-values, one row per status
 * present) as { count, oldest }: how many records, and the oldest claim among
 * them (whole seconds; null when there is none). A row intentkey did not
 * write is a `failed` store error.
 */
export function sqlCounted(rows) {
  let count = 0;
  let oldest = null;
  for (const values of rows) {
    let c;
    try {
      c = internal.rawSchema((s) => s.sqlDecodeCount(values));
    } catch (e) {
      throw storeError('failed', e instanceof Error ? e.message : String(e), e);
    }
    count += Number(c.count);
    if (c.oldest !== undefined && c.oldest !== null && (oldest === null || Number(c.oldest) < oldest)) oldest = Number(c.oldest);
  }
  return { count, oldest };
}

/**
 * A store failure as the WIT `store-error` (jco lowers the `payload`):
 * `unavailable` (could not reach the store, or it was busy: retryable) or `failed`.
 */
export function storeError(kind, message, cause) {
  const e = new Error(message, cause === undefined ? undefined : { cause });
  e.name = 'StoreError';
  e.payload = { tag: kind, val: message };
  return e;
}

/**
 * The core's migration flow of `dialect` ('sqlite', 'postgres' or 'mysql';
 * `schema`: where PostgreSQL's tables live, or the MySQL database that
 * qualifies them): the one order in which every SQL store brings its schema up
 * to date. `step()` answers the first operation, `step(value)` the next one
 * after the last ran (`value`: a query's first column, null or undefined when
 * there was no row, ignored after a statement), each { query: boolean, text,
 * params (sql-values, one per placeholder in text order) } or { done: {
 * fromVersion, toVersion } }. SQLite and PostgreSQL run them in one
 * transaction, commit at done and roll back on any error; MySQL runs them with
 * autocommit on one connection (its DDL commits by itself) under a named lock
 * the flow takes first and gives back last, and closes that connection on any
 * error. A database at a newer schema throws the core's `store-failed`
 * IntentkeyError from `step`. `drop()` when done.
 */
export function migrationFlow(dialect, schema) {
  const flow = internal.migration(dialect, schema);
  let started = false;
  const shape = (raw) =>
    raw.tag === 'done'
      ? { done: raw.val }
      : { query: raw.val.tag === 'query', text: raw.val.val.text, params: raw.val.val.params };
  return {
    step(value) {
      if (!started) {
        started = true;
        return shape(flow.start());
      }
      return shape(flow.resume(value === undefined || value === null ? undefined : BigInt(value)));
    },
    drop: () => flow.drop(),
  };
}
