//! DynamoDB: one table, its items and every request written once in the
//! core (`intentkey::claim::dynamo`), sent here with `aws-sdk-dynamodb`.
//! This file only converts DynamoDB's JSON to the SDK's types and back.
//!
//! The claim is a conditional `PutItem`; completion, recovery writes and
//! release are `UpdateItem`/`DeleteItem` conditioned on the owner token;
//! listing and purging query two sparse indexes (`docs/stores.md`,
//! "DynamoDB").

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, GlobalSecondaryIndex, KeySchemaElement,
    KeyType, Projection, ProjectionType, ReturnValuesOnConditionCheckFailure, ScalarAttributeType,
};
use aws_sdk_dynamodb::Client;
use base64::Engine as _;
use intentkey::claim::dynamo::{self, Answer, ErrorClass, Request, Table};
use intentkey::claim::{Completion, Op, OpResult, Record, Release, Replacement, Status};
use serde_json::{json, Map, Value};

use super::{Store, StoreError};

/// How long a request may take (connecting included).
const TIMEOUT: Duration = Duration::from_secs(10);

/// Records in one DynamoDB table (`dynamodb://HOST:PORT/TABLE` for a local
/// endpoint such as dynalite, `dynamodb://aws/TABLE` for AWS). The table
/// and its indexes are created when missing. Operations are synchronous:
/// each runs on the store's own single-threaded tokio runtime.
pub struct DynamoStore {
    client: Client,
    table: Table,
    runtime: tokio::runtime::Runtime,
}

/// What a request answered: the output, or a condition that did not hold.
enum Sent {
    Done(Value),
    ConditionFailed(Option<Value>),
}

