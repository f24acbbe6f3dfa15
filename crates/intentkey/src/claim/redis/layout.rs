//! Where a Redis store's records live: one server's keys under a prefix, or
//! a cluster's slot-local buckets.
//!
//! On one server every key starts with the prefix (`{prefix}:rec:{key}`,
//! `{prefix}:idx:{status}`, `{prefix}:exp`). A Redis Cluster answers
//! `CROSSSLOT` to a script whose keys hash to different slots, so the
//! cluster layout spreads the records over [`CLUSTER_BUCKETS`] buckets, each
//! under a hash tag of its own (`{prefix:07}`): a record, the status indexes
//! and the expiry index of its bucket share one slot, so every script
//! touches one slot. A key's bucket is the first two bytes of its SHA-256,
//! modulo the bucket count, the same in every runtime. Listing and purging
//! visit every bucket (one script each, routed to the master that holds its
//! slot) and [`listed`] merges their answers in one order.
//!
//! ```
//! use intentkey::claim::redis::{Layout, CLUSTER_BUCKETS};
//! use intentkey::claim::Status;
//!
//! let one = Layout::single("pay")?;
//! assert_eq!(one.record_key("k1"), "pay:rec:k1");
//! assert_eq!(one.list(Some(Status::Done), 10).len(), 1);
//! assert_eq!(one.channel("k1"), "pay:chg");
//!
//! let cluster = Layout::cluster("pay")?;
//! let keys = cluster.keys("k1");
//! let tag = &keys[0][..keys[0].find('}').unwrap() + 1]; // `{pay:NN}`
//! assert!(keys.iter().all(|k| k.starts_with(tag)), "one slot: {keys:?}");
//! assert_eq!(cluster.list(Some(Status::Done), 10).len(), usize::from(CLUSTER_BUCKETS));
//! assert_eq!(Layout::cluster("{pay}").unwrap_err().code().as_str(), "invalid-argument");
//! # Ok::<(), intentkey::Error>(())
//! ```

use super::{complete_args, decode, insert_args, release_args, replace_args, Command, BATCH};
use crate::claim::flow::Op;
use crate::claim::record::{Record, Status};

/// How many slot-local buckets the cluster layout spreads records over. It
/// is part of the layout: a store that used another count would not find
/// the records.
pub const CLUSTER_BUCKETS: u16 = 16;

/// The keys of one store: a prefix, on one server or over a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    prefix: String,
    cluster: bool,
}

/// The keys of one bucket (the whole store on one server): a record key
/// prefix, the status indexes and the expiry index, all in one slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    base: String,
}

/// One call of a script ([`super::scripts`] by name) with its KEYS and ARGV.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The script's name.
    pub script: &'static str,
    /// KEYS (all in one slot).
    pub keys: Vec<String>,
    /// ARGV.
    pub args: Vec<String>,
}

impl Layout {
    /// The one-server layout under `prefix`.
    ///
    /// # Errors
    /// `invalid-argument` (field `prefix`) for an empty prefix or one with
    /// whitespace.
    pub fn single(prefix: &str) -> crate::Result<Layout> {
        Layout::new(prefix, false)
    }

    /// The cluster layout under `prefix`.
    ///
    /// # Errors
    /// As [`Layout::single`], and for a prefix with `{` or `}` (the layout
    /// writes the hash tags itself).
    pub fn cluster(prefix: &str) -> crate::Result<Layout> {
        Layout::new(prefix, true)
    }

    /// The one-server layout (`cluster` false) or the cluster layout.
    ///
    /// # Errors
    /// As [`Layout::single`] and [`Layout::cluster`].
    pub fn new(prefix: &str, cluster: bool) -> crate::Result<Layout> {
        let bad = |why: &str| {
            Err(crate::Error::field(
                crate::ErrorCode::InvalidArgument,
                "prefix",
                format!("the Redis key prefix {prefix:?} {why}"),
            ))
        };
        if prefix.is_empty() || prefix.contains(char::is_whitespace) {
            return bad("must be non-empty, without whitespace (for example payments)");
        }
        if cluster && prefix.contains(['{', '}']) {
            return bad(
                "has a brace: on a cluster the store writes the hash tags itself ({prefix:NN}); \
                 use a prefix without { and }",
            );
        }
        Ok(Layout {
            prefix: prefix.to_owned(),
            cluster,
        })
    }

