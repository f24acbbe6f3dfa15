//! The `claims` and `schema` exports: pure decisions, the schema file, and
//! every store statement (SQL per dialect, Redis scripts) with its encoders
//! and decoders.

use crate::bindings::exports::intentkey::core::{claims, schema};
use crate::bindings::intentkey::core::types as t;
use crate::Component;
use intentkey::claim as core;
use intentkey::claim::{migrate, sql};
use intentkey::journal;
use std::cell::RefCell;

impl claims::Guest for Component {
    fn decide_existing(existing: t::Record, fingerprint: String) -> t::ClaimOutcome {
        t::ClaimOutcome::from(core::decide_existing(
            &core::Record::from(existing),
            &fingerprint,
        ))
    }

    fn classify(result: t::EffectResult, rules: t::Rules) -> t::OutcomeClass {
        t::OutcomeClass::from(core::classify(
            &core::EffectResult::from(result),
            &core::Rules::from(rules),
        ))
    }

    fn decide_recovery(
        existing: t::Record,
        lookup: t::Lookup,
        read_your_writes: bool,
        now: i64,
    ) -> t::RecoveryAction {
        t::RecoveryAction::from(core::decide_recovery(
            &core::Record::from(existing),
            &core::Lookup::from(lookup),
            read_your_writes,
            now,
        ))
    }

    fn recovery_due(existing: t::Record, now: i64, stale_after: i64) -> bool {
        core::recovery_due(&core::Record::from(existing), now, stale_after)
    }

    fn purgeable(existing: t::Record, now: i64) -> bool {
        core::purgeable(&core::Record::from(existing), now)
    }

    fn default_rules() -> t::Rules {
        t::Rules::from(core::Rules::default())
    }

    fn default_stale_after_seconds() -> i64 {
        core::DEFAULT_STALE_AFTER_SECONDS
    }

    fn finish_retry_delays_ms() -> Vec<u32> {
        core::FINISH_RETRY_DELAYS_MS.to_vec()
    }

    fn store_deadline_ms() -> u32 {
        core::STORE_DEADLINE_MS
    }

    fn release_give_up_ms() -> u32 {
        u32::try_from(core::RELEASE_GIVE_UP_MS).unwrap_or(u32::MAX)
    }

    fn owner_token(random_bytes: Vec<u8>) -> Result<String, t::Error> {
        core::owner_token_from_slice(&random_bytes).map_err(t::Error::from)
    }

    fn step_output(
        step: String,
        output_json: String,
        max_bytes: Option<u32>,
    ) -> Result<t::Response, t::Error> {
        let max = max_bytes.map_or(journal::DEFAULT_MAX_OUTPUT_BYTES, |m| m as usize);
        journal::step_output(&step, &output_json, max)
            .map(t::Response::from)
            .map_err(t::Error::from)
    }

    fn in_flight_delivery(recovery: Option<t::Recovered>, now: i64) -> claims::Delivery {
        use core::delivery::{self, Delivery, Wait};
        let recovery = recovery.map(core::Recovered::from);
        match delivery::in_flight_delivery(recovery.as_ref(), now) {
            Delivery::Retry { at, wait } => claims::Delivery::Retry(claims::DeliveryRetry {
                at,
                wait: match wait {
                    Wait::Running => claims::DeliveryWait::Running,
                    Wait::Unknown => claims::DeliveryWait::Unknown,
                    Wait::ChangingHands => claims::DeliveryWait::ChangingHands,
                },
                reason: wait.reason().to_owned(),
            }),
            Delivery::NeedsReconciliation => claims::Delivery::NeedsReconciliation,
        }
    }

    fn step_answer(name: String, outcome: t::ClaimOutcome) -> Result<Option<String>, t::Error> {
        journal::step_answer(&name, &core::ClaimOutcome::from(outcome)).map_err(t::Error::from)
    }
}

impl schema::Guest for Component {
    type MigrationFlow = Migration;

    fn migrations() -> Vec<schema::Migration> {
        core::schema::migrations()
            .into_iter()
            .map(|m| schema::Migration {
                version: m.version,
                statements: m.statements,
            })
            .collect()
    }

    fn migrations_table() -> String {
        core::schema::migrations_table()
    }

    fn schema_version() -> u32 {
        core::schema::SCHEMA_VERSION
    }

    fn migration_lock() -> i64 {
        core::schema::MIGRATION_LOCK
    }

    fn redis_scripts() -> Vec<schema::RedisScript> {
        core::redis::scripts()
            .into_iter()
            .map(|(name, source)| schema::RedisScript {
                name: name.to_owned(),
                source: source.to_owned(),
            })
            .collect()
    }

