//! Every statement against the records table, per SQL dialect, with its
//! parameter order and the reading of its rows: written once, here, for
//! every runtime.
//!
//! The DDL is [`super::schema`]'s; the DML sits beside it, one file per
//! dialect (`schema/sqlite.sql`, `schema/postgres.sql`, `schema/mysql.sql`), loaded with
//! `include_str!` and parsed into named statements ([`Kind`]). A host store
//! is an executor: it prepares the text of [`statements`], binds the values
//! this module makes from a record ([`insert_params`], [`complete_params`],
//! …) and hands the rows back to [`decode_row`] / [`decode_claim`]. The Rust
//! stores (`intentkey-store`, `intentkey-axum`) call this module; the npm
//! package calls it through the WIT `schema` interface (`sql-*`).
//! `docs/stores.md` says how to add a dialect.
//!
//! `{table}` in a statement file stands for the records table: the
//! unqualified `intentkey_records` (found through `search_path`, SQLite's
//! `main` or MySQL's current database), or `"schema".intentkey_records` when a
//! store is given a schema (MySQL: `` `database`.`intentkey_records` ``);
//! `{migrations}` likewise for the migrations table.
//!
//! MySQL's placeholders are positional (`?`): its file writes them numbered
//! in the core's order, like SQLite's, and [`Statement::binds`] says which
//! value binds to each `?` in text order ([`bind`] reorders them).
//! Each statement also has a prepared-statement name, short (PostgreSQL cuts
//! names at 63 bytes) and unique per statement and qualified table:
//! `ik-{statement}-{12 hex digits of SHA-256 of the qualified table}`.
//!
//! ```
//! use intentkey::claim::sql::{self, Dialect, Kind, Value};
//! use intentkey::claim::{Attempt, Record};
//!
//! let statements = sql::statements(Dialect::Postgres, Some("billing"))?;
//! let insert = statements.statement(Kind::Insert)?;
//! assert!(insert.text.starts_with(r#"INSERT INTO "billing".intentkey_records (key,"#));
//! assert!(insert.prepared_name.starts_with("ik-insert-") && insert.prepared_name.len() <= 63);
//!
//! let attempt = Attempt { key: "k1".into(), fingerprint: "fp".into(), tenant_id: "t1".into(), action_type: "pix.send".into(), prior: None };
//! let record = Record::in_flight(&attempt, &"ab".repeat(16), 1_700_000_000);
//! let params = sql::insert_params(&record);
//! assert_eq!(params.len(), insert.params.len());
//! assert_eq!(params[0], Value::Text("k1".into()));
//! # Ok::<(), intentkey::Error>(())
//! ```

use sha2::{Digest, Sha256};

use super::flow::{Completion, Release, Replacement};
use super::record::{Record, Response, Status};
use super::schema::{headers_from_column, headers_to_column};
use crate::{Error, ErrorCode};

/// The SQLite statements, verbatim.
pub const SQLITE_SQL: &str = include_str!("../../schema/sqlite.sql");

/// The PostgreSQL statements, verbatim.
pub const POSTGRES_SQL: &str = include_str!("../../schema/postgres.sql");

/// The MySQL / MariaDB statements, verbatim (numbered placeholders; see
/// [`Statement::binds`]).
pub const MYSQL_SQL: &str = include_str!("../../schema/mysql.sql");

/// MySQL's `ER_DUP_ENTRY`: the plain `INSERT` of a claim lost to an existing key.
pub const MYSQL_DUPLICATE_KEY: u16 = 1062;

/// The records table, unqualified.
pub const TABLE: &str = "intentkey_records";

/// The placeholder a statement file writes for the records table.
pub const TABLE_PLACEHOLDER: &str = "{table}";

/// The migrations table, unqualified.
pub const MIGRATIONS_TABLE: &str = "intentkey_schema_migrations";

/// The placeholder a statement file writes for the migrations table.
pub const MIGRATIONS_PLACEHOLDER: &str = "{migrations}";

/// What stands for the change-notification channel ([`channel`]) in a
/// statement file.
pub const CHANNEL_PLACEHOLDER: &str = "{channel}";

/// The channel on which the records of a table (in `schema`) notify their
/// changes ([`Kind::Listen`], [`Kind::Notify`]): `intentkey_records`, or
/// `intentkey_records_` and 12 hex digits of the schema name's SHA-256 (a
/// plain identifier of at most 63 bytes, whatever the schema is called).
///
/// ```
/// use intentkey::claim::sql::channel;
/// assert_eq!(channel(None), "intentkey_records");
/// assert_eq!(channel(Some("billing")).len(), "intentkey_records_".len() + 12);
/// assert_ne!(channel(Some("billing")), channel(Some("payments")));
/// ```
pub fn channel(schema: Option<&str>) -> String {
    use sha2::{Digest, Sha256};
    match schema {
        None => TABLE.to_owned(),
        Some(s) => {
            let digest = Sha256::digest(s.as_bytes());
            format!("{TABLE}_{}", &crate::key::to_hex(&digest[..6]))
        }
    }
}

/// The record columns, in the order every `SELECT` returns them and
/// [`decode_row`] reads them.
pub const COLUMNS: [&str; 15] = [
    "key",
    "fingerprint",
    "tenant_id",
    "action_type",
    "status",
    "owner_token",
    "response_status",
    "response_content_type",
    "response_headers",
    "response_body",
    "response_body_bytes",
    "created_at",
    "expires_at",
    "lookups",
    "next_lookup_at",
];

/// A SQL dialect with a statement file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// `schema/sqlite.sql`: numbered parameters `?1`, `?2`, ….
    Sqlite,
    /// `schema/postgres.sql`: parameters `$1`, `$2`, ….
    Postgres,
    /// `schema/mysql.sql` (MySQL 8, MariaDB 10.5 and later): positional `?`
    /// parameters bound in [`Statement::binds`] order; the claim is a plain
    /// `INSERT` whose duplicate-key error ([`Dialect::duplicate_key_error`])
    /// means "not inserted".
    Mysql,
}

impl Dialect {
    /// Every dialect.
    pub const ALL: [Dialect; 3] = [Dialect::Sqlite, Dialect::Postgres, Dialect::Mysql];

