"""The DynamoDB store (``DynamoDBStore``, boto3's low-level client) on a
local endpoint: the URL and options, the errors by the core's classes, the
table created with its indexes, the items as the core writes them, records
spread over every bucket and found again by list and purge (page after
page), the 400 KB item limit (``response-too-large``, nothing sent), races
(16 threads x 1,000 keys; 16 recoverers of one stale record) and kill
trials between effect and completion. The conformance scenarios every
store runs are in test_stores.py (parametrized over ``dynamodb`` too), the
records shared with Node and Rust in test_shared_stores.py.

The endpoint is ``INTENTKEY_DYNAMODB`` (default ``dynamodb://127.0.0.1:4567``:
dynalite, ``bash scripts/dynalite.sh start``). Each test uses a table of its
own, deleted afterwards. Without an endpoint the tests that need one skip
(fail under ``CI=true``); the option and error-class tests need none."""

from __future__ import annotations

import base64
import json
import os
import random
import time
import uuid
from typing import Any, Callable, Dict, Iterator, List, Tuple

import boto3
import pytest
from botocore.stub import Stubber

import intentkey as ik
from intentkey import schema
from intentkey.stores import DynamoDBStore
from intentkey.stores import dynamodb as dynamodb_module
from support.kill_child import (
    dynamodb_add_effect, dynamodb_effects, dynamodb_effects_table, naive_process_dynamodb,
)
from support.kill_trials import run_kill_trials
from support.servers import dynamodb_client, dynamodb_endpoint, dynamodb_table
from support.settling_proxy import SettlingProxy
from support.stores import (
    assert_unavailable, concurrent_recoverers_of_one_stale_record, race_for_keys, threads_recover_one_stale_record,
)
from test_stores import RESPONSE, T, attempt, key, record

KILL_TRIALS = int(os.environ.get("IK_DYNAMO_KILL_TRIALS", "30"))
NAIVE_TRIALS = 6
KB = 1024


@pytest.fixture()
def dynamo() -> Iterator[Tuple[str, str]]:
    """(the store URL of a fresh table, its name): every table named after it deleted afterwards."""
    with dynamodb_table() as (url, table):
        yield f"{url}/{table}", table


def sent_actions(client: Any) -> List[str]:
    """The DynamoDB actions `client` sends from now on, in order (a list that fills as they go)."""
    sent: List[str] = []

    def spy(request: Any, **_: Any) -> None:
        sent.append(request.headers["X-Amz-Target"].decode().rpartition(".")[2])

    client.meta.events.register("before-send.dynamodb", spy)
    return sent


def bucket(table: str, k: str) -> str:
    """The bucket of record `k`, as the core's claim of it names it (``list_pk`` = ``in_flight#NN``)."""
    item = schema.dynamo_insert(table, record(k)).params()["Item"]
    return str(item["list_pk"]["S"]).split("#")[1]


def done_record(k: str, body: bytes, created: int = T, expires: int = T + 100) -> ik.StoredRecord:
    response = ik.Response(200, body, "application/octet-stream", (("X-Id", k),))
    return ik.StoredRecord(k, "fp", "tenant-acme", "pix.send", ik.Status.DONE, "a" * 32, response, created, expires,
                           0, None)


def _ready_table(table: str, status: str = "ACTIVE") -> Dict[str, Any]:
    return {"Table": {"TableName": table, "TableStatus": status, "GlobalSecondaryIndexes": [
        {"IndexName": "by_status", "IndexStatus": status}, {"IndexName": "by_expiry", "IndexStatus": status}]}}


# -- the URL and the options (no endpoint) -----------------------------------------------------------------------