    fn redis_default_prefix() -> String {
        core::redis::DEFAULT_PREFIX.to_owned()
    }

    fn redis_batch() -> u32 {
        core::redis::BATCH
    }

    fn redis_check_layout(layout: schema::RedisLayout) -> Result<(), t::Error> {
        redis_layout(&layout).map(drop)
    }

    fn redis_cluster_buckets() -> u32 {
        u32::from(core::redis::CLUSTER_BUCKETS)
    }

    fn redis_record_key(layout: schema::RedisLayout, key: String) -> String {
        redis_layout_unchecked(&layout).record_key(&key)
    }

    fn redis_channel(layout: schema::RedisLayout, key: String) -> String {
        redis_layout_unchecked(&layout).channel(&key)
    }

    fn redis_index_keys(layout: schema::RedisLayout, status: t::Status) -> Vec<String> {
        redis_layout_unchecked(&layout).index_keys(status.into())
    }

    fn redis_channels(layout: schema::RedisLayout) -> Vec<String> {
        redis_layout_unchecked(&layout).channels()
    }

    fn redis_insert(layout: schema::RedisLayout, r: t::Record) -> schema::RedisCall {
        redis_write(&layout, &core::Op::Insert(r.into()))
    }

    fn redis_claim(layout: schema::RedisLayout, r: t::Record) -> schema::RedisCall {
        redis_layout_unchecked(&layout).claim(&r.into()).into()
    }

    fn redis_claimed(
        key: String,
        reply: schema::RedisReply,
    ) -> Result<schema::SqlClaimed, t::Error> {
        let reply = match &reply {
            schema::RedisReply::Nil => core::redis::Reply::Nil,
            schema::RedisReply::Integer(n) => core::redis::Reply::Integer(*n),
            schema::RedisReply::Bulk(value) => core::redis::Reply::Bulk(value),
        };
        Ok(
            match core::redis::claimed(&key, reply).map_err(t::Error::from)? {
                core::OpResult::Existing(r) => schema::SqlClaimed::Existing(r.into()),
                core::OpResult::Inserted(true) => schema::SqlClaimed::Won,
                _ => schema::SqlClaimed::Lost,
            },
        )
    }

    fn redis_complete(layout: schema::RedisLayout, c: t::Completion) -> schema::RedisCall {
        redis_write(&layout, &core::Op::Complete(c.into()))
    }

    fn redis_replace(layout: schema::RedisLayout, r: t::Replacement) -> schema::RedisCall {
        redis_write(&layout, &core::Op::Replace(r.into()))
    }

    fn redis_release(layout: schema::RedisLayout, r: t::ReleaseRequest) -> schema::RedisCall {
        redis_write(&layout, &core::Op::Release(r.into()))
    }

    fn redis_list(
        layout: schema::RedisLayout,
        status: Option<t::Status>,
        limit: u32,
    ) -> Vec<schema::RedisCall> {
        redis_layout_unchecked(&layout)
            .list(status.map(core::Status::from), limit)
            .into_iter()
            .map(schema::RedisCall::from)
            .collect()
    }

    fn redis_listed(limit: u32, replies: Vec<Vec<String>>) -> Result<Vec<t::Record>, t::Error> {
        core::redis::listed(limit, &replies)
            .map(|records| records.into_iter().map(t::Record::from).collect())
            .map_err(t::Error::from)
    }

    fn redis_purge(layout: schema::RedisLayout, now: i64) -> Vec<schema::RedisCall> {
        redis_layout_unchecked(&layout)
            .purge(now)
            .into_iter()
            .map(schema::RedisCall::from)
            .collect()
    }

    fn redis_check_replicas(wanted: u32, acked: i64) -> Result<(), t::Error> {
        core::redis::check_replicas(wanted, acked).map_err(t::Error::from)
    }

    fn redis_decode(key: String, value: String) -> Result<t::Record, t::Error> {
        core::redis::decode(&key, &value)
            .map(t::Record::from)
            .map_err(t::Error::from)
    }

    fn sql_statements(
        dialect: schema::SqlDialect,
        schema_name: Option<String>,
    ) -> Result<Vec<schema::SqlStatement>, t::Error> {
        let dialect = dialect_in(dialect);
        let statements =
            sql::statements(dialect, schema_name.as_deref()).map_err(t::Error::from)?;
        Ok(statements
            .all()
            .iter()
            .map(|s| schema::SqlStatement {
                name: s.kind.as_str().to_owned(),
                prepared_name: s.prepared_name.clone(),
                text: s.text.clone(),
                params: s.params.iter().map(|p| (*p).to_owned()).collect(),
                binds: s
                    .binds
                    .iter()
                    .map(|&i| u32::try_from(i).unwrap_or(u32::MAX))
                    .collect(),
            })
            .collect())
    }

