//! A guarded intent against the statements it cannot do without, on SQLite,
//! PostgreSQL, MySQL/MariaDB, Redis, a Redis Cluster and DynamoDB (on dynalite).
//!
//! `cargo bench -p intentkey-store --bench store` (PostgreSQL at
//! 127.0.0.1:5432, database `test`; MariaDB or MySQL at 127.0.0.1:3306, root,
//! a database of the run's own; Redis at 127.0.0.1:6379, database 3; each
//! part is skipped with a message when its server is unreachable). MySQL's
//! floor is a plain `INSERT` and an `UPDATE` by key (InnoDB's durability is
//! server-wide, so its "non-durable connection" is a second plain one). Redis's
//! floor is `SET … NX` then `SET … XX` (no script, no index, no fencing);
//! its "non-durable connection" is a second connection (Redis has no
//! per-write durability), and its round trip is `PING`. The cluster (the
//! test script's, `bash scripts/redis-cluster.sh start`, or
//! `INTENTKEY_REDIS_CLUSTER`) has the same floor through the cluster client,
//! each key on the master of its slot. DynamoDB's floor is two bare
//! `PutItem`s of the store's own items (`in_flight`, then `done`) into a
//! table made with the store's own definition (both indexes), as the SQL
//! floors use the store's DDL; (g) times the same two writes of a small
//! item into a table with the key only. Both on the same endpoint (dynalite
//! at 127.0.0.1:4567, started by `bash scripts/dynalite.sh start`, or
//! `INTENTKEY_DYNAMODB`).
//!
//! Per intent, one at a time:
//! - (a) the two-commit floor: a bare `INSERT … ON CONFLICT DO NOTHING` and a
//!   bare `UPDATE … WHERE key = …`, each its own commit, prepared once, on one
//!   connection, into a table with the store's own DDL (`floor_records`);
//! - (b) `Guard::claim` + `Guard::finish` (durable completion);
//! - (c) one bare INSERT (the one-commit floor);
//! - (d) `Guard::claim` + `Guard::finish` with `fast_completion` (the
//!   completion's commit does not wait for the disk);
//! - (e) the floor of (d)'s design: the bare INSERT, then the bare UPDATE on
//!   a second connection whose commits do not wait for the disk, as the
//!   store's fast completions do.
//!
//! SQLite runs on a temporary file with the store's settings (WAL,
//! `synchronous = FULL`; the fast connection `synchronous = NORMAL`); the
//! floor uses the same file on connections of its own. PostgreSQL runs in a
//! schema of its own (the fast connection sets `synchronous_commit = off`).
//!
//! - (f) SQLite only: the bare INSERT, then the bare UPDATE on the same
//!   connection with `synchronous` switched to NORMAL for it (what the fast
//!   completion would cost without a second connection).
//!
//! Criterion measures each case. Then (under `cargo bench`, unless
//! `IK_BENCH_ROUNDS=0`) the cases run interleaved: `IK_BENCH_ROUNDS` rounds
//! (120 by default), each running a block of 26 intents of every case in a
//! rotating order, so that the shared machine's drift hits all cases alike
//! while each block behaves like a process doing only that case; the medians,
//! the (b)/(a) and (d)/(c) ratios and each statement's time are printed. The
//! `overhead` group times the guard's own CPU work with no I/O.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::panic
)]

use std::cell::Cell;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::Criterion;
use intentkey::claim::schema::migrations;
use intentkey::claim::{EffectResult, Response, Rules};
use intentkey_store::guard::{new_owner_token, Attempt, Guard};
use intentkey_store::{open, Store};

const PG_BASE: &str = "postgres://postgres@127.0.0.1:5432/test";
const NOW: i64 = 1_700_000_000;

/// The store's DDL for a table of the floor's own.
fn floor_ddl() -> Vec<String> {
    migrations()
        .iter()
        .flat_map(|m| m.statements.clone())
        .map(|s| s.replace("intentkey_records", "floor_records"))
        .collect()
}

/// The columns the store's claim inserts.
const FLOOR_INSERT_SQLITE: &str = "INSERT INTO floor_records (key, fingerprint, tenant_id, action_type, status, owner_token, created_at, lookups) \
     VALUES (?1, 'fp', 't', 'a', 'in_flight', ?2, ?3, 0) ON CONFLICT (key) DO NOTHING";
/// The columns the store's completion writes, by key alone.
const FLOOR_UPDATE_SQLITE: &str =
    "UPDATE floor_records SET status = 'done', response_status = 201, \
     response_content_type = 'application/json', response_headers = NULL, response_body = '{}', \
     expires_at = ?2, next_lookup_at = NULL WHERE key = ?1";
const FLOOR_INSERT_PG: &str = "INSERT INTO floor_records (key, fingerprint, tenant_id, action_type, status, owner_token, created_at, lookups) \
     VALUES ($1, 'fp', 't', 'a', 'in_flight', $2, $3, 0) ON CONFLICT (key) DO NOTHING";
const FLOOR_UPDATE_PG: &str = "UPDATE floor_records SET status = 'done', response_status = 201, \
     response_content_type = 'application/json', response_headers = NULL, response_body = '{}', \
     expires_at = $2, next_lookup_at = NULL WHERE key = $1";

/// A fixed token for the floor rows (the floor makes no randomness).
const FLOOR_TOKEN: &str = "0123456789abcdef0123456789abcdef";