@pytest.fixture()
def no_aws_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """No AWS region or credentials from this machine's environment or files
    (and never a look at an instance's metadata)."""
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                 "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_the_url_and_options_are_checked_by_name(no_aws_settings: None, monkeypatch: pytest.MonkeyPatch) -> None:
    local = "dynamodb://127.0.0.1:4567"
    s3 = boto3.session.Session().client("s3", region_name="us-east-1", aws_access_key_id="x",
                                        aws_secret_access_key="y")
    cases: List[Tuple[Callable[[], Any], str]] = [
        (lambda: DynamoDBStore(f"{local}/payments?colour=red"), "colour"),
        (lambda: DynamoDBStore(f"{local}/payments?region=us-east-1&endpoint=x"), "endpoint"),
        (lambda: DynamoDBStore(f"{local}/payments", colour="red"), "colour"),
        (lambda: DynamoDBStore(f"{local}/payments", timeout=0), "timeout"),
        (lambda: DynamoDBStore(f"{local}/payments", timeout=True), "timeout"),
        (lambda: DynamoDBStore(f"{local}/payments", table="other"), "table"),
        (lambda: DynamoDBStore(f"{local}/ab"), "table"),
        (lambda: DynamoDBStore(f"{local}/has%20space"), "table"),
        (lambda: DynamoDBStore(f"{local}/p\u00e4yments"), "table"),
        (lambda: DynamoDBStore(local, table="t" * 256), "table"),
        (lambda: DynamoDBStore(local, table=5), "table"),
        (lambda: DynamoDBStore(f"{local}/payments?region="), "region"),
        (lambda: DynamoDBStore(f"{local}/payments?region=us%20east"), "region"),
        (lambda: DynamoDBStore("dynamodb://aws/payments"), "region"),  # no region anywhere
        (lambda: DynamoDBStore("redis://127.0.0.1:4567/payments"), "url_or_client"),
        (lambda: DynamoDBStore("127.0.0.1:4567/payments"), "url_or_client"),
        (lambda: DynamoDBStore(f"{local}/a/b"), "url_or_client"),
        (lambda: DynamoDBStore("dynamodb:///payments"), "url_or_client"),
        (lambda: DynamoDBStore("dynamodb://127.0.0.1:99999/payments"), "url_or_client"),
        (lambda: DynamoDBStore("dynamodb://127.0.0.1:4567/payments#x"), "url_or_client"),
        (lambda: DynamoDBStore(42), "url_or_client"),
        (lambda: DynamoDBStore(s3, table="payments"), "url_or_client"),  # a client of another service
    ]
    for make, name in cases:
        with pytest.raises(ik.IntentkeyError) as e:
            make()
        assert (e.value.code, e.value.field) == ("invalid-argument", name), (name, e.value)
        assert name in ("url_or_client", "table", "timeout") or name in e.value.message, e.value.message
    s3.close()

    # What is accepted; nothing is sent until the first operation (no client is made).
    aws = DynamoDBStore("dynamodb://aws/payments?region=eu-west-1")
    assert repr(aws) == "DynamoDBStore(endpoint='aws', table='payments', region='eu-west-1', owned=True)"
    assert aws._client is None
    default = DynamoDBStore(local)
    assert (default.table, default.region) == (schema.dynamo_default_table(), "us-east-1") == ("intentkey", "us-east-1")
    assert repr(default) == "DynamoDBStore(endpoint='http://127.0.0.1:4567', table='intentkey', region='us-east-1', owned=True)"
    assert DynamoDBStore(local, table="payments").table == "payments"
    monkeypatch.setenv("AWS_REGION", "sa-east-1")
    assert DynamoDBStore("dynamodb://aws/payments").region == "sa-east-1"
    assert DynamoDBStore("dynamodb://aws/payments?region=eu-west-1").region == "eu-west-1"  # the URL's first
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    assert DynamoDBStore("dynamodb://aws/payments").region == "ap-south-1"
    for store in (aws, default):
        store.close()  # never used: nothing to close