impl DynamoStore {
    /// Connects to `dynamodb://HOST:PORT/TABLE[?region=R]` (plain HTTP to a
    /// local endpoint) or `dynamodb://aws/TABLE[?region=R]` (AWS's endpoint
    /// for the region, over HTTPS), creating the table when it is missing.
    /// Region and credentials come from `AWS_REGION` (or
    /// `AWS_DEFAULT_REGION`), `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`
    /// and `AWS_SESSION_TOKEN`; for a local endpoint they default to
    /// `us-east-1` and a placeholder key (a local endpoint checks neither).
    ///
    /// # Errors
    /// `store-failed` for a malformed URL, an unknown option or missing AWS
    /// credentials; `store-unavailable` when the endpoint cannot be reached.
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        let rest = url
            .strip_prefix("dynamodb://")
            .ok_or_else(|| StoreError::fatal("dynamodb: the URL must start with dynamodb://"))?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (host, table) = rest.split_once('/').unwrap_or((rest, ""));
        let mut region = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("region", r)) if !r.is_empty() => region = Some(r.to_owned()),
                _ => {
                    let name = pair.split('=').next().unwrap_or(pair);
                    return Err(StoreError::fatal(format!(
                        "dynamodb: unknown option {name:?} in {url} (the store takes region)"
                    )));
                }
            }
        }
        let table = Table::new(if table.is_empty() {
            dynamo::DEFAULT_TABLE
        } else {
            table
        })
        .map_err(|e| StoreError::fatal(format!("dynamodb: {}", e.message())))?;
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let local = host != "aws";
        let region = region
            .or_else(|| env("AWS_REGION"))
            .or_else(|| env("AWS_DEFAULT_REGION"))
            .or_else(|| local.then(|| "us-east-1".to_owned()))
            .ok_or_else(|| {
                StoreError::fatal("dynamodb: no region: set AWS_REGION or add ?region=R to the URL")
            })?;
        let credentials = match (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
            (Some(id), Some(secret)) => {
                Credentials::new(id, secret, env("AWS_SESSION_TOKEN"), None, "environment")
            }
            _ if local => Credentials::new("local", "local", None, None, "local endpoint"),
            _ => {
                return Err(StoreError::fatal(
                    "dynamodb: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
                ))
            }
        };
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
                aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring,
            ))
            .build_https();
        let mut config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(region))
            .credentials_provider(credentials)
            .http_client(http)
            .timeout_config(
                aws_sdk_dynamodb::config::timeout::TimeoutConfig::builder()
                    .operation_timeout(TIMEOUT)
                    .connect_timeout(TIMEOUT)
                    .build(),
            );
        if local {
            config = config.endpoint_url(format!("http://{host}"));
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StoreError::fatal(format!("dynamodb: no runtime: {e}")))?;
        let store = DynamoStore {
            client: Client::from_conf(config.build()),
            table,
            runtime,
        };
        store.ensure_table()?;
        Ok(store)
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        self.table.name()
    }

    /// Creates the table when `DescribeTable` does not find it, then waits
    /// (up to 60 s) until it and its indexes are `ACTIVE`.
    fn ensure_table(&self) -> Result<(), StoreError> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut created = false;
        loop {
            match self.send(&self.table.describe()) {
                Ok(Sent::Done(d)) if dynamo::ready(&d) => return Ok(()),
                Ok(_) => {}
                Err(e) if !created && e.message().contains("ResourceNotFoundException") => {
                    match self.send(&self.table.create()) {
                        Ok(_) => {}
                        Err(e) if e.message().contains("ResourceInUseException") => {}
                        Err(e) => return Err(e),
                    }
                    created = true;
                }
                Err(e) => return Err(e),
            }
            if Instant::now() > deadline {
                return Err(StoreError::retryable(format!(
                    "dynamodb: table {} is not ACTIVE after 60 s",
                    self.table.name()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Performs one store operation with the core's request for it.
    fn perform(&self, op: &Op) -> Result<OpResult, StoreError> {
        let request = self.table.request(op).map_err(core_error)?.ok_or_else(|| {
            StoreError::fatal(format!("dynamodb: {} is not a request", op.as_str()))
        })?;
        let sent = self.send(&request)?;
        let answer = match &sent {
            Sent::Done(v) => Answer::Done(v),
            Sent::ConditionFailed(item) => Answer::ConditionFailed(item.as_ref()),
        };
        dynamo::op_result(op, answer).map_err(core_error)
    }

    /// Every page of `request` (a `Query`), up to `want` items.
    fn pages(&self, request: Request, want: Option<u32>) -> Result<Vec<Value>, StoreError> {
        let mut pages = Vec::new();
        let mut next = Some(request);
        let mut got = 0;
        while let Some(request) = next {
            let Sent::Done(page) = self.send(&request)? else {
                return Err(StoreError::fatal("dynamodb: a Query answered a condition"));
            };
            got += page["Items"].as_array().map_or(0, Vec::len);
            next = dynamo::next_page(&request, &page, got, want);
            pages.push(page);
        }
        Ok(pages)
    }

    /// Sends one request with the SDK (the JSON converted to its types).
    fn send(&self, request: &Request) -> Result<Sent, StoreError> {
        let input = &request.input;
        let c = &self.client;
        let table = self.table.name();
        let text = |name: &str| input[name].as_str().map(str::to_owned);
        let names = || string_map(&input["ExpressionAttributeNames"]);
        let values = || attribute_map(&input["ExpressionAttributeValues"]);
        self.runtime.block_on(async {
            let result: Result<Value, Failure> = match request.action {
                "PutItem" => c
                    .put_item()
                    .table_name(table)
                    .set_item(attribute_map(&input["Item"]))
                    .set_condition_expression(text("ConditionExpression"))
                    .set_expression_attribute_names(names())
                    .return_values_on_condition_check_failure(
                        ReturnValuesOnConditionCheckFailure::AllOld,
                    )
                    .send()
                    .await
                    .map(|_| json!({}))
                    .map_err(error),
                "GetItem" => c
                    .get_item()
                    .table_name(table)
                    .set_key(attribute_map(&input["Key"]))
                    .consistent_read(true)
                    .send()
                    .await
                    .map(|o| match o.item() {
                        Some(item) => json!({ "Item": item_json(item) }),
                        None => json!({}),
                    })
                    .map_err(error),
                "UpdateItem" => c
                    .update_item()
                    .table_name(table)
                    .set_key(attribute_map(&input["Key"]))
                    .set_update_expression(text("UpdateExpression"))
                    .set_condition_expression(text("ConditionExpression"))
                    .set_expression_attribute_names(names())
                    .set_expression_attribute_values(values())
                    .send()
                    .await
                    .map(|_| json!({}))
                    .map_err(error),
                "DeleteItem" => c
                    .delete_item()
                    .table_name(table)
                    .set_key(attribute_map(&input["Key"]))
                    .set_condition_expression(text("ConditionExpression"))
                    .set_expression_attribute_names(names())
                    .set_expression_attribute_values(values())
                    .send()
                    .await
                    .map(|_| json!({}))
                    .map_err(error),
                "Query" => c
                    .query()
                    .table_name(table)
                    .set_index_name(text("IndexName"))
                    .set_key_condition_expression(text("KeyConditionExpression"))
                    .set_expression_attribute_names(names())
                    .set_expression_attribute_values(values())
                    .set_scan_index_forward(input["ScanIndexForward"].as_bool())
                    .set_limit(input["Limit"].as_i64().and_then(|l| i32::try_from(l).ok()))
                    .set_exclusive_start_key(attribute_map(&input["ExclusiveStartKey"]))
                    .send()
                    .await
                    .map(|o| {
                        let mut page = json!({ "Items": o.items().iter().map(item_json).collect::<Vec<_>>() });
                        if let Some(last) = o.last_evaluated_key() {
                            page["LastEvaluatedKey"] = item_json(last);
                        }
                        page
                    })
                    .map_err(error),
                "DescribeTable" => c
                    .describe_table()
                    .table_name(table)
                    .send()
                    .await
                    .map(|o| {
                        let t = o.table();
                        json!({ "Table": {
                            "TableStatus": t.and_then(|t| t.table_status()).map(|s| s.as_str()),
                            "GlobalSecondaryIndexes": t.map_or(&[][..], |t| t.global_secondary_indexes()).iter()
                                .map(|i| json!({ "IndexName": i.index_name(), "IndexStatus": i.index_status().map(|s| s.as_str()) }))
                                .collect::<Vec<_>>()
                        }})
                    })
                    .map_err(error),
                "CreateTable" => create_table(c, input).await,
                other => Err(Failure::Store(StoreError::fatal(format!(
                    "dynamodb: no action {other:?}"
                )))),
            };
            match result {
                Ok(v) => Ok(Sent::Done(v)),
                Err(Failure::Condition) => Ok(Sent::ConditionFailed(None)),
                Err(Failure::Store(e)) => Err(e),
            }
        })
    }
}

/// `CreateTable` from the core's JSON.
async fn create_table(c: &Client, input: &Value) -> Result<Value, Failure> {
    let key_schema = |v: &Value| -> Vec<KeySchemaElement> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|k| {
                KeySchemaElement::builder()
                    .attribute_name(k["AttributeName"].as_str()?)
                    .key_type(KeyType::from(k["KeyType"].as_str()?))
                    .build()
                    .ok()
            })
            .collect()
    };
    let definitions = input["AttributeDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| {
            AttributeDefinition::builder()
                .attribute_name(d["AttributeName"].as_str()?)
                .attribute_type(ScalarAttributeType::from(d["AttributeType"].as_str()?))
                .build()
                .ok()
        })
        .collect();
    let indexes = input["GlobalSecondaryIndexes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| {
            GlobalSecondaryIndex::builder()
                .index_name(i["IndexName"].as_str()?)
                .set_key_schema(Some(key_schema(&i["KeySchema"])))
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::from(
                            i["Projection"]["ProjectionType"].as_str()?,
                        ))
                        .build(),
                )
                .build()
                .ok()
        })
        .collect();
    c.create_table()
        .table_name(input["TableName"].as_str().unwrap_or_default())
        .set_attribute_definitions(Some(definitions))
        .set_key_schema(Some(key_schema(&input["KeySchema"])))
        .set_global_secondary_indexes(Some(indexes))
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await
        .map(|_| json!({}))
        .map_err(error)
}