    /// The layout under `prefix` without the checks of [`Layout::new`], for
    /// a host that made its layout with [`Layout::new`] once and now names
    /// it again on every call (the keys of a prefix `new` refuses may be
    /// `CROSSSLOT` on a cluster, which Redis refuses).
    pub fn unchecked(prefix: &str, cluster: bool) -> Layout {
        Layout {
            prefix: prefix.to_owned(),
            cluster,
        }
    }

    /// The prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Whether this is the cluster layout.
    pub fn is_cluster(&self) -> bool {
        self.cluster
    }

    /// Every bucket (one on one server), in bucket order.
    pub fn shards(&self) -> Vec<Shard> {
        if self.cluster {
            (0..CLUSTER_BUCKETS).map(|b| self.bucket_shard(b)).collect()
        } else {
            vec![Shard {
                base: self.prefix.clone(),
            }]
        }
    }

    fn bucket_shard(&self, bucket: u16) -> Shard {
        Shard {
            base: format!("{{{}:{bucket:02}}}", self.prefix),
        }
    }

    /// The bucket that holds `key`'s record: on a cluster the first two
    /// bytes of its SHA-256 modulo [`CLUSTER_BUCKETS`], on one server 0.
    pub fn bucket(&self, key: &str) -> u16 {
        if self.cluster {
            bucket(key, CLUSTER_BUCKETS)
        } else {
            0
        }
    }

    /// The bucket that holds `key`'s record.
    pub fn shard(&self, key: &str) -> Shard {
        if self.cluster {
            self.bucket_shard(self.bucket(key))
        } else {
            Shard {
                base: self.prefix.clone(),
            }
        }
    }

    /// The key of one record.
    pub fn record_key(&self, key: &str) -> String {
        self.shard(key).record_key(key)
    }

    /// The sharded pub/sub channel on which the writes of `key`'s record
    /// (completion, release, recovery) publish its key: a waiter
    /// `SSUBSCRIBE`s to it (on a cluster it lives in the record's slot).
    pub fn channel(&self, key: &str) -> String {
        self.shard(key).channel()
    }

    /// The status index of every bucket, in bucket order: the sum of their
    /// `ZCARD`s is how many records have `status` (a cheap count).
    pub fn index_keys(&self, status: Status) -> Vec<String> {
        self.shards().iter().map(|s| s.index_key(status)).collect()
    }

    /// Every bucket's change channel ([`Layout::channel`]), in bucket order:
    /// a process that wakes waiters subscribes to them all once.
    pub fn channels(&self) -> Vec<String> {
        self.shards().iter().map(Shard::channel).collect()
    }

    /// The KEYS of the write scripts for `key`: the record, the three status
    /// indexes (in [`Status::ALL`] order) and the expiry index of its bucket.
    pub fn keys(&self, key: &str) -> [String; 5] {
        let shard = self.shard(key);
        [
            shard.record_key(key),
            shard.index_key(Status::InFlight),
            shard.index_key(Status::Done),
            shard.index_key(Status::NeedsReconciliation),
            shard.expiry_key(),
        ]
    }

    /// The command that performs `op`: the claim script for an insert (it
    /// answers the winner), the fenced scripts for the writes, `GET` for a
    /// read. `None` for what Redis does not perform for a driver (a list, a
    /// purge, a look-up, an effect, a pause): see [`Layout::list`] and
    /// [`Layout::purge`].
    pub fn command(&self, op: &Op) -> Option<Command> {
        if let Op::Get(key) = op {
            return Some(Command::Get(self.record_key(key)));
        }
        let call = match op {
            Op::Insert(r) => self.claim(r),
            _ => self.write(op)?,
        };
        let keys = call.keys.try_into().ok()?;
        Some(Command::Script {
            name: call.script,
            keys,
            args: call.args,
        })
    }