    fn sql_duplicate_key_error(dialect: schema::SqlDialect) -> Option<u16> {
        dialect_in(dialect).duplicate_key_error()
    }

    fn dynamo_default_table() -> String {
        core::dynamo::DEFAULT_TABLE.to_owned()
    }

    fn dynamo_check_table(table: String) -> Result<(), t::Error> {
        dynamo_table(&table).map(drop)
    }

    fn dynamo_create_table(table: String) -> schema::DynamoRequest {
        dynamo_table_unchecked(&table).create().into()
    }

    fn dynamo_describe_table(table: String) -> schema::DynamoRequest {
        dynamo_table_unchecked(&table).describe().into()
    }

    fn dynamo_table_ready(output: String) -> bool {
        serde_json::from_str(&output).is_ok_and(|v| core::dynamo::ready(&v))
    }

    fn dynamo_insert(table: String, r: t::Record) -> Result<schema::DynamoRequest, t::Error> {
        dynamo_op(&table, &core::Op::Insert(r.into()))
    }

    fn dynamo_get(table: String, key: String) -> schema::DynamoRequest {
        dynamo_op(&table, &core::Op::Get(key)).unwrap_or_else(|_| empty_request())
    }

    fn dynamo_complete(table: String, c: t::Completion) -> Result<schema::DynamoRequest, t::Error> {
        dynamo_op(&table, &core::Op::Complete(c.into()))
    }

    fn dynamo_replace(table: String, r: t::Replacement) -> Result<schema::DynamoRequest, t::Error> {
        dynamo_op(&table, &core::Op::Replace(r.into()))
    }

    fn dynamo_release(table: String, r: t::ReleaseRequest) -> schema::DynamoRequest {
        dynamo_op(&table, &core::Op::Release(r.into())).unwrap_or_else(|_| empty_request())
    }

    fn dynamo_decode(item: String) -> Result<t::Record, t::Error> {
        let item = json_in(&item)?;
        core::dynamo::decode(&item)
            .map(t::Record::from)
            .map_err(t::Error::from)
    }

    fn dynamo_list(
        table: String,
        status: Option<t::Status>,
        limit: u32,
    ) -> Vec<schema::DynamoRequest> {
        dynamo_table_unchecked(&table)
            .list(status.map(core::Status::from), limit)
            .into_iter()
            .map(schema::DynamoRequest::from)
            .collect()
    }

    fn dynamo_next_page(
        request: schema::DynamoRequest,
        output: String,
        got: u32,
        want: Option<u32>,
    ) -> Option<schema::DynamoRequest> {
        let input = serde_json::from_str(&request.input).ok()?;
        let output = serde_json::from_str(&output).ok()?;
        let action = core::dynamo::ACTIONS
            .iter()
            .find(|a| **a == request.action)?;
        let request = core::dynamo::Request { action, input };
        core::dynamo::next_page(&request, &output, got as usize, want)
            .map(schema::DynamoRequest::from)
    }

    fn dynamo_listed(limit: u32, pages: Vec<String>) -> Result<Vec<t::Record>, t::Error> {
        let pages = pages
            .iter()
            .map(|p| json_in(p))
            .collect::<Result<Vec<_>, _>>()?;
        core::dynamo::listed(limit, &pages)
            .map(|records| records.into_iter().map(t::Record::from).collect())
            .map_err(t::Error::from)
    }

    fn dynamo_purge(table: String, now: i64) -> Vec<schema::DynamoRequest> {
        dynamo_table_unchecked(&table)
            .purge(now)
            .into_iter()
            .map(schema::DynamoRequest::from)
            .collect()
    }

    fn dynamo_purge_deletes(
        table: String,
        now: i64,
        page: String,
    ) -> Result<Vec<schema::DynamoRequest>, t::Error> {
        let page = json_in(&page)?;
        dynamo_table_unchecked(&table)
            .purge_deletes(now, &page)
            .map(|requests| {
                requests
                    .into_iter()
                    .map(schema::DynamoRequest::from)
                    .collect()
            })
            .map_err(t::Error::from)
    }

    fn dynamo_classify_error(name: String, http_status: Option<u16>) -> schema::DynamoErrorClass {
        match core::dynamo::error_class(&name, http_status) {
            core::dynamo::ErrorClass::ConditionFailed => schema::DynamoErrorClass::ConditionFailed,
            core::dynamo::ErrorClass::Retryable => schema::DynamoErrorClass::Retryable,
            core::dynamo::ErrorClass::Failed => schema::DynamoErrorClass::Failed,
        }
    }

