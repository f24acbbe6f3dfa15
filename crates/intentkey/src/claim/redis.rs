//! The Redis store's layout and scripts: written once, here, for every runtime.
//!
//! Like the SQL schema ([`super::schema`]), the Redis layout lives in the
//! core: the Rust store (`intentkey-store`, feature `redis`) reads it from
//! here and the npm package (`intentkey/stores/redis`) through the WIT
//! `schema` interface (`redis-scripts`), so a Rust process and a Node process
//! share one Redis and the same records. `docs/store-schema.md` (section
//! "Redis") describes it.
//!
//! Keys, under a configurable prefix ([`DEFAULT_PREFIX`]), on one server
//! ([`Layout::single`]; a cluster's layout, [`Layout::cluster`], puts the
//! same keys of each of its buckets under a hash tag `{prefix:NN}`):
//!
//! | key | type | holds |
//! |---|---|---|
//! | `{prefix}:rec:{key}` | string | one record (the value below) |
//! | `{prefix}:idx:{status}` | sorted set | the keys with that status, score `created_at` |
//! | `{prefix}:exp` | sorted set | the `done` keys, score `expires_at` (for purge) |
//!
//! Redis orders equal scores by member, so an index lists records by
//! `created_at`, then key, like the SQL stores' `ORDER BY created_at, key`.
//!
//! A record's value is three lines: a header the scripts parse and rewrite
//! (`ik1 {status} {owner_token} {created_at} {lookups} {next_lookup_at} {expires_at}`,
//! `-` for none), the immutable identity (a JSON array `[fingerprint,
//! tenant_id, action_type]`, never rewritten by a script) and the response
//! (empty, or a JSON array `[status, content_type, [[name, value], …],
//! body_hex]`), both written by the host. The scripts never re-encode JSON.
//!
//! The scripts are `.lua` files in `schema/redis/` (in this crate), each
//! starting with `prelude.lua`, loaded with `include_str!`.
//!
//! Every write is one script ([`INSERT`], [`COMPLETE`], [`REPLACE`],
//! [`RELEASE`]), so it is atomic with its index updates. The claim is `SET …
//! NX` with no expiry: an `in_flight` record is never released by TTL. Only
//! `done` records get a TTL (`PEXPIREAT expires_at`), and only when that
//! is in the future by Redis's own `TIME`; otherwise [`PURGE`] deletes them.
//!
//! ```
//! use intentkey::claim::{redis, Attempt, Record, Response};
//!
//! let attempt = Attempt { key: "k1".into(), fingerprint: "fp".into(), tenant_id: "t1".into(), action_type: "pix.send".into(), prior: None };
//! let mut record = Record::in_flight(&attempt, &"ab".repeat(16), 1_700_000_000);
//! record.complete(Response::new(200, "application/pdf", vec![0, 255]), 1_700_000_001, 60);
//! let value = redis::encode(&record);
//! assert!(value.starts_with(&format!("ik1 done {} 1700000000 0 - 1700000061\n", "ab".repeat(16))));
//! assert_eq!(redis::decode("k1", &value)?, record);
//! assert_eq!(redis::Layout::single("intentkey")?.record_key("k1"), "intentkey:rec:k1");
//! assert!(redis::scripts().iter().any(|(name, source)| *name == "insert" && source.contains("'NX'")));
//! # Ok::<(), intentkey::Error>(())
//! ```

use super::flow::{Completion, Op, OpResult, Release, Replacement};
use super::record::{Record, Response, Status};

mod layout;

pub use layout::{
    bucket, check_replicas, listed, purge_again, Call, Layout, Shard, CLUSTER_BUCKETS,
};

/// The key prefix when none is configured.
pub const DEFAULT_PREFIX: &str = "intentkey";

/// The layout's version: the header's first word.
pub const LAYOUT: &str = "ik1";

/// How many expiry-index members one [`PURGE`] call looks at (and how many
/// index members one [`LIST`] call reads at a time): a purge is many short
/// scripts, never one unbounded one.
pub const BATCH: u32 = 500;