/// DynamoDB's JSON attribute values as the SDK's (`None` for none).
fn attribute_map(v: &Value) -> Option<HashMap<String, AttributeValue>> {
    let obj = v.as_object()?;
    Some(
        obj.iter()
            .filter_map(|(k, v)| Some((k.clone(), attribute(v)?)))
            .collect(),
    )
}

fn attribute(v: &Value) -> Option<AttributeValue> {
    let (t, x) = v.as_object()?.iter().next()?;
    Some(match t.as_str() {
        "S" => AttributeValue::S(x.as_str()?.to_owned()),
        "N" => AttributeValue::N(x.as_str()?.to_owned()),
        "B" => AttributeValue::B(Blob::new(
            base64::engine::general_purpose::STANDARD
                .decode(x.as_str()?)
                .ok()?,
        )),
        "BOOL" => AttributeValue::Bool(x.as_bool()?),
        "NULL" => AttributeValue::Null(true),
        _ => return None,
    })
}

fn string_map(v: &Value) -> Option<HashMap<String, String>> {
    let obj = v.as_object()?;
    Some(
        obj.iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
            .collect(),
    )
}

/// The SDK's item as DynamoDB's JSON.
fn item_json(item: &HashMap<String, AttributeValue>) -> Value {
    Value::Object(
        item.iter()
            .map(|(k, v)| {
                let v = match v {
                    AttributeValue::S(s) => json!({ "S": s }),
                    AttributeValue::N(n) => json!({ "N": n }),
                    AttributeValue::B(b) => json!({
                        "B": base64::engine::general_purpose::STANDARD.encode(b.as_ref())
                    }),
                    AttributeValue::Bool(b) => json!({ "BOOL": b }),
                    _ => json!({ "NULL": true }),
                };
                (k.clone(), v)
            })
            .collect::<Map<_, _>>(),
    )
}