    /// `sqlite`, `postgres` or `mysql`.
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Sqlite => "sqlite",
            Dialect::Postgres => "postgres",
            Dialect::Mysql => "mysql",
        }
    }

    /// The dialect's statement file.
    pub fn source(self) -> &'static str {
        match self {
            Dialect::Sqlite => SQLITE_SQL,
            Dialect::Postgres => POSTGRES_SQL,
            Dialect::Mysql => MYSQL_SQL,
        }
    }

    /// The server error code with which the `insert` statement reports that
    /// the key exists, when the dialect reports it as an error rather than
    /// as no row inserted: MySQL's 1062 (`ER_DUP_ENTRY`). An executor that
    /// gets it answers "not inserted"; every other error stays an error.
    pub fn duplicate_key_error(self) -> Option<u16> {
        match self {
            Dialect::Mysql => Some(MYSQL_DUPLICATE_KEY),
            Dialect::Sqlite | Dialect::Postgres => None,
        }
    }

    /// What the server error `code` means, for a dialect whose server
    /// reports numbered errors (MySQL and MariaDB, server and client codes):
    /// one table every host reads, so a Rust, Node and Python store retry
    /// the same errors. Every code of the other dialects is
    /// [`ErrorClass::Failed`] (their hosts read SQLSTATEs and driver errors).
    ///
    /// ```
    /// use intentkey::claim::sql::{Dialect, ErrorClass};
    /// assert_eq!(Dialect::Mysql.error_class(1062), ErrorClass::DuplicateKey);
    /// assert_eq!(Dialect::Mysql.error_class(1213), ErrorClass::Retryable);
    /// assert_eq!(Dialect::Mysql.error_class(2013), ErrorClass::ConnectionLost);
    /// assert_eq!(Dialect::Mysql.error_class(1406), ErrorClass::Failed);
    /// ```
    pub fn error_class(self, code: u16) -> ErrorClass {
        if self != Dialect::Mysql {
            return ErrorClass::Failed;
        }
        match code {
            MYSQL_DUPLICATE_KEY => ErrorClass::DuplicateKey,
            // Server shutdown, connection killed (MariaDB), disconnected for
            // inactivity (MySQL 8); every client error (2000-2999: refused,
            // gone away, lost during a query).
            1053 | 1927 | 4031 | 2000..=2999 => ErrorClass::ConnectionLost,
            // Too many connections (server, user), lock wait timeout,
            // deadlock victim, query interrupted.
            1040 | 1203 | 1205 | 1213 | 1317 => ErrorClass::Retryable,
            _ => ErrorClass::Failed,
        }
    }

    /// `name` as a quoted identifier of this dialect: `"name"` (`"`
    /// doubled), or MySQL's `` `name` `` (`` ` `` doubled).
    ///
    /// # Errors
    /// `invalid-argument` naming `schema` when it is empty or holds a NUL.
    pub fn quote_identifier(self, name: &str) -> crate::Result<String> {
        if name.is_empty() || name.contains('\0') {
            return Err(Error::field(
                ErrorCode::InvalidArgument,
                "schema",
                "a schema name must be non-empty, without NUL characters",
            ));
        }
        Ok(match self {
            Dialect::Mysql => format!("`{}`", name.replace('`', "``")),
            Dialect::Sqlite | Dialect::Postgres => format!("\"{}\"", name.replace('"', "\"\"")),
        })
    }

    /// The table `name` as this dialect's statements name it: unqualified,
    /// or in `schema` (quoted). MySQL always quotes.
    ///
    /// # Errors
    /// `invalid-argument` for an empty schema name.
    pub fn table(self, name: &str, schema: Option<&str>) -> crate::Result<String> {
        let bare = match self {
            Dialect::Mysql => self.quote_identifier(name)?,
            Dialect::Sqlite | Dialect::Postgres => name.to_owned(),
        };
        match schema {
            None => Ok(bare),
            Some(s) => Ok(format!("{}.{bare}", self.quote_identifier(s)?)),
        }
    }
}

/// What a server error code means to a store ([`Dialect::error_class`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// The `insert` lost to an existing key: "not inserted", not an error.
    DuplicateKey,
    /// The connection is gone (killed, timed out, the server shut down or
    /// went away): retryable, and the connection is closed, not reused.
    ConnectionLost,
    /// Nothing was written and a retry may get past it (a lock wait timed
    /// out, a deadlock's victim, too many connections, an interrupted
    /// query); the connection is fit for the next statement.
    Retryable,
    /// Anything else: `store-failed`.
    Failed,
}

impl ErrorClass {
    /// `duplicate-key`, `connection-lost`, `retryable` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::DuplicateKey => "duplicate-key",
            ErrorClass::ConnectionLost => "connection-lost",
            ErrorClass::Retryable => "retryable",
            ErrorClass::Failed => "failed",
        }
    }
}

/// A statement, by what it does. Every dialect has the [`Kind::REQUIRED`]
/// ones; the others are optional (a host checks [`Statements::get`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Insert-on-conflict ([`insert_params`]); one row changed or none.
    Insert,
    /// The insert and, when it lost, the record it lost to, in one round
    /// trip ([`insert_params`]; one row, read by [`decode_claim`]). Optional.
    Claim,
    /// One record by key ([`get_params`]; zero or one row).
    Get,
    /// The fenced completion ([`complete_params`]).
    Complete,
    /// The fenced completion, committed without waiting for the disk
    /// ([`complete_params`]). Optional.
    CompleteFast,
    /// The fenced recovery write ([`replace_params`]).
    Replace,
    /// The fenced release ([`release_params`]).
    Release,
    /// Records by status, oldest first ([`list_params`]).
    List,
    /// Deletes expired `done` records ([`purge_params`]); the count changed.
    Purge,
    /// The migration transaction's advisory lock (`$1`: the lock). Optional.
    MigrationLock,
    /// The highest applied migration (no parameters; one integer). Optional.
    MigratedVersion,
    /// Records an applied migration (`$1`: its version). Optional.
    RecordMigration,
    /// Gives back the migration lock when it outlives the transaction
    /// (MySQL's named lock; `$1`: the lock). Optional.
    MigrationUnlock,
    /// Subscribes the session to the records' change notifications
    /// (PostgreSQL `LISTEN`, on the one connection per process that waits;
    /// no parameters). Optional.
    Listen,
    /// Notifies the waiters that a record changed (`$1`: its key), sent by
    /// a writer after a completion, release or recovery write that changed
    /// a record (PostgreSQL `pg_notify`). Optional.
    Notify,
    /// How many records have a status, and the oldest `created_at` among
    /// them ([`count_params`]; one row per status present, read by
    /// [`decode_count`]). Optional.
    Count,
}