def test_no_secret_is_in_an_error_or_a_repr(no_aws_settings: None, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "hunter2-s3cret/KEY"
    with pytest.raises(ik.IntentkeyError) as e:
        DynamoDBStore(f"dynamodb://root:{secret}@127.0.0.1:4567/payments")
    assert e.value.field == "url_or_client" and "credentials" in e.value.message
    assert secret not in str(e.value) and secret not in repr(e.value)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    store = DynamoDBStore("dynamodb://127.0.0.1:1/payments", timeout=1.0)
    try:
        assert secret not in repr(store)
        with pytest.raises(ik.StoreError) as se:
            store.get("k")
        assert se.value.kind == "unavailable"
        assert secret not in se.value.message and secret not in repr(se.value)
        # The environment's key signs the requests of a local endpoint too (no placeholder then).
        assert store._credentials == {}
    finally:
        store.close()


def test_no_credentials_for_aws_is_failed_on_first_use(no_aws_settings: None) -> None:
    store = DynamoDBStore("dynamodb://aws/payments?region=us-east-1")
    assert store._credentials == {}  # boto3's sources, no placeholder
    # Pointed at a closed local port: were credentials found after all, the
    # request would be refused here (unavailable), never sent to AWS.
    store._endpoint = "http://127.0.0.1:1"
    try:
        with pytest.raises(ik.StoreError) as e:
            store.get("k")
        assert e.value.kind == "failed", e.value.message
        assert e.value.message.startswith("dynamodb: DescribeTable: no AWS credentials: set AWS_ACCESS_KEY_ID")
    finally:
        store.close()


@pytest.mark.timeout(60)
def test_an_unreachable_endpoint_is_unavailable(no_aws_settings: None) -> None:
    store = DynamoDBStore("dynamodb://127.0.0.1:1/payments", timeout=1.0)
    try:
        error = assert_unavailable(store, attempt("k"), T)
        assert error.message.startswith("dynamodb: DescribeTable: Could not connect"), error.message
    finally:
        store.close()
    with pytest.raises(ik.StoreError) as e:
        store.get("k")
    assert e.value.kind == "failed" and "closed" in e.value.message


def test_errors_are_read_by_the_cores_classes() -> None:
    client = dynamodb_client()  # every answer is stubbed: nothing is sent
    table = "stubbed"
    stub = Stubber(client)
    stub.add_response("describe_table", _ready_table(table))
    store = DynamoDBStore(client, table=table)
    r = record("k")
    with stub:
        stub.add_client_error("put_item", "ConditionalCheckFailedException", "The conditional request failed")
        assert store.insert(r) is False
        stub.add_client_error("delete_item", "ConditionalCheckFailedException")
        assert store.release(ik.ReleaseRequest("k", "a" * 32)) is False
        for code, status, kind in [("ProvisionedThroughputExceededException", 400, "unavailable"),
                                   ("ThrottlingException", 400, "unavailable"),
                                   ("InternalServerError", 500, "unavailable"),
                                   ("TransactionConflictException", 400, "unavailable"),
                                   ("ValidationException", 400, "failed"),
                                   ("AccessDeniedException", 400, "failed"),
                                   ("ResourceNotFoundException", 400, "failed"),
                                   # a name the core does not list: by its status (a proxy's 502)
                                   ("BadGateway", 502, "unavailable"),
                                   ("SomethingNew", 400, "failed")]:
            stub.add_client_error("get_item", code, f"the server says {code}", http_status_code=status)
            with pytest.raises(ik.StoreError) as e:
                store.get("k")
            assert (e.value.kind, e.value.message) == (kind, f"dynamodb: GetItem: {code}: the server says {code}")
        stub.add_client_error("put_item", "ThrottlingException")
        with pytest.raises(ik.IntentkeyError) as ie:
            ik.Guard(store).claim(attempt("k"), now=T)
        assert ie.value.code == "store-unavailable"
        stub.add_client_error("update_item", "ConditionalCheckFailedException")
        assert store.complete(ik.Completion("k", "b" * 32, RESPONSE, T + 50, False)) is False
        stub.add_response("get_item", {"Item": {"key": {"S": "k"}, "status": {"S": "weird"}}})
        with pytest.raises(ik.StoreError) as e:
            store.get("k")
        assert e.value.kind == "failed" and "weird" in e.value.message
        stub.assert_no_pending_responses()
    assert schema.dynamo_classify_error("com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException") == \
        "condition-failed"
    assert schema.dynamo_classify_error("LimitExceededException") == "retryable"
    assert schema.dynamo_classify_error("UnrecognizedClientException") == "failed"
    assert schema.dynamo_classify_error("UnrecognizedClientException", 400) == "failed"
    assert schema.dynamo_classify_error("UnrecognizedClientException", 503) == "retryable"
    assert schema.dynamo_classify_error("ConditionalCheckFailedException", 500) == "condition-failed"
    assert schema.dynamo_classify_error("UnrecognizedClientException", 70000) == "failed"  # not a status: unknown
    store.close()
    client.close()


def test_opening_creates_a_missing_table_and_waits_until_it_is_active(monkeypatch: pytest.MonkeyPatch) -> None:
    client = dynamodb_client()
    table = "stubbed"
    stub = Stubber(client)
    create = schema.dynamo_create_table(table).params()
    with stub:
        stub.add_client_error("describe_table", "ResourceNotFoundException", "Requested resource not found")
        # Another process created it in the meantime: ResourceInUseException is an answer.
        stub.add_client_error("create_table", "ResourceInUseException", expected_params=create)
        stub.add_response("describe_table", _ready_table(table, "CREATING"))
        stub.add_response("describe_table", _ready_table(table))
        stub.add_response("get_item", {})
        store = DynamoDBStore(client, table=table)
        assert store.get("k") is None
        stub.add_response("get_item", {})
        assert store.get("k") is None  # ready: no DescribeTable again
        stub.assert_no_pending_responses()

    # A table whose indexes never become ACTIVE: unavailable once the wait is over.
    monkeypatch.setattr(dynamodb_module, "READY_TIMEOUT", 0.3)
    monkeypatch.setattr(dynamodb_module, "_READY_POLL", 0.02)
    with Stubber(client) as stub:
        for _ in range(100):
            stub.add_response("describe_table", _ready_table(table, "CREATING"))
        store = DynamoDBStore(client, table=table)
        started = time.monotonic()
        with pytest.raises(ik.StoreError) as e:
            store.get("k")
        assert e.value.kind == "unavailable" and "not ACTIVE after 0.3 s" in e.value.message
        assert 0.3 <= time.monotonic() - started < 5
    # Any other refusal of DescribeTable fails the operation.
    with Stubber(client) as stub:
        stub.add_client_error("describe_table", "AccessDeniedException", "not authorized")
        with pytest.raises(ik.StoreError) as e:
            DynamoDBStore(client, table=table).get("k")
        assert e.value.kind == "failed" and "AccessDeniedException" in e.value.message
    client.close()


def test_a_response_too_large_is_refused_before_anything_is_sent() -> None:
    client = dynamodb_client()
    stub = Stubber(client)  # no answer queued: any request would fail the test
    store = DynamoDBStore(client, table="stubbed")
    store._ready = True
    big = ik.Response(200, b"x" * (400 * KB), "application/octet-stream", ())
    refused: List[Callable[[], Any]] = [
        lambda: store.complete(ik.Completion("k", "a" * 32, big, T + 50, False)),
        lambda: store.insert(done_record("k", big.body)),
        lambda: store.replace(ik.Replacement("a" * 32, 0, done_record("k", big.body))),
    ]
    with stub:
        for call in refused:
            with pytest.raises(ik.IntentkeyError) as e:
                call()
            assert (e.value.code, e.value.field) == ("response-too-large", "response")
            assert "over DynamoDB's item limit of 409600 bytes" in e.value.message
        stub.assert_no_pending_responses()
    client.close()


# -- on the endpoint -------------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_the_table_is_created_with_its_indexes_and_a_given_client_is_kept(dynamo: Tuple[str, str]) -> None:
    url, table = dynamo
    raw = dynamodb_client()
    try:
        with DynamoDBStore(url) as store:
            sent = sent_actions(store.client)
            assert store.get("k") is None
            assert sent == ["DescribeTable", "CreateTable", "DescribeTable", "GetItem"]
        described = raw.describe_table(TableName=table)["Table"]
        assert described["KeySchema"] == [{"AttributeName": "key", "KeyType": "HASH"}]
        assert described["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
        indexes = {i["IndexName"]: ([(k["AttributeName"], k["KeyType"]) for k in i["KeySchema"]],
                                    i["Projection"]["ProjectionType"]) for i in described["GlobalSecondaryIndexes"]}
        assert indexes == {"by_status": ([("list_pk", "HASH"), ("list_sk", "RANGE")], "ALL"),
                           "by_expiry": ([("purge_pk", "HASH"), ("purge_sk", "RANGE")], "KEYS_ONLY")}
        # A second store finds the table: DescribeTable once, no CreateTable.
        given = dynamodb_client()
        with DynamoDBStore(given, table=table) as store:
            sent = sent_actions(given)
            g = ik.Guard(store)
            a = attempt(key("given"))
            assert g.run(a, lambda k: RESPONSE, now=T).outcome == "ran"
            assert g.run(a, lambda k: RESPONSE, now=T + 1).response == RESPONSE
            assert sent[:2] == ["DescribeTable", "PutItem"] and "CreateTable" not in sent
        assert given.list_tables(Limit=1)["TableNames"]  # the store did not close the caller's client
        given.close()
    finally:
        raw.close()


@pytest.mark.timeout(120)
def test_items_are_the_cores_and_something_else_is_failed(dynamo: Tuple[str, str]) -> None:
    url, table = dynamo
    raw = dynamodb_client()
    try:
        with DynamoDBStore(url) as store:
            k = key("item")
            r = done_record(k, bytes(range(256)) * 3)
            assert store.insert(r) is True
            # The item is the core's, attribute for attribute, the body as bytes.
            stored = raw.get_item(TableName=table, Key={"key": {"S": k}}, ConsistentRead=True)["Item"]
            expected = schema.dynamo_insert(table, r).params()["Item"]
            assert stored["body"]["B"] == bytes(range(256)) * 3
            assert {n: ({"B": base64.b64encode(v["B"]).decode()} if "B" in v else v) for n, v in stored.items()} \
                == expected
            assert store.get(k) == r
            # An item intentkey did not write is failed, and so is a guard's claim of it.
            g = key("garbage")
            raw.put_item(TableName=table, Item={"key": {"S": g}, "status": {"S": "in_flight"}})
            with pytest.raises(ik.StoreError) as e:
                store.get(g)
            assert e.value.kind == "failed" and "fingerprint" in e.value.message
            assert "written by something other than intentkey" in e.value.message
            with pytest.raises(ik.IntentkeyError) as ie:
                ik.Guard(store).claim(attempt(g), now=T)
            assert ie.value.code == "store-failed"
    finally:
        raw.close()


@pytest.mark.timeout(300)
def test_records_spread_over_every_bucket_and_list_and_purge_find_them_all(dynamo: Tuple[str, str]) -> None:
    url, table = dynamo
    raw = dynamodb_client()
    try:
        with DynamoDBStore(url) as store:
            n = 240
            keys = [f"spread-{i:03d}-{uuid.uuid4().hex[:6]}" for i in range(n)]
            created = {k: T + random.Random(k).randrange(1000) for k in keys}
            for k in keys:
                assert store.insert(record(k, created=created[k])) is True
            done = keys[: n // 2]  # half of them done, expiring at T + 5000
            for k in done:
                assert store.complete(ik.Completion(k, "a" * 32, RESPONSE, T + 5000, False)) is True

            # Every bucket holds records (the index partitions, read from the table itself).
            items = raw.scan(TableName=table, ProjectionExpression="list_pk, purge_pk")["Items"]
            partitions = {i["list_pk"]["S"] for i in items}
            assert {p.split("#")[1] for p in partitions} == {f"{b:02d}" for b in range(16)}
            assert {i["purge_pk"]["S"] for i in items if "purge_pk" in i} == {f"{b:02d}" for b in range(16)}

            # list: every bucket's records, merged oldest first (created_at, then key), at most `limit`.
            sent = sent_actions(store.client)
            want = sorted(keys[n // 2:], key=lambda k: (created[k], k))
            assert [r.key for r in store.list(ik.Status.IN_FLIGHT, 1000)] == want
            assert sent == ["Query"] * 16  # one per bucket, never a Scan
            assert [r.key for r in store.list(ik.Status.IN_FLIGHT, 7)] == want[:7]
            assert [r.key for r in store.list(ik.Status.DONE, 1000)] == sorted(done, key=lambda k: (created[k], k))
            assert [r.key for r in store.list(None, 1000)] == sorted(keys, key=lambda k: (created[k], k))
            assert store.list(ik.Status.NEEDS_RECONCILIATION, 10) == [] and store.list(ik.Status.DONE, 0) == []
            assert sorted(ik.Guard(store, stale_after_seconds=60).due(now=T + 5000, limit=1000)) == sorted(want)

            # purge: every bucket's expired done records, and nothing else.
            assert store.purge(T + 4999) == 0
            assert store.purge(T + 5000) == len(done)
            assert store.purge(T + 5001) == 0
            assert store.list(ik.Status.DONE, 1000) == []
            left = raw.scan(TableName=table, ProjectionExpression="#k", ExpressionAttributeNames={"#k": "key"})
            assert sorted(i["key"]["S"] for i in left["Items"]) == sorted(keys[n // 2:])
    finally:
        raw.close()


@pytest.mark.timeout(300)
def test_a_purge_of_more_than_a_page_in_one_bucket_goes_on_until_done(dynamo: Tuple[str, str]) -> None:
    url, table = dynamo
    page = schema.dynamo_purge(table, T)[0].params()["Limit"]
    # Keys of one bucket, found by the core's items (never by hashing here).
    target = bucket(table, "k-0")
    keys = [k for k in (f"k-{i}" for i in range(40 * (page + 100))) if bucket(table, k) == target][: page + 37]
    assert len(keys) == page + 37
    with DynamoDBStore(url) as store:
        for k in keys:
            assert store.insert(done_record(k, b"", expires=T + 10)) is True
        assert store.insert(done_record("later", b"", expires=T + 11)) is True
        sent = sent_actions(store.client)
        assert store.purge(T + 10) == len(keys)
        assert sent.count("DeleteItem") == len(keys) and sent.count("Query") == 16 + 1  # the bucket's second page
        assert [r.key for r in store.list(ik.Status.DONE, 10)] == ["later"]


@pytest.mark.timeout(300)
def test_a_300_kb_body_fits_and_a_list_reads_it_page_after_page(dynamo: Tuple[str, str]) -> None:
    url, table = dynamo
    target = bucket(table, "big-0")
    keys = [k for k in (f"big-{i}" for i in range(400)) if bucket(table, k) == target][:5]
    assert len(keys) == 5
    with DynamoDBStore(url) as store:
        g = ik.Guard(store)
        bodies = {k: bytes([i]) * (300 * KB) for i, k in enumerate(keys)}
        for i, k in enumerate(keys):
            owned = g.claim(attempt(k), now=T + i)
            answer = ik.Response(200, bodies[k], "application/octet-stream", ())
            assert g.finish(k, owned.owner_token, ik.Answered(answer), now=T + i) is ik.Finished.STORED
            assert g.claim(attempt(k), now=T + i).response == answer
        # One bucket's five items are 1.5 MB: DynamoDB answers a Query 1 MB at a time.
        sent = sent_actions(store.client)
        listed = store.list(ik.Status.DONE, 10)
        assert [r.key for r in listed] == keys
        assert all(r.response is not None and r.response.body == bodies[r.key] for r in listed)
        assert sent.count("Query") > 16
        assert [r.key for r in store.list(ik.Status.DONE, 2)] == keys[:2]


@pytest.mark.timeout(120)
def test_a_response_over_400_kb_raises_response_too_large_and_leaves_the_record_in_flight(
        dynamo: Tuple[str, str]) -> None:
    url, _ = dynamo
    with DynamoDBStore(url) as store:
        g = ik.Guard(store)
        a = attempt(key("big"))
        owned = g.claim(a, now=T)
        before = store.get(a.key)
        assert before is not None and before.status is ik.Status.IN_FLIGHT
        sent = sent_actions(store.client)
        big = ik.Response(200, b"x" * (400 * KB + 1), "application/octet-stream", ())
        with pytest.raises(ik.IntentkeyError) as e:
            g.finish(a.key, owned.owner_token, ik.Answered(big), now=T + 1)
        assert (e.value.code, e.value.field) == ("response-too-large", "response")
        assert sent == []  # nothing was sent
        assert store.get(a.key) == before  # in flight, untouched: recovery settles it
        assert g.claim(a, now=T + 2).state is ik.ClaimState.IN_FLIGHT

        # A run whose effect answers too much: raised, the record left in flight, a redelivery 409.
        b = attempt(key("big-run"))
        ran: List[str] = []

        def effect(k: str) -> ik.Response:
            ran.append(k)
            return big

        with pytest.raises(ik.IntentkeyError) as e:
            g.run(b, effect, now=T)
        assert e.value.code == "response-too-large" and ran == [b.key]
        assert g.run(b, effect, now=T + 1).outcome == "in-flight" and ran == [b.key]
        left = store.get(b.key)
        assert left is not None and left.status is ik.Status.IN_FLIGHT and left.response is None

        # The same owner can still finish with a smaller answer (a reference to the body kept elsewhere).
        small = ik.Response.json(201, '{"body": "s3://bucket/key"}')
        assert g.finish(a.key, owned.owner_token, ik.Answered(small), now=T + 3) is ik.Finished.STORED
        assert g.claim(a, now=T + 4).response == small


# -- races ----------------------------------------------------------------------------------------------------


@pytest.mark.timeout(600)
def test_16_threads_racing_for_1000_keys_have_one_owner_per_key(dynamo: Tuple[str, str]) -> None:
    url, _ = dynamo
    DynamoDBStore(url).ensure_table()  # created once, before the race
    stores = [DynamoDBStore(url) for _ in range(16)]  # a client per thread
    try:
        keys = [f"race-{i:04d}" for i in range(1000)]
        race_for_keys(stores, keys)
        assert len(stores[0].list(ik.Status.IN_FLIGHT, 5000)) == 1000
    finally:
        for s in stores:
            s.close()


@pytest.mark.timeout(120)
def test_16_threads_recovering_one_stale_record_re_execute_it_once(dynamo: Tuple[str, str]) -> None:
    url, _ = dynamo
    stores = [DynamoDBStore(url) for _ in range(16)]
    try:
        threads_recover_one_stale_record(stores)
    finally:
        for s in stores:
            s.close()


@pytest.mark.timeout(120)
def test_16_concurrent_recoverers_of_one_stale_record_re_execute_it_once(dynamo: Tuple[str, str]) -> None:
    url, _ = dynamo
    stores = [DynamoDBStore(url) for _ in range(16)]
    try:
        concurrent_recoverers_of_one_stale_record(stores)
    finally:
        for s in stores:
            s.close()


# -- kill trials ----------------------------------------------------------------------------------------------


class DynamoKill:
    """The trials' store and effects on the endpoint: the children go
    through a :class:`SettlingProxy` (a write a killed child sent is applied,
    or not, before anything is read); an effect is an append to the key's
    item in the table ``<table>-fx``."""

    name = "dynamodb"

    def __init__(self, table: str, store: DynamoDBStore):
        self.table, self.store = table, store
        self.effects_table = f"{table}-fx"
        self.client = dynamodb_client()
        dynamodb_effects_table(self.client, self.effects_table)
        endpoint = dynamodb_endpoint().rpartition("//")[2]
        host, _, port = endpoint.rpartition(":")
        self.proxy = SettlingProxy((host, int(port)))

    def close(self) -> None:
        self.proxy.close()
        self.client.close()

    def child_config(self) -> Dict[str, Any]:
        return {"backend": "dynamodb", "url": f"dynamodb://127.0.0.1:{self.proxy.port}/{self.table}",
                "effects": self.effects_table}

    def effects(self, key: str) -> List[str]:
        return dynamodb_effects(self.client, self.effects_table, key)

    def add_effect(self, key: str, source: str) -> None:
        dynamodb_add_effect(self.client, self.effects_table, key, source)

    def settle(self, lines: List[str]) -> None:
        self.proxy.settle()

    def naive_redeliver(self, key: str) -> None:
        naive_process_dynamodb(self.client, self.effects_table, key, "redelivery", 0)


@pytest.mark.timeout(900)
def test_a_killed_owner_is_redelivered_and_recovered_with_one_effect(dynamo: Tuple[str, str]) -> None:
    seed = int(os.environ.get("IK_DYNAMO_KILL_SEED", str(random.randrange(2**32))))
    url, table = dynamo
    with DynamoDBStore(url) as store:
        store.ensure_table()  # the children find it made
        backend = DynamoKill(table, store)
        try:
            summary = run_kill_trials(backend, KILL_TRIALS, seed, NAIVE_TRIALS)
        finally:
            backend.close()
    print("\n" + summary.line("dynamodb"))
    assert summary.duplicates == 0
    assert summary.counts["mid-effect"] >= KILL_TRIALS / 6, summary.counts
    assert summary.naive_duplicated >= 1, \
        "the naive control never duplicated its effect: the kills did not land between effect and marker"


def test_the_schema_wrappers_hand_over_the_cores_requests() -> None:
    table = "payments"
    r = record("k1")
    put = schema.dynamo_insert(table, r)
    assert put.action == "PutItem" and put.params()["ConditionExpression"] == "attribute_not_exists(#key)"
    assert schema.dynamo_decode(json.dumps(put.params()["Item"])) == r
    assert schema.dynamo_get(table, "k1").params() == {"TableName": table, "Key": {"key": {"S": "k1"}},
                                                        "ConsistentRead": True}
    assert len(schema.dynamo_list(table, None, 5)) == 48 and len(schema.dynamo_list(table, ik.Status.DONE, 5)) == 16
    assert schema.dynamo_list(table, None, 0) == [] and schema.dynamo_list(table, None, -3) == []
    query = schema.dynamo_list(table, ik.Status.IN_FLIGHT, 5)[3]
    assert schema.dynamo_next_page(query, '{"Items": []}', 0, 5) is None
    more = schema.dynamo_next_page(query, '{"LastEvaluatedKey": {"key": {"S": "x"}}}', 2, 5)
    assert more is not None and more.params()["ExclusiveStartKey"] == {"key": {"S": "x"}}
    assert schema.dynamo_next_page(query, '{"LastEvaluatedKey": {"key": {"S": "x"}}}', 5, 5) is None
    assert schema.dynamo_listed(10, ['{"Items": []}']) == []
    with pytest.raises(ik.StoreError) as e:
        schema.dynamo_listed(10, ["{}"])
    assert e.value.kind == "failed"
    with pytest.raises(ik.StoreError) as e:
        schema.dynamo_purge_deletes(table, T, '{"nothing": 1}')
    assert e.value.kind == "failed"
    assert [d.action for d in schema.dynamo_purge_deletes(table, T, '{"Items": [{"key": {"S": "k"}}]}')] == \
        ["DeleteItem"]
    assert len(schema.dynamo_purge(table, T)) == 16
    assert schema.dynamo_table_ready(json.dumps(_ready_table(table))) is True
    assert schema.dynamo_table_ready(json.dumps(_ready_table(table, "CREATING"))) is False
    assert schema.dynamo_create_table(table).action == "CreateTable"
    schema.dynamo_check_table("abc")
    with pytest.raises(ik.IntentkeyError) as ie:
        schema.dynamo_check_table("ab")
    assert (ie.value.code, ie.value.field) == ("invalid-argument", "table")
    with pytest.raises(ik.IntentkeyError) as ie:
        schema.dynamo_table_ready({"Table": {}})  # type: ignore[arg-type]
    assert ie.value.field == "output"
