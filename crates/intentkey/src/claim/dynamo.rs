//! The DynamoDB store's table, items and requests: written once, here, for
//! every runtime.
//!
//! Every request is the input of one DynamoDB API action in DynamoDB's own
//! JSON form (`{"TableName": …, "Item": {"key": {"S": "k1"}}, …}`, binary
//! values as base64 under `"B"`), which each host hands to its SDK's
//! low-level client (Rust `aws-sdk-dynamodb`, Node
//! `@aws-sdk/client-dynamodb`, Python `boto3`), converting only the types.
//! The host hands the answer back and [`op_result`] says what it means.
//!
//! The table: partition key `key` (the storage key), one item per record.
//! - The claim is a `PutItem` with `attribute_not_exists(#key)`.
//! - Completion, every recovery write and release are `UpdateItem` or
//!   `DeleteItem` conditioned on `status = in_flight` and the owner token
//!   (recovery writes also on the look-up count).
//! - Expiry is checked on read (the core's decisions compare `expires_at`
//!   with the host's clock; DynamoDB's own TTL deletes days late and is not
//!   relied on).
//! - Listing and purging query two sparse global secondary indexes, never
//!   scan the table: `by_status` (`list_pk` = `{status}#{bucket}`, `list_sk`
//!   = created_at then key, every record) and `by_expiry` (`purge_pk` =
//!   `{bucket}`, `purge_sk` = `expires_at`, only `done` records with an
//!   expiry). Each is spread over [`BUCKETS`] partitions, so no partition
//!   holds every in-flight record.
//! - An item is at most [`MAX_ITEM_BYTES`]: a record whose response cannot
//!   fit is refused before anything is sent (`response-too-large`).
//!
//! ```
//! use intentkey::claim::{dynamo, Attempt, Op, Record, Response};
//!
//! let table = dynamo::Table::new("payments")?;
//! let attempt = Attempt { key: "k1".into(), fingerprint: "fp".into(), tenant_id: "t1".into(), action_type: "pix.send".into(), prior: None };
//! let record = Record::in_flight(&attempt, &"ab".repeat(16), 1_700_000_000);
//! let put = table.request(&Op::Insert(record.clone()))?.unwrap();
//! assert_eq!(put.action, "PutItem");
//! assert_eq!(put.input["ConditionExpression"], "attribute_not_exists(#key)");
//! assert_eq!(put.input["Item"]["status"]["S"], "in_flight");
//! assert_eq!(dynamo::decode(&put.input["Item"])?, record);
//! # Ok::<(), intentkey::Error>(())
//! ```

use base64::Engine as _;
use serde_json::{json, Map, Value};

use super::flow::{Completion, Op, OpResult, Release, Replacement};
use super::record::{Record, Response, Status};

/// The table name when none is configured.
pub const DEFAULT_TABLE: &str = "intentkey";

/// How many partitions each index spreads its records over.
pub const BUCKETS: u16 = 16;

/// DynamoDB's limit on one item (400 KB, names and values included).
pub const MAX_ITEM_BYTES: usize = 400 * 1024;

/// The index that lists records by status, oldest first.
pub const LIST_INDEX: &str = "by_status";

/// The sparse index of `done` records by expiry.
pub const PURGE_INDEX: &str = "by_expiry";

/// Every action a [`Request`] names.
pub const ACTIONS: [&str; 7] = [
    "PutItem",
    "GetItem",
    "UpdateItem",
    "DeleteItem",
    "Query",
    "CreateTable",
    "DescribeTable",
];

/// One table of records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    name: String,
}

/// The input of one DynamoDB API action, in DynamoDB's JSON form.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The action: `PutItem`, `GetItem`, `UpdateItem`, `DeleteItem`,
    /// `Query`, `CreateTable` or `DescribeTable`.
    pub action: &'static str,
    /// Its input (`TableName`, `Key`, `Item`, expressions, …).
    pub input: Value,
}

/// What DynamoDB answered to a request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Answer<'a> {
    /// The action's output (for `GetItem`, with or without `Item`).
    Done(&'a Value),
    /// `ConditionalCheckFailedException`, with the item it found when the
    /// request asked for it and the server sent it (dynalite does not).
    ConditionFailed(Option<&'a Value>),
}

/// How a host reads an error DynamoDB answered, by its name
/// (`__type` after the `#`, or the SDK's error name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// `ConditionalCheckFailedException`: the write's condition did not hold
    /// ([`Answer::ConditionFailed`]).
    ConditionFailed,
    /// Throttling, a server error, a conflicting transaction: try again
    /// (`store-unavailable`).
    Retryable,
    /// Anything else (a missing table, a validation error, access denied):
    /// `store-failed`.
    Failed,
}

