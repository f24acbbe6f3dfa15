"""Waiting for the first attempt (``wait_max_ms``): a retry that finds its
key in flight with the same payload waits for the first attempt's answer
and replays it, instead of answering 409 at once.

The core decides the wait (its intervals, its budget, claiming again after
each watch, the 409 at the end); these tests check that every Python driver
performs the watch (the ASGI and WSGI middleware, the sync and async guards,
the journal, Celery), that the stores that can tell wake their waiters on a
write rather than at the core's next re-check (memory and SQLite in the
process; PostgreSQL through LISTEN/NOTIFY and Redis through sharded pub/sub,
across store instances), and that the options are named and bounded.

The ASGI app is Starlette's, served by uvicorn on a real port in the test's
event loop (as test_asgi.py serves its apps), hit by httpx. PostgreSQL and
Redis are the shared test servers (support/servers.py: each test has its own
schema or key prefix, removed afterwards; unreachable: a failure with
CI=true, else a skip saying why).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
import time
from contextlib import asynccontextmanager, contextmanager
from typing import Any, AsyncIterator, Callable, Dict, Iterator, List, Optional

import httpx
import pytest
import uvicorn
from flask import Flask, jsonify, request as flask_request
from starlette.applications import Starlette
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse
from starlette.routing import Route
from werkzeug.serving import make_server

import intentkey
from intentkey import IntentkeyError
from intentkey.aio import AsyncGuard, AsyncMemoryStore
from intentkey.asgi import IdempotencyMiddleware
from intentkey.celery import once
from intentkey.http import Endpoint, Request, ServePath
from intentkey.journal import AsyncJournal, Journal, StepInFlight
from intentkey.stores import SQLiteStore
from intentkey.wsgi import IdempotencyMiddleware as WsgiIdempotencyMiddleware
from support.servers import pg_conninfo, pg_schema, redis_prefix, redis_url

SECRET = bytes(range(32))
HEADER = "Idempotency-Key"
# Endpoints, stores and apps stay referenced for the session (see test_asgi.py).
KEEP: List[Any] = []

#: A waiter woken by a notification returns within this many seconds of the
#: write. One that polls sleeps the core's intervals (50 ms doubling to 1 s,
#: each up to a quarter shorter): released 1.6 s after it started waiting,
#: its next look is at least 1.91 s in, 0.31 s after the write.
WOKEN_WITHIN = 0.25
RELEASE_AFTER = 1.6


# -- the stores ---------------------------------------------------------------------------------

STORE_KINDS = ["memory", "memory-sync", "sqlite", "postgres", "redis"]


@contextmanager
def store_place(kind: str) -> Iterator[Dict[str, Any]]:
    """Where `kind`'s stores live for one test (its own schema, prefix or file), removed afterwards."""
    if kind == "postgres":
        conninfo = pg_conninfo()
        with pg_schema() as schema:
            yield {"conninfo": conninfo, "schema": schema}
    elif kind == "redis":
        url = redis_url()
        with redis_prefix() as prefix:
            yield {"url": url, "prefix": prefix}
    elif kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="ik-wait-") as d:
            yield {"path": f"{d}/records.db"}
    else:
        yield {}


def make_store(kind: str, place: Dict[str, Any], shared: Optional[Any] = None) -> Any:
    """A store of `kind` at `place`: a new instance (for the cross-instance
    wake-ups), or `shared` again for the in-process kinds."""
    if kind == "postgres":
        from intentkey.stores import AsyncPostgresStore

        return AsyncPostgresStore(place["conninfo"], schema=place["schema"], notify=True)
    if kind == "redis":
        from intentkey.stores import AsyncRedisStore

        return AsyncRedisStore(place["url"], prefix=place["prefix"])
    if shared is not None:
        return shared
    if kind == "memory":
        return AsyncMemoryStore()
    if kind == "memory-sync":
        return intentkey.MemoryStore()
    if kind == "sqlite":
        return SQLiteStore(place["path"])
    raise AssertionError(kind)


