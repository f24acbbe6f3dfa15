//! The migration flow: the one order in which every SQL store, in every
//! host, brings its schema up to date. Sans-I/O: the flow names each
//! statement to run; the host runs it and answers.
//!
//! The host runs every operation inside one transaction it opens before
//! [`MigrationFlow::start`] (SQLite: `BEGIN IMMEDIATE`, one writer at a time;
//! PostgreSQL: `BEGIN`), commits when the flow is done, and rolls back on any
//! error: a migration is applied whole or not at all.
//!
//! MySQL commits each DDL statement by itself, so there the host runs the
//! flow with autocommit and no transaction. The flow first takes a named
//! lock (a query that must answer 1), creates a new database's table in one
//! `CREATE TABLE IF NOT EXISTS` at the latest version ([`super::ddl`]), and
//! gives the lock back in its last statement. A host that stops on an error
//! closes that connection, which gives the lock back too.
//!
//! ```
//! use intentkey::claim::migrate::{MigrationFlow, MigrationOp, MigrationResult, MigrationStep};
//! use intentkey::claim::sql::Dialect;
//! use intentkey::claim::schema::SCHEMA_VERSION;
//!
//! let mut flow = MigrationFlow::new(Dialect::Sqlite, None).unwrap();
//! let mut step = flow.start();
//! let mut executed = Vec::new();
//! let done = loop {
//!     step = match step {
//!         MigrationStep::Done(done) => break done,
//!         // A new database: PRAGMA user_version reads 0.
//!         MigrationStep::Io(MigrationOp::Query(call)) => flow.resume(MigrationResult::Queried(Some(0))).unwrap(),
//!         MigrationStep::Io(MigrationOp::Execute(call)) => {
//!             executed.push(call.text);
//!             flow.resume(MigrationResult::Executed).unwrap()
//!         }
//!     };
//! };
//! assert_eq!((done.from_version, done.to_version), (0, SCHEMA_VERSION));
//! assert_eq!(executed.last().unwrap(), &format!("PRAGMA user_version = {SCHEMA_VERSION}"));
//! ```

use std::fmt;

use super::ddl;
use super::schema::{migrations, migrations_table, Migration, MIGRATION_LOCK, SCHEMA_VERSION};
use super::sql::{quote_identifier, statements, Dialect, Kind, Value};
use crate::{Error, ErrorCode};

/// One statement with its parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqlCall {
    /// The statement's text.
    pub text: String,
    /// Its parameters, in order.
    pub params: Vec<Value>,
}

impl SqlCall {
    fn bare(text: impl Into<String>) -> Self {
        SqlCall {
            text: text.into(),
            params: Vec::new(),
        }
    }
}

/// What the flow asks the host to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MigrationOp {
    /// Run the statement; no rows are read. Answer [`MigrationResult::Executed`].
    Execute(SqlCall),
    /// Run the query and answer the first column of its first row as an
    /// integer ([`MigrationResult::Queried`], `None` when there is no row
    /// or the value is NULL).
    Query(SqlCall),
}

/// The host's answer to the last operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MigrationResult {
    /// The statement ran.
    Executed,
    /// The query's value.
    Queried(Option<i64>),
}

/// Where the schema stood and stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Migrated {
    /// The version the database was at.
    pub from_version: u32,
    /// The version it is at now (this build's [`SCHEMA_VERSION`]).
    pub to_version: u32,
}

/// The flow's next step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MigrationStep {
    /// Perform this, then [`MigrationFlow::resume`] with its result.
    Io(MigrationOp),
    /// Up to date: commit.
    Done(Migrated),
}

/// Why the flow stopped (the host rolls back).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MigrationError {
    /// The database is at a newer schema than this build knows.
    Newer {
        /// The database's version.
        found: i64,
        /// This build's.
        known: u32,
    },
    /// A version that no build writes (negative).
    Invalid(i64),
    /// An answer that is not what the last operation asks for.
    Misuse(&'static str),
    /// The migration lock was not had in time (MySQL's `GET_LOCK` answered
    /// 0 or NULL: another session migrates, or holds it).
    Locked,
}