    fn sql_classify_error(dialect: schema::SqlDialect, code: u16) -> schema::SqlErrorClass {
        match dialect_in(dialect).error_class(code) {
            sql::ErrorClass::DuplicateKey => schema::SqlErrorClass::DuplicateKey,
            sql::ErrorClass::ConnectionLost => schema::SqlErrorClass::ConnectionLost,
            sql::ErrorClass::Retryable => schema::SqlErrorClass::Retryable,
            sql::ErrorClass::Failed => schema::SqlErrorClass::Failed,
        }
    }

    fn sql_insert_params(r: t::Record) -> Vec<schema::SqlValue> {
        values_out(sql::insert_params(&core::Record::from(r)))
    }

    fn sql_get_params(key: String) -> Vec<schema::SqlValue> {
        values_out(sql::get_params(&key))
    }

    fn sql_complete_params(c: t::Completion) -> Vec<schema::SqlValue> {
        values_out(sql::complete_params(&core::Completion::from(c)))
    }

    fn sql_replace_params(r: t::Replacement) -> Vec<schema::SqlValue> {
        values_out(sql::replace_params(&core::Replacement::from(r)))
    }

    fn sql_release_params(r: t::ReleaseRequest) -> Vec<schema::SqlValue> {
        values_out(sql::release_params(&core::Release::from(r)))
    }

    fn sql_list_params(status: Option<t::Status>, limit: u32) -> Vec<schema::SqlValue> {
        values_out(sql::list_params(
            status.map(core::Status::from),
            u64::from(limit),
        ))
    }

    fn sql_purge_params(now: i64) -> Vec<schema::SqlValue> {
        values_out(sql::purge_params(now))
    }

    fn sql_count_params(status: Option<t::Status>) -> Vec<schema::SqlValue> {
        values_out(sql::count_params(status.map(core::Status::from)))
    }

    fn sql_decode_count(row: Vec<schema::SqlValue>) -> Result<schema::StatusCount, t::Error> {
        let c = sql::decode_count(&values_in(row)).map_err(t::Error::from)?;
        Ok(schema::StatusCount {
            status: c.status.into(),
            count: c.count,
            oldest: c.oldest,
        })
    }

    fn sql_decode_row(row: Vec<schema::SqlValue>) -> Result<t::Record, t::Error> {
        sql::decode_row(&values_in(row))
            .map(t::Record::from)
            .map_err(t::Error::from)
    }

    fn sql_decode_claim(row: Vec<schema::SqlValue>) -> Result<schema::SqlClaimed, t::Error> {
        Ok(
            match sql::decode_claim(&values_in(row)).map_err(t::Error::from)? {
                sql::Claimed::Won => schema::SqlClaimed::Won,
                sql::Claimed::Lost => schema::SqlClaimed::Lost,
                sql::Claimed::Existing(r) => schema::SqlClaimed::Existing(t::Record::from(*r)),
            },
        )
    }
}

fn dialect_in(dialect: schema::SqlDialect) -> sql::Dialect {
    match dialect {
        schema::SqlDialect::Sqlite => sql::Dialect::Sqlite,
        schema::SqlDialect::Postgres => sql::Dialect::Postgres,
        schema::SqlDialect::Mysql => sql::Dialect::Mysql,
    }
}

/// The core's migration flow, owned by the host through a resource handle.
pub(crate) struct Migration(RefCell<migrate::MigrationFlow>);

fn migration_step(step: migrate::MigrationStep) -> schema::MigrationStep {
    let call = |c: migrate::SqlCall| schema::SqlCall {
        text: c.text,
        params: values_out(c.params),
    };
    match step {
        migrate::MigrationStep::Io(migrate::MigrationOp::Execute(c)) => {
            schema::MigrationStep::Io(schema::MigrationOp::Execute(call(c)))
        }
        migrate::MigrationStep::Io(migrate::MigrationOp::Query(c)) => {
            schema::MigrationStep::Io(schema::MigrationOp::Query(call(c)))
        }
        migrate::MigrationStep::Done(d) => schema::MigrationStep::Done(schema::Migrated {
            from_version: d.from_version,
            to_version: d.to_version,
        }),
    }
}

impl schema::GuestMigrationFlow for Migration {
    fn create(
        dialect: schema::SqlDialect,
        schema_name: Option<String>,
    ) -> Result<schema::MigrationFlow, t::Error> {
        let flow = migrate::MigrationFlow::new(dialect_in(dialect), schema_name.as_deref())
            .map_err(t::Error::from)?;
        Ok(schema::MigrationFlow::new(Migration(RefCell::new(flow))))
    }

