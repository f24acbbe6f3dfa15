//! Shared by the store test binaries: PostgreSQL schemas of their own,
//! temporary SQLite files, attempts, and child processes (a test binary
//! re-executing one of its own tests with `--exact` and environment variables).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use intentkey_store::guard::Attempt;

pub const PG_BASE: &str = "postgres://postgres@127.0.0.1:5432/test";

/// A PostgreSQL schema of one test's own, dropped at the end.
///
/// When the server is unreachable: under `CI=true` the test fails; otherwise
/// it prints a line starting `SKIPPED:` naming the test and why, and the
/// caller returns.
pub struct PgSchema {
    pub name: String,
}

impl PgSchema {
    pub fn new(test: &str) -> Option<PgSchema> {
        let mut client = pg_admin(test)?;
        let name = format!("ik_rs_{test}_{}_{}", std::process::id(), rand_u32());
        client
            .batch_execute(&format!("CREATE SCHEMA {name}"))
            .unwrap();
        Some(PgSchema { name })
    }

    /// The store URL: every table lands in this schema.
    pub fn url(&self) -> String {
        format!("{PG_BASE}?options=-csearch_path%3D{}", self.name)
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(PG_BASE, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name));
        }
    }
}

/// A client on the test database, or `None` after the skip rule (see [`PgSchema`]).
pub fn pg_admin(test: &str) -> Option<postgres::Client> {
    match postgres::Client::connect(PG_BASE, postgres::NoTls) {
        Ok(c) => Some(c),
        Err(e) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{test}: CI=true and PostgreSQL is not reachable at {PG_BASE}: {e}"
            );
            skipped(&format!(
                "{test}: PostgreSQL is not reachable at {PG_BASE} ({e}); this test needs it (it fails under CI=true)"
            ));
            None
        }
    }
}

/// Prints `SKIPPED: <why>` straight to the process's stderr, past the test
/// harness's output capture, so that a run without `--nocapture` (and a log
/// counting skips) shows it.
pub fn skipped(why: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED: {why}");
}

/// A multi-threaded tokio runtime of `workers` threads, with its timers and I/O.
pub fn runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap()
}

pub fn rand_u32() -> u32 {
    let mut b = [0u8; 4];
    getrandom::fill(&mut b).unwrap();
    u32::from_le_bytes(b)
}

/// A unique path in the temporary directory.
pub fn temp_path(tag: &str, ext: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "ik-{tag}-{}-{}{ext}",
        std::process::id(),
        rand_u32()
    ))
}

/// A SQLite file removed (with its WAL) when dropped.
pub struct TempSqlite {
    pub path: PathBuf,
}

impl TempSqlite {
    pub fn new(tag: &str) -> TempSqlite {
        TempSqlite {
            path: temp_path(tag, ".sqlite"),
        }
    }

    pub fn url(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }
}

impl Drop for TempSqlite {
    fn drop(&mut self) {
        remove_sqlite(&self.path);
    }
}

pub fn remove_sqlite(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

pub fn attempt(key: &str, fingerprint: &str) -> Attempt {
    Attempt {
        key: key.into(),
        fingerprint: fingerprint.into(),
        tenant_id: "t1".into(),
        action_type: "pix.send".into(),
        prior: None,
    }
}

/// A destination in a SQLite file that many processes record effects in.
pub struct EffectsFile {
    pub path: PathBuf,
    conn: std::sync::Mutex<rusqlite::Connection>,
}

impl EffectsFile {
    pub fn new(tag: &str) -> EffectsFile {
        let path = temp_path(tag, ".sqlite");
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; CREATE TABLE effects (key TEXT NOT NULL, by TEXT NOT NULL DEFAULT '')",
        )
        .unwrap();
        conn.busy_timeout(Duration::from_secs(30)).unwrap();
        EffectsFile {
            path,
            conn: std::sync::Mutex::new(conn),
        }
    }

    /// Records one effect (`by` names who ran it).
    pub fn record(&self, key: &str, by: &str) {
        record_effect(&self.conn.lock().unwrap(), key, by);
    }

    pub fn effects(&self, key: &str) -> u32 {
        self.conn
            .lock()
            .unwrap()
            .query_row("SELECT count(*) FROM effects WHERE key = ?1", [key], |r| {
                r.get(0)
            })
            .unwrap()
    }

    /// Who ran the effects of `key`, in order.
    pub fn by(&self, key: &str) -> Vec<String> {
        let conn = self.conn.lock().unwrap();
        let mut st = conn
            .prepare("SELECT by FROM effects WHERE key = ?1 ORDER BY rowid")
            .unwrap();
        st.query_map([key], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }
}

impl Drop for EffectsFile {
    fn drop(&mut self) {
        remove_sqlite(&self.path);
    }
}

/// Opens an effects file from another process.
pub fn open_effects(path: &str) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_secs(30)).unwrap();
    conn
}

pub fn record_effect(conn: &rusqlite::Connection, key: &str, by: &str) {
    conn.execute("INSERT INTO effects (key, by) VALUES (?1, ?2)", [key, by])
        .unwrap();
}

/// Runs this test binary's test `child` (exactly) in a new process, with `env`.
pub fn spawn_child(child: &str, env: &[(&str, String)]) -> Child {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([child, "--exact", "--nocapture", "--test-threads", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    for (name, value) in env {
        command.env(name, value);
    }
    command.spawn().unwrap()
}

/// Waits for a child and asserts it succeeded.
pub fn wait_ok(child: Child, what: &str) {
    let status = child.wait_with_output().unwrap().status;
    assert!(status.success(), "{what}: child process failed: {status}");
}

/// Waits until `path` exists (at most `timeout`).
pub fn wait_for_file(path: &Path, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while !path.exists() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    true
}

/// Writes a report (`name=value` lines) so that a reader never sees half of it.
pub fn write_report(path: &Path, report: &Report) {
    let text: String = report.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    let tmp = PathBuf::from(format!("{}.tmp", path.display()));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

pub fn read_report(path: &Path) -> Report {
    let text = std::fs::read_to_string(path).unwrap();
    let _ = std::fs::remove_file(path);
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// What a child (or the same code in process) reports: `name=value` pairs.
pub type Report = BTreeMap<String, String>;

/// Restarts the machine's PostgreSQL cluster (`pg_ctlcluster … restart`):
/// the tests that show what a restart under load does.
pub fn restart_postgres() -> Result<(), String> {
    let version = std::fs::read_dir("/etc/postgresql")
        .map_err(|e| format!("no /etc/postgresql: {e}"))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .next()
        .ok_or("no PostgreSQL cluster in /etc/postgresql")?;
    let status = Command::new("pg_ctlcluster")
        .args(["--skip-systemctl-redirect", &version, "main", "restart"])
        .status()
        .map_err(|e| format!("cannot run pg_ctlcluster: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("pg_ctlcluster restart failed: {status}"))
    }
}