/// Why a request did not succeed.
enum Failure {
    /// `ConditionalCheckFailedException`.
    Condition,
    /// Anything else.
    Store(StoreError),
}

/// An SDK failure, by the core's class of its code.
fn error<E: ProvideErrorMetadata + std::error::Error + 'static>(
    e: SdkError<E, aws_sdk_dynamodb::config::http::HttpResponse>,
) -> Failure {
    let code = e.code().map(str::to_owned);
    match (&e, code.as_deref()) {
        (SdkError::ServiceError(service), Some(code)) => {
            let message = e.message().unwrap_or_default().to_owned();
            let status = service.raw().status().as_u16();
            match dynamo::error_class(code, Some(status)) {
                ErrorClass::ConditionFailed => Failure::Condition,
                ErrorClass::Retryable => Failure::Store(StoreError::retryable(format!(
                    "dynamodb: {code}: {message}"
                ))),
                ErrorClass::Failed => {
                    Failure::Store(StoreError::fatal(format!("dynamodb: {code}: {message}")))
                }
            }
        }
        // No answer from the service (connecting, a timeout, a dropped
        // connection): nothing is known to be done; retryable.
        _ => Failure::Store(StoreError::retryable(format!(
            "dynamodb: {}",
            aws_smithy_types::error::display::DisplayErrorContext(&e)
        ))),
    }
}

fn core_error(e: intentkey::Error) -> StoreError {
    let message = format!("dynamodb: {}", e.message());
    if e.code() == intentkey::ErrorCode::StoreUnavailable {
        StoreError::retryable(message)
    } else {
        StoreError::with_code(e.code(), message)
    }
}