    /// The claim script call for `r` ([`super::CLAIM`]): the insert's keys
    /// and arguments; its reply, read by [`super::claimed`], is the record
    /// the insert lost to, so a repeat needs no `GET`.
    pub fn claim(&self, r: &Record) -> Call {
        Call {
            script: "claim",
            keys: self.keys(&r.key).into(),
            args: insert_args(r),
        }
    }

    /// The write script call for `op` (`insert`, `complete`, `replace` or
    /// `release`); `None` for an operation that is not one of them.
    pub fn write(&self, op: &Op) -> Option<Call> {
        let (script, key, args) = match op {
            Op::Insert(r) => ("insert", &r.key, insert_args(r)),
            Op::Complete(c) => ("complete", &c.key, complete_args(c)),
            Op::Replace(r) => ("replace", &r.record.key, replace_args(r)),
            Op::Release(r) => ("release", &r.key, release_args(r)),
            _ => return None,
        };
        Some(Call {
            script,
            keys: self.keys(key).into(),
            args,
        })
    }

    /// The `list` script calls that together hold the records with `status`
    /// (every status when `None`), at most `limit` from each: one per bucket
    /// and status. Run each (its keys name its slot) and hand the replies,
    /// in this order, to [`listed`].
    pub fn list(&self, status: Option<Status>, limit: u32) -> Vec<Call> {
        if limit == 0 {
            return Vec::new();
        }
        let statuses = status.map_or(Status::ALL.to_vec(), |s| vec![s]);
        let mut calls = Vec::new();
        for shard in self.shards() {
            for &status in &statuses {
                calls.push(Call {
                    script: "list",
                    keys: vec![shard.index_key(status)],
                    args: vec![
                        status.as_str().to_owned(),
                        limit.to_string(),
                        shard.record_key_prefix(),
                        BATCH.to_string(),
                    ],
                });
            }
        }
        calls
    }

    /// The `purge` script calls, one per bucket. Each answers `[deleted,
    /// looked_at]`; send the same call again while `looked_at` is
    /// [`BATCH`] (see [`purge_again`]).
    pub fn purge(&self, now: i64) -> Vec<Call> {
        self.shards()
            .into_iter()
            .map(|shard| Call {
                script: "purge",
                keys: vec![shard.expiry_key(), shard.index_key(Status::Done)],
                args: vec![
                    now.to_string(),
                    BATCH.to_string(),
                    shard.record_key_prefix(),
                ],
            })
            .collect()
    }
}

impl Shard {
    /// The prefix of every record key in this bucket.
    pub fn record_key_prefix(&self) -> String {
        format!("{}:rec:", self.base)
    }

    /// The key of one record in this bucket.
    pub fn record_key(&self, key: &str) -> String {
        format!("{}:rec:{key}", self.base)
    }

    /// The index of one status in this bucket.
    pub fn index_key(&self, status: Status) -> String {
        format!("{}:idx:{}", self.base, status.as_str())
    }

    /// The expiry index of this bucket's `done` records.
    pub fn expiry_key(&self) -> String {
        format!("{}:exp", self.base)
    }

    /// This bucket's change channel: the completion, release and recovery
    /// scripts `SPUBLISH` the key of each record they change to it.
    pub fn channel(&self) -> String {
        format!("{}:chg", self.base)
    }
}

/// The bucket of `key` among `count`: the first two bytes of its SHA-256,
/// big-endian, modulo `count` (the Redis Cluster layout's and the DynamoDB
/// indexes' spread).
pub fn bucket(key: &str, count: u16) -> u16 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(key.as_bytes());
    u16::from_be_bytes([digest[0], digest[1]]) % count.max(1)
}

/// Whether a purge call that answered `looked_at` must be sent again.
pub fn purge_again(looked_at: u64) -> bool {
    looked_at >= u64::from(BATCH)
}

