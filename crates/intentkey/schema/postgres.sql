-- intentkey records: the PostgreSQL statements (DML), the one source for every
-- runtime. The DDL is intentkey.sql beside this file; docs/stores.md describes
-- how an executor uses these.
--
-- Sections start with "-- statement NAME"; a statement ends with ";" at the end
-- of a line. {table} stands for the records table, as the core names it (the
-- quoted, schema-qualified name when a store is given a schema). The parameter
-- order of each statement is the core's (intentkey::claim::sql, exported through
-- the WIT `schema` interface as sql-*-params); a SELECT returns the record
-- columns in the order the core decodes them (sql-decode-row):
--   key, fingerprint, tenant_id, action_type, status, owner_token,
--   response_status, response_content_type, response_headers, response_body,
--   response_body_bytes, created_at, expires_at, lookups, next_lookup_at
--
-- The fenced writes (complete, complete-fast, replace, release) test the status
-- as `(status = …) IS TRUE`: the same rows as `status = …`, but not a condition
-- the status index can serve, so the planner always finds the row by its key.
-- Written plainly, statistics that see few records in flight (the usual case)
-- lead the planner to the status index instead, which then reads every
-- in-flight entry, live or not yet vacuumed, on every write
-- (host/store/tests/pg_plans.rs).

-- statement insert
-- The claim: insert-on-conflict, one row or none.
-- $1 key, $2 fingerprint, $3 tenant_id, $4 action_type, $5 status, $6 owner_token,
-- $7 response_status, $8 response_content_type, $9 response_headers,
-- $10 response_body_bytes, $11 created_at, $12 expires_at, $13 lookups,
-- $14 next_lookup_at
INSERT INTO {table} (key, fingerprint, tenant_id, action_type, status, owner_token,
    response_status, response_content_type, response_headers, response_body_bytes,
    created_at, expires_at, lookups, next_lookup_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT (key) DO NOTHING;

-- statement claim
-- The claim in one round trip: the insert above (the same parameters) and, when
-- it loses, the record it lost to, read in the same statement. One row of two
-- columns: inserted (1 or 0), then the record as one JSON object (row_to_json:
-- its columns by name, response_body_bytes as the server writes bytea as text,
-- hex or escape), NULL when the insert won, or when the winner committed after
-- the statement began and is not visible to it: read it with get. The record is
-- one column rather than fifteen because the server sets up the output of every
-- column of an answer at each execution, whether the column holds anything or
-- not (about 5 µs for fifteen columns, paid by the first request, which reads
-- nothing); only a claim that lost builds the JSON.
WITH ins AS (
    INSERT INTO {table} (key, fingerprint, tenant_id, action_type, status, owner_token,
        response_status, response_content_type, response_headers, response_body_bytes,
        created_at, expires_at, lookups, next_lookup_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
    ON CONFLICT (key) DO NOTHING
    RETURNING key
)
SELECT CASE WHEN EXISTS (SELECT 1 FROM ins) THEN 1 ELSE 0 END,
    (SELECT row_to_json(r)::text FROM {table} r
     WHERE r.key = $1 AND NOT EXISTS (SELECT 1 FROM ins));

-- statement get
-- One record by key. $1 key
SELECT key, fingerprint, tenant_id, action_type, status, owner_token, response_status,
    response_content_type, response_headers, response_body, response_body_bytes,
    created_at, expires_at, lookups, next_lookup_at
FROM {table} WHERE key = $1;

-- statement complete
-- The fenced completion. $1 key, $2 owner_token, $3 response_status,
-- $4 response_content_type, $5 response_headers, $6 response_body_bytes,
-- $7 expires_at
UPDATE {table} SET status = 'done', response_status = $3, response_content_type = $4,
    response_headers = $5, response_body = NULL, response_body_bytes = $6,
    expires_at = $7, next_lookup_at = NULL
WHERE key = $1 AND (status = 'in_flight') IS TRUE AND owner_token = $2;

-- statement complete-fast
-- The fenced completion whose commit does not wait for the WAL to reach the disk
-- (Rules::fast_completion): set_config(…, true) is SET LOCAL synchronous_commit
-- = off for the statement's own transaction, so it needs no session of its own.
-- The parameters of complete.
UPDATE {table} AS r SET status = 'done', response_status = $3, response_content_type = $4,
    response_headers = $5, response_body = NULL, response_body_bytes = $6,
    expires_at = $7, next_lookup_at = NULL
FROM (SELECT set_config('synchronous_commit', 'off', true)) AS fast (setting)
WHERE r.key = $1 AND (r.status = 'in_flight') IS TRUE AND r.owner_token = $2;

-- statement replace
-- The fenced recovery write (and a human's reconciliation of a record awaiting it). $1 key, $2 expected owner_token, $3 expected
-- lookups, $4 status, $5 owner_token, $6 response_status,
-- $7 response_content_type, $8 response_headers, $9 response_body_bytes,
-- $10 created_at, $11 expires_at, $12 lookups, $13 next_lookup_at
UPDATE {table} SET status = $4, owner_token = $5, response_status = $6,
    response_content_type = $7, response_headers = $8, response_body = NULL,
    response_body_bytes = $9, created_at = $10, expires_at = $11, lookups = $12,
    next_lookup_at = $13
WHERE key = $1 AND (status IN ('in_flight', 'needs_reconciliation')) IS TRUE
    AND owner_token = $2 AND lookups = $3;

-- statement release
-- The fenced release ("nothing happened"). $1 key, $2 owner_token
DELETE FROM {table} WHERE key = $1 AND (status = 'in_flight') IS TRUE AND owner_token = $2;

-- statement list
-- Records with one status ($1; every status when NULL), oldest first, at most $2.
SELECT key, fingerprint, tenant_id, action_type, status, owner_token, response_status,
    response_content_type, response_headers, response_body, response_body_bytes,
    created_at, expires_at, lookups, next_lookup_at
FROM {table} WHERE ($1::text IS NULL OR status = $1)
ORDER BY created_at, key LIMIT $2;

-- statement count
-- How many records have one status ($1; every status when NULL), and the oldest
-- created_at among them: one row per status present (status, count, oldest).
-- With a status it reads the status index only (a cheap gauge of in_flight and
-- needs_reconciliation records).
SELECT status, count(*), min(created_at) FROM {table}
WHERE ($1::text IS NULL OR status = $1) GROUP BY status;

-- statement purge
-- Deletes the done records expired at $1 (now).
DELETE FROM {table} WHERE status = 'done' AND expires_at <= $1;

-- statement migration-lock
-- Migrations (intentkey.sql), in one transaction: this lock first. $1 the lock
-- (schema::MIGRATION_LOCK, WIT migration-lock).
SELECT pg_advisory_xact_lock($1);

-- statement migrated-version
-- The highest migration applied (after the migrations-table statement). One row,
-- one integer.
SELECT coalesce(max(version), 0) FROM intentkey_schema_migrations;

-- statement record-migration
-- Records an applied migration. $1 its version
INSERT INTO intentkey_schema_migrations (version, applied_at)
VALUES ($1, extract(epoch from now())::bigint);

-- statement listen
-- Subscribes this session to the records' change notifications: run once on
-- the one connection per process that wakes waiters (never one per request).
-- {channel} is the core's channel name (sql::channel).
LISTEN {channel};

-- statement notify
-- Wakes the waiters of a record: sent by a writer whose completion, release or
-- recovery write changed the record (when waiting is on). $1 key
SELECT pg_notify('{channel}', $1);
