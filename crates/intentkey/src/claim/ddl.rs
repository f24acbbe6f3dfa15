//! The one schema (`schema/intentkey.sql`) in each dialect's DDL.
//!
//! PostgreSQL and SQLite run the file verbatim. MySQL and MariaDB need it
//! translated, and the translation is written once, here:
//! - every identifier is backquoted (`key` is a reserved word), and the two
//!   tables are qualified with the store's database when it names one;
//! - column types map to MySQL's: the key becomes `VARBINARY(1020)` (room
//!   for 255 characters of UTF-8, compared byte for byte: the `_bin`
//!   collations of MariaDB and MySQL 5.7 ignore trailing spaces, which would
//!   make `k` and `k ` one key), the status and the owner token `VARCHAR`,
//!   the bodies `LONGTEXT` and `LONGBLOB` (MySQL's `TEXT` holds 64 KiB);
//! - a table is created `ENGINE=InnoDB` with `utf8mb4_bin` (the default
//!   collation compares case-insensitively);
//! - MySQL commits each DDL statement by itself, so a new database gets the
//!   latest table in one `CREATE TABLE IF NOT EXISTS` with every column and
//!   index folded in ([`mysql_create_latest`]): a migration cut short is run
//!   again whole, never half-applied.
//!
//! The file writes keywords in upper case and identifiers in lower case; the
//! translation relies on it and refuses anything else, so a migration the
//! translation cannot carry fails the core's tests, not a user's database.
//!
//! ```
//! use intentkey::claim::ddl;
//! let create = ddl::mysql_create_latest(None)?;
//! assert!(create.starts_with("CREATE TABLE IF NOT EXISTS `intentkey_records` ("));
//! assert!(create.contains("VARBINARY(1020) PRIMARY KEY"));
//! assert!(create.contains("`response_body_bytes` LONGBLOB"));
//! assert!(create.ends_with("ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"));
//! # Ok::<(), intentkey::Error>(())
//! ```

use super::schema::{migrations, migrations_table};
use super::sql::{Dialect, MIGRATIONS_TABLE, TABLE};
use crate::{Error, ErrorCode};

/// The table options of every table MySQL creates.
pub const MYSQL_TABLE_OPTIONS: &str = "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin";

/// The longest key a MySQL store holds, in characters (`VARBINARY(1020)`:
/// 255 characters of UTF-8 at most 4 bytes each): the core's keys
/// are 64 hex digits at most, and HTTP storage keys are digests too.
pub const MYSQL_KEY_CHARS: usize = 255;

fn unsupported(what: String) -> Error {
    Error::field(
        ErrorCode::StoreFailed,
        "schema",
        format!("the MySQL translation of the schema: {what}"),
    )
}

/// A column's MySQL type: by column where it matters, else by its type.
fn mysql_type(column: &str, ty: &str) -> crate::Result<String> {
    let by_column = match column {
        // Binary: compared byte for byte. `utf8mb4_bin` pads with spaces
        // (MariaDB, MySQL 5.7), so `k` and `k ` would be one key.
        "key" => Some("VARBINARY(1020)"),
        "status" => Some("VARCHAR(32)"),
        "owner_token" => Some("VARCHAR(64)"),
        "response_body" | "response_headers" => Some("LONGTEXT"),
        _ => None,
    };
    if let Some(t) = by_column {
        return Ok(t.to_owned());
    }
    match ty {
        "TEXT" => Ok("TEXT".to_owned()),
        "BYTEA" => Ok("LONGBLOB".to_owned()),
        "INTEGER" | "BIGINT" => Ok(ty.to_owned()),
        other => Err(unsupported(format!(
            "column {column} has the type {other}, which has no MySQL mapping"
        ))),
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    /// A literal, an operator, punctuation or white space: copied as it is.
    Other(String),
}

fn tokens(sql: &str) -> crate::Result<Vec<Token>> {
    let mut out = Vec::new();
    let chars: Vec<char> = sql.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        if c.is_ascii_alphabetic() || c == '_' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Token::Word(chars[start..i].iter().collect()));
        } else if c == '\'' {
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            if i == chars.len() {
                return Err(unsupported(format!("an unterminated literal in {sql:?}")));
            }
            i += 1;
            out.push(Token::Other(chars[start..i].iter().collect()));
        } else if c == '"' || c == '`' {
            return Err(unsupported(format!(
                "a quoted identifier in {sql:?} (write identifiers in lower case, unquoted)"
            )));
        } else {
            i += 1;
            out.push(Token::Other(c.to_string()));
        }
    }
    Ok(out)
}

