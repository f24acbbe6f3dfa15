"""The claim flow over every store (SQLite, PostgreSQL, MySQL/MariaDB, Redis, Redis Cluster, DynamoDB), through
intentkey.Guard (sync) and intentkey.aio.AsyncGuard (async): claim, replay,
in flight, payload conflict, fenced finish, release, recovery, due, purge,
races for one key, migrations and the store errors."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import tempfile
import threading
import uuid
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterator, List

import pytest

import intentkey as ik
from intentkey import schema
from intentkey.aio import AsyncGuard
from intentkey.stores import (
    AsyncPostgresStore, AsyncRedisStore, DynamoDBStore, MySQLStore, PostgresStore, RedisStore, SQLiteStore,
)
from support.servers import (
    dynamodb_table, mysql_database, mysql_url, pg_conninfo, pg_schema, redis_cluster_prefix, redis_cluster_url,
    redis_prefix, redis_url,
)
from support.stores import assert_get_fails, assert_unavailable, run_threads

T = 1_700_000_000
RESPONSE = ik.Response(201, bytes(range(256)), "application/octet-stream", (("Location", "/orders/1"), ("X-Id", "7")))

# -- backends: a factory of store instances sharing one database / prefix ------------------------


@contextmanager
def sync_backend(kind: str) -> Iterator[Callable[[], Any]]:
    made: List[Any] = []

    def track(store: Any) -> Any:
        made.append(store)
        return store

    with ExitStack() as stack:
        if kind == "sqlite":
            tmp = stack.enter_context(tempfile.TemporaryDirectory())
            path = os.path.join(tmp, "records.db")
            factory: Callable[[], Any] = lambda: track(SQLiteStore(path))
        elif kind == "postgres":
            conninfo = pg_conninfo()
            name = stack.enter_context(pg_schema())
            factory = lambda: track(PostgresStore(conninfo, schema=name))
        elif kind == "mysql":
            url = mysql_url()
            database = stack.enter_context(mysql_database())
            factory = lambda: track(MySQLStore(url, schema=database))
        elif kind == "redis-cluster":
            url = redis_cluster_url()
            prefix = stack.enter_context(redis_cluster_prefix())
            factory = lambda: track(RedisStore(url, prefix=prefix))
        elif kind == "dynamodb":
            url, table = stack.enter_context(dynamodb_table())
            factory = lambda: track(DynamoDBStore(f"{url}/{table}"))
        else:
            url = redis_url()
            prefix = stack.enter_context(redis_prefix())
            factory = lambda: track(RedisStore(url, prefix=prefix))
        try:
            yield factory
        finally:
            for store in made:
                store.close()


@contextmanager
def async_backend(kind: str) -> Iterator[Callable[[], Any]]:
    with ExitStack() as stack:
        if kind == "postgres":
            conninfo = pg_conninfo()
            name = stack.enter_context(pg_schema())
            yield lambda: AsyncPostgresStore(conninfo, schema=name)
        elif kind == "redis-cluster":
            url = redis_cluster_url()
            prefix = stack.enter_context(redis_cluster_prefix())
            yield lambda: AsyncRedisStore(url, prefix=prefix)
        else:
            url = redis_url()
            prefix = stack.enter_context(redis_prefix())
            yield lambda: AsyncRedisStore(url, prefix=prefix)


class Awaitable:
    """A sync guard behind coroutines, so one scenario covers both guards."""

    def __init__(self, guard: ik.Guard):
        self.guard = guard

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.guard, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return method(*args, **kwargs)

        return call


def key(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex}"


def attempt(k: str, fp: str = "fp-1") -> ik.Attempt:
    return ik.Attempt(k, fp, "tenant-acme", "pix.send")


# -- the scenarios, written once ---------------------------------------------------------------


async def claim_and_finish(g: Any) -> None:
    a = attempt(key("claim"))
    owned = await g.claim(a, now=T)
    assert owned.state is ik.ClaimState.OWNED and len(owned.owner_token) == 32
    assert (await g.claim(a, now=T + 1)).state is ik.ClaimState.IN_FLIGHT
    other = attempt(a.key, "fp-2")
    assert (await g.claim(other, now=T + 1)).state is ik.ClaimState.PAYLOAD_CONFLICT
    # A finish with another token is superseded and changes nothing.
    assert await g.finish(a.key, "0" * 32, ik.Answered(RESPONSE), now=T + 2) is ik.Finished.SUPERSEDED
    assert (await g.claim(a, now=T + 2)).state is ik.ClaimState.IN_FLIGHT
    assert await g.finish(a.key, owned.owner_token, ik.Answered(RESPONSE), now=T + 2) is ik.Finished.STORED
    replay = await g.claim(a, now=T + 3)
    assert replay.state is ik.ClaimState.DONE
    assert replay.response == RESPONSE
    assert (await g.claim(other, now=T + 3)).state is ik.ClaimState.PAYLOAD_CONFLICT
    # The owner's second finish is superseded: the record is done.
    again = ik.Answered(ik.Response.json(200, "{}"))
    assert await g.finish(a.key, owned.owner_token, again, now=T + 4) is ik.Finished.SUPERSEDED
    assert (await g.claim(a, now=T + 5)).response == RESPONSE

    ran: List[str] = []

    def effect(k: str) -> ik.Response:
        ran.append(k)
        return ik.Response.json(201, '{"id":2}')

    b = attempt(key("run"))
    first = await g.run(b, effect, now=T)
    second = await g.run(b, effect, now=T + 1)
    assert (first.outcome, second.outcome) == ("ran", "replayed")
    assert second.response.body == b'{"id":2}' and ran == [b.key]
    assert (await g.run(attempt(b.key, "fp-2"), effect, now=T + 2)).outcome == "conflict"


async def release_and_failure(g: Any) -> None:
    a = attempt(key("refused"))
    owned = await g.claim(a, now=T)
    assert await g.finish(a.key, owned.owner_token, ik.Refused(), now=T + 1) is ik.Finished.RELEASED
    again = await g.claim(a, now=T + 2)
    assert again.state is ik.ClaimState.OWNED and again.owner_token != owned.owner_token
    # A release status (503) releases too; a wrong token releases nothing.
    assert await g.finish(a.key, owned.owner_token, ik.Refused(), now=T + 3) is ik.Finished.SUPERSEDED
    busy = ik.Answered(ik.Response.json(503, '{"busy":true}'))
    assert await g.finish(a.key, again.owner_token, busy, now=T + 3) is ik.Finished.RELEASED
    third = await g.claim(a, now=T + 4)
    assert third.state is ik.ClaimState.OWNED
    assert await g.finish(a.key, third.owner_token, ik.Failed(), now=T + 5) is ik.Finished.LEFT_IN_FLIGHT
    assert (await g.claim(a, now=T + 6)).state is ik.ClaimState.IN_FLIGHT


async def recovery(g: Any) -> None:
    # g: stale after 60 s.
    found = ik.Response.json(201, '{"found":true}')
    f, u, a = attempt(key("found")), attempt(key("unknown")), attempt(key("absent"))
    for x in (f, u, a):
        assert (await g.claim(x, now=T)).state is ik.ClaimState.OWNED

    not_due = await g.recover(f.key, lambda k: ik.Found(found), now=T + 10)
    assert not_due.state is ik.RecoveryState.NOT_DUE and not_due.due_at == T + 60
    assert sorted(await g.due(now=T + 61)) == sorted([f.key, u.key, a.key])
    assert await g.due(now=T + 59) == []

    asked: List[str] = []

    def lookup_found(k: str) -> ik.Lookup:
        asked.append(k)
        return ik.Found(found)

    r = await g.recover(f.key, lookup_found, now=T + 61)
    assert r.state is ik.RecoveryState.APPLIED and r.action.kind == "record-done" and asked == [f.key]
    done = await g.claim(f, now=T + 62)
    assert done.state is ik.ClaimState.DONE and done.response == found

    r = await g.recover(u.key, lambda k: ik.Unknown(), now=T + 61)
    assert r.state is ik.RecoveryState.APPLIED and r.action.kind == "check-later"
    assert r.action.lookups == 1 and r.action.next_lookup_at > T + 61
    assert (await g.claim(u, now=T + 62)).state is ik.ClaimState.IN_FLIGHT
    assert u.key not in await g.due(now=T + 62)

    r = await g.recover(a.key, lambda k: ik.Absent(), read_your_writes=True, now=T + 61)
    assert r.state is ik.RecoveryState.APPLIED and r.action.kind == "re-execute"
    # The new owner finishes; the first owner is fenced out.
    old = ik.Answered(ik.Response.json(200, '{"old":true}'))
    assert await g.finish(a.key, "f" * 32, old, now=T + 62) is ik.Finished.SUPERSEDED
    assert await g.finish(a.key, r.owner_token, ik.Answered(RESPONSE), now=T + 62) is ik.Finished.STORED
    assert (await g.claim(a, now=T + 63)).response == RESPONSE

    missing = await g.recover(key("never"), lambda k: ik.Unknown(), now=T + 61)
    assert missing.state is ik.RecoveryState.MISSING
    r = await g.recover(f.key, lookup_found, now=T + 100)
    assert r.state is ik.RecoveryState.NOT_IN_FLIGHT and r.status is ik.Status.DONE


async def due_and_purge(g: Any) -> None:
    # g: TTL 100 s, stale after 60 s.
    done, flight = attempt(key("done")), attempt(key("flight"))
    c = await g.claim(done, now=T)
    assert await g.finish(done.key, c.owner_token, ik.Answered(RESPONSE), now=T) is ik.Finished.STORED
    assert (await g.claim(flight, now=T + 1)).state is ik.ClaimState.OWNED
    assert await g.due(now=T + 61) == [flight.key]
    assert await g.due(now=T + 61, limit=0) == []
    assert await g.purge(now=T + 99) == 0
    assert await g.purge(now=T + 100) == 1
    assert await g.purge(now=T + 101) == 0
    # The done record is gone (a new claim owns it); the in-flight one stays.
    assert (await g.claim(done, now=T + 102)).state is ik.ClaimState.OWNED
    assert (await g.claim(flight, now=T + 102)).state is ik.ClaimState.IN_FLIGHT


SCENARIOS = {
    "claim_and_finish": (claim_and_finish, {}),
    "release_and_failure": (release_and_failure, {}),
    "recovery": (recovery, {"stale_after_seconds": 60}),
    "due_and_purge": (due_and_purge, {"stale_after_seconds": 60, "ttl_seconds": 100}),
}

SYNC_KINDS = ["sqlite", "postgres", "mysql", "redis", "redis-cluster", "dynamodb"]
ASYNC_KINDS = ["postgres", "redis", "redis-cluster"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("kind", SYNC_KINDS)
def test_sync_guard(kind: str, scenario: str) -> None:
    run, options = SCENARIOS[scenario]
    with sync_backend(kind) as make:
        asyncio.run(run(Awaitable(ik.Guard(make(), **options))))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("kind", ASYNC_KINDS)
def test_async_guard(kind: str, scenario: str) -> None:
    run, options = SCENARIOS[scenario]

    async def main(store: Any) -> None:
        try:
            await run(AsyncGuard(store, **options))
        finally:
            await store.close()

    with async_backend(kind) as make:
        asyncio.run(main(make()))


# -- races ----------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", SYNC_KINDS)
def test_threads_racing_one_key_have_one_owner(kind: str) -> None:
    n = 8
    a = attempt(key("race"))
    with sync_backend(kind) as make:
        guards = [ik.Guard(make()) for _ in range(n)]  # a store (connection) per thread
        barrier = threading.Barrier(n)
        claims: List[ik.Claim] = []

        def race(g: ik.Guard) -> None:
            barrier.wait()
            claims.append(g.claim(a, now=T))

        assert run_threads(race, guards) == []
        states = sorted(c.state.value for c in claims)
        assert states == ["in-flight"] * (n - 1) + ["owned"]
        owner = next(c for c in claims if c.state is ik.ClaimState.OWNED)
        assert guards[3].finish(a.key, owner.owner_token, ik.Answered(RESPONSE), now=T + 1) is ik.Finished.STORED
        assert {g.claim(a, now=T + 2).response for g in guards} == {RESPONSE}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ASYNC_KINDS)
def test_tasks_racing_one_key_have_one_owner(kind: str) -> None:
    n = 16

    async def main(store: Any) -> None:
        try:
            g = AsyncGuard(store)
            a = attempt(key("race"))
            ran: List[str] = []

            async def effect(k: str) -> ik.Response:
                ran.append(k)
                await asyncio.sleep(0.05)
                return RESPONSE

            results = await asyncio.gather(*(g.run(a, effect, now=T) for _ in range(n)))
            outcomes = sorted(r.outcome for r in results)
            assert ran == [a.key]
            assert outcomes.count("ran") == 1
            assert set(outcomes) <= {"ran", "in-flight", "replayed"}
            claims = await asyncio.gather(*(g.claim(a, now=T + 1) for _ in range(n)))
            assert {c.state for c in claims} == {ik.ClaimState.DONE}
            assert {c.response for c in claims} == {RESPONSE}
        finally:
            await store.close()

    with async_backend(kind) as make:
        asyncio.run(main(make()))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ASYNC_KINDS)
def test_an_async_replay_is_one_claim_and_no_get(kind: str) -> None:
    """The package's async PostgreSQL and Redis stores claim in one round trip:
    a repeat answers the record it lost to (exactly the stored one), so a
    replay through the async guard reads nothing after its claim."""

    async def main(store: Any) -> None:
        try:
            g = AsyncGuard(store)
            a = attempt(key("one-trip"))

            async def effect(k: str) -> ik.Response:
                return RESPONSE

            assert (await g.run(a, effect, now=T)).outcome == "ran"
            stored = await store.get(a.key)
            again = await store._claim(record(a.key, "b" * 32, created=T + 1))
            assert again == stored
            counted = {"get": 0, "insert": 0, "_claim": 0}
            real = {op: getattr(store, op) for op in counted}

            def counting(op: str) -> Any:
                async def call(*args: Any) -> Any:
                    counted[op] += 1
                    return await real[op](*args)

                return call

            for op in counted:
                setattr(store, op, counting(op))
            try:
                replay = await g.run(a, effect, now=T + 2)
            finally:
                for op in counted:
                    delattr(store, op)
            assert replay.outcome == "replayed" and replay.response == RESPONSE
            assert counted == {"get": 0, "insert": 0, "_claim": 1}
        finally:
            await store.close()

    with async_backend(kind) as make:
        asyncio.run(main(make()))


# -- the store protocol directly ------------------------------------------------------------------------


def record(k: str, token: str = "a" * 32, status: ik.Status = ik.Status.IN_FLIGHT, created: int = T) -> ik.StoredRecord:
    return ik.StoredRecord(k, "fp", "tenant-acme", "pix.send", status, token, None, created, None, 0, None)


@pytest.mark.parametrize("kind", SYNC_KINDS)
def test_store_operations(kind: str) -> None:
    with sync_backend(kind) as make:
        s = make()
        k1, k2 = key("op1"), key("op2")
        assert s.get(k1) is None
        assert s.insert(record(k1)) is True
        assert s.insert(record(k1, "b" * 32)) is False
        assert s.get(k1) == record(k1)
        assert s.insert(record(k2, created=T + 1)) is True
        assert [r.key for r in s.list(ik.Status.IN_FLIGHT, 10)] == [k1, k2]
        assert [r.key for r in s.list(ik.Status.IN_FLIGHT, 1)] == [k1]
        assert s.list(ik.Status.DONE, 10) == []
        assert s.list(ik.Status.IN_FLIGHT, 0) == []
        done = ik.Completion(k1, "a" * 32, RESPONSE, T + 50, False)
        assert s.complete(ik.Completion(k1, "b" * 32, RESPONSE, T + 50, False)) is False
        assert s.complete(done) is True
        got = s.get(k1)
        assert got.status is ik.Status.DONE and got.response == RESPONSE and got.expires_at == T + 50
        fast = ik.Completion(k2, "a" * 32, RESPONSE, T + 60, True)
        assert s.complete(fast) is True and s.get(k2).status is ik.Status.DONE
        k3 = key("op3")
        assert s.insert(record(k3)) is True
        moved = ik.StoredRecord(k3, "fp", "tenant-acme", "pix.send", ik.Status.NEEDS_RECONCILIATION, "c" * 32, None,
                                T, None, 3, None)
        assert s.replace(ik.Replacement("a" * 32, 1, moved)) is False  # lookups differ
        assert s.replace(ik.Replacement("a" * 32, 0, moved)) is True
        assert s.get(k3) == moved
        assert [r.key for r in s.list(ik.Status.NEEDS_RECONCILIATION, 10)] == [k3]
        assert s.release(ik.ReleaseRequest(k3, "c" * 32)) is False  # not in flight
        k4 = key("op4")
        assert s.insert(record(k4)) is True
        assert s.release(ik.ReleaseRequest(k4, "b" * 32)) is False
        assert s.release(ik.ReleaseRequest(k4, "a" * 32)) is True and s.get(k4) is None
        assert s.purge(T + 50) == 1 and s.get(k1) is None and s.get(k2) is not None


# -- migrations -----------------------------------------------------------------------------------------


def test_sqlite_migrates_once_and_refuses_a_newer_schema(tmp_path: Any) -> None:
    path = str(tmp_path / "r.db")
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.schema_version()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.execute(f"PRAGMA user_version = {schema.schema_version() + 1}")
    conn.close()
    with pytest.raises(ik.StoreError) as e:
        SQLiteStore(path)
    assert e.value.kind == "failed" and "schema version" in e.value.message


@pytest.mark.timeout(120)
def test_postgres_migrates_under_the_lock_and_refuses_a_newer_schema() -> None:
    import psycopg

    conninfo = pg_conninfo()
    with pg_schema() as name:
        stores = [PostgresStore(conninfo, schema=name) for _ in range(4)]

        def first_use(s: PostgresStore) -> None:
            s.get("x")

        errors = run_threads(first_use, stores)
        for s in stores:
            s.close()
        assert errors == []
        with psycopg.connect(conninfo, autocommit=True) as conn:
            rows = conn.execute(f"SELECT version FROM {name}.intentkey_schema_migrations ORDER BY version").fetchall()
            assert [r[0] for r in rows] == [m.version for m in schema.migrations()]
            conn.execute(f"INSERT INTO {name}.intentkey_schema_migrations VALUES (%s, 0)", [schema.schema_version() + 1])
        assert_get_fails(PostgresStore(conninfo, schema=name), "failed", "upgrade intentkey")


# -- errors -----------------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_unreachable_servers_are_unavailable() -> None:
    pg = PostgresStore("host=127.0.0.1 port=1 dbname=test user=postgres connect_timeout=1", timeout=1.0)
    try:
        assert_unavailable(pg, attempt("k"), T)
    finally:
        pg.close()
    assert_unavailable(RedisStore("redis://127.0.0.1:1/0", timeout=1.0), attempt("k"), T)

    async def aio() -> None:
        ars = AsyncRedisStore("redis://127.0.0.1:1/0", timeout=1.0)
        with pytest.raises(ik.StoreError) as e:
            await ars.get("x")
        assert e.value.kind == "unavailable"
        await ars.close()
        apg = AsyncPostgresStore("host=127.0.0.1 port=1 dbname=test user=postgres connect_timeout=1", timeout=1.0)
        with pytest.raises(ik.StoreError) as e:
            await apg.get("x")
        assert e.value.kind == "unavailable"
        await apg.close()

    asyncio.run(aio())


@pytest.mark.timeout(60)
def test_async_guard_reports_an_unreachable_store_as_unavailable() -> None:
    async def aio() -> None:
        ars = AsyncRedisStore("redis://127.0.0.1:1/0", timeout=1.0)
        try:
            with pytest.raises(ik.IntentkeyError) as ie:
                await AsyncGuard(ars).claim(attempt("k"), now=T)
            assert ie.value.code == "store-unavailable"
        finally:
            await ars.close()

    asyncio.run(aio())


def test_data_intentkey_did_not_write_is_failed() -> None:
    import redis

    url = redis_url()
    with redis_prefix() as prefix:
        s = RedisStore(url, prefix=prefix)
        raw = redis.Redis.from_url(url)
        k = key("garbage")
        raw.set(schema.redis_record_key(prefix, k), "not a record")
        with pytest.raises(ik.StoreError) as e:
            s.get(k)
        assert e.value.kind == "failed"
        raw.close()
        s.close()
    with pytest.raises(ik.StoreError) as e:
        schema.sql_decode_row(["k", "fp", "t", "a", "bogus", "tok", None, None, None, None, None, T, None, 0, None])
    assert e.value.kind == "failed"


def test_sync_guard_reports_a_failing_get_as_store_failed() -> None:
    import redis

    url = redis_url()
    with redis_prefix() as prefix:
        s = RedisStore(url, prefix=prefix)
        raw = redis.Redis.from_url(url)
        try:
            k = key("garbage")
            raw.set(schema.redis_record_key(prefix, k), "not a record")
            with pytest.raises(ik.IntentkeyError) as ie:
                ik.Guard(s).claim(attempt(k), now=T)
            assert ie.value.code == "store-failed"
        finally:
            raw.close()
            s.close()


def test_schema_arguments_are_checked() -> None:
    with pytest.raises(ik.IntentkeyError) as e:
        schema.sql_statements("oracle")
    assert e.value.code == "invalid-argument" and e.value.field == "dialect"
    with pytest.raises(ik.IntentkeyError) as e:
        schema.sql_statements("postgres", "")
    assert e.value.code == "invalid-argument"
    with pytest.raises(ik.IntentkeyError) as e:
        PostgresStore("host=127.0.0.1", schema="")
    assert e.value.field == "schema"
    with pytest.raises(ik.IntentkeyError) as e:
        RedisStore("redis://127.0.0.1:6379/0", prefix="has space")
    assert e.value.field == "prefix"
    with pytest.raises(ik.IntentkeyError) as e:
        SQLiteStore(42)  # type: ignore[arg-type]
    assert e.value.field == "path_or_connection"
    with pytest.raises(ik.IntentkeyError) as e:
        RedisStore("redis://127.0.0.1:6379/0", colour="red")
    assert (e.value.code, e.value.field) == ("invalid-argument", "colour")
    for make in (lambda: ik.Guard(ik.MemoryStore(), ttl=5), lambda: ik.Keyer(secret=b"k" * 32, polcy=None),
                 lambda: SQLiteStore(":memory:", busy_timeout=1), lambda: PostgresStore("host=127.0.0.1", pool=1)):
        with pytest.raises(ik.IntentkeyError) as e:
            make()
        assert e.value.code == "invalid-argument" and e.value.field in ("ttl", "polcy", "busy_timeout", "pool")
    assert set(schema.sql_statements("postgres")) >= {
        "insert", "claim", "get", "complete", "complete-fast", "replace", "release", "list", "purge",
        "migration-lock", "migrated-version", "record-migration"}
    assert set(schema.redis_scripts()) == {"insert", "complete", "replace", "release", "list", "purge", "claim"}
    assert schema.redis_default_prefix() == "intentkey"
    call = schema.redis_insert("p", record("k"))
    assert call.script == "insert" and call.keys[0] == "p:rec:k"


def test_the_claim_statement_decodes() -> None:
    # The PostgreSQL claim statement's row: inserted, then the record it lost
    # to as one JSON column (row_to_json, bytea as the server writes it).
    assert isinstance(schema.sql_decode_claim([1, None]), schema.Won)
    assert isinstance(schema.sql_decode_claim([0, None]), schema.Lost)
    rec = record("k")
    columns = {"key": "k", "fingerprint": "fp", "tenant_id": "tenant-acme", "action_type": "pix.send",
               "status": "in_flight", "owner_token": "a" * 32, "response_status": None,
               "response_content_type": None, "response_headers": None, "response_body": None,
               "response_body_bytes": None, "created_at": T, "expires_at": None, "lookups": 0,
               "next_lookup_at": None}
    decoded = schema.sql_decode_claim([0, json.dumps(columns)])
    assert isinstance(decoded, schema.Existing) and decoded.record == rec
    del columns["lookups"]
    with pytest.raises(ik.StoreError) as bad:
        schema.sql_decode_claim([0, json.dumps(columns)])
    assert bad.value.kind == "failed" and "no column lookups" in bad.value.message
    # A row of inserted and the record columns is read too.
    assert isinstance(schema.sql_decode_claim([1] + [None] * 15), schema.Won)
    row = [0, "k", "fp", "tenant-acme", "pix.send", "in_flight", "a" * 32, None, None, None, None, None, T, None, 0, None]
    decoded = schema.sql_decode_claim(row)
    assert isinstance(decoded, schema.Existing) and decoded.record == rec