impl Kind {
    /// Every statement kind.
    pub const ALL: [Kind; 16] = [
        Kind::Insert,
        Kind::Claim,
        Kind::Get,
        Kind::Complete,
        Kind::CompleteFast,
        Kind::Replace,
        Kind::Release,
        Kind::List,
        Kind::Purge,
        Kind::MigrationLock,
        Kind::MigratedVersion,
        Kind::RecordMigration,
        Kind::MigrationUnlock,
        Kind::Listen,
        Kind::Notify,
        Kind::Count,
    ];

    /// What every dialect's file holds.
    pub const REQUIRED: [Kind; 7] = [
        Kind::Insert,
        Kind::Get,
        Kind::Complete,
        Kind::Replace,
        Kind::Release,
        Kind::List,
        Kind::Purge,
    ];

    /// Its name in the statement files and the WIT: `insert`, `claim`,
    /// `get`, `complete`, `complete-fast`, `replace`, `release`, `list`,
    /// `purge`, `migration-lock`, `migrated-version`, `record-migration`,
    /// `migration-unlock`, `listen`, `notify`, `count`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Insert => "insert",
            Kind::Claim => "claim",
            Kind::Get => "get",
            Kind::Complete => "complete",
            Kind::CompleteFast => "complete-fast",
            Kind::Replace => "replace",
            Kind::Release => "release",
            Kind::List => "list",
            Kind::Purge => "purge",
            Kind::MigrationLock => "migration-lock",
            Kind::MigratedVersion => "migrated-version",
            Kind::RecordMigration => "record-migration",
            Kind::MigrationUnlock => "migration-unlock",
            Kind::Listen => "listen",
            Kind::Notify => "notify",
            Kind::Count => "count",
        }
    }

    /// The kind named `name`.
    pub fn parse(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// What binds to each parameter, in order (`$1`, `$2`, … / `?1`, `?2`, …).
    pub fn params(self) -> &'static [&'static str] {
        match self {
            Kind::Insert | Kind::Claim => &INSERT_PARAMS,
            Kind::Get => &["key"],
            Kind::Complete | Kind::CompleteFast => &COMPLETE_PARAMS,
            Kind::Replace => &REPLACE_PARAMS,
            Kind::Release => &["key", "owner_token"],
            Kind::List => &["status", "limit"],
            Kind::Purge => &["now"],
            Kind::MigrationLock | Kind::MigrationUnlock => &["migration_lock"],
            Kind::MigratedVersion | Kind::Listen => &[],
            Kind::Notify => &["key"],
            Kind::Count => &["status"],
            Kind::RecordMigration => &["version"],
        }
    }
}

const INSERT_PARAMS: [&str; 14] = [
    "key",
    "fingerprint",
    "tenant_id",
    "action_type",
    "status",
    "owner_token",
    "response_status",
    "response_content_type",
    "response_headers",
    "response_body_bytes",
    "created_at",
    "expires_at",
    "lookups",
    "next_lookup_at",
];

const COMPLETE_PARAMS: [&str; 7] = [
    "key",
    "owner_token",
    "response_status",
    "response_content_type",
    "response_headers",
    "response_body_bytes",
    "expires_at",
];

const REPLACE_PARAMS: [&str; 13] = [
    "key",
    "expected_token",
    "expected_lookups",
    "status",
    "owner_token",
    "response_status",
    "response_content_type",
    "response_headers",
    "response_body_bytes",
    "created_at",
    "expires_at",
    "lookups",
    "next_lookup_at",
];

/// One parameter or column value, as every SQL driver has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// An integer (the executor binds it at the parameter's width).
    Integer(i64),
    /// Text.
    Text(String),
    /// Bytes (`BYTEA`, `BLOB`).
    Bytes(Vec<u8>),
}

/// One statement, ready for a host to prepare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    /// What it does.
    pub kind: Kind,
    /// Its prepared-statement name: `ik-{kind}-{table hash}`, at most 63 bytes.
    pub prepared_name: String,
    /// Its text, with the table named.
    pub text: String,
    /// What binds to each parameter, in order ([`Kind::params`]).
    pub params: &'static [&'static str],
    /// Which value binds to each placeholder of the text, in text order:
    /// an index into [`Statement::params`]. `0, 1, 2, …` for the numbered
    /// placeholders of PostgreSQL and SQLite; MySQL's positional `?` may
    /// bind a value twice or in another order ([`bind`]).
    pub binds: Vec<usize>,
}

/// A dialect's statements for one table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statements {
    dialect: Dialect,
    table: String,
    list: Vec<Statement>,
}

impl Statements {
    /// The dialect.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The table, as the statements name it.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Every statement of the dialect, in file order.
    pub fn all(&self) -> &[Statement] {
        &self.list
    }

    /// The statement of `kind`, when the dialect has one.
    pub fn get(&self, kind: Kind) -> Option<&Statement> {
        self.list.iter().find(|s| s.kind == kind)
    }

    /// The statement of `kind`.
    ///
    /// # Errors
    /// `store-failed` when the dialect has none (never for [`Kind::REQUIRED`]).
    pub fn statement(&self, kind: Kind) -> crate::Result<&Statement> {
        self.get(kind).ok_or_else(|| {
            Error::field(
                ErrorCode::StoreFailed,
                "statement",
                format!(
                    "the {} statements have no {} statement",
                    self.dialect.as_str(),
                    kind.as_str()
                ),
            )
        })
    }

    /// The text of a [`Kind::REQUIRED`] statement (empty for an optional one
    /// the dialect lacks: use [`Statements::get`] for those).
    pub fn text(&self, kind: Kind) -> &str {
        self.get(kind).map_or("", |s| s.text.as_str())
    }
}

/// `name` as a quoted identifier: `"name"`, with `"` doubled (PostgreSQL
/// and SQLite; [`Dialect::quote_identifier`] for every dialect).
///
/// # Errors
/// `invalid-argument` naming `schema` when it is empty or holds a NUL.
pub fn quote_identifier(name: &str) -> crate::Result<String> {
    Dialect::Postgres.quote_identifier(name)
}

/// The records table as the PostgreSQL and SQLite statements name it:
/// `intentkey_records`, or `"schema".intentkey_records`
/// ([`Dialect::table`] for every dialect).
///
/// # Errors
/// `invalid-argument` for an empty schema name ([`quote_identifier`]).
pub fn qualified_table(schema: Option<&str>) -> crate::Result<String> {
    Dialect::Postgres.table(TABLE, schema)
}