/// The class of the DynamoDB error `name`, answered with the HTTP status
/// `http_status` when the host knows it. A name this list does not know
/// answered with a 5xx (a proxy's, a load balancer's, a new server error)
/// is [`ErrorClass::Retryable`] too.
///
/// ```
/// use intentkey::claim::dynamo::{error_class, ErrorClass};
///
/// assert_eq!(error_class("ThrottlingException", Some(400)), ErrorClass::Retryable);
/// assert_eq!(error_class("BadGateway", Some(502)), ErrorClass::Retryable);
/// assert_eq!(error_class("ValidationException", Some(400)), ErrorClass::Failed);
/// ```
pub fn error_class(name: &str, http_status: Option<u16>) -> ErrorClass {
    let name = name.rsplit('#').next().unwrap_or(name);
    match name {
        "ConditionalCheckFailedException" => ErrorClass::ConditionFailed,
        _ if http_status.is_some_and(|s| s >= 500) => ErrorClass::Retryable,
        "ProvisionedThroughputExceededException"
        | "ThrottlingException"
        | "RequestLimitExceeded"
        | "InternalServerError"
        | "InternalFailure"
        | "ServiceUnavailable"
        | "TransactionConflictException"
        | "LimitExceededException" => ErrorClass::Retryable,
        _ => ErrorClass::Failed,
    }
}

const KEY: &str = "key";

/// Every attribute an expression names, as `#name`.
fn names(list: &[&str]) -> Value {
    Value::Object(
        list.iter()
            .map(|n| (format!("#{n}"), Value::String((*n).to_owned())))
            .collect(),
    )
}

fn s(v: &str) -> Value {
    json!({ "S": v })
}

fn n(v: impl ToString) -> Value {
    json!({ "N": v.to_string() })
}

/// `created_at` as a string that sorts like the number (offset by 2^63,
/// 20 digits), then `#` and the key: the order of `ORDER BY created_at, key`.
fn list_sort_key(created_at: i64, key: &str) -> String {
    let offset = i128::from(created_at) - i128::from(i64::MIN);
    format!("{offset:020}#{key}")
}

fn bucket(key: &str) -> u16 {
    super::redis::bucket(key, BUCKETS)
}

fn list_partition(status: Status, bucket: u16) -> String {
    format!("{}#{bucket:02}", status.as_str())
}

fn bad(field: &str, message: String) -> crate::Error {
    crate::Error::field(crate::ErrorCode::InvalidArgument, field, message)
}

fn malformed(what: String) -> crate::Error {
    crate::Error::field(
        crate::ErrorCode::StoreFailed,
        "dynamodb",
        format!("{what}; the item was written by something other than intentkey"),
    )
}

/// The response's parts: `[status, content_type, headers]` as JSON, and the body.
fn response_parts(r: &Response) -> (String, String) {
    let head = serde_json::to_string(&(r.status, &r.content_type, &r.headers)).unwrap_or_default();
    (
        head,
        base64::engine::general_purpose::STANDARD.encode(&r.body),
    )
}

/// A record as its item (every attribute, the index keys included).
///
/// # Errors
/// `response-too-large` when the item would exceed [`MAX_ITEM_BYTES`].
pub fn encode(record: &Record) -> crate::Result<Value> {
    let mut item = Map::new();
    item.insert(KEY.into(), s(&record.key));
    item.insert("fingerprint".into(), s(&record.fingerprint));
    item.insert("tenant_id".into(), s(&record.tenant_id));
    item.insert("action_type".into(), s(&record.action_type));
    for (name, value) in mutable_attributes(record) {
        if let Some(value) = value {
            item.insert(name.into(), value);
        }
    }
    let item = Value::Object(item);
    check_size(&item)?;
    Ok(item)
}