impl fmt::Display for MigrationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MigrationError::Newer { found, known } => write!(
                f,
                "the database is at schema version {found}; this package knows version {known} (upgrade intentkey)"
            ),
            MigrationError::Invalid(found) => write!(
                f,
                "the database records schema version {found}, which no intentkey writes"
            ),
            MigrationError::Misuse(what) => write!(f, "the migration flow was answered {what}"),
            MigrationError::Locked => f.write_str(
                "the migration lock was not had within 30 s: another session is migrating this database (or holds the lock); try again",
            ),
        }
    }
}

impl std::error::Error for MigrationError {}

impl From<MigrationError> for Error {
    fn from(e: MigrationError) -> Self {
        let code = match e {
            MigrationError::Newer { .. } | MigrationError::Invalid(_) => ErrorCode::StoreFailed,
            MigrationError::Misuse(_) => ErrorCode::FlowMisuse,
            MigrationError::Locked => ErrorCode::StoreUnavailable,
        };
        Error::new(code, e.to_string())
    }
}

/// The migration flow of one dialect and schema.
#[derive(Clone, Debug)]
pub struct MigrationFlow {
    dialect: Dialect,
    /// Every migration in this dialect's DDL.
    ddl: Vec<Migration>,
    /// A new database's table in one statement (MySQL: [`ddl::mysql_create_latest`]).
    create_latest: Option<String>,
    /// A lock taken by a query that must answer 1 (MySQL), before the prelude.
    lock_query: Option<SqlCall>,
    /// The statements before the version is read (PostgreSQL: the lock, the
    /// search path, the migrations table).
    prelude: Vec<MigrationOp>,
    /// The last statement (MySQL: the lock given back).
    last: Option<MigrationOp>,
    version_query: SqlCall,
    record: Option<String>,
    /// What is left to ask, in order, once the version is known.
    pending: std::collections::VecDeque<MigrationOp>,
    from: Option<u32>,
    state: State,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Lock,
    Prelude,
    Version,
    Applying,
    Done,
}

/// SQLite keeps the version in the database header.
const SQLITE_VERSION: &str = "PRAGMA user_version";

impl MigrationFlow {
    /// The flow for `dialect`; `schema` (PostgreSQL) is where the tables
    /// live, found through `search_path` for this transaction.
    ///
    /// # Errors
    /// `invalid-argument` when `schema` is not a valid identifier.
    pub fn new(dialect: Dialect, schema: Option<&str>) -> crate::Result<Self> {
        let mut lock_query = None;
        let mut last = None;
        let mut create_latest = None;
        let mut translated = migrations();
        let (prelude, version_query, record) = match dialect {
            Dialect::Sqlite => (Vec::new(), SqlCall::bare(SQLITE_VERSION), None),
            Dialect::Mysql => {
                let sql = statements(dialect, schema)?;
                let lock = || vec![Value::Integer(MIGRATION_LOCK)];
                lock_query = Some(SqlCall {
                    text: sql.statement(Kind::MigrationLock)?.text.clone(),
                    params: lock(),
                });
                last = Some(MigrationOp::Execute(SqlCall {
                    text: sql.statement(Kind::MigrationUnlock)?.text.clone(),
                    params: lock(),
                }));
                create_latest = Some(ddl::mysql_create_latest(schema)?);
                for m in &mut translated {
                    for s in &mut m.statements {
                        *s = ddl::mysql_statement(s, schema)?;
                    }
                }
                (
                    vec![MigrationOp::Execute(SqlCall::bare(
                        ddl::mysql_migrations_table(schema)?,
                    ))],
                    SqlCall::bare(sql.text(Kind::MigratedVersion)),
                    Some(sql.text(Kind::RecordMigration).to_owned()),
                )
            }
            Dialect::Postgres => {
                let sql = statements(dialect, schema)?;
                let mut prelude = vec![MigrationOp::Execute(SqlCall {
                    text: sql.text(Kind::MigrationLock).to_owned(),
                    params: vec![Value::Integer(MIGRATION_LOCK)],
                })];
                // The DDL stays verbatim: a schema puts it there through search_path.
                if let Some(schema) = schema {
                    prelude.push(MigrationOp::Execute(SqlCall::bare(format!(
                        "SET LOCAL search_path TO {}",
                        quote_identifier(schema)?
                    ))));
                }
                prelude.push(MigrationOp::Execute(SqlCall::bare(migrations_table())));
                (
                    prelude,
                    SqlCall::bare(sql.text(Kind::MigratedVersion)),
                    Some(sql.text(Kind::RecordMigration).to_owned()),
                )
            }
        };
        Ok(MigrationFlow {
            dialect,
            ddl: translated,
            create_latest,
            lock_query,
            prelude,
            last,
            version_query,
            record,
            pending: Default::default(),
            from: None,
            state: State::Prelude,
        })
    }