/// Functions every script starts with: the header parser and the writer of
/// a record's indexes and TTL.
macro_rules! prelude {
    () => {
        include_str!("../../schema/redis/prelude.lua")
    };
}

/// The claim: `SET {rec} value NX` (no expiry) and the record's index, atomically.
///
/// KEYS: record, index in_flight, index done, index needs_reconciliation,
/// expiry index ([`Layout::keys`]). ARGV: [`insert_args`]. Returns 1 when this call
/// inserted, 0 when the key exists.
pub const INSERT: &str = concat!(prelude!(), include_str!("../../schema/redis/insert.lua"));

/// The fenced completion: `done`, the response and the expiry, only while
/// the record is `in_flight` under the owner's token.
///
/// KEYS: as [`INSERT`]. ARGV: [`complete_args`]. Returns 1 when it wrote.
pub const COMPLETE: &str = concat!(prelude!(), include_str!("../../schema/redis/complete.lua"));

/// The fenced recovery write: every mutable field, only while the record is
/// `in_flight` under the expected token with the expected look-up count.
///
/// KEYS: as [`INSERT`]. ARGV: [`replace_args`]. Returns 1 when it wrote.
pub const REPLACE: &str = concat!(prelude!(), include_str!("../../schema/redis/replace.lua"));

/// The fenced release ("nothing happened"): deletes the record only while it
/// is `in_flight` under the owner's token.
///
/// KEYS: as [`INSERT`]. ARGV: [`release_args`]. Returns 1 when it deleted.
pub const RELEASE: &str = concat!(prelude!(), include_str!("../../schema/redis/release.lua"));

/// Records with one status, oldest first (`created_at`, then key), at most
/// `limit`: the index read [`BATCH`] members at a time, skipping members
/// whose record Redis expired (or that no longer has that status).
///
/// KEYS: the status's index. ARGV: status, limit, record key prefix
/// (`{prefix}:rec:`), batch. Returns `[key, value, key, value, …]`.
pub const LIST: &str = concat!(prelude!(), include_str!("../../schema/redis/list.lua"));

/// One batch of a purge: looks at up to `batch` members of the expiry index
/// with `expires_at <= now`, deletes those records that are `done` and
/// expired, and removes the index members of records Redis already expired.
/// Never touches `in_flight` or `needs_reconciliation` records.
///
/// KEYS: expiry index, index done. ARGV: now, batch, record key prefix.
/// Returns `[deleted, looked_at]`; the host calls again while
/// `looked_at == batch`.
pub const PURGE: &str = concat!(prelude!(), include_str!("../../schema/redis/purge.lua"));

/// The claim of a driver that takes the winner in the same round trip
/// ([`Layout::command`] sends it for [`Op::Insert`]): [`INSERT`], except that when
/// the key exists it answers the record's value (read in the same script)
/// instead of 0, so a repeat is one round trip and no `GET` follows.
///
/// KEYS and ARGV: as [`INSERT`]. Returns 1 when this call inserted, else
/// the value of the record that holds the key.
pub const CLAIM: &str = concat!(prelude!(), include_str!("../../schema/redis/claim.lua"));

/// Every script by name: `insert`, `complete`, `replace`, `release`, `list`,
/// `purge`, `claim`.
pub fn scripts() -> [(&'static str, &'static str); 7] {
    [
        ("insert", INSERT),
        ("complete", COMPLETE),
        ("replace", REPLACE),
        ("release", RELEASE),
        ("list", LIST),
        ("purge", PURGE),
        ("claim", CLAIM),
    ]
}

/// What a host sends Redis for one of a flow's store operations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `EVALSHA` of script `name` (see [`scripts`]) with these KEYS and ARGV.
    Script {
        /// The script's name.
        name: &'static str,
        /// KEYS.
        keys: [String; 5],
        /// ARGV.
        args: Vec<String>,
    },
    /// `GET` of this record key.
    Get(String),
}