/// Every attribute a recovery write may change, `None` for one to remove.
fn mutable_attributes(record: &Record) -> Vec<(&'static str, Option<Value>)> {
    let b = bucket(&record.key);
    let (response, body) = match &record.response {
        Some(r) => {
            let (head, body) = response_parts(r);
            (
                Some(s(&head)),
                (!r.body.is_empty()).then(|| json!({ "B": body })),
            )
        }
        None => (None, None),
    };
    let expiring = record.status == Status::Done && record.expires_at.is_some();
    vec![
        ("status", Some(s(record.status.as_str()))),
        ("owner_token", Some(s(&record.owner_token))),
        ("created_at", Some(n(record.created_at))),
        ("lookups", Some(n(record.lookups))),
        ("next_lookup_at", record.next_lookup_at.map(n)),
        ("expires_at", record.expires_at.map(n)),
        ("response", response),
        ("body", body),
        ("list_pk", Some(s(&list_partition(record.status, b)))),
        (
            "list_sk",
            Some(s(&list_sort_key(record.created_at, &record.key))),
        ),
        ("purge_pk", expiring.then(|| s(&format!("{b:02}")))),
        ("purge_sk", record.expires_at.filter(|_| expiring).map(n)),
    ]
}

/// An item's size as DynamoDB counts it (UTF-8 names and strings, binary
/// bytes, and about one byte per two digits of a number, plus one).
pub fn item_size(item: &Value) -> usize {
    fn value_size(v: &Value) -> usize {
        let Some(obj) = v.as_object() else { return 0 };
        obj.iter()
            .map(|(t, x)| match (t.as_str(), x) {
                ("S", Value::String(s)) => s.len(),
                ("N", Value::String(d)) => {
                    d.trim_start_matches('-')
                        .trim_start_matches('0')
                        .len()
                        .div_ceil(2)
                        + 1
                }
                ("B", Value::String(b)) => b.len() / 4 * 3,
                _ => 1,
            })
            .sum()
    }
    item.as_object()
        .map_or(0, |o| o.iter().map(|(k, v)| k.len() + value_size(v)).sum())
}

fn check_size(item: &Value) -> crate::Result<()> {
    let size = item_size(item);
    if size > MAX_ITEM_BYTES {
        return Err(crate::Error::field(
            crate::ErrorCode::ResponseTooLarge,
            "response",
            format!(
                "the record would be {size} bytes, over DynamoDB's item limit of {MAX_ITEM_BYTES} bytes \
                 (the body is most of it): nothing was written; store a smaller answer (for example a \
                 reference to the full body kept elsewhere) or use another store"
            ),
        ));
    }
    Ok(())
}

fn text<'a>(item: &'a Value, name: &str) -> crate::Result<&'a str> {
    item[name]["S"]
        .as_str()
        .ok_or_else(|| malformed(format!("its {name} is not a string")))
}

fn number<T: std::str::FromStr>(item: &Value, name: &str) -> crate::Result<Option<T>> {
    match &item[name] {
        Value::Null => Ok(None),
        v => v["N"]
            .as_str()
            .and_then(|d| d.parse().ok())
            .map(Some)
            .ok_or_else(|| malformed(format!("its {name} is not a number"))),
    }
}

/// Reads an item back as its record.
///
/// # Errors
/// `store-failed` when the item is not one this module wrote.
pub fn decode(item: &Value) -> crate::Result<Record> {
    let key = text(item, KEY)?;
    let status = text(item, "status")?;
    let status = Status::parse(status)
        .ok_or_else(|| malformed(format!("record {key}: unknown status {status:?}")))?;
    let response = match &item["response"] {
        Value::Null => None,
        v => {
            let head = v["S"]
                .as_str()
                .ok_or_else(|| malformed(format!("record {key}: its response is not a string")))?;
            let (code, content_type, headers): (u16, String, Vec<(String, String)>) =
                serde_json::from_str(head).map_err(|_| {
                    malformed(format!(
                        "record {key}: its response is not [status, type, headers]"
                    ))
                })?;
            let body = match item["body"]["B"].as_str() {
                None => Vec::new(),
                Some(b) => base64::engine::general_purpose::STANDARD
                    .decode(b)
                    .map_err(|_| malformed(format!("record {key}: its body is not base64")))?,
            };
            Some(Response {
                status: code,
                content_type,
                headers,
                body,
            })
        }
    };
    let required = |name: &str| -> crate::Result<i64> {
        number(item, name)?.ok_or_else(|| malformed(format!("record {key}: no {name}")))
    };
    Ok(Record {
        key: key.to_owned(),
        fingerprint: text(item, "fingerprint")?.to_owned(),
        tenant_id: text(item, "tenant_id")?.to_owned(),
        action_type: text(item, "action_type")?.to_owned(),
        status,
        owner_token: text(item, "owner_token")?.to_owned(),
        response,
        created_at: required("created_at")?,
        expires_at: number(item, "expires_at")?,
        lookups: number(item, "lookups")?
            .ok_or_else(|| malformed(format!("record {key}: no lookups")))?,
        next_lookup_at: number(item, "next_lookup_at")?,
    })
}

