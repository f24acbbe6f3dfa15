// What every store shares: the one schema (its DDL comes ONLY from the component's
// `schema` export, i.e. the core's crates/intentkey/schema/intentkey.sql, the file
// the Rust stores apply too), the mapping between its rows and the WIT records the
// component passes to the store operations, and the store errors the WIT `store`
// interface reports.
//
// Response bodies (schema version 3): every write puts the bytes in
// response_body_bytes (BYTEA / BLOB) and NULL in the legacy text column
// response_body; a read takes response_body_bytes, or else, for a record written
// before version 3, response_body's text as UTF-8 bytes.
import { internal } from '../node-core.js';
import { NO_HEADERS, STATUS_FROM_WIT, STATUS_TO_WIT } from '../claims.js';

export { TRUSTED } from './trusted.js';

/** The record table's columns, in the order recordParams writes them and the stores select them. */
export const COLUMNS = [
  'key',
  'fingerprint',
  'tenant_id',
  'action_type',
  'status',
  'owner_token',
  'response_status',
  'response_content_type',
  'response_headers',
  'response_body',
  'response_body_bytes',
  'created_at',
  'expires_at',
  'lookups',
  'next_lookup_at',
];

let cached = null;
/**
 * The schema, from the component: { migrations: [{ version, statements }],
 * migrationsTable, schemaVersion, migrationLock (a bigint), redisScripts:
 * [{ name, source }], redisDefaultPrefix, redisBatch }.
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
      }),
    );
  }
  return cached;
}

/**
 * The core's call of a Redis write script ({ script, keys, args }) for a store
 * operation under `prefix`: `insert` (a WIT record), `complete` (a completion),
 * `replace` (a replacement) or `release` (a release request).
 */
export function redisCall(op, prefix, value) {
  return internal.rawSchema((s) => {
    switch (op) {
      case 'insert':
        return s.redisInsert(prefix, value);
      case 'complete':
        return s.redisComplete(prefix, value);
      case 'replace':
        return s.redisReplace(prefix, value);
      case 'release':
        return s.redisRelease(prefix, value);
      default:
        throw new Error(`intentkey: no Redis call for ${op} (a bug)`);
    }
  });
}

/** A stored Redis value as the WIT record under `key` (the core decodes; store-failed when malformed). */
export function redisDecode(key, value) {
  return internal.rawSchema((s) => s.redisDecode(key, value));
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

/** The response_headers column: JSON text of [name, value] pairs, or null when there are none. */
export function headersToColumn(headers) {
  return headers.length === 0 ? null : JSON.stringify(headers);
}

/** The response_headers column back; a malformed one is a `failed` store error. */
export function headersFromColumn(text, key) {
  if (text === null || text === undefined || text === '') return NO_HEADERS;
  let pairs;
  try {
    pairs = JSON.parse(text);
  } catch {
    pairs = null;
  }
  if (
    !Array.isArray(pairs) ||
    !pairs.every((p) => Array.isArray(p) && p.length === 2 && typeof p[0] === 'string' && typeof p[1] === 'string')
  ) {
    throw storeError(
      'failed',
      `record ${key}: the stored response headers are not a JSON array of [name, value] string pairs; ` +
        'the row was written by something other than intentkey',
    );
  }
  return pairs;
}

const optionalBig = (v) => (v === null || v === undefined ? undefined : BigInt(v));

const encoder = new TextEncoder();

/** A body for the response_body_bytes column: a Buffer over the same bytes (both drivers bind Buffers). */
export function bodyToColumn(body) {
  return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

/**
 * The body of a row: response_body_bytes (a Buffer from either driver, copied
 * into a plain Uint8Array), or the legacy text of a record completed before
 * version 3 as UTF-8 bytes.
 */
export function bodyFromRow(row) {
  const bytes = row.response_body_bytes;
  if (bytes !== null && bytes !== undefined) return bytes.length === 0 ? new Uint8Array(0) : new Uint8Array(bytes);
  const legacy = row.response_body;
  if (typeof legacy === 'string' && legacy.length > 0) return encoder.encode(legacy);
  return new Uint8Array(0);
}

/** A row (BIGINTs as numbers, bigints or strings) to the WIT record. */
export function rowToRecord(row) {
  const key = row.key;
  const status = STATUS_TO_WIT.get(row.status);
  if (status === undefined) throw storeError('failed', `record ${key} has an unknown status ${JSON.stringify(row.status)}`);
  let response;
  if (row.response_status !== null && row.response_status !== undefined) {
    const code = Number(row.response_status);
    if (!Number.isInteger(code) || code < 0 || code > 65535) {
      throw storeError('failed', `record ${key} has response status ${row.response_status}`);
    }
    response = {
      status: code,
      contentType: row.response_content_type ?? '',
      headers: headersFromColumn(row.response_headers, key),
      body: bodyFromRow(row),
    };
  }
  return {
    key,
    fingerprint: row.fingerprint,
    tenantId: row.tenant_id,
    actionType: row.action_type,
    status,
    ownerToken: row.owner_token,
    response,
    createdAt: BigInt(row.created_at),
    expiresAt: optionalBig(row.expires_at),
    lookups: Number(row.lookups),
    nextLookupAt: optionalBig(row.next_lookup_at),
  };
}

/** A WIT record as row values, in COLUMNS order. */
export function recordParams(r) {
  const x = r.response;
  return [
    r.key,
    r.fingerprint,
    r.tenantId,
    r.actionType,
    STATUS_FROM_WIT.get(r.status),
    r.ownerToken,
    x === undefined || x === null ? null : x.status,
    x === undefined || x === null ? null : x.contentType,
    x === undefined || x === null ? null : headersToColumn(x.headers),
    null,
    x === undefined || x === null ? null : bodyToColumn(x.body),
    r.createdAt,
    r.expiresAt ?? null,
    r.lookups,
    r.nextLookupAt ?? null,
  ];
}

/** The statuses the WIT names, stored spelling (for list). */
export function storedStatus(witStatus) {
  const s = STATUS_FROM_WIT.get(witStatus);
  if (s === undefined) throw storeError('failed', `unknown status ${String(witStatus)}`);
  return s;
}

/** Why a schema version is refused. */
export function newerSchema(where, version, latest) {
  return new Error(
    `intentkey: this ${where} is at schema version ${version}; this package knows version ${latest} ` +
      '(upgrade intentkey)',
  );
}