/// The floor's statements: prepared once, on a connection of their own
/// with the store's durability, plus a second connection whose commits do
/// not wait for the disk (as the store's fast completions).
trait Floor {
    /// A bare insert, one (durable) commit.
    fn insert(&mut self, key: &str);
    /// A bare update by key, one durable commit.
    fn update(&mut self, key: &str);
    /// The same update on the non-durable connection.
    fn update_fast(&mut self, key: &str);
    /// The cheapest statement: one round trip, no write.
    fn round_trip(&mut self);
    /// The update on the durable connection with its commit made
    /// non-durable for that one statement (SQLite: `synchronous` switched to
    /// NORMAL around it); `false` where the floor has no such variant.
    fn update_switched(&mut self, _key: &str) -> bool {
        false
    }

    /// The same two writes into a table with the key only (no index);
    /// `false` where the floor has no such variant (DynamoDB has).
    fn bare_pair(&mut self, _key: &str) -> bool {
        false
    }

    /// (a): insert, then update, two durable commits.
    fn two_commits(&mut self, key: &str) {
        self.insert(key);
        self.update(key);
    }
}

struct SqliteFloor {
    conn: rusqlite::Connection,
    fast: rusqlite::Connection,
}

impl Floor for SqliteFloor {
    fn insert(&mut self, key: &str) {
        let mut insert = self.conn.prepare_cached(FLOOR_INSERT_SQLITE).unwrap();
        let n = insert
            .execute(rusqlite::params![key, FLOOR_TOKEN, NOW])
            .unwrap();
        assert_eq!(n, 1);
    }
    fn update(&mut self, key: &str) {
        let mut update = self.conn.prepare_cached(FLOOR_UPDATE_SQLITE).unwrap();
        let n = update
            .execute(rusqlite::params![key, NOW + 86_400])
            .unwrap();
        assert_eq!(n, 1);
    }
    fn update_fast(&mut self, key: &str) {
        let mut update = self.fast.prepare_cached(FLOOR_UPDATE_SQLITE).unwrap();
        let n = update
            .execute(rusqlite::params![key, NOW + 86_400])
            .unwrap();
        assert_eq!(n, 1);
    }
    fn round_trip(&mut self) {
        let mut select = self.conn.prepare_cached("SELECT 1").unwrap();
        let one: i64 = select.query_row([], |r| r.get(0)).unwrap();
        assert_eq!(one, 1);
    }
    fn update_switched(&mut self, key: &str) -> bool {
        self.conn
            .pragma_update(None, "synchronous", "NORMAL")
            .unwrap();
        self.update(key);
        self.conn
            .pragma_update(None, "synchronous", "FULL")
            .unwrap();
        true
    }
}

struct PgFloor {
    client: postgres::Client,
    fast: postgres::Client,
    insert: postgres::Statement,
    update: postgres::Statement,
    update_fast: postgres::Statement,
    select: postgres::Statement,
}

impl Floor for PgFloor {
    fn insert(&mut self, key: &str) {
        let n = self
            .client
            .execute(&self.insert, &[&key, &FLOOR_TOKEN, &NOW])
            .unwrap();
        assert_eq!(n, 1);
    }
    fn update(&mut self, key: &str) {
        let n = self
            .client
            .execute(&self.update, &[&key, &(NOW + 86_400)])
            .unwrap();
        assert_eq!(n, 1);
    }
    fn update_fast(&mut self, key: &str) {
        let n = self
            .fast
            .execute(&self.update_fast, &[&key, &(NOW + 86_400)])
            .unwrap();
        assert_eq!(n, 1);
    }
    fn round_trip(&mut self) {
        let one: i32 = self.client.query_one(&self.select, &[]).unwrap().get(0);
        assert_eq!(one, 1);
    }
}

/// MySQL's floor: a plain `INSERT` and an `UPDATE` by key, prepared once,
/// autocommit, on a connection of its own (and a second for `update_fast`).
struct MysqlFloor {
    conn: mysql::Conn,
    fast: mysql::Conn,
    insert: mysql::Statement,
    update: mysql::Statement,
    update_fast: mysql::Statement,
}

impl Floor for MysqlFloor {
    fn insert(&mut self, key: &str) {
        use mysql::prelude::Queryable;
        self.conn
            .exec_drop(&self.insert, (key, FLOOR_TOKEN, NOW))
            .unwrap();
        assert_eq!(self.conn.affected_rows(), 1);
    }
    fn update(&mut self, key: &str) {
        use mysql::prelude::Queryable;
        self.conn
            .exec_drop(&self.update, (NOW + 86_400, key))
            .unwrap();
        assert_eq!(self.conn.affected_rows(), 1);
    }
    fn update_fast(&mut self, key: &str) {
        use mysql::prelude::Queryable;
        self.fast
            .exec_drop(&self.update_fast, (NOW + 86_400, key))
            .unwrap();
        assert_eq!(self.fast.affected_rows(), 1);
    }
    fn round_trip(&mut self) {
        use mysql::prelude::Queryable;
        let one: Option<i64> = self.conn.query_first("SELECT 1").unwrap();
        assert_eq!(one, Some(1));
    }
}