/// `values` (in [`Kind::params`] order) in the order the statement's
/// placeholders bind them ([`Statement::binds`]): what a MySQL executor
/// hands its driver. An index past `values` binds NULL (never for the
/// core's own parameter lists, which its tests check).
pub fn bind(statement: &Statement, values: &[Value]) -> Vec<Value> {
    statement
        .binds
        .iter()
        .map(|&i| values.get(i).cloned().unwrap_or(Value::Null))
        .collect()
}

/// `text` with its numbered `?N` placeholders made positional `?`, and the
/// value index of each in text order. Text in single quotes or backquotes
/// is left alone.
fn positional(text: &str) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(text.len());
    let mut binds = Vec::new();
    let mut quote: Option<char> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '`') => quote = Some(c),
            (None, '?') => {
                let mut n = 0usize;
                let mut digits = 0;
                while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                    n = n.saturating_mul(10).saturating_add(d as usize);
                    digits += 1;
                    chars.next();
                }
                if digits > 0 {
                    binds.push(n.saturating_sub(1));
                }
            }
            (None, _) => {}
        }
    }
    (out, binds)
}

/// The prepared-statement name of `kind` on `table` (the qualified name):
/// short and unique per statement and table.
pub fn prepared_name(kind: Kind, table: &str) -> String {
    let digest = Sha256::digest(table.as_bytes());
    format!("ik-{}-{}", kind.as_str(), crate::key::to_hex(&digest[..6]))
}

/// The named sections of a statement file, with the statements' text
/// (comments dropped, the trailing `;` removed).
fn sections(source: &str) -> Vec<(&str, String)> {
    let mut out: Vec<(&str, String)> = Vec::new();
    for line in source.lines() {
        let trimmed = line.trim();
        if let Some(name) = trimmed.strip_prefix("-- statement ") {
            out.push((name.trim(), String::new()));
            continue;
        }
        if trimmed.starts_with("--") || trimmed.is_empty() {
            continue;
        }
        if let Some((_, text)) = out.last_mut() {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(line.trim_end());
        }
    }
    for (_, text) in &mut out {
        if let Some(stripped) = text.strip_suffix(';') {
            *text = stripped.to_owned();
        }
    }
    out
}

/// The statements of `dialect` for the records table in `schema` (none:
/// the unqualified table).
///
/// # Errors
/// `invalid-argument` for an empty schema name; `store-failed` when the
/// statement file is malformed (a bug the core's tests catch).
pub fn statements(dialect: Dialect, schema: Option<&str>) -> crate::Result<Statements> {
    let table = dialect.table(TABLE, schema)?;
    let migrations = dialect.table(MIGRATIONS_TABLE, schema)?;
    let channel = channel(schema);
    let malformed = |what: String| {
        Error::field(
            ErrorCode::StoreFailed,
            "statement",
            format!("the {} statement file: {what}", dialect.as_str()),
        )
    };
    let mut list: Vec<Statement> = Vec::new();
    for (name, text) in sections(dialect.source()) {
        let kind =
            Kind::parse(name).ok_or_else(|| malformed(format!("unknown statement {name:?}")))?;
        if list.iter().any(|s| s.kind == kind) {
            return Err(malformed(format!("{name} twice")));
        }
        if text.is_empty() || text.contains(';') {
            return Err(malformed(format!("{name} is not one statement")));
        }
        let text = text
            .replace(TABLE_PLACEHOLDER, &table)
            .replace(MIGRATIONS_PLACEHOLDER, &migrations)
            .replace(CHANNEL_PLACEHOLDER, &channel);
        let (text, binds) = match dialect {
            Dialect::Mysql => positional(&text),
            Dialect::Sqlite | Dialect::Postgres => (text, (0..kind.params().len()).collect()),
        };
        list.push(Statement {
            kind,
            prepared_name: prepared_name(kind, &table),
            text,
            params: kind.params(),
            binds,
        });
    }
    let statements = Statements {
        dialect,
        table,
        list,
    };
    if let Some(missing) = Kind::REQUIRED
        .into_iter()
        .find(|k| statements.get(*k).is_none())
    {
        return Err(malformed(format!("no {} statement", missing.as_str())));
    }
    Ok(statements)
}

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

fn optional_integer(v: Option<i64>) -> Value {
    v.map_or(Value::Null, Value::Integer)
}

fn optional_text(v: Option<String>) -> Value {
    v.map_or(Value::Null, Value::Text)
}

/// The response columns: status, content type, headers, body bytes.
fn response_values(response: Option<&Response>) -> [Value; 4] {
    match response {
        None => [Value::Null, Value::Null, Value::Null, Value::Null],
        Some(r) => [
            Value::Integer(i64::from(r.status)),
            text(&r.content_type),
            optional_text(headers_to_column(&r.headers)),
            Value::Bytes(r.body.clone()),
        ],
    }
}

/// The parameters of [`Kind::Insert`] and [`Kind::Claim`].
pub fn insert_params(r: &Record) -> Vec<Value> {
    let [status, content_type, headers, body] = response_values(r.response.as_ref());
    vec![
        text(&r.key),
        text(&r.fingerprint),
        text(&r.tenant_id),
        text(&r.action_type),
        text(r.status.as_str()),
        text(&r.owner_token),
        status,
        content_type,
        headers,
        body,
        Value::Integer(r.created_at),
        optional_integer(r.expires_at),
        Value::Integer(i64::from(r.lookups)),
        optional_integer(r.next_lookup_at),
    ]
}

/// The parameters of [`Kind::Get`].
pub fn get_params(key: &str) -> Vec<Value> {
    vec![text(key)]
}

/// The parameters of [`Kind::Complete`] and [`Kind::CompleteFast`].
pub fn complete_params(c: &Completion) -> Vec<Value> {
    let [status, content_type, headers, body] = response_values(Some(&c.response));
    vec![
        text(&c.key),
        text(&c.owner_token),
        status,
        content_type,
        headers,
        body,
        Value::Integer(c.expires_at),
    ]
}

/// The parameters of [`Kind::Replace`].
pub fn replace_params(r: &Replacement) -> Vec<Value> {
    let x = &r.record;
    let [status, content_type, headers, body] = response_values(x.response.as_ref());
    vec![
        text(&x.key),
        text(&r.expected_token),
        Value::Integer(i64::from(r.expected_lookups)),
        text(x.status.as_str()),
        text(&x.owner_token),
        status,
        content_type,
        headers,
        body,
        Value::Integer(x.created_at),
        optional_integer(x.expires_at),
        Value::Integer(i64::from(x.lookups)),
        optional_integer(x.next_lookup_at),
    ]
}