    /// The first operation.
    pub fn start(&mut self) -> MigrationStep {
        self.prelude.reverse(); // popped from the end, in order
        if let Some(lock) = self.lock_query.take() {
            self.state = State::Lock;
            return MigrationStep::Io(MigrationOp::Query(lock));
        }
        self.next_prelude()
    }

    fn next_prelude(&mut self) -> MigrationStep {
        match self.prelude.pop() {
            Some(op) => MigrationStep::Io(op),
            None => {
                self.state = State::Version;
                MigrationStep::Io(MigrationOp::Query(self.version_query.clone()))
            }
        }
    }

    /// The operations that bring `from` up to this build's version.
    fn plan(&self, from: u32) -> std::collections::VecDeque<MigrationOp> {
        let mut ops = std::collections::VecDeque::new();
        // A new database gets the latest table in one statement where DDL
        // commits by itself (MySQL): cut short, it is run again whole.
        let folded = match (&self.create_latest, from) {
            (Some(create), 0) => {
                ops.push_back(MigrationOp::Execute(SqlCall::bare(create.clone())));
                true
            }
            _ => false,
        };
        for m in self.ddl.iter().filter(|m| m.version > from) {
            if !folded {
                ops.extend(
                    m.statements
                        .iter()
                        .map(|s| MigrationOp::Execute(SqlCall::bare(s.clone()))),
                );
            }
            if let Some(record) = &self.record {
                ops.push_back(MigrationOp::Execute(SqlCall {
                    text: record.clone(),
                    params: vec![Value::Integer(i64::from(m.version))],
                }));
            }
        }
        if self.dialect == Dialect::Sqlite && from < SCHEMA_VERSION {
            ops.push_back(MigrationOp::Execute(SqlCall::bare(format!(
                "{SQLITE_VERSION} = {SCHEMA_VERSION}"
            ))));
        }
        ops.extend(self.last.clone());
        ops
    }

    fn next(&mut self) -> MigrationStep {
        match self.pending.pop_front() {
            Some(op) => MigrationStep::Io(op),
            None => {
                self.state = State::Done;
                MigrationStep::Done(Migrated {
                    from_version: self.from.unwrap_or(0),
                    to_version: SCHEMA_VERSION,
                })
            }
        }
    }

    /// Whether the last operation asked for was a query (its value is due).
    pub fn awaits_query(&self) -> bool {
        matches!(self.state, State::Version | State::Lock)
    }