    fn start(&self) -> schema::MigrationStep {
        migration_step(self.0.borrow_mut().start())
    }

    fn resume(&self, value: Option<i64>) -> Result<schema::MigrationStep, t::Error> {
        let mut flow = self.0.borrow_mut();
        let result = if flow.awaits_query() {
            migrate::MigrationResult::Queried(value)
        } else if value.is_none() {
            migrate::MigrationResult::Executed
        } else {
            migrate::MigrationResult::Queried(value) // a value after a statement: the flow's misuse
        };
        flow.resume(result)
            .map(migration_step)
            .map_err(|e| t::Error::from(intentkey::Error::from(e)))
    }
}

fn values_out(values: Vec<sql::Value>) -> Vec<schema::SqlValue> {
    values
        .into_iter()
        .map(|v| match v {
            sql::Value::Null => schema::SqlValue::Null,
            sql::Value::Integer(n) => schema::SqlValue::Integer(n),
            sql::Value::Text(s) => schema::SqlValue::Text(s),
            sql::Value::Bytes(b) => schema::SqlValue::Bytes(b),
        })
        .collect()
}

fn values_in(values: Vec<schema::SqlValue>) -> Vec<sql::Value> {
    values
        .into_iter()
        .map(|v| match v {
            schema::SqlValue::Null => sql::Value::Null,
            schema::SqlValue::Integer(n) => sql::Value::Integer(n),
            schema::SqlValue::Text(s) => sql::Value::Text(s),
            schema::SqlValue::Bytes(b) => sql::Value::Bytes(b),
        })
        .collect()
}

fn dynamo_table(table: &str) -> Result<core::dynamo::Table, t::Error> {
    core::dynamo::Table::new(table).map_err(t::Error::from)
}

/// The table for a call that cannot answer an error (a host checks its
/// table name once, with `dynamo-check-table`).
fn dynamo_table_unchecked(table: &str) -> core::dynamo::Table {
    core::dynamo::Table::unchecked(table)
}

fn dynamo_op(table: &str, op: &core::Op) -> Result<schema::DynamoRequest, t::Error> {
    match dynamo_table_unchecked(table).request(op) {
        Ok(Some(request)) => Ok(request.into()),
        Ok(None) => Ok(empty_request()),
        Err(e) => Err(t::Error::from(e)),
    }
}

/// The request of an operation that is not one (never asked for by the exports above).
fn empty_request() -> schema::DynamoRequest {
    schema::DynamoRequest {
        action: String::new(),
        input: String::from("{}"),
    }
}

/// JSON text from a host; `store-failed` when it is not JSON.
fn json_in(text: &str) -> Result<serde_json::Value, t::Error> {
    serde_json::from_str(text).map_err(|e| {
        t::Error::from(intentkey::Error::field(
            intentkey::ErrorCode::StoreFailed,
            "dynamodb",
            format!("the host handed over DynamoDB JSON that does not parse: {e}"),
        ))
    })
}

impl From<core::dynamo::Request> for schema::DynamoRequest {
    fn from(r: core::dynamo::Request) -> Self {
        schema::DynamoRequest {
            action: r.action.to_owned(),
            input: r.input.to_string(),
        }
    }
}

/// The core's layout of a WIT one; `invalid-argument` for a prefix it cannot use.
pub(crate) fn redis_layout(layout: &schema::RedisLayout) -> Result<core::redis::Layout, t::Error> {
    core::redis::Layout::new(&layout.prefix, layout.cluster).map_err(t::Error::from)
}

/// The layout for a call that cannot answer an error (a host checks its
/// layout once, with `redis-check-layout`, before its first call).
fn redis_layout_unchecked(layout: &schema::RedisLayout) -> core::redis::Layout {
    core::redis::Layout::unchecked(&layout.prefix, layout.cluster)
}

/// A write script's call: the record's keys (record, indexes, expiry) and its arguments.
fn redis_write(layout: &schema::RedisLayout, op: &core::Op) -> schema::RedisCall {
    let call = redis_layout_unchecked(layout).write(op);
    call.map_or_else(
        || schema::RedisCall {
            script: String::new(),
            keys: Vec::new(),
            args: Vec::new(),
        },
        schema::RedisCall::from,
    )
}

impl From<core::redis::Call> for schema::RedisCall {
    fn from(c: core::redis::Call) -> Self {
        schema::RedisCall {
            script: c.script.to_owned(),
            keys: c.keys,
            args: c.args,
        }
    }
}