/// The parameters of [`Kind::Release`].
pub fn release_params(r: &Release) -> Vec<Value> {
    vec![text(&r.key), text(&r.owner_token)]
}

/// The parameters of [`Kind::List`]: one status (every status when `None`)
/// and the most rows.
pub fn list_params(status: Option<Status>, limit: u64) -> Vec<Value> {
    vec![
        status.map_or(Value::Null, |s| text(s.as_str())),
        Value::Integer(i64::try_from(limit).unwrap_or(i64::MAX)),
    ]
}

/// The parameters of [`Kind::Count`]: one status, or every status.
pub fn count_params(status: Option<Status>) -> Vec<Value> {
    vec![status.map_or(Value::Null, |s| text(s.as_str()))]
}

/// How many records have one status, and when the oldest was claimed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusCount {
    /// The status.
    pub status: Status,
    /// How many records have it.
    pub count: u64,
    /// The oldest `created_at` among them.
    pub oldest: Option<i64>,
}

/// A row of [`Kind::Count`]: status, count, oldest `created_at`.
///
/// # Errors
/// `store-failed` for a row that is not one.
pub fn decode_count(row: &[Value]) -> crate::Result<StatusCount> {
    let bad = |why: &str| {
        Error::field(
            ErrorCode::StoreFailed,
            "count",
            format!("a count row {why}"),
        )
    };
    let [status, count, oldest] = row else {
        return Err(bad(&format!("has {} columns, not 3", row.len())));
    };
    let status = match status {
        Value::Text(t) => Status::parse(t),
        Value::Bytes(b) => Status::parse(&String::from_utf8_lossy(b)),
        _ => None,
    }
    .ok_or_else(|| bad("has no known status"))?;
    let integer = |v: &Value| match v {
        Value::Integer(n) => Some(*n),
        Value::Text(t) => t.parse().ok(),
        Value::Bytes(b) => String::from_utf8_lossy(b).parse().ok(),
        Value::Null => None,
    };
    let count = integer(count)
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| bad("has no count"))?;
    Ok(StatusCount {
        status,
        count,
        oldest: integer(oldest),
    })
}

/// The parameters of [`Kind::Purge`].
pub fn purge_params(now: i64) -> Vec<Value> {
    vec![Value::Integer(now)]
}

fn bad_row(key: &str, column: &str, what: &str) -> Error {
    Error::field(
        ErrorCode::StoreFailed,
        column,
        format!("record {key}: {what}; the row was written by something other than intentkey"),
    )
}

/// Reads the typed columns of a row in [`COLUMNS`] order.
struct Columns<'a> {
    values: &'a [Value],
    key: String,
}

impl Columns<'_> {
    fn at(&self, i: usize) -> &Value {
        self.values.get(i).unwrap_or(&Value::Null)
    }

    /// Text, also as the UTF-8 bytes of a binary string column (MySQL's
    /// key is `VARBINARY`, compared byte for byte: see `claim::ddl`).
    fn text(&self, i: usize) -> crate::Result<String> {
        match self.at(i) {
            Value::Text(s) => Ok(s.clone()),
            Value::Bytes(b) => match std::str::from_utf8(b) {
                Ok(s) => Ok(s.to_owned()),
                Err(_) => Err(self.wrong(i, "UTF-8 text", &Value::Bytes(Vec::new()))),
            },
            other => Err(self.wrong(i, "text", other)),
        }
    }

    fn optional_text(&self, i: usize) -> crate::Result<Option<String>> {
        match self.at(i) {
            Value::Null => Ok(None),
            Value::Text(s) => Ok(Some(s.clone())),
            other => Err(self.wrong(i, "text or NULL", other)),
        }
    }

    fn integer(&self, i: usize) -> crate::Result<i64> {
        match self.at(i) {
            Value::Integer(n) => Ok(*n),
            other => Err(self.wrong(i, "an integer", other)),
        }
    }

    fn optional_integer(&self, i: usize) -> crate::Result<Option<i64>> {
        match self.at(i) {
            Value::Null => Ok(None),
            Value::Integer(n) => Ok(Some(*n)),
            other => Err(self.wrong(i, "an integer or NULL", other)),
        }
    }

    fn optional_bytes(&self, i: usize) -> crate::Result<Option<Vec<u8>>> {
        match self.at(i) {
            Value::Null => Ok(None),
            Value::Bytes(b) => Ok(Some(b.clone())),
            other => Err(self.wrong(i, "bytes or NULL", other)),
        }
    }

    fn wrong(&self, i: usize, expected: &str, got: &Value) -> Error {
        let got = match got {
            Value::Null => "NULL",
            Value::Integer(_) => "an integer",
            Value::Text(_) => "text",
            Value::Bytes(_) => "bytes",
        };
        let column = COLUMNS.get(i).copied().unwrap_or("column");
        bad_row(
            &self.key,
            column,
            &format!("{column} is {got}, not {expected}"),
        )
    }
}

/// A row of [`COLUMNS`] (from [`Kind::Get`] or [`Kind::List`]) as a record.
/// A record written before schema version 3 keeps its body as text in
/// `response_body`, read when `response_body_bytes` is NULL.
///
/// # Errors
/// `store-failed`, naming the column, for a row this build cannot read.
pub fn decode_row(row: &[Value]) -> crate::Result<Record> {
    let key = match row.first() {
        Some(Value::Text(k)) => k.clone(),
        Some(Value::Bytes(k)) => String::from_utf8_lossy(k).into_owned(),
        _ => String::from("?"),
    };
    if row.len() != COLUMNS.len() {
        return Err(bad_row(
            &key,
            "row",
            &format!("the row has {} columns, not {}", row.len(), COLUMNS.len()),
        ));
    }
    let c = Columns { values: row, key };
    let key = c.text(0)?;
    let status_text = c.text(4)?;
    let status = Status::parse(&status_text).ok_or_else(|| {
        bad_row(
            &key,
            "status",
            &format!("it has an unknown status {status_text:?}"),
        )
    })?;
    let response = match c.optional_integer(6)? {
        None => None,
        Some(code) => Some(Response {
            status: u16::try_from(code).map_err(|_| {
                bad_row(
                    &key,
                    "response_status",
                    &format!("it has response status {code}"),
                )
            })?,
            content_type: c.optional_text(7)?.unwrap_or_default(),
            headers: headers_from_column(c.optional_text(8)?.as_deref())
                .map_err(|e| bad_row(&key, "response_headers", e.message()))?,
            body: match c.optional_bytes(10)? {
                Some(bytes) => bytes,
                None => c.optional_text(9)?.unwrap_or_default().into_bytes(),
            },
        }),
    };
    let lookups = c.integer(13)?;
    Ok(Record {
        fingerprint: c.text(1)?,
        tenant_id: c.text(2)?,
        action_type: c.text(3)?,
        status,
        owner_token: c.text(5)?,
        response,
        created_at: c.integer(11)?,
        expires_at: c.optional_integer(12)?,
        lookups: u32::try_from(lookups).unwrap_or(if lookups < 0 { 0 } else { u32::MAX }),
        next_lookup_at: c.optional_integer(14)?,
        key,
    })
}