const MYSQL_BASE: &str = "mysql://root@127.0.0.1:3306";
const FLOOR_INSERT_MYSQL: &str = "INSERT INTO floor_records (`key`, fingerprint, tenant_id, action_type, status, owner_token, created_at, lookups) \
     VALUES (?, 'fp', 't', 'a', 'in_flight', ?, ?, 0)";
const FLOOR_UPDATE_MYSQL: &str =
    "UPDATE floor_records SET status = 'done', response_status = 201, \
     response_content_type = 'application/json', response_headers = NULL, response_body = '{}', \
     expires_at = ?, next_lookup_at = NULL WHERE `key` = ?";

/// This run's MySQL database, its store URL and a floor; `None` when unreachable.
fn mysql_setup() -> Option<(String, String, MysqlFloor)> {
    use mysql::prelude::Queryable;
    let connect = |db: &str| {
        let opts = mysql::Opts::from_url(&format!("{MYSQL_BASE}/{db}")).unwrap();
        mysql::Conn::new(
            mysql::OptsBuilder::from_opts(opts)
                .additional_capabilities(mysql::consts::CapabilityFlags::CLIENT_FOUND_ROWS),
        )
    };
    let mut admin = match connect("test") {
        Ok(c) => c,
        Err(e) => {
            println!("SKIPPED: MySQL benchmarks: not reachable at {MYSQL_BASE} ({e})");
            return None;
        }
    };
    let db = format!("ik_bench_{}", std::process::id());
    admin
        .query_drop(format!("DROP DATABASE IF EXISTS `{db}`"))
        .unwrap();
    admin.query_drop(format!("CREATE DATABASE `{db}`")).unwrap();
    let mut conn = connect(&db).unwrap();
    let create = intentkey::claim::ddl::mysql_create_latest(None)
        .unwrap()
        .replace("`intentkey_records`", "`floor_records`");
    conn.query_drop(create).unwrap();
    let mut fast = connect(&db).unwrap();
    let insert = conn.prep(FLOOR_INSERT_MYSQL).unwrap();
    let update = conn.prep(FLOOR_UPDATE_MYSQL).unwrap();
    let update_fast = fast.prep(FLOOR_UPDATE_MYSQL).unwrap();
    Some((
        db.clone(),
        format!("{MYSQL_BASE}/{db}"),
        MysqlFloor {
            conn,
            fast,
            insert,
            update,
            update_fast,
        },
    ))
}

/// Redis's floor: a bare `SET NX` (the claim without its index) and a bare
/// `SET XX` (the completion without its fence), on connections of its own.
struct RedisFloor {
    conn: Box<dyn redis::ConnectionLike>,
    fast: Box<dyn redis::ConnectionLike>,
    prefix: String,
}

impl RedisFloor {
    fn set(conn: &mut dyn redis::ConnectionLike, key: &str, mode: &str) {
        let ok: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg("ik1 in_flight 0123456789abcdef0123456789abcdef 1700000000 0 - -\n[\"fp\",\"t\",\"a\"]\n")
            .arg(mode)
            .query(conn)
            .unwrap();
        assert_eq!(ok.as_deref(), Some("OK"));
    }
}

impl Floor for RedisFloor {
    fn insert(&mut self, key: &str) {
        Self::set(
            self.conn.as_mut(),
            &format!("{}:floor:{key}", self.prefix),
            "NX",
        );
    }
    fn update(&mut self, key: &str) {
        Self::set(
            self.conn.as_mut(),
            &format!("{}:floor:{key}", self.prefix),
            "XX",
        );
    }
    fn update_fast(&mut self, key: &str) {
        Self::set(
            self.fast.as_mut(),
            &format!("{}:floor:{key}", self.prefix),
            "XX",
        );
    }
    fn round_trip(&mut self) {
        let pong: redis::Value = redis::cmd("PING").query(self.conn.as_mut()).unwrap();
        assert!(!matches!(pong, redis::Value::ServerError(_)), "{pong:?}");
    }
}

const REDIS_BASE: &str = "redis://127.0.0.1:6379/3";

/// This run's Redis prefix, its store URL and a floor; `None` when unreachable.
fn redis_setup() -> Option<(String, String, RedisFloor)> {
    let connect = || redis::Client::open(REDIS_BASE).and_then(|c| c.get_connection());
    let (conn, fast) = match (connect(), connect()) {
        (Ok(conn), Ok(fast)) => (conn, fast),
        (Err(e), _) | (_, Err(e)) => {
            println!("SKIPPED: Redis benchmarks: not reachable at {REDIS_BASE} ({e})");
            return None;
        }
    };
    let prefix = format!("ik-bench-{}", std::process::id());
    let url = format!("{REDIS_BASE}?prefix={prefix}");
    Some((
        prefix.clone(),
        url,
        RedisFloor {
            conn: Box::new(conn),
            fast: Box::new(fast),
            prefix,
        },
    ))
}

/// DynamoDB's floor: two bare `PutItem`s of the store's own items (the
/// core's encoding of an `in_flight` record, conditioned on the key's
/// absence, then of the same record `done`, conditioned on its presence)
/// into a table made with the store's own definition (its two indexes), as
/// the SQL floors write into a table with the store's own DDL. The same two
/// `PutItem`s of a small item into a table with the key only (no index) are
/// timed too (`bare_pair`), on the same endpoint (dynalite, started by the
/// test script).
struct DynamoFloor {
    client: aws_sdk_dynamodb::Client,
    runtime: tokio::runtime::Runtime,
    /// The floor's table, made by the store (its definition).
    table: String,
    /// A table with the key only.
    bare: String,
}