impl Command {
    /// The command as Redis reads it off the wire (RESP: an array of bulk
    /// strings): `EVALSHA sha1 5 KEYS… ARGV…`, or `GET key`. A host writes
    /// these bytes to its client's connection as they are; a reply of
    /// `NOSCRIPT` means the server has not loaded the script yet (load
    /// every one of [`scripts`] and send the same bytes again).
    pub fn to_resp(&self) -> Vec<u8> {
        fn bulk(out: &mut Vec<u8>, s: &[u8]) {
            out.push(b'$');
            out.extend_from_slice(s.len().to_string().as_bytes());
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(s);
            out.extend_from_slice(b"\r\n");
        }
        fn array(n: usize) -> Vec<u8> {
            format!("*{n}\r\n").into_bytes()
        }
        match self {
            Command::Script { name, keys, args } => {
                let mut out = array(3 + keys.len() + args.len());
                bulk(&mut out, b"EVALSHA");
                bulk(&mut out, sha1_of(name).unwrap_or_default().as_bytes());
                bulk(&mut out, keys.len().to_string().as_bytes());
                for s in keys.iter().chain(args) {
                    bulk(&mut out, s.as_bytes());
                }
                out
            }
            Command::Get(key) => {
                let mut out = array(2);
                bulk(&mut out, b"GET");
                bulk(&mut out, key.as_bytes());
                out
            }
        }
    }
}

/// The SHA-1 of script `name`'s source, in hex (what `EVALSHA` names it
/// by); empty for a name that is not one of [`scripts`].
pub fn script_sha1(name: &str) -> String {
    sha1_of(name).map(str::to_owned).unwrap_or_default()
}

/// The scripts' SHA-1s, computed once.
fn sha1_of(name: &str) -> Option<&'static str> {
    use sha1::{Digest, Sha1};
    static SHAS: std::sync::OnceLock<Vec<(&'static str, String)>> = std::sync::OnceLock::new();
    SHAS.get_or_init(|| {
        scripts()
            .iter()
            .map(|(n, source)| {
                let hex = Sha1::digest(source.as_bytes())
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                (*n, hex)
            })
            .collect()
    })
    .iter()
    .find(|(n, _)| *n == name)
    .map(|(_, sha)| sha.as_str())
}

/// A Redis reply, as far as the write scripts and `GET` answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply<'a> {
    /// A nil reply.
    Nil,
    /// An integer reply.
    Integer(i64),
    /// A bulk string reply.
    Bulk(&'a str),
}

/// What `reply`, the answer to [`Layout::command`]`(op)`, means to the flow
/// that asked for `op`.
///
/// # Errors
/// `store-failed` when the reply is not one that command gives (or a
/// record's value is not in the layout).
pub fn op_result(op: &Op, reply: Reply<'_>) -> crate::Result<OpResult> {
    let unexpected = || {
        crate::Error::field(
            crate::ErrorCode::StoreFailed,
            "redis",
            format!(
                "Redis answered {reply:?} to the command for {}",
                op.as_str()
            ),
        )
    };
    Ok(match (op, reply) {
        (Op::Insert(r), _) => return claimed(&r.key, reply),
        (Op::Get(_), Reply::Nil) => OpResult::Got(None),
        (Op::Get(key), Reply::Bulk(value)) => OpResult::Got(Some(decode(key, value)?)),
        (Op::Complete(_) | Op::Replace(_) | Op::Release(_), Reply::Integer(n @ (0 | 1))) => {
            OpResult::Written(n == 1)
        }
        _ => return Err(unexpected()),
    })
}