impl Store for DynamoStore {
    fn kind(&self) -> &'static str {
        "dynamodb"
    }

    fn insert(&self, record: &Record) -> Result<bool, StoreError> {
        match self.perform(&Op::Insert(record.clone()))? {
            OpResult::Inserted(inserted) => Ok(inserted),
            OpResult::Existing(_) => Ok(false),
            other => Err(StoreError::fatal(format!(
                "dynamodb: an insert answered {other:?}"
            ))),
        }
    }

    /// The conditional `PutItem`; a lost claim answers the item it lost to
    /// when the server sends it back (`ReturnValuesOnConditionCheckFailure`;
    /// dynalite does not, and the flow then reads it).
    fn claim(&self, record: &Record) -> Result<OpResult, StoreError> {
        match self.perform(&Op::Insert(record.clone()))? {
            answer @ (OpResult::Inserted(_) | OpResult::Existing(_)) => Ok(answer),
            other => Err(StoreError::fatal(format!(
                "dynamodb: an insert answered {other:?}"
            ))),
        }
    }

    fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        match self.perform(&Op::Get(key.to_owned()))? {
            OpResult::Got(record) => Ok(record),
            other => Err(StoreError::fatal(format!(
                "dynamodb: a get answered {other:?}"
            ))),
        }
    }

    fn complete(&self, completion: &Completion) -> Result<bool, StoreError> {
        written(self.perform(&Op::Complete(completion.clone()))?)
    }

    fn replace(&self, replacement: &Replacement) -> Result<bool, StoreError> {
        written(self.perform(&Op::Replace(replacement.clone()))?)
    }

    fn release(&self, release: &Release) -> Result<bool, StoreError> {
        written(self.perform(&Op::Release(release.clone()))?)
    }

    fn list(&self, status: Option<Status>, limit: usize) -> Result<Vec<Record>, StoreError> {
        let limit = u32::try_from(limit).unwrap_or(u32::MAX);
        let mut pages = Vec::new();
        for request in self.table.list(status, limit) {
            pages.extend(self.pages(request, Some(limit))?);
        }
        dynamo::listed(limit, &pages).map_err(core_error)
    }

    fn purge(&self, now: i64) -> Result<u64, StoreError> {
        let mut deleted = 0;
        for request in self.table.purge(now) {
            for page in self.pages(request, None)? {
                for delete in self.table.purge_deletes(now, &page).map_err(core_error)? {
                    if let Sent::Done(_) = self.send(&delete)? {
                        deleted += 1;
                    }
                }
            }
        }
        Ok(deleted)
    }
}

fn written(result: OpResult) -> Result<bool, StoreError> {
    match result {
        OpResult::Written(w) => Ok(w),
        other => Err(StoreError::fatal(format!(
            "dynamodb: a write answered {other:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::config::http::HttpResponse;
    use aws_sdk_dynamodb::error::ErrorMetadata;
    use aws_sdk_dynamodb::operation::get_item::GetItemError;
    use aws_smithy_types::body::SdkBody;

    /// What `error` makes of an error the service answered with `code` and `status`.
    fn answered(code: &str, status: u16) -> Failure {
        let e = GetItemError::generic(ErrorMetadata::builder().code(code).message("m").build());
        let raw = HttpResponse::new(status.try_into().unwrap(), SdkBody::empty());
        error(SdkError::service_error(e, raw))
    }

    fn retryable(f: Failure) -> Option<bool> {
        match f {
            Failure::Condition => None,
            Failure::Store(e) => Some(e.is_retryable()),
        }
    }

    #[test]
    fn errors_are_classed_by_the_cores_name_and_status() {
        assert_eq!(
            retryable(answered("ConditionalCheckFailedException", 400)),
            None
        );
        assert_eq!(retryable(answered("ThrottlingException", 400)), Some(true));
        assert_eq!(retryable(answered("ValidationException", 400)), Some(false));
        // A name the core does not list: by its status (a proxy's 502).
        assert_eq!(retryable(answered("BadGateway", 502)), Some(true));
        assert_eq!(retryable(answered("SomethingNew", 400)), Some(false));
    }
}