impl Table {
    /// A table of records named `name` (3 to 255 of `a-z A-Z 0-9 _ . -`).
    ///
    /// # Errors
    /// `invalid-argument` (field `table`) for another name.
    pub fn new(name: &str) -> crate::Result<Table> {
        let ok = (3..=255).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        if !ok {
            return Err(bad(
                "table",
                format!("the DynamoDB table name {name:?} must be 3 to 255 of a-z, A-Z, 0-9, _, . and -"),
            ));
        }
        Ok(Table {
            name: name.to_owned(),
        })
    }

    /// The table named `name` without the check of [`Table::new`], for a
    /// host that checked it once and names it again on every call.
    pub fn unchecked(name: &str) -> Table {
        Table {
            name: name.to_owned(),
        }
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `CreateTable`: the key, both indexes, on-demand capacity.
    pub fn create(&self) -> Request {
        let index = |name: &str, hash: &str, range: &str, projection: &str| {
            json!({
                "IndexName": name,
                "KeySchema": [
                    { "AttributeName": hash, "KeyType": "HASH" },
                    { "AttributeName": range, "KeyType": "RANGE" }
                ],
                "Projection": { "ProjectionType": projection }
            })
        };
        Request {
            action: "CreateTable",
            input: json!({
                "TableName": self.name,
                "AttributeDefinitions": [
                    { "AttributeName": KEY, "AttributeType": "S" },
                    { "AttributeName": "list_pk", "AttributeType": "S" },
                    { "AttributeName": "list_sk", "AttributeType": "S" },
                    { "AttributeName": "purge_pk", "AttributeType": "S" },
                    { "AttributeName": "purge_sk", "AttributeType": "N" }
                ],
                "KeySchema": [{ "AttributeName": KEY, "KeyType": "HASH" }],
                "GlobalSecondaryIndexes": [
                    index(LIST_INDEX, "list_pk", "list_sk", "ALL"),
                    index(PURGE_INDEX, "purge_pk", "purge_sk", "KEYS_ONLY")
                ],
                "BillingMode": "PAY_PER_REQUEST"
            }),
        }
    }

    /// `DescribeTable` (see [`ready`]).
    pub fn describe(&self) -> Request {
        Request {
            action: "DescribeTable",
            input: json!({ "TableName": self.name }),
        }
    }

    fn key(&self, key: &str) -> Value {
        json!({ KEY: s(key) })
    }

    /// The request that performs `op`; `None` for an operation that is not
    /// one request (a list, a purge: see [`Table::list`] and
    /// [`Table::purge`]; a look-up, an effect, a pause).
    ///
    /// # Errors
    /// `response-too-large` for a record whose item would exceed
    /// [`MAX_ITEM_BYTES`] (nothing is sent).
    pub fn request(&self, op: &Op) -> crate::Result<Option<Request>> {
        Ok(Some(match op {
            Op::Insert(r) => Request {
                action: "PutItem",
                input: json!({
                    "TableName": self.name,
                    "Item": encode(r)?,
                    "ConditionExpression": "attribute_not_exists(#key)",
                    "ExpressionAttributeNames": names(&[KEY]),
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD"
                }),
            },
            Op::Get(key) => Request {
                action: "GetItem",
                input: json!({ "TableName": self.name, "Key": self.key(key), "ConsistentRead": true }),
            },
            Op::Complete(c) => self.complete(c)?,
            Op::Replace(r) => self.replace(r)?,
            Op::Release(r) => self.release(r),
            Op::List { .. }
            | Op::Purge { .. }
            | Op::Ask(_)
            | Op::Effect(_)
            | Op::Wait(_)
            | Op::Watch(_) => return Ok(None),
        }))
    }

    /// `UpdateItem` setting (or removing) `attributes`, under `condition`.
    fn update(
        &self,
        key: &str,
        attributes: Vec<(&'static str, Option<Value>)>,
        condition: &str,
        mut values: Map<String, Value>,
        mut named: Vec<&'static str>,
    ) -> Request {
        let (mut set, mut remove) = (Vec::new(), Vec::new());
        for (name, value) in attributes {
            named.push(name);
            match value {
                Some(v) => {
                    set.push(format!("#{name} = :{name}"));
                    values.insert(format!(":{name}"), v);
                }
                None => remove.push(format!("#{name}")),
            }
        }
        named.sort_unstable();
        named.dedup();
        let mut expression = format!("SET {}", set.join(", "));
        if !remove.is_empty() {
            expression.push_str(&format!(" REMOVE {}", remove.join(", ")));
        }
        Request {
            action: "UpdateItem",
            input: json!({
                "TableName": self.name,
                "Key": self.key(key),
                "UpdateExpression": expression,
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names(&named),
                "ExpressionAttributeValues": values
            }),
        }
    }

    fn fenced(token: &str) -> Map<String, Value> {
        let mut values = Map::new();
        values.insert(":expected_status".into(), s(Status::InFlight.as_str()));
        values.insert(":expected_token".into(), s(token));
        values
    }

    fn complete(&self, c: &Completion) -> crate::Result<Request> {
        let (head, body) = response_parts(&c.response);
        let b = bucket(&c.key);
        let attributes = vec![
            ("status", Some(s(Status::Done.as_str()))),
            ("response", Some(s(&head))),
            (
                "body",
                (!c.response.body.is_empty()).then(|| json!({ "B": body })),
            ),
            ("expires_at", Some(n(c.expires_at))),
            ("next_lookup_at", None),
            ("list_pk", Some(s(&list_partition(Status::Done, b)))),
            ("purge_pk", Some(s(&format!("{b:02}")))),
            ("purge_sk", Some(n(c.expires_at))),
        ];
        // The item after the update, for its size: the identity and the
        // fields the completion leaves, at their largest.
        let mut after = Map::new();
        after.insert(KEY.into(), s(&c.key));
        for (name, value) in &attributes {
            if let Some(v) = value {
                after.insert((*name).into(), v.clone());
            }
        }
        check_size(&Value::Object(after))?;
        Ok(self.update(
            &c.key,
            attributes,
            "#status = :expected_status AND #owner_token = :expected_token",
            Self::fenced(&c.owner_token),
            vec!["owner_token"],
        ))
    }

    fn replace(&self, r: &Replacement) -> crate::Result<Request> {
        check_size(&encode(&r.record)?)?;
        let mut values = Self::fenced(&r.expected_token);
        values.insert(":expected_lookups".into(), n(r.expected_lookups));
        values.insert(
            ":reconciling".into(),
            json!({ "S": Status::NeedsReconciliation.as_str() }),
        );
        Ok(self.update(
            &r.record.key,
            mutable_attributes(&r.record),
            "#status IN (:expected_status, :reconciling) AND #owner_token = :expected_token AND #lookups = :expected_lookups",
            values,
            vec![],
        ))
    }

    fn release(&self, r: &Release) -> Request {
        Request {
            action: "DeleteItem",
            input: json!({
                "TableName": self.name,
                "Key": self.key(&r.key),
                "ConditionExpression": "#status = :expected_status AND #owner_token = :expected_token",
                "ExpressionAttributeNames": names(&["status", "owner_token"]),
                "ExpressionAttributeValues": Self::fenced(&r.owner_token)
            }),
        }
    }

    /// The `Query` requests on [`LIST_INDEX`] that together hold the records
    /// with `status` (every status when `None`), oldest first, at most
    /// `limit` from each: one per bucket and status. Follow each with
    /// [`next_page`], and hand every page, in order, to [`listed`].
    pub fn list(&self, status: Option<Status>, limit: u32) -> Vec<Request> {
        if limit == 0 {
            return Vec::new();
        }
        let statuses = status.map_or(Status::ALL.to_vec(), |s| vec![s]);
        let mut out = Vec::new();
        for &status in &statuses {
            for b in 0..BUCKETS {
                out.push(Request {
                    action: "Query",
                    input: json!({
                        "TableName": self.name,
                        "IndexName": LIST_INDEX,
                        "KeyConditionExpression": "#list_pk = :list_pk",
                        "ExpressionAttributeNames": names(&["list_pk"]),
                        "ExpressionAttributeValues": { ":list_pk": s(&list_partition(status, b)) },
                        "ScanIndexForward": true,
                        "Limit": limit
                    }),
                });
            }
        }
        out
    }

    /// The `Query` requests on [`PURGE_INDEX`], one per bucket, for the
    /// `done` records whose expiry is at or before `now` (keys only). Hand
    /// each page to [`Table::purge_deletes`], and follow it with
    /// [`next_page`].
    pub fn purge(&self, now: i64) -> Vec<Request> {
        (0..BUCKETS)
            .map(|b| Request {
                action: "Query",
                input: json!({
                    "TableName": self.name,
                    "IndexName": PURGE_INDEX,
                    "KeyConditionExpression": "#purge_pk = :purge_pk AND #purge_sk <= :now",
                    "ExpressionAttributeNames": names(&["purge_pk", "purge_sk"]),
                    "ExpressionAttributeValues": { ":purge_pk": s(&format!("{b:02}")), ":now": n(now) },
                    "Limit": super::redis::BATCH
                }),
            })
            .collect()
    }

    /// The `DeleteItem` of each record a purge query's page names, each
    /// conditioned on `done` and `expires_at <= now` (the index lags the
    /// table: a record taken over since is left alone). A delete whose
    /// condition fails deleted nothing; count the others.
    ///
    /// # Errors
    /// `store-failed` for a page that is not a `Query` output.
    pub fn purge_deletes(&self, now: i64, page: &Value) -> crate::Result<Vec<Request>> {
        let items = page["Items"]
            .as_array()
            .ok_or_else(|| malformed("a Query output has no Items".to_owned()))?;
        items
            .iter()
            .map(|item| {
                let key = text(item, KEY)?;
                Ok(Request {
                    action: "DeleteItem",
                    input: json!({
                        "TableName": self.name,
                        "Key": self.key(key),
                        "ConditionExpression": "#status = :done AND #expires_at <= :now",
                        "ExpressionAttributeNames": names(&["status", "expires_at"]),
                        "ExpressionAttributeValues": { ":done": s(Status::Done.as_str()), ":now": n(now) }
                    }),
                })
            })
            .collect()
    }
}

/// Whether a `DescribeTable` output shows the table and both its indexes `ACTIVE`.
pub fn ready(describe: &Value) -> bool {
    let table = &describe["Table"];
    table["TableStatus"] == "ACTIVE"
        && table["GlobalSecondaryIndexes"]
            .as_array()
            .is_some_and(|ix| ix.len() == 2 && ix.iter().all(|i| i["IndexStatus"] == "ACTIVE"))
}

/// The request for the next page of a `Query`, when its output has a
/// `LastEvaluatedKey` and fewer than `want` items came so far (`None`:
/// every page). `None` when there is nothing more to read.
pub fn next_page(
    request: &Request,
    output: &Value,
    got: usize,
    want: Option<u32>,
) -> Option<Request> {
    let last = output.get("LastEvaluatedKey").filter(|v| !v.is_null())?;
    if want.is_some_and(|w| got >= w as usize) {
        return None;
    }
    let mut input = request.input.clone();
    input["ExclusiveStartKey"] = last.clone();
    Some(Request {
        action: request.action,
        input,
    })
}

/// The records of the `Query` pages of [`Table::list`]'s requests, oldest
/// first (`created_at`, then key), at most `limit`.
///
/// # Errors
/// `store-failed` for a page or an item not in this layout.
pub fn listed(limit: u32, pages: &[Value]) -> crate::Result<Vec<Record>> {
    let mut all = Vec::new();
    for page in pages {
        let items = page["Items"]
            .as_array()
            .ok_or_else(|| malformed("a Query output has no Items".to_owned()))?;
        for item in items {
            all.push(decode(item)?);
        }
    }
    Ok(crate::claim::record::oldest_first(all, limit))
}

/// What `answer`, DynamoDB's answer to [`Table::request`]`(op)`, means to
/// the flow that asked for `op`.
///
/// # Errors
/// `store-failed` for an answer that request does not get, or an item not
/// in this layout.
pub fn op_result(op: &Op, answer: Answer<'_>) -> crate::Result<OpResult> {
    Ok(match (op, answer) {
        (Op::Insert(_), Answer::Done(_)) => OpResult::Inserted(true),
        (Op::Insert(_), Answer::ConditionFailed(Some(item))) if item.get(KEY).is_some() => {
            OpResult::Existing(decode(item)?)
        }
        (Op::Insert(_), Answer::ConditionFailed(_)) => OpResult::Inserted(false),
        (Op::Get(_), Answer::Done(output)) => OpResult::Got(match output.get("Item") {
            None | Some(Value::Null) => None,
            Some(item) => Some(decode(item)?),
        }),
        (Op::Complete(_) | Op::Replace(_) | Op::Release(_), Answer::Done(_)) => {
            OpResult::Written(true)
        }
        (Op::Complete(_) | Op::Replace(_) | Op::Release(_), Answer::ConditionFailed(_)) => {
            OpResult::Written(false)
        }
        (op, answer) => {
            return Err(crate::Error::field(
                crate::ErrorCode::StoreFailed,
                "dynamodb",
                format!(
                    "DynamoDB answered {answer:?} to the request for {}",
                    op.as_str()
                ),
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claim::Attempt;

    fn record(key: &str, created_at: i64) -> Record {
        let attempt = Attempt {
            key: key.into(),
            fingerprint: "fp \"q\"".into(),
            tenant_id: "t".into(),
            action_type: "a".into(),
            prior: None,
        };
        Record::in_flight(&attempt, &"0f".repeat(16), created_at)
    }

    fn table() -> Table {
        Table::new("ik-test").unwrap()
    }

    #[test]
    fn every_record_round_trips_through_its_item() {
        let mut r = record("k", -5);
        assert_eq!(decode(&encode(&r).unwrap()), Ok(r.clone()));
        r.lookups = 2;
        r.next_lookup_at = Some(99);
        assert_eq!(decode(&encode(&r).unwrap()), Ok(r.clone()));
        r.complete(
            Response::new(
                200,
                "application/octet-stream",
                (0..=255u8).collect::<Vec<_>>(),
            )
            .with_header("Location", "/x"),
            10,
            60,
        );
        let item = encode(&r).unwrap();
        assert_eq!(item["purge_sk"]["N"], "70");
        assert_eq!(
            item["list_pk"]["S"].as_str().unwrap().split('#').next(),
            Some("done")
        );
        assert_eq!(decode(&item), Ok(r.clone()));
        let mut empty = record("e", 1);
        empty.complete(Response::new(204, "", Vec::new()), 1, 1);
        let item = encode(&empty).unwrap();
        assert!(item.get("body").is_none(), "no empty binary value");
        assert_eq!(decode(&item), Ok(empty));
        assert!(
            encode(&record("f", 1)).unwrap().get("purge_pk").is_none(),
            "sparse"
        );
    }

    #[test]
    fn the_list_sort_key_sorts_like_created_at_then_key() {
        let mut keys = [
            (-5, "b"),
            (0, "a"),
            (i64::MIN, "z"),
            (i64::MAX, "a"),
            (0, "b"),
            (3, "a"),
        ];
        let mut sorted: Vec<String> = keys.iter().map(|(c, k)| list_sort_key(*c, k)).collect();
        sorted.sort();
        keys.sort();
        let expected: Vec<String> = keys.iter().map(|(c, k)| list_sort_key(*c, k)).collect();
        assert_eq!(sorted, expected);
    }

    #[test]
    fn the_writes_are_fenced() {
        let t = table();
        let r = record("k", 1);
        let put = t.request(&Op::Insert(r.clone())).unwrap().unwrap();
        assert_eq!(put.input["ExpressionAttributeNames"]["#key"], "key");
        let c = Completion {
            key: "k".into(),
            owner_token: "tok".into(),
            response: Response::json(201, "{}"),
            expires_at: 100,
            fast: false,
        };
        let up = t.request(&Op::Complete(c)).unwrap().unwrap();
        assert_eq!(up.action, "UpdateItem");
        assert_eq!(
            up.input["ConditionExpression"],
            "#status = :expected_status AND #owner_token = :expected_token"
        );
        assert_eq!(
            up.input["ExpressionAttributeValues"][":expected_token"]["S"],
            "tok"
        );
        let expr = up.input["UpdateExpression"].as_str().unwrap();
        assert!(
            expr.contains("#status = :status") && expr.ends_with("REMOVE #next_lookup_at"),
            "{expr}"
        );
        // Every name an expression uses is declared, and no other.
        for req in [&put, &up] {
            let declared: Vec<&String> = req.input["ExpressionAttributeNames"]
                .as_object()
                .unwrap()
                .keys()
                .collect();
            let text = format!(
                "{} {}",
                req.input["UpdateExpression"], req.input["ConditionExpression"]
            );
            for d in &declared {
                assert!(text.contains(d.as_str()), "{d} unused in {text}");
            }
        }
        let rep = Replacement {
            expected_token: "old".into(),
            expected_lookups: 3,
            record: r,
        };
        let rep = t.request(&Op::Replace(rep)).unwrap().unwrap();
        assert!(rep.input["ConditionExpression"]
            .as_str()
            .unwrap()
            .ends_with("#lookups = :expected_lookups"));
        assert!(rep.input["UpdateExpression"]
            .as_str()
            .unwrap()
            .contains("REMOVE"));
        let rel = t
            .request(&Op::Release(Release {
                key: "k".into(),
                owner_token: "tok".into(),
            }))
            .unwrap()
            .unwrap();
        assert_eq!(rel.action, "DeleteItem");
        assert_eq!(t.request(&Op::Wait(1)).unwrap(), None);
    }

    #[test]
    fn answers_mean_what_the_flow_needs() {
        let r = record("k", 1);
        let insert = Op::Insert(r.clone());
        let item = encode(&r).unwrap();
        assert_eq!(
            op_result(&insert, Answer::Done(&json!({}))),
            Ok(OpResult::Inserted(true))
        );
        assert_eq!(
            op_result(&insert, Answer::ConditionFailed(None)),
            Ok(OpResult::Inserted(false))
        );
        assert_eq!(
            op_result(&insert, Answer::ConditionFailed(Some(&item))),
            Ok(OpResult::Existing(r.clone()))
        );
        let get = Op::Get("k".into());
        assert_eq!(
            op_result(&get, Answer::Done(&json!({}))),
            Ok(OpResult::Got(None))
        );
        assert_eq!(
            op_result(&get, Answer::Done(&json!({ "Item": item }))),
            Ok(OpResult::Got(Some(r)))
        );
        assert_eq!(
            op_result(&get, Answer::ConditionFailed(None))
                .unwrap_err()
                .code()
                .as_str(),
            "store-failed"
        );
        assert_eq!(
            error_class(
                "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException",
                Some(400)
            ),
            ErrorClass::ConditionFailed
        );
        assert_eq!(
            error_class("ThrottlingException", None),
            ErrorClass::Retryable
        );
        assert_eq!(
            error_class("ResourceNotFoundException", Some(400)),
            ErrorClass::Failed
        );
        assert_eq!(
            error_class("ResourceNotFoundException", None),
            ErrorClass::Failed
        );
        // A 5xx under a name the list does not know: a proxy's answer.
        assert_eq!(
            error_class("UnknownError", Some(503)),
            ErrorClass::Retryable
        );
        assert_eq!(error_class("UnknownError", Some(499)), ErrorClass::Failed);
    }

    #[test]
    fn a_response_that_cannot_fit_is_refused_before_anything_is_sent() {
        let t = table();
        let c = Completion {
            key: "k".into(),
            owner_token: "tok".into(),
            response: Response::new(200, "application/octet-stream", vec![7; MAX_ITEM_BYTES]),
            expires_at: 100,
            fast: false,
        };
        let e = t.request(&Op::Complete(c.clone())).unwrap_err();
        assert_eq!(
            (e.code().as_str(), e.field_name()),
            ("response-too-large", Some("response"))
        );
        let mut small = c;
        small.response.body = vec![7; 300 * 1024];
        assert!(t.request(&Op::Complete(small)).is_ok());
    }

    #[test]
    fn lists_and_purges_query_every_bucket_and_merge() {
        let t = table();
        assert_eq!(t.list(None, 5).len(), 3 * usize::from(BUCKETS));
        assert!(t.list(None, 0).is_empty());
        let q = &t.list(Some(Status::InFlight), 5)[3];
        assert_eq!(
            q.input["ExpressionAttributeValues"][":list_pk"]["S"],
            "in_flight#03"
        );
        let page = |records: &[Record]| json!({ "Items": records.iter().map(|r| encode(r).unwrap()).collect::<Vec<_>>() });
        let got = listed(
            10,
            &[
                page(&[record("c", 3), record("b", 5)]),
                page(&[record("a", 5)]),
            ],
        )
        .unwrap();
        let keys: Vec<&str> = got.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["c", "a", "b"]);
        assert_eq!(next_page(q, &json!({ "Items": [] }), 0, Some(5)), None);
        let more = next_page(
            q,
            &json!({ "LastEvaluatedKey": { "key": { "S": "x" } } }),
            2,
            Some(5),
        )
        .unwrap();
        assert_eq!(more.input["ExclusiveStartKey"]["key"]["S"], "x");
        assert_eq!(
            next_page(q, &json!({ "LastEvaluatedKey": {} }), 5, Some(5)),
            None
        );
        let purge = t.purge(7);
        assert_eq!(purge.len(), usize::from(BUCKETS));
        let deletes = t
            .purge_deletes(7, &json!({ "Items": [{ "key": { "S": "k" } }] }))
            .unwrap();
        assert_eq!(
            deletes[0].input["ConditionExpression"],
            "#status = :done AND #expires_at <= :now"
        );
        assert!(Table::new("ab").is_err() && Table::new("a b c").is_err());
        assert!(ready(
            &json!({ "Table": { "TableStatus": "ACTIVE", "GlobalSecondaryIndexes": [{ "IndexStatus": "ACTIVE" }, { "IndexStatus": "ACTIVE" }] } })
        ));
        assert!(!ready(&json!({ "Table": { "TableStatus": "CREATING" } })));
    }
}