/// What a claim's reply means for the record under `key`, as
/// [`op_result`] reads it for [`Op::Insert`]: `Inserted(true)` for 1,
/// `Inserted(false)` for 0 or nil, `Existing` for the stored value of the
/// record it lost to.
///
/// # Errors
/// `store-failed` for any other reply, or a value not in the layout.
///
/// ```
/// use intentkey::claim::{redis, Attempt, OpResult, Record};
///
/// let attempt = Attempt {
///     key: "k1".into(),
///     fingerprint: "fp".into(),
///     tenant_id: "t1".into(),
///     action_type: "pix.send".into(),
///     prior: None,
/// };
/// let record = Record::in_flight(&attempt, &"ab".repeat(16), 1_700_000_000);
/// let stored = redis::encode(&record);
/// assert_eq!(redis::claimed("k1", redis::Reply::Integer(1)).unwrap(), OpResult::Inserted(true));
/// assert_eq!(redis::claimed("k1", redis::Reply::Bulk(&stored)).unwrap(), OpResult::Existing(record));
/// assert_eq!(redis::claimed("k1", redis::Reply::Integer(7)).unwrap_err().code().as_str(), "store-failed");
/// ```
pub fn claimed(key: &str, reply: Reply<'_>) -> crate::Result<OpResult> {
    match reply {
        Reply::Integer(1) => Ok(OpResult::Inserted(true)),
        Reply::Integer(0) | Reply::Nil => Ok(OpResult::Inserted(false)),
        Reply::Bulk(value) => Ok(OpResult::Existing(decode(key, value)?)),
        Reply::Integer(_) => Err(crate::Error::field(
            crate::ErrorCode::StoreFailed,
            "redis",
            format!("Redis answered {reply:?} to the claim of {key}"),
        )),
    }
}