/// What [`Kind::Claim`] answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claimed {
    /// The insert won: the attempt owns the key.
    Won,
    /// The insert lost to a record the statement could not see (it
    /// committed after the statement began): read it with [`Kind::Get`].
    Lost,
    /// The insert lost to this record.
    Existing(Box<Record>),
}

/// The row of [`Kind::Claim`]: `inserted` (1 or 0), then the record it
/// lost to as one JSON text column (PostgreSQL's `row_to_json`: the columns
/// by name, `response_body_bytes` as PostgreSQL writes `bytea` as text, in
/// its hex or its escape format), NULL when the insert won or the winner is
/// not visible to the statement. A row of `inserted` and the record's
/// [`COLUMNS`] is read too.
///
/// ```
/// use intentkey::claim::sql::{decode_claim, Claimed, Value};
///
/// assert_eq!(decode_claim(&[Value::Integer(1), Value::Null])?, Claimed::Won);
/// assert_eq!(decode_claim(&[Value::Integer(0), Value::Null])?, Claimed::Lost);
/// let lost_to = r#"{"key":"k1","fingerprint":"fp","tenant_id":"t1","action_type":"POST /orders",
///     "status":"done","owner_token":"ab","response_status":201,
///     "response_content_type":"application/json","response_headers":"[]","response_body":null,
///     "response_body_bytes":"\\x7b7d","created_at":1700000000,"expires_at":1700086400,
///     "lookups":0,"next_lookup_at":null}"#;
/// let Claimed::Existing(record) = decode_claim(&[Value::Integer(0), Value::Text(lost_to.into())])? else {
///     panic!("the record it lost to");
/// };
/// assert_eq!(record.response.unwrap().body, b"{}");
///
/// let err = decode_claim(&[Value::Integer(0), Value::Text("[1]".into())]).unwrap_err();
/// assert_eq!(err.code().as_str(), "store-failed");
/// # Ok::<(), intentkey::Error>(())
/// ```
///
/// # Errors
/// `store-failed` for a row this build cannot read.
pub fn decode_claim(row: &[Value]) -> crate::Result<Claimed> {
    match row.first() {
        Some(Value::Integer(1)) => Ok(Claimed::Won),
        Some(Value::Integer(0)) => match row.get(1) {
            Some(Value::Null) => Ok(Claimed::Lost),
            Some(Value::Text(json)) if row.len() == 2 => {
                decode_json_row(json).map(|r| Claimed::Existing(Box::new(r)))
            }
            _ => decode_row(&row[1..]).map(|r| Claimed::Existing(Box::new(r))),
        },
        _ => Err(bad_row(
            "?",
            "inserted",
            "the claim row does not start with inserted (1 or 0)",
        )),
    }
}

/// A record written as one JSON object by the claim statement: each of
/// [`COLUMNS`] by name (text, an integer or null; `response_body_bytes` as
/// `bytea` text, [`bytea_from_text`]), read as [`decode_row`] reads the
/// columns.
fn decode_json_row(json: &str) -> crate::Result<Record> {
    use serde_json::Value as Json;
    let object: serde_json::Map<String, Json> = serde_json::from_str(json).map_err(|e| {
        bad_row(
            "?",
            "claim",
            &format!("the record the claim lost to is not a JSON object of its columns ({e})"),
        )
    })?;
    let key = object.get("key").and_then(Json::as_str).unwrap_or("?");
    let values = COLUMNS
        .iter()
        .map(|&column| match object.get(column) {
            None => Err(bad_row(
                key,
                column,
                &format!("the claim's record has no column {column}"),
            )),
            Some(Json::Null) => Ok(Value::Null),
            Some(Json::String(text)) if column == "response_body_bytes" => bytea_from_text(text)
                .map(Value::Bytes)
                .ok_or_else(|| bad_row(key, column, "it is not bytea text (hex `\\x…` or escape)")),
            Some(Json::String(text)) => Ok(Value::Text(text.clone())),
            Some(Json::Number(n)) => n
                .as_i64()
                .map(Value::Integer)
                .ok_or_else(|| bad_row(key, column, &format!("it is not an integer ({n})"))),
            Some(_) => Err(bad_row(
                key,
                column,
                "it is neither text, an integer nor null",
            )),
        })
        .collect::<crate::Result<Vec<Value>>>()?;
    decode_row(&values)
}

