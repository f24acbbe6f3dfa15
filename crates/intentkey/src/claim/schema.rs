//! The store schema: one versioned SQL file, the source for every runtime.
//!
//! `schema/intentkey.sql` (in this crate) holds every migration; the Rust
//! stores read it from here and the npm package through the WIT `schema`
//! interface, so both apply the identical DDL, constraints and migration lock.
//!
//! ```
//! use intentkey::claim::schema;
//! let migrations = schema::migrations();
//! assert_eq!(migrations.last().map(|m| m.version), Some(schema::SCHEMA_VERSION));
//! assert!(migrations[0].statements[0].starts_with("CREATE TABLE intentkey_records"));
//! assert!(schema::migrations_table().starts_with("CREATE TABLE IF NOT EXISTS intentkey_schema_migrations"));
//! ```

/// The schema file, verbatim.
pub const SCHEMA_SQL: &str = include_str!("../../schema/intentkey.sql");

/// The latest schema version (the highest `-- migration N` in the file).
pub const SCHEMA_VERSION: u32 = 3;

/// The PostgreSQL advisory lock every intentkey migration holds
/// (`pg_advisory_xact_lock`), in every runtime.
pub const MIGRATION_LOCK: i64 = 7_316_502_411;

/// One migration: its version and its statements, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Migration {
    /// The version it brings the schema to.
    pub version: u32,
    /// Its statements, without the trailing `;`.
    pub statements: Vec<String>,
}

/// The sections of the file: `(header, statements)`.
fn sections() -> Vec<(&'static str, Vec<String>)> {
    let mut out: Vec<(&'static str, Vec<String>)> = Vec::new();
    let mut current = String::new();
    for line in SCHEMA_SQL.lines() {
        let trimmed = line.trim();
        if let Some(header) = trimmed.strip_prefix("-- ").filter(|h| {
            *h == "migrations-table" || h.strip_prefix("migration ").is_some_and(is_number)
        }) {
            out.push((header, Vec::new()));
            continue;
        }
        if trimmed.starts_with("--") || (trimmed.is_empty() && current.is_empty()) {
            continue;
        }
        if !current.is_empty() {
            current.push('\n');
        }
        current.push_str(line.trim_end());
        if let Some(statement) = current.strip_suffix(';') {
            if let Some((_, statements)) = out.last_mut() {
                statements.push(statement.to_owned());
            }
            current.clear();
        }
    }
    out
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// Every migration in the file, in version order.
pub fn migrations() -> Vec<Migration> {
    sections()
        .into_iter()
        .filter_map(|(header, statements)| {
            let version = header.strip_prefix("migration ")?.parse().ok()?;
            Some(Migration {
                version,
                statements,
            })
        })
        .collect()
}

/// The statement that creates the migrations table (PostgreSQL records the
/// applied versions there; SQLite uses `PRAGMA user_version`).
pub fn migrations_table() -> String {
    sections()
        .into_iter()
        .find(|(header, _)| *header == "migrations-table")
        .and_then(|(_, statements)| statements.into_iter().next())
        .unwrap_or_default()
}

/// The `response_headers` column's text: a JSON array of `[name, value]`
/// pairs, or `None` when there are no headers.
///
/// ```
/// use intentkey::claim::schema::{headers_from_column, headers_to_column};
/// let headers = vec![("Location".to_owned(), "/orders/1".to_owned())];
/// let text = headers_to_column(&headers);
/// assert_eq!(text.as_deref(), Some(r#"[["Location","/orders/1"]]"#));
/// assert_eq!(headers_from_column(text.as_deref()), Ok(headers));
/// assert_eq!(headers_from_column(None), Ok(vec![]));
/// ```
pub fn headers_to_column(headers: &[(String, String)]) -> Option<String> {
    if headers.is_empty() {
        return None;
    }
    let pairs: Vec<[&str; 2]> = headers
        .iter()
        .map(|(n, v)| [n.as_str(), v.as_str()])
        .collect();
    serde_json::to_string(&pairs).ok()
}

/// Reads the `response_headers` column back.
///
/// # Errors
/// `store-failed` when the text is not a JSON array of string pairs.
pub fn headers_from_column(text: Option<&str>) -> crate::Result<Vec<(String, String)>> {
    let Some(text) = text.filter(|t| !t.is_empty()) else {
        return Ok(Vec::new());
    };
    let pairs: Vec<(String, String)> = serde_json::from_str(text).map_err(|_| {
        crate::Error::field(
            crate::ErrorCode::StoreFailed,
            "response_headers",
            "the stored response headers are not a JSON array of [name, value] string pairs; the row was written by something other than intentkey",
        )
    })?;
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_run_one_to_latest_without_gaps() {
        let versions: Vec<u32> = migrations().iter().map(|m| m.version).collect();
        assert_eq!(versions, (1..=SCHEMA_VERSION).collect::<Vec<_>>());
        assert!(migrations().iter().all(|m| !m.statements.is_empty()));
    }

    #[test]
    fn statements_are_whole() {
        for m in migrations() {
            for s in &m.statements {
                assert!(!s.contains(';'), "{s}");
                assert!(!s.trim_start().starts_with("--"), "{s}");
            }
        }
        assert_eq!(migrations()[1].statements.len(), 3);
    }

    #[test]
    fn the_table_has_room_for_fencing_and_headers() {
        let all = migrations()
            .iter()
            .flat_map(|m| m.statements.clone())
            .collect::<Vec<_>>()
            .join("\n");
        for column in ["owner_token", "response_headers", "CHECK (status IN"] {
            assert!(all.contains(column), "{column}");
        }
    }
}
