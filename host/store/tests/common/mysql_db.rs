//! MySQL / MariaDB for the store test binaries (stores.rs, fencing.rs): a
//! database of each test's own, dropped at the end.

use mysql::prelude::Queryable;

use crate::common::{rand_u32, skipped};

/// The server the tests use (MariaDB on the project machines: root, no
/// password). Each test creates a database of its own there.
pub const MYSQL_BASE: &str = "mysql://root@127.0.0.1:3306";

/// A database of one test's own, dropped (with everything in it) at the end.
///
/// When the server is unreachable: under `CI=true` the test fails; otherwise
/// it prints a line starting `SKIPPED:` naming the test and why, and the
/// caller returns.
pub struct MysqlDb {
    pub name: String,
}

impl MysqlDb {
    pub fn new(test: &str) -> Option<MysqlDb> {
        let mut admin = mysql_admin(test)?;
        let name = format!("ik_rs_{test}_{}_{}", std::process::id(), rand_u32());
        admin
            .query_drop(format!("CREATE DATABASE `{name}`"))
            .unwrap();
        Some(MysqlDb { name })
    }

    /// The store URL: the tables land in this database.
    pub fn url(&self) -> String {
        format!("{MYSQL_BASE}/{}", self.name)
    }
}

impl Drop for MysqlDb {
    fn drop(&mut self) {
        if let Ok(mut c) =
            mysql::Conn::new(mysql::Opts::from_url(&format!("{MYSQL_BASE}/test")).unwrap())
        {
            let _ = c.query_drop(format!("DROP DATABASE IF EXISTS `{}`", self.name));
        }
    }
}

/// A connection to the `test` database, or `None` after the skip rule (see [`MysqlDb`]).
pub fn mysql_admin(test: &str) -> Option<mysql::Conn> {
    let url = format!("{MYSQL_BASE}/test");
    let opts = mysql::OptsBuilder::from_opts(mysql::Opts::from_url(&url).unwrap())
        .tcp_connect_timeout(Some(std::time::Duration::from_secs(5)));
    match mysql::Conn::new(opts) {
        Ok(c) => Some(c),
        Err(e) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{test}: CI=true and MySQL/MariaDB is not reachable at {url}: {e}"
            );
            skipped(&format!(
                "{test}: MySQL/MariaDB is not reachable at {url} ({e}); this test needs it (it fails under CI=true)"
            ));
            None
        }
    }
}
