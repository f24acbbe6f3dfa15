//! The migration flow: the one order in which every SQL store, in every
//! host, brings its schema up to date. Sans-I/O: the flow names each
//! statement to run; the host runs it and answers.
//!
//! The host runs every operation inside one transaction it opens before
//! [`MigrationFlow::start`] (SQLite: `BEGIN IMMEDIATE`, one writer at a time;
//! PostgreSQL: `BEGIN`), commits when the flow is done, and rolls back on any
//! error: a migration is applied whole or not at all.
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
        }
    }
}

impl std::error::Error for MigrationError {}

impl From<MigrationError> for Error {
    fn from(e: MigrationError) -> Self {
        let code = match e {
            MigrationError::Newer { .. } | MigrationError::Invalid(_) => ErrorCode::StoreFailed,
            MigrationError::Misuse(_) => ErrorCode::FlowMisuse,
        };
        Error::new(code, e.to_string())
    }
}

/// The migration flow of one dialect and schema.
#[derive(Clone, Debug)]
pub struct MigrationFlow {
    dialect: Dialect,
    /// The statements before the version is read (PostgreSQL: the lock, the
    /// search path, the migrations table).
    prelude: Vec<MigrationOp>,
    version_query: SqlCall,
    record: Option<String>,
    /// What is left to ask, in order, once the version is known.
    pending: std::collections::VecDeque<MigrationOp>,
    from: Option<u32>,
    state: State,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
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
        let (prelude, version_query, record) = match dialect {
            Dialect::Sqlite => (Vec::new(), SqlCall::bare(SQLITE_VERSION), None),
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
            prelude,
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
    fn plan(&self, from: u32, all: Vec<Migration>) -> std::collections::VecDeque<MigrationOp> {
        let mut ops = std::collections::VecDeque::new();
        for m in all.into_iter().filter(|m| m.version > from) {
            ops.extend(
                m.statements
                    .into_iter()
                    .map(|s| MigrationOp::Execute(SqlCall::bare(s))),
            );
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
        self.state == State::Version
    }

    /// Resumes with the result of the last operation.
    ///
    /// # Errors
    /// [`MigrationError::Newer`] when the database is ahead of this build;
    /// [`MigrationError::Misuse`] for an answer the last operation did not
    /// ask for, or a flow already done.
    pub fn resume(&mut self, result: MigrationResult) -> Result<MigrationStep, MigrationError> {
        match (self.state, result) {
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
                self.pending = self.plan(from, migrations());
                self.state = State::Applying;
                Ok(self.next())
            }
            (State::Applying, MigrationResult::Executed) => Ok(self.next()),
            (State::Done, _) => Err(MigrationError::Misuse("after it was done")),
            (State::Version, MigrationResult::Executed) => Err(MigrationError::Misuse(
                "executed where a query's value was due",
            )),
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