    /// Resumes with the result of the last operation.
    ///
    /// # Errors
    /// [`MigrationError::Newer`] when the database is ahead of this build;
    /// [`MigrationError::Misuse`] for an answer the last operation did not
    /// ask for, or a flow already done.
    pub fn resume(&mut self, result: MigrationResult) -> Result<MigrationStep, MigrationError> {
        match (self.state, result) {
            (State::Lock, MigrationResult::Queried(Some(1))) => {
                self.state = State::Prelude;
                Ok(self.next_prelude())
            }
            (State::Lock, MigrationResult::Queried(_)) => Err(MigrationError::Locked),
            (State::Prelude, MigrationResult::Executed) => Ok(self.next_prelude()),
            (State::Version, MigrationResult::Queried(found)) => {
                let found = found.unwrap_or(0);
                let from = u32::try_from(found).map_err(|_| MigrationError::Invalid(found))?;
                if from > SCHEMA_VERSION {
                    return Err(MigrationError::Newer {
                        found,
                        known: SCHEMA_VERSION,
                    });
                }
                self.from = Some(from);
                self.pending = self.plan(from);
                self.state = State::Applying;
                Ok(self.next())
            }
            (State::Applying, MigrationResult::Executed) => Ok(self.next()),
            (State::Done, _) => Err(MigrationError::Misuse("after it was done")),
            (State::Version | State::Lock, MigrationResult::Executed) => Err(
                MigrationError::Misuse("executed where a query's value was due"),
            ),
            (_, MigrationResult::Queried(_)) => Err(MigrationError::Misuse(
                "a query's value where a statement was due",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the flow against a database at `version`: every operation, and the end.
    fn run(
        dialect: Dialect,
        schema: Option<&str>,
        version: Option<i64>,
    ) -> (Vec<MigrationOp>, Result<Migrated, MigrationError>) {
        let mut flow = MigrationFlow::new(dialect, schema).unwrap();
        let mut ops = Vec::new();
        let mut step = flow.start();
        loop {
            let result = match step {
                MigrationStep::Done(done) => return (ops, Ok(done)),
                MigrationStep::Io(op) => {
                    let result = match &op {
                        // MySQL's named lock, had at once.
                        MigrationOp::Query(c) if c.text.starts_with("SELECT GET_LOCK") => {
                            MigrationResult::Queried(Some(1))
                        }
                        MigrationOp::Query(_) => MigrationResult::Queried(version),
                        MigrationOp::Execute(_) => MigrationResult::Executed,
                    };
                    ops.push(op);
                    result
                }
            };
            step = match flow.resume(result) {
                Ok(step) => step,
                Err(e) => return (ops, Err(e)),
            };
        }
    }

    fn texts(ops: &[MigrationOp]) -> Vec<&str> {
        ops.iter()
            .map(|op| match op {
                MigrationOp::Execute(c) | MigrationOp::Query(c) => c.text.as_str(),
            })
            .collect()
    }

    #[test]
    fn postgres_locks_reads_the_version_then_applies_and_records_each_missing_migration() {
        let (ops, done) = run(Dialect::Postgres, Some("tenant_a"), Some(1));
        let texts = texts(&ops);
        assert!(texts[0].contains("pg_advisory_xact_lock"), "{texts:?}");
        assert_eq!(
            ops[0],
            MigrationOp::Execute(SqlCall {
                text: texts[0].to_owned(),
                params: vec![Value::Integer(MIGRATION_LOCK)]
            })
        );
        assert_eq!(texts[1], "SET LOCAL search_path TO \"tenant_a\"");
        assert_eq!(texts[2], migrations_table());
        assert!(matches!(ops[3], MigrationOp::Query(_)));
        let applied: Vec<_> = migrations().into_iter().filter(|m| m.version > 1).collect();
        let records: Vec<_> = ops
            .iter()
            .filter_map(|op| match op {
                MigrationOp::Execute(c)
                    if c.text.contains("intentkey_schema_migrations (version") =>
                {
                    Some(c.params.clone())
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            records,
            applied
                .iter()
                .map(|m| vec![Value::Integer(i64::from(m.version))])
                .collect::<Vec<_>>()
        );
        let statements: usize = applied.iter().map(|m| m.statements.len()).sum();
        assert_eq!(ops.len(), 4 + statements + applied.len());
        assert_eq!(
            done,
            Ok(Migrated {
                from_version: 1,
                to_version: SCHEMA_VERSION
            })
        );
    }

    #[test]
    fn an_up_to_date_database_runs_nothing_after_the_version() {
        let (ops, done) = run(Dialect::Postgres, None, Some(i64::from(SCHEMA_VERSION)));
        assert_eq!(
            ops.len(),
            3,
            "lock, migrations table, version: {:?}",
            texts(&ops)
        );
        assert!(done.is_ok());
        let (ops, _) = run(Dialect::Sqlite, None, Some(i64::from(SCHEMA_VERSION)));
        assert_eq!(texts(&ops), vec![SQLITE_VERSION]);
    }

    #[test]
    fn sqlite_applies_everything_and_sets_user_version_once() {
        let (ops, done) = run(Dialect::Sqlite, None, None);
        let all: usize = migrations().iter().map(|m| m.statements.len()).sum();
        assert_eq!(ops.len(), 1 + all + 1);
        assert_eq!(
            texts(&ops).last().copied(),
            Some(format!("PRAGMA user_version = {SCHEMA_VERSION}").as_str())
        );
        assert_eq!(
            done,
            Ok(Migrated {
                from_version: 0,
                to_version: SCHEMA_VERSION
            })
        );
    }

    #[test]
    fn a_newer_database_stops_the_flow_before_any_write() {
        for dialect in Dialect::ALL {
            let (ops, done) = run(dialect, None, Some(i64::from(SCHEMA_VERSION) + 1));
            assert!(matches!(ops.last(), Some(MigrationOp::Query(_))));
            let err = done.unwrap_err();
            assert_eq!(
                err,
                MigrationError::Newer {
                    found: i64::from(SCHEMA_VERSION) + 1,
                    known: SCHEMA_VERSION
                }
            );
            assert_eq!(Error::from(err).code(), ErrorCode::StoreFailed);
        }
        let (_, done) = run(Dialect::Sqlite, None, Some(-1));
        assert_eq!(done, Err(MigrationError::Invalid(-1)));
    }

    #[test]
    fn mysql_locks_creates_the_latest_table_at_once_records_every_version_and_unlocks() {
        let (ops, done) = run(Dialect::Mysql, Some("ik"), None);
        let texts = texts(&ops);
        assert!(matches!(ops[0], MigrationOp::Query(_)), "{texts:?}");
        assert!(texts[0].starts_with("SELECT GET_LOCK("), "{texts:?}");
        assert!(
            texts[1].starts_with("CREATE TABLE IF NOT EXISTS `ik`.`intentkey_schema_migrations`")
        );
        assert!(matches!(ops[2], MigrationOp::Query(_)));
        assert_eq!(texts[3], ddl::mysql_create_latest(Some("ik")).unwrap());
        let records = texts
            .iter()
            .filter(|t| t.starts_with("INSERT INTO `ik`.`intentkey_schema_migrations`"))
            .count();
        assert_eq!(records, SCHEMA_VERSION as usize);
        assert!(
            texts.last().unwrap().starts_with("DO RELEASE_LOCK("),
            "{texts:?}"
        );
        assert_eq!(ops.len(), 3 + 1 + SCHEMA_VERSION as usize + 1);
        assert_eq!(done.map(|d| d.from_version), Ok(0));
        // Up to date: the lock, the table, the version, the unlock.
        let (ops, _) = run(Dialect::Mysql, None, Some(i64::from(SCHEMA_VERSION)));
        assert_eq!(ops.len(), 4, "{:?}", texts_of(&ops));
        // A database at version 1 gets the later migrations one statement at a time.
        let (ops, _) = run(Dialect::Mysql, None, Some(1));
        let texts = texts_of(&ops);
        assert!(
            texts.iter().any(|t| t.starts_with(
                "ALTER TABLE `intentkey_records` ADD COLUMN `owner_token` VARCHAR(64)"
            )),
            "{texts:?}"
        );
        assert!(!texts
            .iter()
            .any(|t| t.starts_with("CREATE TABLE IF NOT EXISTS `intentkey_records`")));
    }

    fn texts_of(ops: &[MigrationOp]) -> Vec<String> {
        texts(ops).into_iter().map(str::to_owned).collect()
    }

    #[test]
    fn a_mysql_lock_not_had_stops_the_flow_retryably() {
        for answer in [Some(0), None] {
            let mut flow = MigrationFlow::new(Dialect::Mysql, None).unwrap();
            assert!(matches!(
                flow.start(),
                MigrationStep::Io(MigrationOp::Query(_))
            ));
            assert!(flow.awaits_query());
            let e = flow.resume(MigrationResult::Queried(answer)).unwrap_err();
            assert_eq!(e, MigrationError::Locked);
            assert_eq!(Error::from(e).code(), ErrorCode::StoreUnavailable);
        }
    }

    #[test]
    fn answers_out_of_turn_are_misuse() {
        let mut flow = MigrationFlow::new(Dialect::Sqlite, None).unwrap();
        flow.start();
        assert!(matches!(
            flow.resume(MigrationResult::Executed),
            Err(MigrationError::Misuse(_))
        ));
        assert!(MigrationFlow::new(Dialect::Postgres, Some("")).is_err());
    }
}