fn optional(v: Option<i64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// The identity line: `[fingerprint, tenant_id, action_type]` as JSON.
pub fn encode_identity(record: &Record) -> String {
    serde_json::to_string(&[&record.fingerprint, &record.tenant_id, &record.action_type])
        .unwrap_or_default()
}

/// The response part: empty, or `[status, content_type, [[name, value], …], body_hex]` as JSON.
pub fn encode_response(response: Option<&Response>) -> String {
    let Some(r) = response else {
        return String::new();
    };
    serde_json::to_string(&(
        r.status,
        &r.content_type,
        &r.headers,
        crate::key::to_hex(&r.body),
    ))
    .unwrap_or_default()
}

/// A record's whole value, as [`INSERT`] writes it (the scripts build the
/// header; this is for tests and documentation).
pub fn encode(record: &Record) -> String {
    format!(
        "{LAYOUT} {} {} {} {} {} {}\n{}\n{}",
        record.status.as_str(),
        record.owner_token,
        record.created_at,
        record.lookups,
        optional(record.next_lookup_at),
        optional(record.expires_at),
        encode_identity(record),
        encode_response(record.response.as_ref())
    )
}

/// ARGV of [`INSERT`].
pub fn insert_args(record: &Record) -> Vec<String> {
    vec![
        record.key.clone(),
        record.status.as_str().to_owned(),
        record.owner_token.clone(),
        record.created_at.to_string(),
        record.lookups.to_string(),
        optional(record.next_lookup_at),
        optional(record.expires_at),
        encode_identity(record),
        encode_response(record.response.as_ref()),
    ]
}

/// ARGV of [`COMPLETE`].
pub fn complete_args(c: &Completion) -> Vec<String> {
    vec![
        c.key.clone(),
        c.owner_token.clone(),
        c.expires_at.to_string(),
        encode_response(Some(&c.response)),
    ]
}

/// ARGV of [`REPLACE`].
pub fn replace_args(r: &Replacement) -> Vec<String> {
    let x = &r.record;
    vec![
        x.key.clone(),
        r.expected_token.clone(),
        r.expected_lookups.to_string(),
        x.status.as_str().to_owned(),
        x.owner_token.clone(),
        x.created_at.to_string(),
        x.lookups.to_string(),
        optional(x.next_lookup_at),
        optional(x.expires_at),
        encode_response(x.response.as_ref()),
    ]
}

/// ARGV of [`RELEASE`].
pub fn release_args(r: &Release) -> Vec<String> {
    vec![r.key.clone(), r.owner_token.clone()]
}

fn malformed(key: &str, what: &str) -> crate::Error {
    crate::Error::field(
        crate::ErrorCode::StoreFailed,
        "redis",
        format!("record {key}: {what}; the value was written by something other than intentkey"),
    )
}

fn number<T: std::str::FromStr>(key: &str, field: &str, s: &str) -> crate::Result<T> {
    s.parse()
        .map_err(|_| malformed(key, &format!("its {field} {s:?} is not a number")))
}

fn optional_number(key: &str, field: &str, s: &str) -> crate::Result<Option<i64>> {
    if s == "-" {
        Ok(None)
    } else {
        number(key, field, s).map(Some)
    }
}

fn from_hex(key: &str, hex: &str) -> crate::Result<Vec<u8>> {
    crate::key::from_hex(hex).ok_or_else(|| malformed(key, "its body is not hex"))
}

/// Reads a record's value back (`key` is the record's key, without the prefix).
///
/// # Errors
/// `store-failed` when the value is not in the layout.
pub fn decode(key: &str, value: &str) -> crate::Result<Record> {
    let (header, rest) = value
        .split_once('\n')
        .ok_or_else(|| malformed(key, "it has no header line"))?;
    let (identity, response) = rest
        .split_once('\n')
        .ok_or_else(|| malformed(key, "it has no identity line"))?;
    let fields: Vec<&str> = header.split(' ').collect();
    let [layout, status, token, created, lookups, next, expires] = fields[..] else {
        return Err(malformed(key, "its header does not have 7 fields"));
    };
    if layout != LAYOUT {
        return Err(malformed(
            key,
            &format!("its layout is {layout:?}, not {LAYOUT}"),
        ));
    }
    let status = Status::parse(status)
        .ok_or_else(|| malformed(key, &format!("unknown status {status:?}")))?;
    let [fingerprint, tenant_id, action_type]: [String; 3] = serde_json::from_str(identity)
        .map_err(|_| malformed(key, "its identity is not a JSON array of 3 strings"))?;
    let response = if response.is_empty() {
        None
    } else {
        let (code, content_type, headers, body): (u16, String, Vec<(String, String)>, String) =
            serde_json::from_str(response)
                .map_err(|_| malformed(key, "its response is not [status, type, headers, hex]"))?;
        Some(Response {
            status: code,
            content_type,
            headers,
            body: from_hex(key, &body)?,
        })
    };
    Ok(Record {
        key: key.to_owned(),
        fingerprint,
        tenant_id,
        action_type,
        status,
        owner_token: token.to_owned(),
        response,
        created_at: number(key, "created_at", created)?,
        expires_at: optional_number(key, "expires_at", expires)?,
        lookups: number(key, "lookups", lookups)?,
        next_lookup_at: optional_number(key, "next_lookup_at", next)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claim::Attempt;

    fn record() -> Record {
        let attempt = Attempt {
            key: "k".into(),
            fingerprint: "fp \"q\"\nline".into(),
            tenant_id: "t".into(),
            action_type: "a".into(),
            prior: None,
        };
        Record::in_flight(&attempt, &"0f".repeat(16), -5)
    }

    #[test]
    fn every_record_round_trips() {
        let mut r = record();
        assert_eq!(decode("k", &encode(&r)), Ok(r.clone()));
        r.lookups = 3;
        r.next_lookup_at = Some(1_700_000_240);
        assert_eq!(decode("k", &encode(&r)), Ok(r.clone()));
        r.complete(
            Response::new(
                200,
                "application/octet-stream",
                (0..=255u8).collect::<Vec<_>>(),
            )
            .with_header("Location", "/x"),
            10,
            i64::MAX,
        );
        let value = encode(&r);
        assert_eq!(
            value.lines().count(),
            3,
            "the identity line has no raw newline"
        );
        assert_eq!(decode("k", &value), Ok(r));
        let empty = Response::new(204, "", Vec::new());
        let mut r = record();
        r.complete(empty, 1, 1);
        assert!(encode(&r).ends_with(r#"[204,"",[],""]"#));
        assert_eq!(decode("k", &encode(&r)), Ok(r));
    }

    #[test]
    fn malformed_values_are_store_failed() {
        for bad in [
            "",
            "ik1 done",
            "ik2 done t 1 0 - -\n[]\n",
            "ik1 done t 1 0 - -\n[1]\n",
            "ik1 done t x 0 - -\n[\"a\",\"b\",\"c\"]\n",
            "ik1 done t 1 0 - -\n[\"a\",\"b\",\"c\"]\n[200,\"\",[],\"zz\"]",
        ] {
            let e = decode("k", bad).unwrap_err();
            assert_eq!(e.code().as_str(), "store-failed", "{bad:?}");
        }
    }

    #[test]
    fn the_scripts_share_the_prelude_and_the_header_format() {
        for (name, source) in scripts() {
            assert!(
                source.starts_with("-- intentkey Redis layout ik1"),
                "{name}"
            );
            assert!(!source.contains("cjson"), "{name}: no JSON re-encoding");
            // The one TTL is settle's PEXPIREAT, for done records.
            assert_eq!(source.matches("EXPIRE").count(), 1, "{name}");
        }
        assert!(INSERT.contains("'SET', KEYS[1], h .. ARGV[8] .. '\\n' .. ARGV[9], 'NX'"));
        assert!(CLAIM.contains("'SET', KEYS[1], h .. ARGV[8] .. '\\n' .. ARGV[9], 'NX'"));
        assert!(CLAIM.contains("return redis.call('GET', KEYS[1])"));
        assert!(!INSERT.contains("'EX'") && !INSERT.contains("'PX'"));
    }

    #[test]
    fn a_driver_sends_the_claim_script_and_reads_the_winner_from_its_reply() {
        let attempt = crate::claim::Attempt {
            key: "k1".into(),
            fingerprint: "fp".into(),
            tenant_id: "t1".into(),
            action_type: "pix.send".into(),
            prior: None,
        };
        let record = Record::in_flight(&attempt, &"ab".repeat(16), 1_700_000_000);
        let insert = Op::Insert(record.clone());
        let layout = Layout::single("p").unwrap();
        let command = |op: &Op| layout.command(op);
        let Some(Command::Script { name, keys, args }) = command(&insert) else {
            panic!("an insert is a script");
        };
        assert_eq!((name, keys[0].as_str()), ("claim", "p:rec:k1"));
        assert_eq!(args, insert_args(&record));
        assert_eq!(
            op_result(&insert, Reply::Integer(1)).unwrap(),
            OpResult::Inserted(true)
        );
        assert_eq!(
            op_result(&insert, Reply::Nil).unwrap(),
            OpResult::Inserted(false)
        );
        let value = encode(&record);
        assert_eq!(
            op_result(&insert, Reply::Bulk(&value)).unwrap(),
            OpResult::Existing(record.clone())
        );
        let get = Op::Get("k1".into());
        assert_eq!(command(&get), Some(Command::Get("p:rec:k1".into())));
        assert_eq!(op_result(&get, Reply::Nil).unwrap(), OpResult::Got(None));
        assert_eq!(
            op_result(&get, Reply::Bulk(&value)).unwrap(),
            OpResult::Got(Some(record))
        );
        assert_eq!(command(&Op::Wait(5)), None);
        assert_eq!(
            Command::Get("p:rec:k1".into()).to_resp(),
            b"*2\r\n$3\r\nGET\r\n$8\r\np:rec:k1\r\n"
        );
        let resp = command(&insert).unwrap().to_resp();
        let sha = script_sha1("claim");
        assert_eq!(sha.len(), 40);
        assert!(resp.starts_with(
            format!("*17\r\n$7\r\nEVALSHA\r\n$40\r\n{sha}\r\n$1\r\n5\r\n$8\r\np:rec:k1\r\n")
                .as_bytes()
        ));
        assert_eq!(script_sha1("nope"), "");
        for (op, reply) in [
            (&insert, Reply::Integer(2)),
            (&get, Reply::Integer(1)),
            (&get, Reply::Bulk("not ik1")),
        ] {
            assert_eq!(
                op_result(op, reply).unwrap_err().code().as_str(),
                "store-failed"
            );
        }
    }
}
