// The record table every store uses, version 1 (docs/store-schema.md, shared
// with the Rust host), and the mapping between its rows and the records of
// claims.js. Column names and types are exactly the document's.
import { STATUSES, recordIn } from '../claims.js';

/** The schema version this package writes and reads. */
export const SCHEMA_VERSION = 1;

/** The record table's columns, in the order recordToRow writes them. */
export const COLUMNS = [
  'key',
  'fingerprint',
  'tenant_id',
  'action_type',
  'status',
  'response_status',
  'response_content_type',
  'response_body',
  'created_at',
  'expires_at',
  'lookups',
  'next_lookup_at',
];

/**
 * Version 1's DDL, statement by statement; `table(name)` qualifies a name.
 * @param {(name: string) => string} table
 */
export function schemaV1(table = (name) => name) {
  return [
    `CREATE TABLE ${table('intentkey_records')} (
    key                   TEXT PRIMARY KEY,
    fingerprint           TEXT NOT NULL,
    tenant_id             TEXT NOT NULL,
    action_type           TEXT NOT NULL,
    status                TEXT NOT NULL,
    response_status       INTEGER,
    response_content_type TEXT,
    response_body         TEXT,
    created_at            BIGINT NOT NULL,
    expires_at            BIGINT,
    lookups               INTEGER NOT NULL DEFAULT 0,
    next_lookup_at        BIGINT
)`,
    `CREATE INDEX intentkey_records_expiry ON ${table('intentkey_records')} (expires_at)`,
  ];
}

/** The migrations table: PostgreSQL records applied versions in it (SQLite uses PRAGMA user_version). */
export function migrationsTable(table = (name) => name) {
  return `CREATE TABLE ${table('intentkey_schema_migrations')} (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`;
}

/** A record (checked to be one) as row values in COLUMNS order. */
export function recordToRow(record) {
  recordIn(record); // the same checks the core boundary makes: refuse a malformed record before writing it
  const r = record.response ?? null;
  return [
    record.key,
    record.fingerprint,
    record.tenantId,
    record.actionType,
    record.status,
    r === null ? null : r.status,
    r === null ? null : r.contentType,
    r === null ? null : r.body,
    record.createdAt,
    record.expiresAt ?? null,
    record.lookups ?? 0,
    record.nextLookupAt ?? null,
  ];
}

function seconds(value) {
  return value === null || value === undefined ? null : Number(value);
}

/** A row (BIGINTs as numbers, or as strings from pg) to a record. */
export function rowToRecord(row) {
  return {
    key: row.key,
    fingerprint: row.fingerprint,
    tenantId: row.tenant_id,
    actionType: row.action_type,
    status: row.status,
    response:
      row.response_status === null || row.response_status === undefined
        ? null
        : {
            status: Number(row.response_status),
            contentType: row.response_content_type ?? '',
            body: row.response_body ?? '',
          },
    createdAt: Number(row.created_at),
    expiresAt: seconds(row.expires_at),
    lookups: Number(row.lookups),
    nextLookupAt: seconds(row.next_lookup_at),
  };
}

/** Whole seconds for a store argument (`now`). */
export function checkNow(now) {
  if (!Number.isSafeInteger(now)) throw new TypeError('now must be whole seconds (a safe integer)');
  return now;
}

/** The status a list() asks for, checked. */
export function checkStatus(status) {
  if (!STATUSES.includes(status)) {
    throw new TypeError(`status must be one of ${STATUSES.join(', ')} (got ${String(status)})`);
  }
  return status;
}

/** How many records purge() reads per batch before asking the core about each. */
export const PURGE_BATCH = 500;