/// The records of the replies to [`Layout::list`]'s calls (each a flat
/// `[key, value, key, value, …]`), oldest first (`created_at`, then key, as
/// the SQL stores order them), at most `limit`.
///
/// # Errors
/// `store-failed` for a reply with an odd count or a value not in the layout.
pub fn listed<S: AsRef<str>>(limit: u32, replies: &[Vec<S>]) -> crate::Result<Vec<Record>> {
    let mut all = Vec::new();
    for reply in replies {
        if reply.len() % 2 != 0 {
            return Err(crate::Error::field(
                crate::ErrorCode::StoreFailed,
                "redis",
                "the list script answered an odd count",
            ));
        }
        for pair in reply.chunks(2) {
            all.push(decode(pair[0].as_ref(), pair[1].as_ref())?);
        }
    }
    Ok(crate::claim::record::oldest_first(all, limit))
}

/// What `WAIT numreplicas timeout` answering `acked` means after a write
/// that asked for `wanted` replicas: `Ok` when enough copies acknowledged
/// it, else `store-unavailable` (the write is on the master only, and a
/// failover now could lose it; the caller treats it as not acknowledged).
///
/// # Errors
/// `store-unavailable` when `acked < wanted`.
pub fn check_replicas(wanted: u32, acked: i64) -> crate::Result<()> {
    if acked >= i64::from(wanted) {
        return Ok(());
    }
    Err(crate::Error::field(
        crate::ErrorCode::StoreUnavailable,
        "wait",
        format!(
            "the write reached {acked} of the {wanted} replica(s) WAIT asked for before its timeout: \
             it is on the master only and is not acknowledged (retry; check the replicas)"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claim::{Attempt, Response};

    fn record(key: &str, created_at: i64) -> Record {
        let attempt = Attempt {
            key: key.into(),
            fingerprint: "fp".into(),
            tenant_id: "t".into(),
            action_type: "a".into(),
            prior: None,
        };
        Record::in_flight(&attempt, &"ab".repeat(16), created_at)
    }

    /// Redis's own CRC16 (XMODEM) slot of a key, hash tag included, to
    /// check that the layout's keys share one slot as a cluster computes it.
    fn slot(key: &str) -> u16 {
        let bytes = key.as_bytes();
        let hashed = match key.find('{') {
            Some(open) => match key[open + 1..].find('}') {
                Some(len) if len > 0 => &bytes[open + 1..open + 1 + len],
                _ => bytes,
            },
            None => bytes,
        };
        let mut crc: u16 = 0;
        for &b in hashed {
            crc ^= u16::from(b) << 8;
            for _ in 0..8 {
                crc = if crc & 0x8000 != 0 {
                    (crc << 1) ^ 0x1021
                } else {
                    crc << 1
                };
            }
        }
        crc % 16384
    }

    #[test]
    fn the_crc16_is_redis_s() {
        // Known slots (CLUSTER KEYSLOT on a Redis 7 server).
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("{user1000}.following"), slot("{user1000}.followers"));
        assert_eq!(slot("123456789"), 0x31C3);
    }

    #[test]
    fn one_server_keeps_the_layout_it_had() {
        let l = Layout::single("p").unwrap();
        assert_eq!(
            l.keys("k1"),
            [
                "p:rec:k1",
                "p:idx:in_flight",
                "p:idx:done",
                "p:idx:needs_reconciliation",
                "p:exp"
            ]
            .map(String::from)
        );
        assert_eq!(l.bucket("k1"), 0);
        let purge = l.purge(7);
        assert_eq!(purge.len(), 1);
        assert_eq!(purge[0].keys, ["p:exp", "p:idx:done"]);
        assert_eq!(purge[0].args, ["7", &BATCH.to_string(), "p:rec:"]);
        let list = l.list(None, 3);
        assert_eq!(list.len(), 3);
        assert_eq!(list[1].keys, ["p:idx:done"]);
        assert_eq!(list[1].args, ["done", "3", "p:rec:", &BATCH.to_string()]);
        assert!(l.list(None, 0).is_empty());
    }

    #[test]
    fn every_script_of_the_cluster_layout_touches_one_slot() {
        let l = Layout::cluster("pay").unwrap();
        let mut used = std::collections::BTreeSet::new();
        for i in 0..2000 {
            let key = format!("{i:064x}");
            let keys = l.keys(&key);
            let s = slot(&keys[0]);
            assert!(keys.iter().all(|k| slot(k) == s), "{keys:?}");
            assert!(keys[0].starts_with(&format!("{{pay:{:02}}}:rec:", l.bucket(&key))));
            used.insert(l.bucket(&key));
        }
        assert_eq!(
            used.len(),
            usize::from(CLUSTER_BUCKETS),
            "every bucket is used"
        );
        for call in l.list(None, 5).iter().chain(&l.purge(1)) {
            let s = slot(&call.keys[0]);
            assert!(call.keys.iter().all(|k| slot(k) == s), "{call:?}");
            // The record keys the script builds from ARGV are in the same slot.
            let rec = call.args.iter().find(|a| a.ends_with(":rec:")).unwrap();
            assert_eq!(slot(&format!("{rec}anything")), s, "{call:?}");
        }
        assert_eq!(l.list(None, 5).len(), 3 * usize::from(CLUSTER_BUCKETS));
        // A record's key with braces of its own still hashes by the layout's tag.
        let keys = l.keys("{x}");
        assert_eq!(slot(&keys[0]), slot(&keys[4]));
    }

    #[test]
    fn the_prefix_is_checked() {
        for bad in ["", "a b", "a\tb"] {
            let e = Layout::single(bad).unwrap_err();
            assert_eq!(
                (e.code().as_str(), e.field_name()),
                ("invalid-argument", Some("prefix"))
            );
        }
        assert!(Layout::single("{bull}").is_ok());
        for bad in ["{p}", "p}", "a{b"] {
            let e = Layout::cluster(bad).unwrap_err();
            assert!(e.message().contains("hash tags"), "{e}");
        }
    }

    #[test]
    fn the_commands_name_the_bucket_of_the_key() {
        let l = Layout::cluster("p").unwrap();
        let r = record("k9", 1);
        let Some(Command::Script { name, keys, .. }) = l.command(&Op::Insert(r.clone())) else {
            panic!("an insert is a script");
        };
        assert_eq!(name, "claim");
        assert_eq!(keys, l.keys("k9"));
        assert_eq!(
            l.command(&Op::Get("k9".into())),
            Some(Command::Get(l.record_key("k9")))
        );
        assert_eq!(l.write(&Op::Insert(r)).unwrap().script, "insert");
        assert_eq!(l.command(&Op::Wait(1)), None);
    }

    #[test]
    fn listed_merges_the_buckets_in_one_order() {
        use super::super::encode;
        let mut done = record("b", 5);
        done.complete(Response::new(200, "", Vec::new()), 6, 60);
        let one = vec![
            "c".to_owned(),
            encode(&record("c", 3)),
            "b".to_owned(),
            encode(&done),
        ];
        let two = vec!["a".to_owned(), encode(&record("a", 5))];
        let got = listed(10, &[one.clone(), two.clone()]).unwrap();
        let keys: Vec<_> = got.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["c", "a", "b"], "created_at, then key");
        assert_eq!(listed(2, &[one, two]).unwrap().len(), 2);
        let e = listed(1, &[vec!["odd".to_owned()]]).unwrap_err();
        assert_eq!(e.code().as_str(), "store-failed");
    }

    #[test]
    fn wait_shortfalls_are_unavailable() {
        assert!(check_replicas(1, 1).is_ok());
        assert!(check_replicas(0, 0).is_ok());
        let e = check_replicas(1, 0).unwrap_err();
        assert_eq!(e.code().as_str(), "store-unavailable");
        assert!(purge_again(u64::from(BATCH)) && !purge_again(3));
    }
}