/// DynamoDB's JSON form of an item as the SDK's attributes.
fn dynamo_item(
    item: &serde_json::Value,
) -> std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> {
    use aws_sdk_dynamodb::types::AttributeValue as V;
    use base64::Engine as _;
    item.as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let (t, x) = v.as_object().unwrap().iter().next().unwrap();
            let x = x.as_str().unwrap();
            let v = match t.as_str() {
                "S" => V::S(x.to_owned()),
                "N" => V::N(x.to_owned()),
                "B" => V::B(aws_sdk_dynamodb::primitives::Blob::new(
                    base64::engine::general_purpose::STANDARD.decode(x).unwrap(),
                )),
                other => panic!("no attribute type {other}"),
            };
            (k.clone(), v)
        })
        .collect()
}

impl DynamoFloor {
    fn put(
        &mut self,
        table: &str,
        item: std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
        condition: &str,
    ) {
        let put = self
            .client
            .put_item()
            .table_name(table)
            .set_item(Some(item))
            .condition_expression(condition)
            .expression_attribute_names("#k", "key");
        self.runtime.block_on(put.send()).unwrap();
    }

    /// The store's item for `key`, `in_flight` or `done`.
    fn record(
        key: &str,
        done: bool,
    ) -> std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> {
        let mut record = intentkey::claim::Record::in_flight(&bench_attempt(key), FLOOR_TOKEN, NOW);
        if done {
            record.complete(Response::json(201, "{}"), NOW, Rules::default().ttl_seconds);
        }
        dynamo_item(&intentkey::claim::dynamo::encode(&record).unwrap())
    }

    fn small(
        key: &str,
    ) -> std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> {
        use aws_sdk_dynamodb::types::AttributeValue as V;
        [
            ("key", V::S(key.to_owned())),
            ("status", V::S("in_flight".to_owned())),
            ("owner_token", V::S(FLOOR_TOKEN.to_owned())),
            ("created_at", V::N(NOW.to_string())),
            ("fingerprint", V::S("fp".to_owned())),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }
}

impl Floor for DynamoFloor {
    fn insert(&mut self, key: &str) {
        let (table, item) = (self.table.clone(), Self::record(key, false));
        self.put(&table, item, "attribute_not_exists(#k)");
    }
    fn update(&mut self, key: &str) {
        let (table, item) = (self.table.clone(), Self::record(key, true));
        self.put(&table, item, "attribute_exists(#k)");
    }
    fn update_fast(&mut self, key: &str) {
        self.update(key);
    }
    fn round_trip(&mut self) {
        let get = self.client.get_item().table_name(&self.bare).key(
            "key",
            aws_sdk_dynamodb::types::AttributeValue::S("none".to_owned()),
        );
        self.runtime.block_on(get.send()).unwrap();
    }
    fn bare_pair(&mut self, key: &str) -> bool {
        let bare = self.bare.clone();
        self.put(&bare, Self::small(key), "attribute_not_exists(#k)");
        self.put(&bare, Self::small(key), "attribute_exists(#k)");
        true
    }
}

fn dynamo_endpoint() -> String {
    std::env::var("INTENTKEY_DYNAMODB").unwrap_or_else(|_| "dynamodb://127.0.0.1:4567".to_owned())
}

/// The store's table and URL, and the floor's table; `None` when there is no endpoint.
fn dynamo_setup() -> Option<(String, DynamoFloor)> {
    use aws_sdk_dynamodb::types::{
        AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    };
    let endpoint = dynamo_endpoint();
    let host = endpoint
        .trim_start_matches("dynamodb://")
        .trim_end_matches('/')
        .to_owned();
    if let Err(e) = std::net::TcpStream::connect(&host) {
        println!("SKIPPED: DynamoDB benchmarks: no endpoint at {endpoint} ({e}); bash scripts/dynalite.sh start");
        return None;
    }
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "local", "local", None, None, "bench",
        ))
        .http_client(
            aws_smithy_http_client::Builder::new()
                .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
                    aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring,
                ))
                .build_https(),
        )
        .endpoint_url(format!("http://{host}"))
        .build();
    let client = aws_sdk_dynamodb::Client::from_conf(config);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let bare = format!("ik-bench-bare-{}", std::process::id());
    let create = client
        .create_table()
        .table_name(&bare)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("key")
                .attribute_type(ScalarAttributeType::S)
                .build()
                .unwrap(),
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("key")
                .key_type(KeyType::Hash)
                .build()
                .unwrap(),
        )
        .billing_mode(BillingMode::PayPerRequest);
    runtime.block_on(create.send()).unwrap();
    // The floor's table, made by the store with its own definition.
    let table = format!("ik-bench-floor-{}", std::process::id());
    drop(open(&format!("{}/{table}", endpoint.trim_end_matches('/'))).unwrap());
    let url = format!(
        "{}/ik-bench-{}",
        endpoint.trim_end_matches('/'),
        std::process::id()
    );
    Some((
        url,
        DynamoFloor {
            client,
            runtime,
            table,
            bare,
        },
    ))
}

