"""The Redis stores on a real Redis Cluster (``redis+cluster://``, the core's
cluster layout: every record with its bucket's indexes under one hash tag
``{prefix:NN}``, 16 buckets), and ``wait=N`` on a cluster and on one
server: the URL and options, records spread over every master and found
again by list and purge, races (16 threads x 1,000 keys; 16 recoverers of
one stale record), kill trials between effect and completion, WAIT on the
connection that wrote, the errors. The conformance scenarios every store
runs are in test_stores.py (parametrized over ``redis-cluster`` too), the
records shared with Node and Rust in test_shared_stores.py.

The cluster is ``INTENTKEY_REDIS_CLUSTER`` (default
``redis+cluster://127.0.0.1:7000``; ``bash scripts/redis-cluster.sh start``
makes one with 3 masters and 3 replicas). Each test uses a prefix of its own
and deletes every key under its hash tags afterwards (KEYS on each master,
DEL one key at a time). Without a cluster the tests skip (fail under
``CI=true``)."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import random
import signal
import socket
import time
import uuid
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster as aio_cluster
from redis.cluster import LoadBalancingStrategy

import intentkey as ik
from intentkey import schema
from intentkey.aio import AsyncGuard
from intentkey.stores import AsyncRedisStore, RedisStore
from support.kill_child import effects_key, naive_process_redis
from support.kill_trials import run_kill_trials
from support.servers import (
    cluster_client, redis_cluster_keys, redis_cluster_masters, redis_cluster_prefix, redis_cluster_url, redis_prefix,
    redis_url,
)
from support.stores import (
    assert_unavailable, concurrent_recoverers_of_one_stale_record, race_for_keys, threads_recover_one_stale_record,
)
from test_stores import RESPONSE, T, attempt, key, record

KILL_TRIALS = int(os.environ.get("IK_REDIS_KILL_TRIALS", "40"))
NAIVE_TRIALS = 6


@pytest.fixture()
def cluster() -> Iterator[Tuple[str, str]]:
    """(the cluster's URL, a fresh prefix), the prefix's keys deleted afterwards."""
    url = redis_cluster_url()
    with redis_cluster_prefix() as prefix:
        yield url, prefix


def _on(url: str, prefix: str, **options: Any) -> str:
    extra = "".join(f"&{k}={v}" for k, v in options.items())
    return f"{url}{'&' if '?' in url else '?'}prefix={prefix}{extra}"


def _by_master(prefix: str, wanted: List[str]) -> Dict[str, List[bytes]]:
    """Which of the keys `wanted` each master holds, asked of each master
    directly (``KEYS {prefix:*``)."""
    want = {k.encode() for k in wanted}
    return {where: sorted(k for k in keys if k in want) for where, keys in redis_cluster_keys(prefix).items()}


def _record_keys(prefix: str, keys: List[str]) -> List[str]:
    """The Redis keys of the records `keys` in the cluster layout under `prefix` (the core's names)."""
    layout = schema.RedisLayout(prefix, True)
    return [schema.redis_record_key(layout, k) for k in keys]


def _bucket(layout: schema.RedisLayout, k: str) -> frozenset:  # type: ignore[type-arg]
    """The keys record `k` shares with every record of its bucket (its
    write scripts' keys but its own): one bucket, one set."""
    return frozenset(schema.redis_insert(layout, record(k)).keys) - {schema.redis_record_key(layout, k)}


# -- options and URLs (no server) ------------------------------------------------------------------


def test_the_url_and_options_are_checked_by_name() -> None:
    cases: List[Tuple[Any, str]] = [
        (lambda: RedisStore("redis+cluster://127.0.0.1:7000?prefix=p&colour=red"), "colour"),
        (lambda: RedisStore("redis+cluster://127.0.0.1:7000?protocol=3"), "protocol"),  # one server passes it on
        (lambda: RedisStore("redis://127.0.0.1:6379/0?socket_timeout=1"), "socket_timeout"),
        (lambda: RedisStore("redis+cluster://127.0.0.1:7000", colour="red"), "colour"),
        (lambda: AsyncRedisStore("redis+cluster://127.0.0.1:7000", colour="red"), "colour"),
        (lambda: RedisStore("redis+cluster://127.0.0.1:7000?wait=0"), "wait"),
        (lambda: RedisStore("redis+cluster://127.0.0.1:7000?wait=many"), "wait"),
        (lambda: RedisStore("redis+cluster://127.0.0.1:7000", wait=True), "wait"),
        (lambda: RedisStore("redis+cluster://127.0.0.1:7000", wait=-1), "wait"),
        (lambda: RedisStore("redis+cluster://127.0.0.1:7000?wait_timeout_ms=5"), "wait_timeout_ms"),
        (lambda: RedisStore("redis+cluster://127.0.0.1:7000?wait=1&wait_timeout_ms=0"), "wait_timeout_ms"),
        (lambda: RedisStore("redis+cluster://127.0.0.1:7000?wait=1", wait_timeout_ms=5000), "wait_timeout_ms"),
        (lambda: RedisStore("redis+cluster://127.0.0.1:7000?wait=1&wait_timeout_ms=2000", timeout=1), "wait_timeout_ms"),
        (lambda: RedisStore("redis+cluster://127.0.0.1:7000/1"), "client_or_url"),
        (lambda: RedisStore("redis+cluster://?prefix=p"), "client_or_url"),
        (lambda: RedisStore("redis+cluster://127.0.0.1"), "client_or_url"),
        (lambda: RedisStore("redis+cluster://127.0.0.1:99999"), "client_or_url"),
        (lambda: RedisStore("redis+cluster://127.0.0.1:7000", timeout=0), "timeout"),
        (lambda: RedisStore(42), "client_or_url"),  # type: ignore[arg-type]
    ]
    for make, name in cases:
        with pytest.raises(ik.IntentkeyError) as e:
            make()
        assert (e.value.code, e.value.field) == ("invalid-argument", name), (name, e.value)
        assert name == "client_or_url" or name in e.value.message, e.value.message
    # What is accepted: the options in the URL or as keywords, the keyword first.
    s = RedisStore("redis+cluster://127.0.0.1:7000,127.0.0.1:7001/?prefix=url&wait=2&wait_timeout_ms=300", prefix="kw")
    assert (s.prefix, s.cluster, s._wait.replicas, s._wait.timeout_ms) == ("kw", True, 2, 300)
    assert repr(s) == "RedisStore(prefix='kw', cluster=True, wait=2, wait_timeout_ms=300, owned=True)"
    s.close()  # never connected: nothing to close
    one = RedisStore("redis://127.0.0.1:6379/0?protocol=3&prefix=p", wait=1)
    assert (one.cluster, one._wait.replicas, one._wait.timeout_ms, one._flow_driver()) == (False, 1, 1000, None)
    one.close()


def test_the_schema_wrappers_hand_over_the_cores_layout() -> None:
    one, many = schema.RedisLayout("p"), schema.RedisLayout("p", True)
    r = record("k1")
    # A prefix alone is the one-server layout; the record key is the insert's record key.
    assert schema.redis_insert("p", r) == schema.redis_insert(one, r)
    for layout in (one, many):
        call = schema.redis_insert(layout, r)
        assert schema.redis_record_key(layout, "k1") in call.keys
    assert schema.redis_record_key(one, "k1") != schema.redis_record_key(many, "k1")
    buckets = schema.redis_cluster_buckets()
    assert len(schema.redis_list(one, None, 5)) == 3 and len(schema.redis_list(one, ik.Status.DONE, 5)) == 1
    assert len(schema.redis_list(many, None, 5)) == 3 * buckets and len(schema.redis_list(many, "done", 5)) == buckets
    assert schema.redis_list(many, None, 0) == [] and schema.redis_list(many, None, -3) == []
    assert len(schema.redis_purge(one, T)) == 1 and len(schema.redis_purge(many, T)) == buckets
    assert {c.script for c in schema.redis_purge(many, T)} == {"purge"}
    # What a list script answered goes to the core as text (the merge order is checked on the cluster below).
    assert schema.redis_listed(10, [[], None]) == []
    with pytest.raises(ik.StoreError) as e:
        schema.redis_listed(10, [[b"odd"]])
    assert e.value.kind == "failed"
    with pytest.raises(ik.StoreError) as e:
        schema.redis_listed(10, [[b"k", b"\xff"]])
    assert e.value.kind == "failed"
    schema.redis_check_replicas(1, 1)
    with pytest.raises(ik.StoreError) as e:
        schema.redis_check_replicas(2, 1)
    assert e.value.kind == "unavailable" and "1 of the 2" in e.value.message
    with pytest.raises(ik.IntentkeyError) as ie:
        schema.redis_check_replicas(-1, 0)
    assert ie.value.field == "wanted"
    schema.redis_check_layout(schema.RedisLayout("{p}"))
    with pytest.raises(ik.IntentkeyError) as ie:
        schema.redis_check_layout(schema.RedisLayout("{p}", True))
    assert (ie.value.code, ie.value.field) == ("invalid-argument", "prefix")
    with pytest.raises(ik.IntentkeyError) as ie:
        schema.redis_record_key(schema.RedisLayout("p", 1), "k")  # type: ignore[arg-type]
    assert ie.value.field == "cluster"


@pytest.mark.parametrize("make", [RedisStore, AsyncRedisStore])
def test_a_cluster_prefix_with_a_brace_is_refused_by_the_core(make: Any) -> None:
    for prefix in ("{pay}", "pay}", "a{b"):
        with pytest.raises(ik.IntentkeyError) as e:
            make(f"redis+cluster://127.0.0.1:7000?prefix={prefix}")
        assert (e.value.code, e.value.field) == ("invalid-argument", "prefix")
        assert "hash tags" in e.value.message
        with pytest.raises(ik.IntentkeyError) as e:
            make("redis+cluster://127.0.0.1:7000", prefix=prefix)
        assert e.value.field == "prefix"
    # On one server a brace is only a character.
    one = RedisStore("redis://127.0.0.1:6379/0", prefix="{pay}")
    assert one.prefix == "{pay}" and not one.cluster
    one.close()
    with pytest.raises(ik.IntentkeyError) as e:
        make("redis+cluster://127.0.0.1:7000", prefix="has space")
    assert e.value.field == "prefix"
    # A given asyncio cluster client (it connects on its first command) is the cluster layout too.
    with pytest.raises(ik.IntentkeyError) as e:
        AsyncRedisStore(aio_cluster.RedisCluster(host="127.0.0.1", port=7000), prefix="{p}")
    assert e.value.field == "prefix"


def test_passwords_never_appear_in_errors_or_repr() -> None:
    secret = "hunter2-s3cret"
    for bad in (f"redis+cluster://root:{secret}@127.0.0.1:7000/0", f"redis+cluster://root:{secret}@127.0.0.1",
                f"redis://root:{secret}@127.0.0.1:notaport/0", f"redis+cluster://root:{secret}@h:1?colour=1"):
        with pytest.raises(ik.IntentkeyError) as e:
            RedisStore(bad)
        assert secret not in str(e.value) and secret not in repr(e.value), bad
    for url in (f"redis+cluster://root:{secret}@127.0.0.1:1", f"redis://root:{secret}@127.0.0.1:1/0"):
        store = RedisStore(url, timeout=1.0)
        try:
            assert secret not in repr(store)
            with pytest.raises(ik.StoreError) as se:
                store.get("k")
            assert se.value.kind == "unavailable"
            assert secret not in se.value.message and secret not in repr(se.value)
        finally:
            store.close()


@pytest.mark.timeout(60)
def test_an_unreachable_cluster_is_unavailable() -> None:
    store = RedisStore("redis+cluster://127.0.0.1:1?prefix=p", timeout=1.0)
    try:
        assert_unavailable(store, attempt("k"), T)
        assert_unavailable(store, attempt("k"), T)  # the client is made again on the next use
    finally:
        store.close()

    async def aio() -> None:
        ars = AsyncRedisStore("redis+cluster://127.0.0.1:1?prefix=p", timeout=1.0)
        try:
            with pytest.raises(ik.StoreError) as e:
                await ars.get("x")
            assert e.value.kind == "unavailable"
            with pytest.raises(ik.IntentkeyError) as ie:
                await AsyncGuard(ars).claim(attempt("k"), now=T)
            assert ie.value.code == "store-unavailable"
        finally:
            await ars.close()

    asyncio.run(aio())


# -- the layout on the cluster ----------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_records_spread_over_every_master_and_list_and_purge_find_them_all(cluster: Tuple[str, str]) -> None:
    url, prefix = cluster
    with RedisStore(url, prefix=prefix) as store:
        assert store.cluster and store._flow_driver() is None  # the generic store path
        n = 240
        keys = [f"spread-{i:03d}-{uuid.uuid4().hex[:6]}" for i in range(n)]
        created = {k: T + random.Random(k).randrange(1000) for k in keys}
        for k in keys:
            assert store.insert(record(k, created=created[k])) is True
        done = keys[: n // 2]  # half of them done, expiring at T + 5000
        for k in done:
            assert store.complete(ik.Completion(k, "a" * 32, RESPONSE, T + 5000, False)) is True

        # Every master holds records, each asked directly; together every record, once.
        layout = schema.RedisLayout(prefix, True)
        by_master = _by_master(prefix, _record_keys(prefix, keys))
        assert len(by_master) >= 3, by_master.keys()
        assert all(by_master.values()), {m: len(ks) for m, ks in by_master.items()}
        assert sorted(k for ks in by_master.values() for k in ks) == sorted(k.encode() for k in _record_keys(prefix, keys))
        # Every bucket holds records: the index of each (the keys of the core's list calls) exists.
        indexes = [c.keys[0] for c in schema.redis_list(layout, ik.Status.IN_FLIGHT, 1)]
        assert len(indexes) == schema.redis_cluster_buckets() == len({_bucket(layout, k) for k in keys})
        assert all(sum(_by_master(prefix, indexes).values(), [])) and len(sum(_by_master(prefix, indexes).values(), [])) == len(indexes)

        # list: every bucket's records, merged oldest first (created_at, then key), at most `limit`.
        in_flight = store.list(ik.Status.IN_FLIGHT, 1000)
        want = sorted(keys[n // 2:], key=lambda k: (created[k], k))
        assert [r.key for r in in_flight] == want
        assert [r.key for r in store.list(ik.Status.IN_FLIGHT, 7)] == want[:7]
        assert [r.key for r in store.list(ik.Status.DONE, 1000)] == sorted(done, key=lambda k: (created[k], k))
        assert store.list(ik.Status.NEEDS_RECONCILIATION, 10) == []
        assert sorted(ik.Guard(store, stale_after_seconds=60).due(now=T + 5000, limit=1000)) == sorted(want)

        # purge: every bucket's expired done records, and nothing else.
        assert store.purge(T + 4999) == 0
        assert store.purge(T + 5000) == len(done)
        assert store.purge(T + 5001) == 0
        assert store.list(ik.Status.DONE, 1000) == []
        left = sorted(k for ks in _by_master(prefix, _record_keys(prefix, keys)).values() for k in ks)
        assert left == sorted(k.encode() for k in _record_keys(prefix, keys[n // 2:]))


@pytest.mark.timeout(300)
def test_a_purge_of_more_than_a_batch_in_one_bucket_goes_on_until_done(cluster: Tuple[str, str]) -> None:
    url, prefix = cluster
    layout = schema.RedisLayout(prefix, True)
    batch = schema.redis_batch()
    # Keys of one bucket, found by the core's keys (never by hashing here).
    target = _bucket(layout, "k-0")
    keys = [k for k in (f"k-{i}" for i in range(40 * (batch + 100))) if _bucket(layout, k) == target][: batch + 37]
    assert len(keys) == batch + 37

    async def fill() -> None:
        async with AsyncRedisStore(url, prefix=prefix) as store:
            for chunk in range(0, len(keys), 100):
                part = keys[chunk:chunk + 100]
                assert all(await asyncio.gather(*(store.insert(record(k)) for k in part)))
                assert all(await asyncio.gather(*(
                    store.complete(ik.Completion(k, "a" * 32, RESPONSE, T + 10, False)) for k in part)))
            assert await store.purge(T + 10) == len(keys)  # the asyncio store's loop, too
            assert await store.list(ik.Status.DONE, 10) == []

    asyncio.run(fill())
    with RedisStore(url, prefix=prefix) as store:
        for k in keys[:batch + 1]:
            assert store.insert(record(k)) is True
            assert store.complete(ik.Completion(k, "a" * 32, RESPONSE, T + 10, False)) is True
        assert store.purge(T + 10) == batch + 1
        assert store.get(keys[0]) is None and store.list(ik.Status.DONE, 10) == []


@pytest.mark.timeout(120)
def test_a_given_cluster_client_is_used_and_kept(cluster: Tuple[str, str]) -> None:
    url, prefix = cluster
    client = cluster_client()
    node = client.get_default_node()
    try:
        with RedisStore(client, prefix=prefix) as store:
            assert store.client is client and store.cluster
            g = ik.Guard(store)
            a = attempt(key("given"))
            assert g.run(a, lambda k: RESPONSE, now=T).outcome == "ran"
            assert g.run(a, lambda k: RESPONSE, now=T + 1).outcome == "replayed"
        assert client.ping()  # the store did not close the caller's client
        # A value intentkey did not write is failed, named by the core's key.
        k = key("garbage")
        client.set(schema.redis_record_key(schema.RedisLayout(prefix, True), k), "not a record")
        with RedisStore(client, prefix=prefix) as store:
            with pytest.raises(ik.StoreError) as e:
                store.get(k)
            assert e.value.kind == "failed"
        # A client that reads from replicas could miss a record just written: refused.
        with pytest.raises(ik.IntentkeyError) as ie:
            RedisStore(cluster_client(load_balancing_strategy=LoadBalancingStrategy.ROUND_ROBIN), prefix=prefix)
        assert ie.value.field == "client_or_url"
    finally:
        client.close()

    async def aio() -> None:
        given = aio_cluster.RedisCluster(host=node.host, port=node.port)
        try:
            store = AsyncRedisStore(given, prefix=prefix)
            g = AsyncGuard(store)
            a = attempt(key("given-async"))
            results = await asyncio.gather(*(g.run(a, _answer, now=T) for _ in range(8)))
            assert sorted(r.outcome for r in results).count("ran") == 1
            await store.close()
            assert await given.ping()
        finally:
            await given.aclose()

    asyncio.run(aio())


async def _answer(k: str) -> ik.Response:
    await asyncio.sleep(0.02)
    return RESPONSE


# -- races ----------------------------------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_16_threads_racing_for_1000_keys_have_one_owner_per_key(cluster: Tuple[str, str]) -> None:
    url, prefix = cluster
    stores = [RedisStore(url, prefix=prefix) for _ in range(16)]  # a client per thread
    try:
        keys = [f"race-{i:04d}" for i in range(1000)]
        race_for_keys(stores, keys)
        assert len(stores[0].list(ik.Status.IN_FLIGHT, 5000)) == 1000
        assert all(_by_master(prefix, _record_keys(prefix, keys)).values())  # the records are on every master
    finally:
        for s in stores:
            s.close()


@pytest.mark.timeout(120)
def test_16_threads_recovering_one_stale_record_re_execute_it_once(cluster: Tuple[str, str]) -> None:
    url, prefix = cluster
    stores = [RedisStore(url, prefix=prefix) for _ in range(16)]
    try:
        threads_recover_one_stale_record(stores)
    finally:
        for s in stores:
            s.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("wait", [None, 1])
def test_16_concurrent_recoverers_of_one_stale_record_re_execute_it_once(cluster: Tuple[str, str],
                                                                         wait: Optional[int]) -> None:
    url, prefix = cluster
    stores = [RedisStore(url, prefix=prefix, wait=wait) for _ in range(16)]
    try:
        concurrent_recoverers_of_one_stale_record(stores)
    finally:
        for s in stores:
            s.close()


# -- kill trials ----------------------------------------------------------------------------------------------


class ClusterKill:
    """The trials' store and effects on the cluster, under one prefix: the
    children write through ``RedisStore(wait=1)``; an effect is an RPUSH
    onto the key's effects list."""

    name = "redis-cluster"

    def __init__(self, prefix: str, store: RedisStore):
        self.prefix, self.store = prefix, store
        self.client = cluster_client()
        self.nodes = redis_cluster_masters(replicas=True)

    def close(self) -> None:
        self.client.close()
        for node in self.nodes:
            node.close()

    def child_config(self) -> Dict[str, Any]:
        return {"backend": "redis-cluster", "prefix": self.prefix, "wait": 1,
                "client_name": f"ik-kill-{uuid.uuid4().hex[:12]}"}

    def effects(self, key: str) -> List[str]:
        return [v.decode() for v in self.client.lrange(effects_key(self.prefix, key), 0, -1)]

    def add_effect(self, key: str, source: str) -> None:
        self.client.rpush(effects_key(self.prefix, key), source)

    def settle(self, lines: List[str]) -> None:
        names = {line.split()[1] for line in lines if line.startswith("client ")}
        deadline = time.monotonic() + 60
        while names:
            held = [c for node in self.nodes for c in node.client_list() if c.get("name") in names]
            if not held:
                break
            assert time.monotonic() < deadline, f"the cluster kept the killed child's connections {held}"
            time.sleep(0.002)

    def naive_redeliver(self, key: str) -> None:
        naive_process_redis(self.client, self.prefix, key, "redelivery", 0)


@pytest.mark.timeout(900)
def test_a_killed_owner_is_redelivered_and_recovered_with_one_effect(cluster: Tuple[str, str]) -> None:
    seed = int(os.environ.get("IK_REDIS_KILL_SEED", str(random.randrange(2**32))))
    url, prefix = cluster
    with RedisStore(url, prefix=prefix) as store:
        backend = ClusterKill(prefix, store)
        try:
            summary = run_kill_trials(backend, KILL_TRIALS, seed, NAIVE_TRIALS)
        finally:
            backend.close()
    print("\n" + summary.line("redis-cluster"))
    assert summary.duplicates == 0
    assert summary.counts["mid-effect"] >= KILL_TRIALS / 6, summary.counts
    assert summary.naive_duplicated >= 1, \
        "the naive control never duplicated its effect: the kills did not land between effect and marker"


# -- wait -------------------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_wait_for_one_replica_holds_and_an_unsatisfiable_wait_is_unavailable(cluster: Tuple[str, str]) -> None:
    url, prefix = cluster
    with RedisStore(_on(url, prefix, wait=1)) as store:
        g = ik.Guard(store)
        a = attempt(key("wait"))
        assert g.run(a, lambda k: RESPONSE, now=T).outcome == "ran"
        assert g.run(a, lambda k: RESPONSE, now=T + 1).outcome == "replayed"
        assert store.insert(record(a.key)) is False  # no write, no WAIT: not inserted
    with RedisStore(url, prefix=prefix, wait=5, wait_timeout_ms=100) as store:
        k = key("five")
        started = time.monotonic()
        with pytest.raises(ik.StoreError) as e:
            store.insert(record(k))
        assert e.value.kind == "unavailable" and "of the 5 replica" in e.value.message
        assert time.monotonic() - started >= 0.09  # WAIT waited for its timeout
        # The write is on the master (it was not acknowledged, not undone).
        assert store.get(k) == record(k)
        with pytest.raises(ik.IntentkeyError) as ie:
            ik.Guard(store).claim(attempt(key("five")), now=T)
        assert ie.value.code == "store-unavailable"

    async def aio() -> None:
        async with AsyncRedisStore(url, prefix=prefix, wait=1) as ok:
            b = attempt(key("wait-async"))
            results = await asyncio.gather(*(AsyncGuard(ok).run(b, _answer, now=T) for _ in range(8)))
            assert [r.outcome for r in results].count("ran") == 1
        async with AsyncRedisStore(url, prefix=prefix, wait=5, wait_timeout_ms=100) as five:
            with pytest.raises(ik.StoreError) as e:
                await five.insert(record(key("five-async")))
            assert e.value.kind == "unavailable"

    asyncio.run(aio())


def _local_pid(node: Any) -> Optional[int]:
    """The process id of `node` (a ``redis.Redis``) when it runs on this machine."""
    host = node.connection_pool.connection_kwargs["host"]
    try:
        local = ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
    except (OSError, ValueError):
        local = False
    pid = int(node.info("server")["process_id"])
    if not local:
        return None
    try:
        os.kill(pid, 0)
    except OSError:
        return None
    return pid


@pytest.mark.timeout(120)
def test_wait_runs_on_the_connection_that_wrote(cluster: Tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    url, prefix = cluster
    layout = schema.RedisLayout(prefix, True)
    # The client's side: each command the store sends, with the identity of the connection it went on.
    sent: List[Tuple[int, str]] = []
    send = redis.connection.AbstractConnection.send_command

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append((id(self), str(args[0])))
        return send(self, *args, **kwargs)

    with RedisStore(url, prefix=prefix, wait=1, wait_timeout_ms=500) as store:
        store.get("warm-up")
        monkeypatch.setattr(redis.connection.AbstractConnection, "send_command", spy)
        assert store.insert(record(key("same"))) is True
        monkeypatch.undo()
        writes = [i for i, (_, c) in enumerate(sent) if c in ("EVALSHA", "EVAL")]
        waits = [i for i, (_, c) in enumerate(sent) if c == "WAIT"]
        assert len(waits) == 1 and writes and sent[waits[0]][0] == sent[writes[-1]][0], sent

    # The server's side: every connection of a client of our own is named; on
    # the master that took the write, the connection whose last command was
    # the script is the one that then ran WAIT (none is left at EVALSHA).
    name = f"ik-wait-{uuid.uuid4().hex[:12]}"
    named = cluster_client(client_name=name)
    try:
        with RedisStore(named, prefix=prefix, wait=1) as store:
            k = key("named")
            assert store.insert(record(k)) is True
            node = named.get_node_from_key(schema.redis_record_key(layout, k))
            master = redis.Redis(host=node.host, port=node.port)  # asked on a connection of its own
            try:
                seen = [c["cmd"] for c in master.client_list() if c.get("name") == name]
            finally:
                master.close()
            assert "wait" in seen and not {"evalsha", "eval"} & set(seen), seen
    finally:
        named.close()

    # A replica that cannot acknowledge (its process stopped, shorter than the
    # cluster's node timeout): the write is on its master only, and unavailable.
    with RedisStore(url, prefix=prefix, wait=1, wait_timeout_ms=200) as store:
        k = key("stopped")
        client = cluster_client()
        try:
            slot = client.keyslot(schema.redis_record_key(layout, k))
            master = client.nodes_manager.slots_cache[slot][0]
            replicas = [redis.Redis(host=n.host, port=n.port) for n in client.nodes_manager.slots_cache[slot][1:]]
        finally:
            client.close()
        try:
            pids = [_local_pid(r) for r in replicas]
            if not replicas or None in pids:
                pytest.skip(f"the replicas of {master.name} are not processes of this machine: cannot stop them")
            for pid in pids:
                assert pid is not None
                os.kill(pid, signal.SIGSTOP)
            try:
                with pytest.raises(ik.StoreError) as e:
                    store.insert(record(k))
            finally:
                for pid in pids:
                    assert pid is not None
                    os.kill(pid, signal.SIGCONT)
            assert e.value.kind == "unavailable" and "reached 0 of the 1" in e.value.message, e.value.message
        finally:
            for r in replicas:
                r.close()
        assert store.get(k) == record(k)  # written on the master, not acknowledged
        deadline = time.monotonic() + 10
        while True:  # the replica catches up: a write is acknowledged again
            try:
                assert store.insert(record(key("after"))) is True
                break
            except ik.StoreError:
                assert time.monotonic() < deadline
                time.sleep(0.05)


@pytest.mark.timeout(60)
def test_wait_on_one_server_without_replicas_is_unavailable_and_skips_the_fast_path() -> None:
    url = redis_url()
    with redis_prefix() as prefix:
        raw = redis.Redis.from_url(url)
        replicas = int(raw.info("replication")["connected_slaves"])
        raw.close()
        if replicas > 0:
            pytest.skip(f"{url} has replicas: WAIT 1 would be satisfied")
        plain = RedisStore(url, prefix=prefix)
        assert plain._flow_driver() is not None  # without wait: the core's flows over raw RESP
        plain.close()
        single = redis.Redis.from_url(url, single_connection_client=True)
        for given in (url, single):
            with RedisStore(given, prefix=prefix, wait=1, wait_timeout_ms=50) as store:
                assert store._flow_driver() is None  # writes go through the store import, each followed by WAIT
                k = key("lonely")
                with pytest.raises(ik.StoreError) as e:
                    store.insert(record(k))
                assert e.value.kind == "unavailable" and "reached 0 of the 1" in e.value.message
                assert store.insert(record(k)) is False  # it was written: no write, no WAIT the second time
                with pytest.raises(ik.IntentkeyError) as ie:
                    ik.Guard(store).claim(attempt(key("lonely")), now=T)
                assert ie.value.code == "store-unavailable"
        single.close()

        async def aio() -> None:
            given = redis.asyncio.Redis.from_url(url, single_connection_client=True)
            for client in (url, given):
                async with AsyncRedisStore(client, prefix=prefix, wait=1, wait_timeout_ms=50) as store:
                    k = key("lonely-async")
                    with pytest.raises(ik.StoreError) as e:
                        await store.insert(record(k))
                    assert e.value.kind == "unavailable" and "reached 0 of the 1" in e.value.message
                    assert await store.insert(record(k)) is False
                    assert await store.get(k) == record(k)
            await given.aclose()

        asyncio.run(aio())