fn is_keyword(word: &str) -> bool {
    word.bytes()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

fn is_identifier(word: &str) -> bool {
    word.bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// One statement of the schema file in MySQL's DDL.
///
/// # Errors
/// `store-failed` naming `schema` for a statement the translation cannot
/// carry (a mixed-case word, a quoted identifier, a type with no mapping);
/// `invalid-argument` for an empty database name.
pub fn mysql_statement(sql: &str, schema: Option<&str>) -> crate::Result<String> {
    let d = Dialect::Mysql;
    let toks = tokens(sql)?;
    let words: Vec<&str> = toks
        .iter()
        .filter_map(|t| match t {
            Token::Word(w) => Some(w.as_str()),
            Token::Other(_) => None,
        })
        .collect();
    let create_table = words.starts_with(&["CREATE", "TABLE"]);
    let mut out = String::with_capacity(sql.len() + 64);
    let mut depth = 0usize;
    // A column definition starts: at depth 1 of CREATE TABLE after `(` or
    // `,`, and after ADD COLUMN.
    let mut expect_column = false;
    let mut column: Option<String> = None;
    let mut previous: Option<&str> = None;
    for t in &toks {
        match t {
            Token::Other(s) => {
                match s.as_str() {
                    "(" => {
                        depth += 1;
                        expect_column = create_table && depth == 1;
                    }
                    ")" => depth = depth.saturating_sub(1),
                    "," => expect_column = create_table && depth == 1,
                    _ => {}
                }
                out.push_str(s);
            }
            Token::Word(w) => {
                if let Some(name) = column.take() {
                    if !is_keyword(w) {
                        return Err(unsupported(format!("column {name} has no type in {sql:?}")));
                    }
                    out.push_str(&mysql_type(&name, w)?);
                } else if is_keyword(w) {
                    expect_column = w == "COLUMN" && previous == Some("ADD");
                    out.push_str(w);
                } else if is_identifier(w) {
                    if expect_column {
                        column = Some(w.clone());
                        expect_column = false;
                    }
                    if w == TABLE || w == MIGRATIONS_TABLE {
                        out.push_str(&d.table(w, schema)?);
                    } else {
                        out.push_str(&d.quote_identifier(w)?);
                    }
                } else {
                    return Err(unsupported(format!(
                        "the word {w:?} in {sql:?} is neither a keyword (upper case) nor an identifier (lower case)"
                    )));
                }
                previous = Some(w.as_str());
            }
        }
    }
    if create_table {
        out.push(' ');
        out.push_str(MYSQL_TABLE_OPTIONS);
    }
    Ok(out)
}

/// The statement creating MySQL's migrations table.
///
/// # Errors
/// As [`mysql_statement`].
pub fn mysql_migrations_table(schema: Option<&str>) -> crate::Result<String> {
    mysql_statement(&migrations_table(), schema)
}

/// The records table at the latest version, in one statement: migration
/// 1's `CREATE TABLE` (made `IF NOT EXISTS`) with every later migration's
/// `ADD COLUMN` and `CREATE INDEX` on it folded in, in MySQL's DDL.
///
/// # Errors
/// `store-failed` naming `schema` when a migration holds a statement that
/// cannot be folded (anything but those three shapes on the records table).
pub fn mysql_create_latest(schema: Option<&str>) -> crate::Result<String> {
    let create_prefix = format!("CREATE TABLE {TABLE} (");
    let add_prefix = format!("ALTER TABLE {TABLE} ADD COLUMN ");
    let mut create: Option<String> = None;
    let mut items: Vec<String> = Vec::new();
    for m in migrations() {
        for statement in m.statements {
            let flat = statement.split_whitespace().collect::<Vec<_>>().join(" ");
            if statement.starts_with(&create_prefix) && create.is_none() {
                create = Some(statement);
            } else if let Some(def) = flat.strip_prefix(&add_prefix) {
                items.push(def.to_owned());
            } else if let Some((name, columns)) = flat
                .strip_prefix("CREATE INDEX ")
                .and_then(|rest| rest.split_once(&format!(" ON {TABLE} ")))
            {
                items.push(format!("INDEX {name} {columns}"));
            } else {
                return Err(unsupported(format!(
                    "migration {} holds {flat:?}, which cannot be folded into one CREATE TABLE",
                    m.version
                )));
            }
        }
    }
    let create =
        create.ok_or_else(|| unsupported(format!("no {create_prefix:?} in the schema")))?;
    let body_end = create
        .rfind(')')
        .ok_or_else(|| unsupported("the CREATE TABLE has no closing parenthesis".to_owned()))?;
    let mut folded = String::from("CREATE TABLE IF NOT EXISTS ");
    folded.push_str(create["CREATE TABLE ".len()..body_end].trim_end());
    for item in items {
        folded.push_str(",\n    ");
        folded.push_str(&item);
    }
    folded.push_str("\n)");
    mysql_statement(&folded, schema)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_migration_statement_translates() {
        for m in migrations() {
            for s in &m.statements {
                let t = mysql_statement(s, Some("db")).unwrap();
                assert!(!t.contains(" key "), "{t}");
                assert!(!t.contains("BYTEA"), "{t}");
            }
        }
        assert_eq!(
            mysql_statement("ALTER TABLE intentkey_records ADD COLUMN owner_token TEXT NOT NULL DEFAULT ''", None).unwrap(),
            "ALTER TABLE `intentkey_records` ADD COLUMN `owner_token` VARCHAR(64) NOT NULL DEFAULT ''"
        );
        assert_eq!(
            mysql_statement("CREATE INDEX intentkey_records_status ON intentkey_records (status, created_at)", Some("d")).unwrap(),
            "CREATE INDEX `intentkey_records_status` ON `d`.`intentkey_records` (`status`, `created_at`)"
        );
    }

    #[test]
    fn the_latest_table_has_every_column_and_index_of_every_migration() {
        let create = mysql_create_latest(Some("ik")).unwrap();
        let flat = create.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(create.starts_with("CREATE TABLE IF NOT EXISTS `ik`.`intentkey_records` ("));
        for column in super::super::sql::COLUMNS {
            assert!(
                create.contains(&format!("`{column}` ")),
                "{column}: {create}"
            );
        }
        for index in [
            "INDEX `intentkey_records_expiry` (`expires_at`)",
            "INDEX `intentkey_records_status` (`status`, `created_at`)",
        ] {
            assert!(create.contains(index), "{index}: {create}");
        }
        assert!(flat.contains("`status` VARCHAR(32) NOT NULL CHECK (`status` IN ('in_flight', 'done', 'needs_reconciliation'))"), "{create}");
        assert!(
            flat.contains("`owner_token` VARCHAR(64) NOT NULL DEFAULT ''"),
            "{create}"
        );
        assert_eq!(create.matches(MYSQL_TABLE_OPTIONS).count(), 1);
        let migrations_table = mysql_migrations_table(None).unwrap();
        assert!(migrations_table
            .starts_with("CREATE TABLE IF NOT EXISTS `intentkey_schema_migrations` ("));
    }

    #[test]
    fn what_the_translation_cannot_carry_is_refused_by_name() {
        for bad in [
            "CREATE TABLE t (Key TEXT)",
            "CREATE TABLE t (k JSONB)",
            "CREATE TABLE t (\"k\" TEXT)",
            "CREATE TABLE t (k TEXT DEFAULT 'x)",
        ] {
            let e = mysql_statement(bad, None).unwrap_err();
            assert_eq!(e.code(), ErrorCode::StoreFailed, "{bad}");
            assert_eq!(e.field_name(), Some("schema"), "{bad}");
        }
    }
}