/// Deletes the bench's three tables.
fn dynamo_cleanup(floor_table: &str, bare_table: &str) {
    let endpoint = dynamo_endpoint();
    let host = endpoint
        .trim_start_matches("dynamodb://")
        .trim_end_matches('/')
        .to_owned();
    for table in [
        floor_table.to_owned(),
        bare_table.to_owned(),
        format!("ik-bench-{}", std::process::id()),
    ] {
        use std::io::{Read as _, Write as _};
        let Ok(mut s) = std::net::TcpStream::connect(&host) else {
            return;
        };
        let body = format!(r#"{{"TableName":"{table}"}}"#);
        let _ = write!(
            s,
            "POST / HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/x-amz-json-1.0\r\n\
             X-Amz-Target: DynamoDB_20120810.DeleteTable\r\nX-Amz-Date: 20260101T000000Z\r\n\
             Authorization: AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = s.read_to_string(&mut String::new());
    }
}

/// The Redis Cluster of the test script (`scripts/redis-cluster.sh start`;
/// `INTENTKEY_REDIS_CLUSTER` names another).
fn redis_cluster_url() -> String {
    std::env::var("INTENTKEY_REDIS_CLUSTER")
        .unwrap_or_else(|_| "redis+cluster://127.0.0.1:7000".to_owned())
}

fn redis_cluster_client() -> redis::RedisResult<redis::cluster::ClusterClient> {
    let url = redis_cluster_url();
    let nodes = url.replacen("redis+cluster://", "", 1);
    let nodes = nodes.split(['?', '/']).next().unwrap_or_default();
    redis::cluster::ClusterClient::new(nodes.split(',').map(|n| format!("redis://{n}")))
}

/// The cluster's prefix, store URL and floor (`SET NX` + `SET XX` through
/// the cluster client, each key on the master of its slot); `None` when
/// there is no cluster.
fn redis_cluster_setup() -> Option<(String, String, RedisFloor)> {
    let connect = || redis_cluster_client().and_then(|c| c.get_connection());
    let (conn, fast) = match (connect(), connect()) {
        (Ok(conn), Ok(fast)) => (conn, fast),
        (Err(e), _) | (_, Err(e)) => {
            println!(
                "SKIPPED: Redis Cluster benchmarks: none at {} ({e}); bash scripts/redis-cluster.sh start",
                redis_cluster_url()
            );
            return None;
        }
    };
    let prefix = format!("ik-bench-cluster-{}", std::process::id());
    let url = format!("{}?prefix={prefix}", redis_cluster_url());
    Some((
        prefix.clone(),
        url,
        RedisFloor {
            conn: Box::new(conn),
            fast: Box::new(fast),
            prefix,
        },
    ))
}

/// Deletes the cluster keys of this run: the floor's (`prefix:floor:…`) and
/// the store's (`{prefix:NN}:…`), one key at a time.
fn redis_cluster_cleanup(prefix: &str) {
    let Ok(mut c) = redis_cluster_client().and_then(|c| c.get_connection()) else {
        return;
    };
    for pattern in [format!("{prefix}:*"), format!("{{{prefix}:*")] {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(pattern)
            .query(&mut c)
            .unwrap_or_default();
        for key in keys {
            let _: Result<i64, _> = redis::cmd("DEL").arg(key).query(&mut c);
        }
    }
}

/// Deletes the keys under this run's prefix (never FLUSHDB).
fn redis_cleanup(prefix: &str) {
    let Ok(mut c) = redis::Client::open(REDIS_BASE).and_then(|c| c.get_connection()) else {
        return;
    };
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query(&mut c)
        .unwrap_or_default();
    for chunk in keys.chunks(1000) {
        let _: Result<i64, _> = redis::cmd("DEL").arg(chunk).query(&mut c);
    }
}

fn bench_attempt(key: &str) -> Attempt {
    Attempt {
        key: key.to_owned(),
        fingerprint: "fp".into(),
        tenant_id: "t".into(),
        action_type: "a".into(),
        prior: None,
    }
}

/// `Guard::claim`; the owner token.
fn claim(guard: &Guard<'_>, key: &str) -> String {
    let claimed = guard.claim(&bench_attempt(key), NOW).unwrap();
    debug_assert_eq!(claimed.outcome.as_str(), "owned");
    claimed.owner_token
}

/// `Guard::finish` with the effect's answer.
fn finish(guard: &Guard<'_>, key: &str, token: &str) {
    let finished = guard
        .finish(
            key,
            token,
            EffectResult::Answered(Response::json(201, "{}")),
            NOW,
        )
        .unwrap();
    debug_assert_eq!(finished.as_str(), "stored");
}

/// One guarded intent: claim, the effect's answer, finish.
fn guarded(guard: &Guard<'_>, key: &str) {
    let token = claim(guard, key);
    finish(guard, key, &token);
}

fn fast_rules() -> Rules {
    Rules {
        fast_completion: true,
        ..Rules::default()
    }
}

/// Unique keys, per run and per case.
struct Keys {
    tag: String,
    next: Cell<u64>,
}

impl Keys {
    fn new(tag: &str) -> Keys {
        Keys {
            tag: format!("{tag}-{}", std::process::id()),
            next: Cell::new(0),
        }
    }
    fn next(&self) -> String {
        let n = self.next.get();
        self.next.set(n + 1);
        format!("{}-{n}", self.tag)
    }
}

/// One store under test: its floor connection and its guards.
struct Subject<'s> {
    name: &'static str,
    floor: Box<dyn Floor + 's>,
    store: &'s dyn Store,
}

fn bench_subject(c: &mut Criterion, subject: &mut Subject<'_>) {
    let durable = Guard::new(subject.store);
    let fast = Guard::new(subject.store).with_rules(fast_rules());
    let mut group = c.benchmark_group(subject.name);
    let keys = Keys::new("a");
    group.bench_function("(a) floor: bare INSERT + bare UPDATE, two commits", |b| {
        b.iter(|| subject.floor.two_commits(&keys.next()))
    });
    let keys = Keys::new("b");
    group.bench_function("(b) Guard claim + finish (durable)", |b| {
        b.iter(|| guarded(&durable, &keys.next()))
    });
    let keys = Keys::new("c");
    group.bench_function("(c) floor: one bare INSERT, one commit", |b| {
        b.iter(|| subject.floor.insert(&keys.next()))
    });
    let keys = Keys::new("d");
    group.bench_function("(d) Guard claim + finish (fast_completion)", |b| {
        b.iter(|| guarded(&fast, &keys.next()))
    });
    let keys = Keys::new("e");
    group.bench_function(
        "(e) floor: bare INSERT + bare UPDATE on a non-durable connection",
        |b| {
            b.iter(|| {
                let key = keys.next();
                subject.floor.insert(&key);
                subject.floor.update_fast(&key);
            })
        },
    );
    let probe = keys.next();
    subject.floor.insert(&probe);
    if subject.floor.update_switched(&probe) {
        let keys = Keys::new("f");
        group.bench_function(
            "(f) floor: bare INSERT + bare UPDATE, same connection, synchronous=NORMAL for the UPDATE",
            |b| {
                b.iter(|| {
                    let key = keys.next();
                    subject.floor.insert(&key);
                    subject.floor.update_switched(&key);
                })
            },
        );
    }
    group.finish();
}

/// The guard's own work with no I/O: an owner token, and claim + finish on the memory store.
fn bench_overhead(c: &mut Criterion) {
    let memory = open("memory:").unwrap();
    let guard = Guard::new(memory.as_ref());
    let mut group = c.benchmark_group("overhead");
    group.bench_function("new_owner_token (getrandom)", |b| {
        b.iter(|| black_box(new_owner_token().unwrap()))
    });
    let keys = Keys::new("m");
    group.bench_function("Guard claim + finish on the memory store", |b| {
        b.iter(|| guarded(&guard, &keys.next()))
    });
    group.finish();
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Times `f` in µs.
fn timed(f: impl FnOnce()) -> f64 {
    let start = Instant::now();
    f();
    start.elapsed().as_secs_f64() * 1e6
}

/// Per-statement times of every case, interleaved.
#[derive(Default)]
struct Samples {
    parts: std::collections::BTreeMap<&'static str, Vec<f64>>,
}

impl Samples {
    fn push(&mut self, part: &'static str, us: f64) {
        self.parts.entry(part).or_default().push(us);
    }
    fn median(&self, part: &str) -> f64 {
        median(self.parts[part].clone())
    }
    /// The median, or a dash where the floor has no such case.
    fn cell(&self, part: &str) -> String {
        self.parts
            .get(part)
            .map_or_else(|| "—".to_owned(), |v| format!("{:.0}", median(v.clone())))
    }
}

/// Intents per block: a case runs this many intents in a row, as a process
/// that does only that would (its connections' page caches stay warm).
const BLOCK: usize = 26;

/// Runs every case for `rounds` blocks of [`BLOCK`] intents, the cases'
/// order rotating from round to round so that the machine's drift hits all
/// alike; records each statement's time and each intent's total, leaving
/// out the first intent of each block (it follows another case's writes).
fn interleaved(subject: &mut Subject<'_>, rounds: usize) -> Samples {
    let durable = Guard::new(subject.store);
    let fast = Guard::new(subject.store).with_rules(fast_rules());
    let keys = Keys::new("i");
    let floor = &mut subject.floor;
    let mut samples = Samples::default();
    let mut warm_up = Samples::default();
    // One done record, claimed again by every replay.
    let done = keys.next();
    let token = claim(&durable, &done);
    finish(&durable, &done, &token);
    for round in 0..rounds {
        for (case, n) in (0..9).flat_map(|case| (0..BLOCK).map(move |n| (case, n))) {
            let samples = if n == 0 { &mut warm_up } else { &mut samples };
            let k = keys.next();
            match (case + round) % 9 {
                0 => {
                    let i = timed(|| floor.insert(&k));
                    let u = timed(|| floor.update(&k));
                    samples.push("a", i + u);
                    samples.push("floor insert", i);
                    samples.push("floor update", u);
                }
                1 => {
                    let mut token = String::new();
                    let c = timed(|| token = claim(&durable, &k));
                    let f = timed(|| finish(&durable, &k, &token));
                    samples.push("b", c + f);
                    samples.push("guard claim", c);
                    samples.push("guard finish", f);
                }
                2 => samples.push("c", timed(|| floor.insert(&k))),
                3 => {
                    let mut token = String::new();
                    let c = timed(|| token = claim(&fast, &k));
                    let f = timed(|| finish(&fast, &k, &token));
                    samples.push("d", c + f);
                    samples.push("guard claim", c);
                    samples.push("guard finish fast", f);
                }
                4 => {
                    let i = timed(|| floor.insert(&k));
                    let u = timed(|| floor.update_fast(&k));
                    samples.push("e", i + u);
                    samples.push("floor insert", i);
                    samples.push("floor update fast", u);
                }
                5 => samples.push("round trip", timed(|| floor.round_trip())),
                7 => {
                    let replayed = timed(|| {
                        let claimed = durable.claim(&bench_attempt(&done), NOW).unwrap();
                        debug_assert_eq!(claimed.outcome.as_str(), "done");
                    });
                    samples.push("replay", replayed);
                }
                6 => {
                    let mut bare = false;
                    let t = timed(|| bare = floor.bare_pair(&k));
                    if bare {
                        samples.push("g", t);
                    }
                }
                _ => {
                    let i = timed(|| floor.insert(&k));
                    let mut switched = false;
                    let u = timed(|| switched = floor.update_switched(&k));
                    if switched {
                        samples.push("f", i + u);
                        samples.push("floor update switched", u);
                    }
                }
            }
        }
    }
    samples
}

fn print_interleaved(subjects: &mut [Subject<'_>], rounds: usize) {
    let results: Vec<(&str, Samples)> = subjects
        .iter_mut()
        .map(|s| (s.name, interleaved(s, rounds)))
        .collect();
    println!();
    println!(
        "Interleaved: {rounds} rounds of every case, {} intents per case, medians (µs):",
        rounds * (BLOCK - 1)
    );
    println!();
    println!(
        "| store | (a) floor: INSERT + UPDATE | (b) Guard claim + finish | (b)/(a) | (c) floor: one INSERT \
         | (d) Guard, fast completion | (d)/(c) | (e) floor: INSERT + UPDATE on a non-durable connection | (d)/(e) \
         | (f) floor: INSERT + UPDATE, synchronous switched | (f)/(c) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (name, s) in &results {
        let (a, b, c, d, e) = (
            s.median("a"),
            s.median("b"),
            s.median("c"),
            s.median("d"),
            s.median("e"),
        );
        let f = s.parts.get("f").map_or_else(
            || "—".to_owned(),
            |v| format!("{:.2}", median(v.clone()) / c),
        );
        println!(
            "| {name} | {a:.0} | {b:.0} | **{:.2}** | {c:.0} | {d:.0} | **{:.2}** | {e:.0} | {:.2} | {} | {f} |",
            b / a,
            d / c,
            d / e,
            s.cell("f"),
        );
    }
    println!();
    println!("Per statement, medians (µs):");
    println!();
    println!(
        "| store | round trip (SELECT 1) | floor INSERT | Guard claim | floor UPDATE (durable) \
         | Guard finish (durable) | floor UPDATE (non-durable connection) | Guard finish (fast) \
         | floor UPDATE (synchronous switched) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (name, s) in &results {
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} |",
            s.cell("round trip"),
            s.cell("floor insert"),
            s.cell("guard claim"),
            s.cell("floor update"),
            s.cell("guard finish"),
            s.cell("floor update fast"),
            s.cell("guard finish fast"),
            s.cell("floor update switched"),
        );
    }
    println!();
    println!("A replay (Guard::claim of a done record), medians (µs):");
    println!();
    println!("| store | round trip | Guard replay | replay / round trip |");
    println!("|---|---|---|---|");
    for (name, s) in &results {
        let (r, t) = (s.median("replay"), s.median("round trip"));
        let ratio = if t >= 1.0 {
            format!("{:.2}", r / t)
        } else {
            "—".to_owned()
        };
        println!("| {name} | {t:.0} | {r:.0} | {ratio} |");
    }
    for (name, s) in &results {
        if s.parts.contains_key("g") {
            let (a, b, g) = (s.median("a"), s.median("b"), s.median("g"));
            println!();
            println!(
                "{name}: (g) the two writes into a table with the key only (no index): {g:.0} µs; \
                 (a)/(g) {:.2}, (b)/(g) {:.2}",
                a / g,
                b / g
            );
        }
    }
}

fn sqlite_path() -> PathBuf {
    std::env::temp_dir().join(format!("ik-bench-{}.sqlite", std::process::id()))
}

fn remove_sqlite(path: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// The SQLite subject: the store's file, and a floor connection with the store's settings.
fn sqlite_subject<'s>(store: &'s dyn Store, path: &std::path::Path) -> Subject<'s> {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_secs(30)).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "FULL").unwrap();
    for statement in floor_ddl() {
        conn.execute_batch(&statement).unwrap();
    }
    // The fast completions' settings: WAL commits that do not wait for the disk.
    let fast = rusqlite::Connection::open(path).unwrap();
    fast.busy_timeout(Duration::from_secs(30)).unwrap();
    fast.pragma_update(None, "journal_mode", "WAL").unwrap();
    fast.pragma_update(None, "synchronous", "NORMAL").unwrap();
    Subject {
        name: "SQLite (WAL, synchronous=FULL)",
        floor: Box::new(SqliteFloor { conn, fast }),
        store,
    }
}

