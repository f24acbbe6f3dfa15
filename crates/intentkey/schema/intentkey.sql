-- The intentkey store schema: the one source for every runtime.
--
-- The Rust stores (host/store) and the npm package's stores (js/src/stores)
-- both apply exactly these statements, read from this file through the core
-- (`intentkey::claim::schema`, exported to JS through the WIT `schema`
-- interface), so a database migrated by one runtime is served by the other.
-- Every statement is accepted by both PostgreSQL and SQLite.
--
-- Applying: PostgreSQL runs the migrations table statement, then every
-- migration above the highest recorded version, in one transaction holding
-- pg_advisory_xact_lock(7316502411), recording each version in
-- intentkey_schema_migrations. SQLite runs the migrations above
-- PRAGMA user_version inside BEGIN IMMEDIATE and sets user_version.
-- MySQL and MariaDB run it translated by the core (intentkey::claim::ddl),
-- under a named lock: a new database gets the latest table in one CREATE
-- TABLE IF NOT EXISTS. Keywords are written in upper case and identifiers in
-- lower case here; the translation relies on it.
-- A store that finds a version above the latest refuses to start.
--
-- Sections start with "-- migrations-table" or "-- migration N"; statements end
-- with ";" at the end of a line.

-- migrations-table
CREATE TABLE IF NOT EXISTS intentkey_schema_migrations (
    version    INTEGER PRIMARY KEY,
    applied_at BIGINT NOT NULL
);

-- migration 1
CREATE TABLE intentkey_records (
    key                   TEXT PRIMARY KEY,
    fingerprint           TEXT NOT NULL,
    tenant_id             TEXT NOT NULL,
    action_type           TEXT NOT NULL,
    status                TEXT NOT NULL CHECK (status IN ('in_flight', 'done', 'needs_reconciliation')),
    response_status       INTEGER,
    response_content_type TEXT,
    response_body         TEXT,
    created_at            BIGINT NOT NULL,
    expires_at            BIGINT,
    lookups               INTEGER NOT NULL DEFAULT 0,
    next_lookup_at        BIGINT
);
CREATE INDEX intentkey_records_expiry ON intentkey_records (expires_at);

-- migration 2
-- Fencing: every claim writes an owner token; completion, release and every
-- recovery write compare-and-set on it. Records claimed before version 2 get
-- the empty token, which no claim writes (tokens are 32 hex characters).
ALTER TABLE intentkey_records ADD COLUMN owner_token TEXT NOT NULL DEFAULT '';
-- Replayable response headers: a JSON array of [name, value] pairs.
ALTER TABLE intentkey_records ADD COLUMN response_headers TEXT;
CREATE INDEX intentkey_records_status ON intentkey_records (status, created_at);

-- migration 3
-- Response bodies as bytes, so binary bodies (a PDF, an image) replay byte
-- for byte. Every write sets response_body_bytes and leaves response_body
-- NULL; a record written before version 3 keeps its text in response_body,
-- which readers use when response_body_bytes is NULL.
ALTER TABLE intentkey_records ADD COLUMN response_body_bytes BYTEA;