/// The bytes of PostgreSQL's text form of a `bytea`, in either of its
/// output formats (`bytea_output`): hex (`\x` then two hex digits a byte)
/// or escape (`\\` for a backslash, `\` and three octal digits for a
/// byte, any other byte as itself). `None` for text in neither.
fn bytea_from_text(text: &str) -> Option<Vec<u8>> {
    if let Some(hex) = text.strip_prefix("\\x") {
        return crate::key::from_hex(hex);
    }
    let octal = |b: u8| (b'0'..=b'7').contains(&b).then(|| b - b'0');
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        rest = tail;
        if b != b'\\' {
            bytes.push(b);
            continue;
        }
        match rest {
            [b'\\', tail @ ..] => {
                bytes.push(b'\\');
                rest = tail;
            }
            [a, b, c, tail @ ..] => {
                let value =
                    u16::from(octal(*a)?) << 6 | u16::from(octal(*b)?) << 3 | u16::from(octal(*c)?);
                bytes.push(u8::try_from(value).ok()?);
                rest = tail;
            }
            _ => return None,
        }
    }
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claim::Attempt;

    fn record() -> Record {
        let attempt = Attempt {
            key: "k".into(),
            fingerprint: "fp".into(),
            tenant_id: "t".into(),
            action_type: "a".into(),
            prior: None,
        };
        Record::in_flight(&attempt, &"0f".repeat(16), 7)
    }

    /// The row a database would return for `r` (what the statements write).
    fn row_of(r: &Record) -> Vec<Value> {
        let p = insert_params(r);
        let mut row = p[..9].to_vec();
        row.push(Value::Null);
        row.extend_from_slice(&p[9..]);
        row
    }

    #[test]
    fn every_dialect_has_every_required_statement_with_its_parameters() {
        for dialect in Dialect::ALL {
            let s = statements(dialect, None).unwrap();
            for kind in Kind::REQUIRED {
                assert!(s.get(kind).is_some(), "{dialect:?} {kind:?}");
            }
            for st in s.all() {
                let n = st.params.len();
                assert!(!st.text.contains(TABLE_PLACEHOLDER));
                assert!(!st.text.contains(MIGRATIONS_PLACEHOLDER));
                assert!(!st.text.contains("--"), "{:?}", st.kind);
                if dialect == Dialect::Mysql {
                    // Positional: one `?` per bind, every value bound at least once.
                    assert_eq!(
                        st.text.matches('?').count(),
                        st.binds.len(),
                        "{:?}",
                        st.kind
                    );
                    for i in 0..n {
                        assert!(st.binds.contains(&i), "mysql {:?} never binds {i}", st.kind);
                    }
                    assert!(st.binds.iter().all(|&i| i < n), "{:?}", st.kind);
                    assert!(!st.text.contains("?1"), "{:?}", st.kind);
                    continue;
                }
                assert_eq!(st.binds, (0..n).collect::<Vec<_>>());
                let mark = if dialect == Dialect::Postgres {
                    '$'
                } else {
                    '?'
                };
                for i in 1..=n {
                    assert!(
                        st.text.contains(&format!("{mark}{i}")),
                        "{dialect:?} {:?} lacks {mark}{i}",
                        st.kind
                    );
                }
                assert!(
                    !st.text.contains(&format!("{mark}{}", n + 1)),
                    "{dialect:?} {:?} has more than {n} parameters",
                    st.kind
                );
            }
        }
        let pg = statements(Dialect::Postgres, None).unwrap();
        for kind in Kind::ALL {
            assert_eq!(
                pg.get(kind).is_some(),
                kind != Kind::MigrationUnlock,
                "postgres {kind:?}"
            );
        }
    }

    #[test]
    fn mysql_binds_positionally_and_quotes_with_backquotes() {
        let s = statements(Dialect::Mysql, None).unwrap();
        let list = s.statement(Kind::List).unwrap();
        assert_eq!(list.binds, vec![0, 0, 1]);
        assert!(
            list.text.contains("WHERE (? IS NULL OR status = ?)"),
            "{}",
            list.text
        );
        assert_eq!(
            bind(list, &list_params(Some(Status::Done), 7)),
            vec![text("done"), text("done"), Value::Integer(7)]
        );
        let complete = s.statement(Kind::Complete).unwrap();
        assert_eq!(complete.binds, vec![2, 3, 4, 5, 6, 0, 1]);
        assert!(complete.text.starts_with("UPDATE `intentkey_records` SET"));
        assert!(s.text(Kind::Get).contains("WHERE `key` = ?"));
        let q = statements(Dialect::Mysql, Some("we`ird")).unwrap();
        assert_eq!(q.table(), "`we``ird`.`intentkey_records`");
        assert!(q
            .text(Kind::MigratedVersion)
            .ends_with("FROM `we``ird`.`intentkey_schema_migrations`"));
        assert_eq!(Dialect::Mysql.duplicate_key_error(), Some(1062));
        assert_eq!(Dialect::Postgres.duplicate_key_error(), None);
        assert_eq!(Dialect::Mysql.error_class(1927), ErrorClass::ConnectionLost);
        assert_eq!(Dialect::Mysql.error_class(1317), ErrorClass::Retryable);
        assert_eq!(Dialect::Postgres.error_class(1062), ErrorClass::Failed);
        // Text in quotes is never a placeholder.
        assert_eq!(
            positional("a = '?1' AND `?2` = ?3"),
            ("a = '?1' AND `?2` = ?".to_owned(), vec![2])
        );
        assert!(s.get(Kind::Claim).is_none() && s.get(Kind::CompleteFast).is_none());
    }

    #[test]
    fn parameter_lists_match_the_declared_order() {
        let mut r = record();
        r.complete(Response::json(201, "{}"), 8, 60);
        assert_eq!(insert_params(&r).len(), Kind::Insert.params().len());
        let c = Completion {
            key: "k".into(),
            owner_token: "t".into(),
            response: Response::json(200, "{}"),
            expires_at: 9,
            fast: false,
        };
        assert_eq!(complete_params(&c).len(), Kind::Complete.params().len());
        let x = Replacement {
            record: r.clone(),
            expected_token: "t".into(),
            expected_lookups: 2,
        };
        let p = replace_params(&x);
        assert_eq!(p.len(), Kind::Replace.params().len());
        assert_eq!(p[2], Value::Integer(2));
        assert_eq!(list_params(None, 5), vec![Value::Null, Value::Integer(5)]);
    }

    #[test]
    fn rows_round_trip_and_legacy_text_bodies_are_read() {
        let mut r = record();
        assert_eq!(decode_row(&row_of(&r)), Ok(r.clone()));
        r.complete(
            Response::new(200, "application/pdf", vec![0, 255]).with_header("Location", "/x"),
            8,
            60,
        );
        assert_eq!(decode_row(&row_of(&r)), Ok(r.clone()));
        let mut legacy = row_of(&r);
        legacy[9] = Value::Text("old".into());
        legacy[10] = Value::Null;
        let old = decode_row(&legacy).unwrap();
        assert_eq!(old.response.unwrap().body, b"old");
        let mut claim = vec![Value::Integer(0)];
        claim.extend(row_of(&r));
        assert_eq!(decode_claim(&claim), Ok(Claimed::Existing(Box::new(r))));
        let mut lost = vec![Value::Integer(0)];
        lost.extend(std::iter::repeat_n(Value::Null, 15));
        assert_eq!(decode_claim(&lost), Ok(Claimed::Lost));
        lost[0] = Value::Integer(1);
        assert_eq!(decode_claim(&lost), Ok(Claimed::Won));
    }

    /// The JSON object PostgreSQL's claim statement writes for `r`
    /// (`row_to_json` of its columns, the body in hex).
    fn json_of(r: &Record) -> String {
        let row = row_of(r);
        let object: serde_json::Map<String, serde_json::Value> = COLUMNS
            .iter()
            .zip(row)
            .map(|(&column, value)| {
                let json = match value {
                    Value::Null => serde_json::Value::Null,
                    Value::Integer(n) => n.into(),
                    Value::Text(t) => t.into(),
                    Value::Bytes(b) => format!("\\x{}", crate::key::to_hex(&b)).into(),
                };
                (column.to_owned(), json)
            })
            .collect();
        serde_json::Value::Object(object).to_string()
    }

    #[test]
    fn a_claim_reads_the_record_it_lost_to_from_one_json_column() {
        let mut r = record();
        let lost_to = |r: &Record| vec![Value::Integer(0), Value::Text(json_of(r))];
        assert_eq!(
            decode_claim(&lost_to(&r)),
            Ok(Claimed::Existing(Box::new(r.clone())))
        );
        r.complete(
            Response::new(200, "application/pdf", vec![0, 255, 10]).with_header("Location", "/x"),
            8,
            60,
        );
        assert_eq!(
            decode_claim(&lost_to(&r)),
            Ok(Claimed::Existing(Box::new(r.clone())))
        );
        assert_eq!(
            decode_claim(&[Value::Integer(0), Value::Null]),
            Ok(Claimed::Lost)
        );
        assert_eq!(
            decode_claim(&[Value::Integer(1), Value::Null]),
            Ok(Claimed::Won)
        );
        // A record written before the bodies were bytes: its text body.
        let legacy = json_of(&r)
            .replace(r#""response_body":null"#, r#""response_body":"old""#)
            .replace(
                r#""response_body_bytes":"\\x00ff0a""#,
                r#""response_body_bytes":null"#,
            );
        let Ok(Claimed::Existing(old)) = decode_claim(&[Value::Integer(0), Value::Text(legacy)])
        else {
            panic!("a legacy record is read");
        };
        assert_eq!(old.response.unwrap().body, b"old");
    }

    #[test]
    fn bytea_text_is_read_in_both_output_formats() {
        let bytes = [0u8, b'a', b'\\', 0x7f, 0xff, b'"'];
        assert_eq!(
            bytea_from_text(r"\x00615c7fff22").as_deref(),
            Some(&bytes[..])
        );
        assert_eq!(
            bytea_from_text(r"\x00615C7FFF22").as_deref(),
            Some(&bytes[..])
        );
        assert_eq!(
            bytea_from_text(r#"\000a\\\177\377""#).as_deref(),
            Some(&bytes[..])
        );
        assert_eq!(bytea_from_text(r"\x").as_deref(), Some(&[][..]));
        assert_eq!(bytea_from_text("").as_deref(), Some(&[][..]));
    }

    #[test]
    fn a_claim_json_column_that_is_not_the_record_names_what_is_wrong() {
        let r = record();
        let bad = |json: String| decode_claim(&[Value::Integer(0), Value::Text(json)]).unwrap_err();
        let e = bad("not json".into());
        assert_eq!(
            (e.code(), e.field_name()),
            (ErrorCode::StoreFailed, Some("claim"))
        );
        let e = bad(json_of(&r).replace(r#""lookups":0,"#, ""));
        assert_eq!(
            (e.code(), e.field_name()),
            (ErrorCode::StoreFailed, Some("lookups"))
        );
        assert!(e.message().contains("record k:"), "{}", e.message());
        let e = bad(json_of(&r).replace(r#""created_at":7"#, r#""created_at":7.5"#));
        assert_eq!(e.field_name(), Some("created_at"));
        for not_bytea in [r"\x0", r"\xzz", r"\9", r"a\", r"\1", r"\400", r"\38a"] {
            let e = bad(json_of(&r).replace(
                r#""response_body_bytes":null"#,
                &format!(
                    r#""response_body_bytes":{}"#,
                    serde_json::Value::from(not_bytea)
                ),
            ));
            assert_eq!(e.field_name(), Some("response_body_bytes"), "{not_bytea}");
        }
        let e = bad(json_of(&r).replace(r#""status":"in_flight""#, r#""status":["in_flight"]"#));
        assert_eq!(e.field_name(), Some("status"));
    }

    #[test]
    fn a_key_read_as_bytes_is_its_utf8_text() {
        let r = record();
        let mut row = row_of(&r);
        row[0] = Value::Bytes(b"k".to_vec());
        assert_eq!(decode_row(&row), Ok(r.clone()));
        row[0] = Value::Bytes(vec![0xff]);
        let e = decode_row(&row).unwrap_err();
        assert!(
            e.message().contains("key is bytes, not UTF-8 text"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn malformed_rows_are_store_failed_naming_the_column() {
        let r = record();
        let mut bad = row_of(&r);
        bad[4] = Value::Text("gone".into());
        let e = decode_row(&bad).unwrap_err();
        assert_eq!(e.code().as_str(), "store-failed");
        assert!(e.message().contains("unknown status"), "{}", e.message());
        let mut bad = row_of(&r);
        bad[11] = Value::Text("x".into());
        assert!(decode_row(&bad)
            .unwrap_err()
            .message()
            .contains("created_at"));
        assert!(decode_row(&row_of(&r)[..3]).is_err());
        let mut bad = row_of(&r);
        bad[6] = Value::Integer(70_000);
        assert!(decode_row(&bad).is_err());
    }

    #[test]
    fn tables_are_quoted_and_names_are_short_and_distinct() {
        let long = "s".repeat(70);
        let a = statements(Dialect::Postgres, Some(&format!("{long}_a"))).unwrap();
        let b = statements(Dialect::Postgres, Some(&format!("{long}_b"))).unwrap();
        let plain = statements(Dialect::Postgres, None).unwrap();
        for kind in Kind::ALL
            .into_iter()
            .filter(|k| *k != Kind::MigrationUnlock)
        {
            let names = [a.get(kind), b.get(kind), plain.get(kind)]
                .map(|s| s.unwrap().prepared_name.clone());
            assert!(names.iter().all(|n| n.len() <= 63), "{names:?}");
            assert_ne!(names[0], names[1]);
            assert_ne!(names[0], names[2]);
        }
        let q = statements(Dialect::Sqlite, Some("we\"ird")).unwrap();
        assert_eq!(q.table(), "\"we\"\"ird\".intentkey_records");
        assert!(q
            .text(Kind::Get)
            .contains("FROM \"we\"\"ird\".intentkey_records WHERE"));
        for bad in ["", "a\0b"] {
            let e = statements(Dialect::Postgres, Some(bad)).unwrap_err();
            assert_eq!(e.code().as_str(), "invalid-argument");
        }
    }
}