/// The PostgreSQL schema of this run, its URL and a floor client; `None` when unreachable.
fn pg_setup() -> Option<(String, String, PgFloor)> {
    let mut client = match postgres::Client::connect(PG_BASE, postgres::NoTls) {
        Ok(c) => c,
        Err(e) => {
            println!("SKIPPED: PostgreSQL benchmarks: not reachable at {PG_BASE} ({e})");
            return None;
        }
    };
    let schema = format!("ik_bench_{}", std::process::id());
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}; SET search_path = {schema}"
        ))
        .unwrap();
    for statement in floor_ddl() {
        client.batch_execute(&statement).unwrap();
    }
    let insert = client.prepare(FLOOR_INSERT_PG).unwrap();
    let update = client.prepare(FLOOR_UPDATE_PG).unwrap();
    let select = client.prepare("SELECT 1").unwrap();
    let url = format!("{PG_BASE}?options=-csearch_path%3D{schema}");
    // The fast completions' settings: commits that do not wait for the WAL flush.
    let mut fast = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    fast.batch_execute("SET synchronous_commit = off").unwrap();
    let update_fast = fast.prepare(FLOOR_UPDATE_PG).unwrap();
    Some((
        schema,
        url,
        PgFloor {
            client,
            fast,
            insert,
            update,
            update_fast,
            select,
        },
    ))
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(6))
        .without_plots()
        .configure_from_args();
    // Outside `cargo bench` (e.g. `cargo test --benches`) criterion runs each case once.
    let benching = std::env::args().any(|a| a == "--bench");
    let rounds: usize = std::env::var("IK_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(120);

    let path = sqlite_path();
    let sqlite = open(&format!("sqlite:{}", path.display())).unwrap();
    let (pg_schema, pg_store, pg_floor) = match pg_setup() {
        Some((schema, url, floor)) => (Some(schema), Some(open(&url).unwrap()), Some(floor)),
        None => (None, None, None),
    };
    let (mysql_db, mysql_store, mysql_floor) = match mysql_setup() {
        Some((db, url, floor)) => (Some(db), Some(open(&url).unwrap()), Some(floor)),
        None => (None, None, None),
    };
    let (redis_prefix, redis_store, redis_floor) = match redis_setup() {
        Some((prefix, url, floor)) => (Some(prefix), Some(open(&url).unwrap()), Some(floor)),
        None => (None, None, None),
    };
    let (cluster_prefix, cluster_store, cluster_floor) = match redis_cluster_setup() {
        Some((prefix, url, floor)) => (Some(prefix), Some(open(&url).unwrap()), Some(floor)),
        None => (None, None, None),
    };
    let (dynamo_store, dynamo_floor) = match dynamo_setup() {
        Some((url, floor)) => (Some(open(&url).unwrap()), Some(floor)),
        None => (None, None),
    };
    let dynamo_floor_tables = dynamo_floor
        .as_ref()
        .map(|f| (f.table.clone(), f.bare.clone()));
    {
        let mut subjects = vec![sqlite_subject(sqlite.as_ref(), &path)];
        if let (Some(store), Some(floor)) = (pg_store.as_ref(), pg_floor) {
            subjects.push(Subject {
                name: "PostgreSQL 15 (loopback)",
                floor: Box::new(floor),
                store: store.as_ref(),
            });
        }
        if let (Some(store), Some(floor)) = (mysql_store.as_ref(), mysql_floor) {
            subjects.push(Subject {
                name: "MariaDB 10.11 (loopback)",
                floor: Box::new(floor),
                store: store.as_ref(),
            });
        }
        if let (Some(store), Some(floor)) = (redis_store.as_ref(), redis_floor) {
            subjects.push(Subject {
                name: "Redis 7.0 (loopback, no persistence)",
                floor: Box::new(floor),
                store: store.as_ref(),
            });
        }
        if let (Some(store), Some(floor)) = (cluster_store.as_ref(), cluster_floor) {
            subjects.push(Subject {
                name: "Redis 7.0 Cluster (3 masters + 3 replicas, loopback)",
                floor: Box::new(floor),
                store: store.as_ref(),
            });
        }
        if let (Some(store), Some(floor)) = (dynamo_store.as_ref(), dynamo_floor) {
            subjects.push(Subject {
                name: "DynamoDB (dynalite 4.0, loopback)",
                floor: Box::new(floor),
                store: store.as_ref(),
            });
        }
        for subject in &mut subjects {
            bench_subject(&mut c, subject);
        }
        bench_overhead(&mut c);
        c.final_summary();

        if benching && rounds > 0 {
            print_interleaved(&mut subjects, rounds);
        }
    }

    drop(sqlite);
    remove_sqlite(&path);
    drop(pg_store);
    drop(redis_store);
    drop(mysql_store);
    if let Some(db) = mysql_db {
        use mysql::prelude::Queryable;
        if let Ok(mut c) =
            mysql::Conn::new(mysql::Opts::from_url(&format!("{MYSQL_BASE}/test")).unwrap())
        {
            let _ = c.query_drop(format!("DROP DATABASE IF EXISTS `{db}`"));
        }
    }
    if let Some(prefix) = redis_prefix {
        redis_cleanup(&prefix);
    }
    drop(dynamo_store);
    if let Some((table, bare)) = dynamo_floor_tables {
        dynamo_cleanup(&table, &bare);
    }
    drop(cluster_store);
    if let Some(prefix) = cluster_prefix {
        redis_cluster_cleanup(&prefix);
    }
    if let Some(schema) = pg_schema {
        if let Ok(mut client) = postgres::Client::connect(PG_BASE, postgres::NoTls) {
            let _ = client.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
        }
    }
}
