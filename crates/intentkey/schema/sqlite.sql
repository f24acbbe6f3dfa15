-- intentkey records: the SQLite statements (DML), the one source for every
-- runtime. The DDL is intentkey.sql beside this file; docs/stores.md describes
-- how an executor uses these.
--
-- Sections start with "-- statement NAME"; a statement ends with ";" at the end
-- of a line. {table} stands for the records table, as the core names it. The
-- parameters are numbered (?1, ?2, …) in the core's order (the same as
-- postgres.sql's; intentkey::claim::sql, exported through the WIT `schema`
-- interface as sql-*-params); a SELECT returns the record columns in the order
-- the core decodes them (sql-decode-row):
--   key, fingerprint, tenant_id, action_type, status, owner_token,
--   response_status, response_content_type, response_headers, response_body,
--   response_body_bytes, created_at, expires_at, lookups, next_lookup_at
-- SQLite migrations keep their version in PRAGMA user_version, so there are no
-- migration statements here.

-- statement insert
-- The claim: insert-on-conflict, one row or none.
-- ?1 key, ?2 fingerprint, ?3 tenant_id, ?4 action_type, ?5 status, ?6 owner_token,
-- ?7 response_status, ?8 response_content_type, ?9 response_headers,
-- ?10 response_body_bytes, ?11 created_at, ?12 expires_at, ?13 lookups,
-- ?14 next_lookup_at
INSERT INTO {table} (key, fingerprint, tenant_id, action_type, status, owner_token,
    response_status, response_content_type, response_headers, response_body_bytes,
    created_at, expires_at, lookups, next_lookup_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
ON CONFLICT (key) DO NOTHING;

-- statement get
-- One record by key. ?1 key
SELECT key, fingerprint, tenant_id, action_type, status, owner_token, response_status,
    response_content_type, response_headers, response_body, response_body_bytes,
    created_at, expires_at, lookups, next_lookup_at
FROM {table} WHERE key = ?1;

-- statement complete
-- The fenced completion. ?1 key, ?2 owner_token, ?3 response_status,
-- ?4 response_content_type, ?5 response_headers, ?6 response_body_bytes,
-- ?7 expires_at
UPDATE {table} SET status = 'done', response_status = ?3, response_content_type = ?4,
    response_headers = ?5, response_body = NULL, response_body_bytes = ?6,
    expires_at = ?7, next_lookup_at = NULL
WHERE key = ?1 AND status = 'in_flight' AND owner_token = ?2;

-- statement replace
-- The fenced recovery write (and a human's reconciliation of a record awaiting it). ?1 key, ?2 expected owner_token, ?3 expected
-- lookups, ?4 status, ?5 owner_token, ?6 response_status,
-- ?7 response_content_type, ?8 response_headers, ?9 response_body_bytes,
-- ?10 created_at, ?11 expires_at, ?12 lookups, ?13 next_lookup_at
UPDATE {table} SET status = ?4, owner_token = ?5, response_status = ?6,
    response_content_type = ?7, response_headers = ?8, response_body = NULL,
    response_body_bytes = ?9, created_at = ?10, expires_at = ?11, lookups = ?12,
    next_lookup_at = ?13
WHERE key = ?1 AND status IN ('in_flight', 'needs_reconciliation') AND owner_token = ?2 AND lookups = ?3;

-- statement release
-- The fenced release ("nothing happened"). ?1 key, ?2 owner_token
DELETE FROM {table} WHERE key = ?1 AND status = 'in_flight' AND owner_token = ?2;

-- statement list
-- Records with one status (?1; every status when NULL), oldest first, at most ?2.
SELECT key, fingerprint, tenant_id, action_type, status, owner_token, response_status,
    response_content_type, response_headers, response_body, response_body_bytes,
    created_at, expires_at, lookups, next_lookup_at
FROM {table} WHERE (?1 IS NULL OR status = ?1)
ORDER BY created_at, key LIMIT ?2;

-- statement count
-- How many records have one status (?1; every status when NULL), and the oldest
-- created_at among them: one row per status present (status, count, oldest).
-- With a status it reads the status index only (a cheap gauge of in_flight and
-- needs_reconciliation records).
SELECT status, count(*), min(created_at) FROM {table}
WHERE (?1 IS NULL OR status = ?1) GROUP BY status;

-- statement purge
-- Deletes the done records expired at ?1 (now).
DELETE FROM {table} WHERE status = 'done' AND expires_at <= ?1;