async def close_store(store: Any) -> None:
    close = getattr(store, "close", None)
    if close is None:
        return
    value = close()
    if asyncio.iscoroutine(value):
        await value


# -- an ASGI app under uvicorn, in this event loop ---------------------------------------------------


class Orders:
    """A Starlette app whose POST /orders counts its runs and sleeps `delay` seconds."""

    def __init__(self, delay: float):
        self.runs = 0
        self.started = asyncio.Event()
        self.delay = delay

        async def create(request: StarletteRequest) -> JSONResponse:
            payload = await request.json()
            self.runs += 1
            n = self.runs
            self.started.set()
            await asyncio.sleep(self.delay)
            return JSONResponse({"id": n, "amount": payload.get("amount")}, status_code=201,
                                headers={"Location": f"/orders/{n}"})

        self.app = Starlette(routes=[Route("/orders", create, methods=["POST"])])


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """`app` served by uvicorn on 127.0.0.1 (a free port) in this event loop: its URL."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    task = asyncio.ensure_future(server.serve())
    deadline = time.monotonic() + 10
    while not server.started:
        assert not task.done(), f"uvicorn did not start: {task.exception() if not task.cancelled() else 'cancelled'}"
        assert time.monotonic() < deadline, "uvicorn did not start in 10 s"
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)


def guarded(orders: Orders, store: Any, **options: Any) -> IdempotencyMiddleware:
    middleware = IdempotencyMiddleware(orders.app, secret=SECRET, store=store, profile="ietf", **options)
    KEEP.extend([orders, middleware])
    return middleware


async def post(client: httpx.AsyncClient, key: str, amount: int) -> httpx.Response:
    return await client.post("/orders", json={"amount": amount}, headers={HEADER: key})


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_concurrent_duplicates_wait_for_the_first_and_replay_it(kind: str) -> None:
    """16 duplicates at once of a request whose handler takes 300 ms: one
    runs it, the 15 others wait and replay its answer; no 409."""
    with store_place(kind) as place:
        async def main() -> None:
            store = make_store(kind, place)
            orders = Orders(delay=0.3)
            app = guarded(orders, store, wait_max_ms=5000)
            try:
                async with serving(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
                    started = time.monotonic()
                    answers = await asyncio.gather(*(post(client, "order-1", 10) for _ in range(16)))
                    took = time.monotonic() - started
            finally:
                await close_store(store)
            statuses = [r.status_code for r in answers]
            assert statuses == [201] * 16, statuses
            assert orders.runs == 1
            replayed = [r for r in answers if r.headers.get("Idempotent-Replayed") == "true"]
            assert len(replayed) == 15
            assert {r.content for r in answers} == {answers[0].content}  # byte-identical
            assert json.loads(answers[0].content) == {"id": 1, "amount": 10}
            assert {r.headers["Location"] for r in answers} == {"/orders/1"}
            assert took < 4.0, f"16 duplicates took {took:.2f} s"

        asyncio.run(main())


@pytest.mark.parametrize("kind", ["memory", "memory-sync"])
def test_a_handler_slower_than_the_wait_gets_409_with_retry_after(kind: str) -> None:
    with store_place(kind) as place:
        async def main() -> None:
            store = make_store(kind, place)
            orders = Orders(delay=1.5)
            app = guarded(orders, store, wait_max_ms=200, retry_after_seconds=2)
            async with serving(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
                first = asyncio.ensure_future(post(client, "slow-1", 5))
                await asyncio.wait_for(orders.started.wait(), 5)
                started = time.monotonic()
                busy = await post(client, "slow-1", 5)
                waited = time.monotonic() - started
                done = await first
            assert busy.status_code == 409, busy.text
            assert busy.headers["Retry-After"] == "2"
            assert 0.2 <= waited < 1.2, f"the 409 came after {waited:.3f} s (wait 200 ms, handler 1.5 s)"
            assert done.status_code == 201 and orders.runs == 1

        asyncio.run(main())


@pytest.mark.parametrize("kind", ["memory", "memory-sync", "postgres"])
def test_another_payload_is_422_at_once_not_after_the_wait(kind: str) -> None:
    with store_place(kind) as place:
        async def main() -> None:
            store = make_store(kind, place)
            orders = Orders(delay=1.5)
            app = guarded(orders, store, wait_max_ms=5000)
            try:
                async with serving(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
                    first = asyncio.ensure_future(post(client, "pay-1", 5))
                    await asyncio.wait_for(orders.started.wait(), 5)
                    started = time.monotonic()
                    other = await post(client, "pay-1", 6)
                    took = time.monotonic() - started
                    done = await first
            finally:
                await close_store(store)
            assert other.status_code == 422, other.text
            assert took < 0.5, f"the conflict took {took:.3f} s: it waited"
            assert done.status_code == 201 and orders.runs == 1

        asyncio.run(main())


# -- waking on the write, not at the next re-check -------------------------------------------------------


class PollingStore:
    """An AsyncMemoryStore behind a store that cannot tell when a record
    changed (the negative control: its waiters sleep the core's intervals)."""

    def __init__(self) -> None:
        self.inner = AsyncMemoryStore()

    async def insert(self, record: Any) -> Any:
        return await self.inner.insert(record)

    async def get(self, key: str) -> Any:
        return await self.inner.get(key)

    async def complete(self, completion: Any) -> Any:
        return await self.inner.complete(completion)

    async def replace(self, replacement: Any) -> Any:
        return await self.inner.replace(replacement)

    async def release(self, request: Any) -> Any:
        return await self.inner.release(request)

    async def list(self, status: Any, limit: int) -> Any:
        return await self.inner.list(status, limit)

    async def purge(self, now: int) -> Any:
        return await self.inner.purge(now)


async def _woken_after_release(writer: Any, waiter: Any, key: str) -> float:
    """The first attempt runs over `writer` and holds `key`; a second, over
    `waiter`, waits for it; the first answers 1.6 s later. Seconds from that
    answer to the waiter's replay."""
    attempt = intentkey.Attempt(key, "fp-1", "tenant-1", "pay")
    release, started = asyncio.Event(), asyncio.Event()

    async def slow(_key: str) -> intentkey.Response:
        started.set()
        await release.wait()
        return intentkey.Response.json(201, '{"id":1}')

    def never(_key: str) -> intentkey.Response:
        raise AssertionError("the waiter ran the effect")

    first = asyncio.ensure_future(AsyncGuard(writer).run(attempt, slow))
    await asyncio.wait_for(started.wait(), 5)
    second = asyncio.ensure_future(AsyncGuard(waiter, wait_max_ms=10_000).run(attempt, never))
    await asyncio.sleep(RELEASE_AFTER)
    released = time.monotonic()
    release.set()
    assert (await first).outcome == "ran"
    r = await second
    woke = time.monotonic() - released
    assert r.outcome == "replayed" and r.response is not None and r.response.body == b'{"id":1}', r
    return woke


@pytest.mark.parametrize("kind", ["memory", "postgres", "redis"])
def test_a_waiter_wakes_on_the_write(kind: str) -> None:
    """The waiter is woken by the first attempt's completion: in the process
    (memory), or, with two store instances, through PostgreSQL's LISTEN on
    the core's channel and Redis's sharded pub/sub (the writer's instance
    cannot wake the waiter's any other way)."""
    with store_place(kind) as place:
        async def main() -> float:
            writer = make_store(kind, place)
            waiter = make_store(kind, place, shared=writer)
            try:
                return await _woken_after_release(writer, waiter, f"wake-{kind}")
            finally:
                await close_store(writer)
                if waiter is not writer:
                    assert waiter.listening(), "the waiter's store did not start its listener"
                    await close_store(waiter)
                    assert not waiter.listening()

        woke = asyncio.run(main())
    assert woke < WOKEN_WITHIN, f"the waiter replayed {woke:.3f} s after the write: it was not woken"


def test_without_notifications_the_waiter_polls() -> None:
    """The control: a store that cannot tell is re-checked at the core's
    intervals, so it replays only at its next look, well after the write."""
    store = PollingStore()
    woke = asyncio.run(_woken_after_release(store, store, "poll-1"))
    assert woke >= 0.3, f"a polling waiter replayed {woke:.3f} s after the write"


def test_postgres_without_notify_falls_back_on_the_re_checks() -> None:
    """PostgreSQL's control: the writer does not send the core's notify, so
    the waiter's listener hears nothing and it replays at its next look."""
    from intentkey.stores import AsyncPostgresStore

    with store_place("postgres") as place:
        async def main() -> float:
            writer = AsyncPostgresStore(place["conninfo"], schema=place["schema"])
            waiter = AsyncPostgresStore(place["conninfo"], schema=place["schema"])
            try:
                return await _woken_after_release(writer, waiter, "quiet-1")
            finally:
                await close_store(writer)
                await close_store(waiter)

        woke = asyncio.run(main())
    assert woke >= 0.3, f"the waiter replayed {woke:.3f} s after a write that notified nobody"


def test_served_says_how_long_it_waited() -> None:
    async def main() -> None:
        store = AsyncMemoryStore()
        endpoint = Endpoint(secret=SECRET, wait_max_ms=5000)
        KEEP.append(endpoint)
        guard = AsyncGuard(store)
        req = Request("tenant-1", "POST", "/orders", ["k-1"], "application/json", b'{"n":1}')
        gate = asyncio.Event()

        async def handler(_key: str) -> intentkey.Reply:
            await gate.wait()
            return intentkey.Reply(201, (("Content-Type", "application/json"),), b'{"id":1}')

        first = asyncio.ensure_future(guard.serve(endpoint, req, handler))
        await asyncio.sleep(0.05)
        second = asyncio.ensure_future(guard.serve(endpoint, req, handler))
        await asyncio.sleep(0.3)
        gate.set()
        one, two = await first, await second
        assert one.path == ServePath.HANDLER and one.waited_ms == 0
        assert two.path == ServePath.REPLAY and two.reply is not None and two.reply.body == b'{"id":1}'
        assert 250 <= two.waited_ms < 2000, two.waited_ms
        assert two.ran is False

    asyncio.run(main())


# -- the synchronous drivers -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory-sync", "sqlite"])
def test_sync_guard_run_waits_in_its_thread_and_is_woken(kind: str) -> None:
    with store_place(kind) as place:
        store = make_store(kind, place)
        KEEP.append(store)
        attempt = intentkey.Attempt("sync-1", "fp", "tenant-1", "pay")
        started, release = threading.Event(), threading.Event()
        results: Dict[str, Any] = {}

        def slow(_key: str) -> intentkey.Response:
            started.set()
            assert release.wait(10)
            return intentkey.Response.json(201, '{"id":7}')

        def first() -> None:
            results["first"] = intentkey.Guard(store).run(attempt, slow)

        def second() -> None:
            results["second"] = intentkey.Guard(store, wait_max_ms=10_000).run(attempt, lambda _k: None)
            results["woke"] = time.monotonic()

        one = threading.Thread(target=first)
        one.start()
        assert started.wait(5)
        two = threading.Thread(target=second)
        two.start()
        time.sleep(RELEASE_AFTER)
        released = time.monotonic()
        release.set()
        one.join(10)
        two.join(10)
        assert results["first"].outcome == "ran"
        assert results["second"].outcome == "replayed"
        assert results["second"].response.body == b'{"id":7}'
        woke = results["woke"] - released
        assert woke < WOKEN_WITHIN, f"the waiting thread replayed {woke:.3f} s after the write"
        if kind == "sqlite":
            store.close()


def test_sync_guard_without_a_wait_answers_in_flight_at_once() -> None:
    store = intentkey.MemoryStore()
    attempt = intentkey.Attempt("nowait-1", "fp", "tenant-1", "pay")
    guard = intentkey.Guard(store)
    claim = guard.claim(attempt)
    assert claim.state is intentkey.ClaimState.OWNED
    started = time.monotonic()
    r = guard.run(attempt, lambda _k: None)
    assert r.outcome == "in-flight" and time.monotonic() - started < 0.2
    # The same run with a per-call wait: the whole budget, then in flight.
    started = time.monotonic()
    r = guard.run(attempt, lambda _k: None, wait_max_ms=300)
    took = time.monotonic() - started
    assert r.outcome == "in-flight" and 0.3 <= took < 1.0, (r, took)


class FlaskOrders:
    def __init__(self, delay: float):
        self.runs = 0
        self.lock = threading.Lock()
        app = self.app = Flask(__name__)

        @app.post("/orders")
        def create() -> Any:
            payload = flask_request.get_json()
            with self.lock:
                self.runs += 1
                n = self.runs
            time.sleep(delay)
            return jsonify({"id": n, "amount": payload.get("amount")}), 201


@pytest.mark.parametrize("kind", ["memory-sync", "sqlite"])
def test_wsgi_duplicates_wait_for_the_first_and_replay_it(kind: str) -> None:
    with store_place(kind) as place:
        store = make_store(kind, place)
        orders = FlaskOrders(delay=0.3)
        app = WsgiIdempotencyMiddleware(orders.app, secret=SECRET, store=store, wait_max_ms=5000)
        KEEP.extend([orders, app, store])
        server = make_server("127.0.0.1", 0, app, threaded=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        url = f"http://127.0.0.1:{server.server_port}"
        answers: List[httpx.Response] = []
        lock = threading.Lock()

        def one() -> None:
            with httpx.Client(base_url=url, timeout=30) as client:
                r = client.post("/orders", json={"amount": 3}, headers={HEADER: "wsgi-1"})
            with lock:
                answers.append(r)

        try:
            threads = [threading.Thread(target=one) for _ in range(16)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
        finally:
            server.shutdown()
            thread.join(10)
        assert [r.status_code for r in answers] == [201] * 16, [r.status_code for r in answers]
        assert orders.runs == 1
        assert sum(r.headers.get("Idempotent-Replayed") == "true" for r in answers) == 15
        assert {r.content for r in answers} == {answers[0].content}
        if kind == "sqlite":
            store.close()


def test_journal_step_waits_for_the_attempt_running_it() -> None:
    keyer = intentkey.Keyer(secret=SECRET)
    KEEP.append(keyer)
    run = intentkey.Run("tenant-1", "run-1", 1_700_000_000)
    store = intentkey.MemoryStore()
    started, release = threading.Event(), threading.Event()
    results: Dict[str, Any] = {}

    def plan() -> Dict[str, str]:
        started.set()
        assert release.wait(10)
        return {"text": "first"}

    def first() -> None:
        results["first"] = Journal(intentkey.Guard(store), keyer, run=run).step("plan", plan)

    one = threading.Thread(target=first)
    one.start()
    assert started.wait(5)
    # Without a wait: StepInFlight at once.
    with pytest.raises(StepInFlight):
        Journal(intentkey.Guard(store), keyer, run=run).step("plan", lambda: {"text": "second"})
    waiting = Journal(intentkey.Guard(store), keyer, run=run, wait_max_ms=5000)
    threading.Timer(0.3, release.set).start()
    assert waiting.step("plan", lambda: {"text": "second"}) == {"text": "first"}
    one.join(10)
    assert results["first"] == {"text": "first"}


TOOL_POLICY = {"version": 1, "actionTypes": ["pay"],
               "fields": {"amount": {"class": "key", "normalizer": "decimal", "scale": 2}}}


def test_async_journal_tool_call_waits_for_the_attempt_running_it() -> None:
    keyer = intentkey.Keyer(secret=SECRET, policy=TOOL_POLICY)
    KEEP.append(keyer)
    run = intentkey.Run("tenant-1", "run-2", 1_700_000_000)

    async def main() -> None:
        store = AsyncMemoryStore()
        release = asyncio.Event()
        calls: List[str] = []

        async def pay(key: str) -> Dict[str, Any]:
            calls.append(key)
            await release.wait()
            return {"paid": True}

        first = asyncio.ensure_future(AsyncJournal(AsyncGuard(store), keyer, run=run).tool_call("pay", {"amount": "10.00"}, pay))
        await asyncio.sleep(0.05)
        waiting = AsyncGuard(store, wait_max_ms=5000)  # the guard's wait, taken by the journal
        second = asyncio.ensure_future(AsyncJournal(waiting, keyer, run=run).tool_call("pay", {"amount": "10.00"}, pay))
        await asyncio.sleep(0.3)
        release.set()
        assert await first == {"paid": True}
        assert await second == {"paid": True}
        assert len(calls) == 1

    asyncio.run(main())


class _Retried(Exception):
    pass


class _TaskRequest:
    def __init__(self, id: str, kwargs: Dict[str, Any]):
        self.id, self.kwargs, self.retries = id, kwargs, 0


class _FakeTask:
    """Celery's bound task as once() uses it: request, name, retry."""

    name = "ledger.write"

    def __init__(self, id: str, kwargs: Dict[str, Any]):
        self.request = _TaskRequest(id, kwargs)

    def retry(self, countdown: Any = None, exc: Any = None, max_retries: Any = None) -> Exception:
        raise _Retried(str(exc))


CELERY_POLICY = {"version": 1, "bucketSeconds": 900, "actionTypes": ["ledger.write"],
                 "fields": {"n": {"class": "key", "normalizer": "integer"}}}


def test_celery_delivery_waits_for_the_worker_running_its_intent() -> None:
    keyer = intentkey.Keyer(secret=SECRET, policy=CELERY_POLICY)
    KEEP.append(keyer)
    guard = intentkey.Guard(intentkey.MemoryStore())
    started, release = threading.Event(), threading.Event()
    ledger: List[str] = []

    def effect(self: Any, key: str, *, intent_id: str, n: int) -> Dict[str, Any]:
        ledger.append(key)
        started.set()
        assert release.wait(10)
        return {"intent": intent_id, "n": n}

    plain = once(guard=guard, keyer=keyer, tenant="acme", action="ledger.write")(effect)
    waiting = once(guard=guard, keyer=keyer, tenant="acme", action="ledger.write", wait_max_ms=5000)(effect)
    results: Dict[str, Any] = {}

    def first() -> None:
        results["first"] = plain(_FakeTask("t-1", {}), intent_id="pay-1", n=5)

    one = threading.Thread(target=first)
    one.start()
    assert started.wait(5)
    with pytest.raises(_Retried):  # no wait: the delivery is retried later
        plain(_FakeTask("t-2", {}), intent_id="pay-1", n=5)
    threading.Timer(0.3, release.set).start()
    assert waiting(_FakeTask("t-3", {}), intent_id="pay-1", n=5) == {"intent": "pay-1", "n": 5}
    one.join(10)
    assert results["first"] == {"intent": "pay-1", "n": 5}
    assert len(ledger) == 1


# -- the options -------------------------------------------------------------------------------------------------


def _entry_points(**options: Any) -> Dict[str, Callable[[], Any]]:
    """Every entry point that takes wait_max_ms, made with `options`."""
    keyer = intentkey.Keyer(secret=SECRET)
    KEEP.append(keyer)
    run = intentkey.Run("tenant-1", "run-1", 1_700_000_000)
    mem = intentkey.MemoryStore()
    KEEP.append(mem)

    def keep(value: Any) -> Any:
        KEEP.append(value)
        return value

    return {
        "asgi": lambda: keep(IdempotencyMiddleware(Starlette(), secret=SECRET, store=AsyncMemoryStore(), **options)),
        "asgi-sync-store": lambda: keep(IdempotencyMiddleware(Starlette(), secret=SECRET, store=mem, **options)),
        "wsgi": lambda: keep(WsgiIdempotencyMiddleware(Flask(__name__), secret=SECRET, store=mem, **options)),
        "endpoint": lambda: keep(Endpoint(secret=SECRET, **options)),
        "guard": lambda: intentkey.Guard(mem, **options),
        "async-guard": lambda: AsyncGuard(AsyncMemoryStore(), **options),
        "journal": lambda: Journal(intentkey.Guard(mem), keyer, run=run, **options),
        "async-journal": lambda: AsyncJournal(AsyncGuard(AsyncMemoryStore()), keyer, run=run, **options),
        "celery": lambda: once(guard=intentkey.Guard(mem), keyer=keyer, tenant="acme", **options),
    }


ENTRY_POINTS = list(_entry_points())


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_an_option_typo_is_the_typed_error_naming_it(entry: str) -> None:
    with pytest.raises(IntentkeyError) as e:
        _entry_points(wait_max_mss=5000)[entry]()
    assert e.value.code == "invalid-argument"
    assert e.value.field == "wait_max_mss"
    assert "wait_max_mss" in str(e.value)


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize("value", [60_001, -1, 1 << 32, "5000", 5000.0, True])
def test_a_wait_out_of_range_is_invalid_argument_naming_the_field(entry: str, value: Any) -> None:
    with pytest.raises(IntentkeyError) as e:
        _entry_points(wait_max_ms=value)[entry]()
    assert e.value.code == "invalid-argument", e.value
    assert e.value.field == "wait_max_ms", e.value
    assert "wait_max_ms" in e.value.message and "wait-max-ms" not in e.value.message


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize("value", [0, 1, 60_000])
def test_a_wait_in_range_is_taken(entry: str, value: int) -> None:
    made = _entry_points(wait_max_ms=value)[entry]()
    endpoint = getattr(made, "endpoint", made)
    if isinstance(endpoint, Endpoint):
        assert endpoint.options.wait_max_ms == value
    if isinstance(made, (intentkey.Guard, AsyncGuard)):
        assert made.wait_max_ms == value


def test_a_run_wait_out_of_range_is_refused_before_anything_is_claimed() -> None:
    store = intentkey.MemoryStore()
    attempt = intentkey.Attempt("range-1", "fp", "tenant-1", "pay")
    with pytest.raises(IntentkeyError) as e:
        intentkey.Guard(store).run(attempt, lambda _k: intentkey.Response.json(201, "{}"), wait_max_ms=60_001)
    assert (e.value.code, e.value.field) == ("invalid-argument", "wait_max_ms")
    assert store.get("range-1") is None


def test_the_default_is_no_wait() -> None:
    assert intentkey.http.default_options().wait_max_ms == 0
    middleware = IdempotencyMiddleware(Starlette(), secret=SECRET, store=AsyncMemoryStore())
    KEEP.append(middleware)
    assert middleware.endpoint.options.wait_max_ms == 0
    assert intentkey.Guard(intentkey.MemoryStore()).wait_max_ms == 0
    assert "wait_max_ms" in intentkey.http.OPTION_NAMES


def test_the_postgres_notify_option_is_checked() -> None:
    """The PostgreSQL stores' notify option is checked by name and type (no server needed)."""
    from intentkey.stores import AsyncPostgresStore, PostgresStore

    for make in (PostgresStore, AsyncPostgresStore):
        with pytest.raises(IntentkeyError) as e:
            make("host=127.0.0.1 dbname=test", notify="yes")
        assert (e.value.code, e.value.field) == ("invalid-argument", "notify")
        with pytest.raises(IntentkeyError) as e:
            make("host=127.0.0.1 dbname=test", notfy=True)
        assert (e.value.code, e.value.field) == ("invalid-argument", "notfy")
        assert make("host=127.0.0.1 dbname=test", notify=True).notify is True


def _readme_wait_example() -> str:
    """The Python block that follows the ``wait-example`` marker in py/README.md, verbatim."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    marker = readme.index("<!-- wait-example")
    start = readme.index("```python\n", marker) + len("```python\n")
    return readme[start:readme.index("```", start)]


def test_the_readme_wait_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: Dict[str, Any] = {"__name__": "readme_wait_example"}
    exec(compile(_readme_wait_example(), "README.md (wait-example)", "exec"), namespace)
    KEEP.append(namespace)
    out = capsys.readouterr().out.splitlines()
    assert out == ["[(201, None), (201, b'true'), (201, b'true')]"], out
    assert len(namespace["runs"]) == 1
