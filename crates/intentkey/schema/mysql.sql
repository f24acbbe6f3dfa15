-- intentkey records: the MySQL / MariaDB statements (DML), the one source for
-- every runtime. The DDL is intentkey.sql beside this file, translated for
-- MySQL by the core (intentkey::claim::ddl); docs/stores.md describes how an
-- executor uses these.
--
-- Sections start with "-- statement NAME"; a statement ends with ";" at the end
-- of a line. {table} stands for the records table and {migrations} for the
-- migrations table, as the core names them (backquoted, database-qualified
-- when a store is given one). Parameters are written numbered (?1, ?2, …) in the
-- core's order, as in sqlite.sql; the core turns each into MySQL's positional
-- "?" and says which value binds to each, in text order (Statement::binds, WIT
-- sql-statement.binds), so ?1 written twice binds the first value twice.
--
-- The claim is a plain INSERT: a duplicate key fails with error 1062
-- (ER_DUP_ENTRY), which the executor reads as "not inserted" (the core's
-- Dialect::duplicate_key_error). Never INSERT … ON DUPLICATE KEY UPDATE (it
-- takes next-key locks and deadlocks under concurrent claims) and never SELECT …
-- FOR UPDATE before the insert (check-then-insert).
--
-- The fenced writes compare the owner token in their WHERE clause. An executor
-- connects with CLIENT_FOUND_ROWS, so an UPDATE counts the rows it matched,
-- not only the rows whose values changed.
--
-- A SELECT returns the record columns in the order the core decodes them
-- (sql-decode-row):
--   key, fingerprint, tenant_id, action_type, status, owner_token,
--   response_status, response_content_type, response_headers, response_body,
--   response_body_bytes, created_at, expires_at, lookups, next_lookup_at
-- `key` is a reserved word in MySQL: it is always backquoted.

-- statement insert
-- The claim: a plain insert; error 1062 when the key exists.
-- ?1 key, ?2 fingerprint, ?3 tenant_id, ?4 action_type, ?5 status, ?6 owner_token,
-- ?7 response_status, ?8 response_content_type, ?9 response_headers,
-- ?10 response_body_bytes, ?11 created_at, ?12 expires_at, ?13 lookups,
-- ?14 next_lookup_at
INSERT INTO {table} (`key`, fingerprint, tenant_id, action_type, status, owner_token,
    response_status, response_content_type, response_headers, response_body_bytes,
    created_at, expires_at, lookups, next_lookup_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14);

-- statement get
-- One record by key. ?1 key
SELECT `key`, fingerprint, tenant_id, action_type, status, owner_token, response_status,
    response_content_type, response_headers, response_body, response_body_bytes,
    created_at, expires_at, lookups, next_lookup_at
FROM {table} WHERE `key` = ?1;

-- statement complete
-- The fenced completion. ?1 key, ?2 owner_token, ?3 response_status,
-- ?4 response_content_type, ?5 response_headers, ?6 response_body_bytes,
-- ?7 expires_at
UPDATE {table} SET status = 'done', response_status = ?3, response_content_type = ?4,
    response_headers = ?5, response_body = NULL, response_body_bytes = ?6,
    expires_at = ?7, next_lookup_at = NULL
WHERE `key` = ?1 AND status = 'in_flight' AND owner_token = ?2;

-- statement replace
-- The fenced recovery write (and a human's reconciliation of a record awaiting it). ?1 key, ?2 expected owner_token, ?3 expected
-- lookups, ?4 status, ?5 owner_token, ?6 response_status,
-- ?7 response_content_type, ?8 response_headers, ?9 response_body_bytes,
-- ?10 created_at, ?11 expires_at, ?12 lookups, ?13 next_lookup_at
UPDATE {table} SET status = ?4, owner_token = ?5, response_status = ?6,
    response_content_type = ?7, response_headers = ?8, response_body = NULL,
    response_body_bytes = ?9, created_at = ?10, expires_at = ?11, lookups = ?12,
    next_lookup_at = ?13
WHERE `key` = ?1 AND status IN ('in_flight', 'needs_reconciliation') AND owner_token = ?2 AND lookups = ?3;

-- statement release
-- The fenced release ("nothing happened"). ?1 key, ?2 owner_token
DELETE FROM {table} WHERE `key` = ?1 AND status = 'in_flight' AND owner_token = ?2;

-- statement list
-- Records with one status (?1; every status when NULL), oldest first, at most ?2.
SELECT `key`, fingerprint, tenant_id, action_type, status, owner_token, response_status,
    response_content_type, response_headers, response_body, response_body_bytes,
    created_at, expires_at, lookups, next_lookup_at
FROM {table} WHERE (?1 IS NULL OR status = ?1)
ORDER BY created_at, `key` LIMIT ?2;

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

-- statement migration-lock
-- Migrations take this named lock first (a query: 1 when it was taken within 30
-- s). It is held by the session, not by a transaction: MySQL commits every
-- DDL statement on its own, so a migration cannot run in one transaction.
-- ?1 the lock (schema::MIGRATION_LOCK, WIT migration-lock).
SELECT GET_LOCK(CONCAT('intentkey-migration-', ?1), 30);

-- statement migration-unlock
-- The migration flow's last statement: gives the named lock back. ?1 the lock
DO RELEASE_LOCK(CONCAT('intentkey-migration-', ?1));

-- statement migrated-version
-- The highest migration applied (after the migrations-table statement). One row,
-- one integer.
SELECT COALESCE(MAX(version), 0) FROM {migrations};

-- statement record-migration
-- Records an applied migration. ?1 its version
INSERT INTO {migrations} (version, applied_at) VALUES (?1, UNIX_TIMESTAMP());
