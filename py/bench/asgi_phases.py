"""Where one HTTP request's time goes in the ASGI middleware, phase by phase:
the Python side of js/bench/HTTP.md ("A memory first request, phase by phase").

In one process, with no socket and no server: ``intentkey.asgi.IdempotencyMiddleware``
(profile ``ietf``) around a trivial ASGI application (it reads the JSON body
``{"sku":"A1","qty":2}`` and answers 201 with a Location and a small JSON
body), called as ``await mw(scope, receive, send)``: a first request (a new
``Idempotency-Key``) and a replay (one key again), over ``AsyncMemoryStore``,
``AsyncRedisStore`` (127.0.0.1:6379, a prefix of its own) and
``AsyncPostgresStore`` (127.0.0.1:5432, a fresh schema ``ik_phases_<pid>``).

The package is not edited: the bench replaces, only around the calls it
times, the middleware's ``Request`` and ``send_reply``, the guard's ``serve``,
its ``StoreCalls.call`` (each store call in a task of its own, bounded by the
store deadline) and the store's own methods (``insert``, ``_claim``, ``get``,
``complete``, ``replace``, ``release``), stamping ``time.perf_counter_ns()``
at each step and summing the time spent inside the store calls; every
replacement is undone at the end. Interleaved with the timed calls, call by
call (the order turning each time), so that the machine's noise falls on all
alike: the same middleware without the stamps (the overhead reported), the
bare application called the same way, and the store's floor in the same
process: Redis ``SET NX``, the application, ``SET XX`` (redis.asyncio), and
one ``GET`` for a replay; PostgreSQL a bare INSERT, the application, a bare
UPDATE, each its own commit through the pool the store uses, and one SELECT
for a replay. A last pass, not in the figures above, also times the calls
into the guest's core functions (``_canon._call_unchecked``, as
py/bench/floor.py does) and counts the component's exports called.

Every answer is checked (201 and a new order on a first request; the stored
status, Location and body, marked replayed, on a replay), and the
application's runs at the end (once per key, never on a replay); a failure
stops the bench with an error. What it writes is removed at the end, failure
or not.

Run: python py/bench/asgi_phases.py [--rounds 5 --requests 400 --only memory,redis,pg]
(the installed package with redis and psycopg from requirements-dev.txt;
INTENTKEY_BENCH_REDIS and INTENTKEY_TEST_PG to point elsewhere). A store that
cannot be reached is skipped with the reason printed (an error when CI=true).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
import uuid
from collections import Counter
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, List, Optional, Set, Tuple

import intentkey
from intentkey import _binding, _canon, asgi
from intentkey.aio import AsyncGuard, AsyncMemoryStore
from intentkey.asgi import IdempotencyMiddleware

BODY = b'{"sku":"A1","qty":2}'
SECRET = bytes.fromhex("5c" * 32)
REDIS_URL = os.environ.get("INTENTKEY_BENCH_REDIS", "redis://127.0.0.1:6379/2")
PG_DSN = os.environ.get("INTENTKEY_TEST_PG", "host=127.0.0.1 port=5432 user=postgres dbname=test")
WARMUP = 100  # iterations run before the counted rounds of each store
STORE_METHODS = ("insert", "_claim", "get", "complete", "replace", "release")

Message = asgi.Message
ASGIApp = Callable[..., Awaitable[None]]  # (scope, receive, send)

# The table's rows: (what the phase covers, its marks on a first request, on a replay).
PHASES: List[Tuple[str, Tuple[str, str], Optional[Tuple[str, str]]]] = [
    ("1. the read: method, tenant, route, key header, the body, the `Request`",
     ("start", "request"), ("start", "request")),
    ("2. the serving task started (`ensure_future`, the shield, a turn of the loop) up to `guard.serve`",
     ("request", "serve"), ("request", "serve")),
    ("3. `serve` up to the app (replay: all of `serve`): admit (storage key HMAC, fingerprint), the claim "
     "(replay: the done record found and decoded)", ("serve", "app"), ("serve", "served")),
    ("4. the app: reads the body, answers 201 (its messages captured)", ("app", "app-end"), None),
    ("5. the app's return to `serve`'s return: the answer taken, the record finished (the core's completion, "
     "the store's complete), `Served`", ("app-end", "served"), None),
    ("6. `serve`'s return to `send_reply`: the task ends, its callbacks, back through the shield",
     ("served", "send"), ("served", "send")),
    ("7. `send_reply`: the reply's headers and body sent", ("send", "sent"), ("send", "sent")),
    ("8. the rest: `send_reply`'s return to the middleware's", ("sent", "end"), ("sent", "end")),
]
MARKS = {"first": ["start", "request", "serve", "app", "app-end", "served", "send", "sent", "end"],
         "replay": ["start", "request", "serve", "served", "send", "sent", "end"]}


class BenchFailure(Exception):
    """The middleware (or the bench) did not behave: no figures are reported."""


class Skip(Exception):
    """A store that cannot be reached."""


def check(ok: bool, what: str) -> None:
    if not ok:
        raise BenchFailure(what)


# ------------------------------------------------------------------ the stamps


class Probe:
    """One request's marks, each with the time spent so far inside the store's
    methods, inside ``StoreCalls.call`` (which holds them) and inside the
    guest's core functions; and the component's exports called."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.marks: List[Tuple[str, int, int, int, int]] = []
        self.store_ns = self.calls_ns = self.guest_ns = self.guest_calls = 0
        self.exports: List[str] = []
        self.inside: Set[str] = set()

    def mark(self, name: str) -> None:
        self.marks.append((name, time.perf_counter_ns(), self.store_ns, self.calls_ns, self.guest_ns))

    def phases(self, kind: str) -> Dict[str, Dict[str, int]]:
        """Each phase of a `kind` request: its time, and within it the store's
        methods, the deadline's task and wait around them, the rest, the guest."""
        names = [m[0] for m in self.marks]
        check(names == MARKS[kind], f"{kind}: the steps seen were {names}, not {MARKS[kind]}")
        at = {m[0]: m[1:] for m in self.marks}
        out = {}
        for label, first, replay in PHASES:
            span = first if kind == "first" else replay
            if span is None:
                continue
            (t0, s0, c0, g0), (t1, s1, c1, g1) = at[span[0]], at[span[1]]
            out[label] = {"total": t1 - t0, "store": s1 - s0, "wait": (c1 - c0) - (s1 - s0),
                          "rest": (t1 - t0) - (c1 - c0), "guest": g1 - g0}
        return out


probe = Probe()


class Patches:
    """Attributes replaced while on, put back as they were by ``off()``."""

    def __init__(self) -> None:
        self._items: List[Tuple[Any, str, Any, Any]] = []
        self.active = False

    def add(self, owner: Any, name: str, wrap: Callable[[Any], Any]) -> None:
        self._items.append((owner, name, wrap(getattr(owner, name)), vars(owner).get(name, Patches)))

    def on(self) -> None:
        for owner, name, replacement, _ in self._items:
            setattr(owner, name, replacement)
        self.active = True

    def off(self) -> None:
        for owner, name, _, original in self._items:
            if original is Patches:  # an instance's method: its class's again
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        self.active = False


def marking(before: str, after: Optional[str] = None) -> Callable[[Any], Any]:
    """A wrapper of a function (`after`: of a coroutine function) marking its steps."""
    def wrap(original: Any) -> Any:
        if after is None:
            def made(*args: Any, **kwargs: Any) -> Any:
                value = original(*args, **kwargs)
                probe.mark(before)
                return value
            return made

        async def awaited(*args: Any, **kwargs: Any) -> Any:
            probe.mark(before)
            try:
                return await original(*args, **kwargs)
            finally:
                probe.mark(after)
        return awaited
    return wrap


def summing(counter: str) -> Callable[[Any], Any]:
    """A wrapper of a coroutine function adding its time to ``probe.<counter>``
    (once: a wrapped method called from another is inside it already)."""
    def wrap(original: Any) -> Any:
        async def timed(*args: Any, **kwargs: Any) -> Any:
            if counter in probe.inside:
                return await original(*args, **kwargs)
            probe.inside.add(counter)
            t0 = time.perf_counter_ns()
            try:
                return await original(*args, **kwargs)
            finally:
                setattr(probe, counter, getattr(probe, counter) + time.perf_counter_ns() - t0)
                probe.inside.discard(counter)
        return timed
    return wrap


def phase_patches(mw: IdempotencyMiddleware, store: Any) -> Patches:
    patches = Patches()
    patches.add(asgi, "Request", marking("request"))
    patches.add(asgi, "send_reply", marking("send", "sent"))
    guard = mw.guard
    if not isinstance(guard, AsyncGuard):
        raise BenchFailure(f"the middleware drives a {type(guard).__name__}, not an AsyncGuard")
    patches.add(guard, "serve", marking("serve", "served"))
    patches.add(guard.calls, "call", summing("calls_ns"))
    for name in STORE_METHODS:
        if hasattr(store, name):
            patches.add(store, name, summing("store_ns"))
    return patches


def guest_patches() -> Patches:
    """The guest's core functions timed and counted, the component's exports named."""
    def unchecked(original: Any) -> Any:
        def call(*args: Any) -> Any:
            t0 = time.perf_counter_ns()
            try:
                return original(*args)
            finally:
                probe.guest_ns += time.perf_counter_ns() - t0
                probe.guest_calls += 1
        return call

    def export(original: Any) -> Any:
        def call(rt: Any, iface: str, name: str, *args: Any) -> Any:
            probe.exports.append(name)
            return original(rt, iface, name, *args)
        return call

    patches = Patches()
    patches.add(_canon, "_call_unchecked", unchecked)
    patches.add(_binding.Runtime, "call", export)
    return patches


# ------------------------------------------------------------------ requests


class App:
    """The application: reads the JSON body and answers 201 with a Location
    and a small JSON body; counts its runs per key."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        self.total = 0

    async def __call__(self, scope: asgi.Scope, receive: asgi.Receive, send: asgi.Send) -> None:
        probe.mark("app")
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        payload = json.loads(body)
        self.runs[key_of(scope)] += 1
        self.total += 1
        order = f"ord_{self.total}"
        out = json.dumps({"id": order, "sku": payload["sku"], "qty": payload["qty"], "status": "accepted"}).encode()
        await send({"type": "http.response.start", "status": 201,
                    "headers": [(b"content-type", b"application/json"), (b"location", f"/orders/{order}".encode()),
                                (b"content-length", str(len(out)).encode())]})
        await send({"type": "http.response.body", "body": out})
        probe.mark("app-end")


def key_of(scope: asgi.Scope) -> str:
    return bytes(dict(scope["headers"])[b"idempotency-key"]).decode()[1:-1]


class Answer:
    """What was sent: status, headers (lower-case names), body."""

    def __init__(self, messages: List[Message]):
        check([m["type"] for m in messages] == ["http.response.start", "http.response.body"],
              f"the messages sent were {[m['type'] for m in messages]}")
        self.status = messages[0]["status"]
        self.headers = {bytes(n).decode().lower(): bytes(v).decode() for n, v in messages[0]["headers"]}
        self.body = bytes(messages[1]["body"])

    def stored(self) -> str:
        return json.dumps({"status": self.status, "location": self.headers["location"], "body": self.body.decode()})


async def call(app: ASGIApp, key: str) -> Tuple[int, Answer]:
    """``await app(scope, receive, send)`` for one request: (ns, what was sent)."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/orders", "raw_path": b"/orders", "query_string": b"", "root_path": "",
             "headers": [(b"host", b"bench"), (b"content-type", b"application/json"),
                         (b"content-length", str(len(BODY)).encode()), (b"idempotency-key", f'"{key}"'.encode())],
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80)}
    read = False
    messages: List[Message] = []

    async def receive() -> Message:
        nonlocal read
        check(not read, "receive was called again after the whole body was read")
        read = True
        return {"type": "http.request", "body": BODY, "more_body": False}

    async def send(message: Message) -> None:
        messages.append(message)

    probe.reset()
    probe.mark("start")
    await app(scope, receive, send)
    probe.mark("end")
    return probe.marks[-1][1] - probe.marks[0][1], Answer(messages)


def floor_apps(app: App, claim: Callable[[str], Awaitable[bool]], complete: Callable[[str, str], Awaitable[None]],
               read: Callable[[str], Awaitable[str]]) -> Tuple[ASGIApp, ASGIApp]:
    """The floor of a first request (claim, the app, its answer stored, then
    sent) and of a replay (the stored answer read and sent)."""
    async def first(scope: Dict[str, Any], receive: Any, send: Any) -> None:
        key = key_of(scope)
        check(await claim(key), "the floor's claim lost on a new key")
        held: List[Message] = []

        async def hold(message: Message) -> None:
            held.append(message)

        await app(scope, receive, hold)
        await complete(key, Answer(held).stored())
        for message in held:
            await send(message)

    async def replay(scope: Dict[str, Any], receive: Any, send: Any) -> None:
        stored = json.loads(await read(key_of(scope)))
        await send({"type": "http.response.start", "status": stored["status"],
                    "headers": [(b"content-type", b"application/json"), (b"location", stored["location"].encode())]})
        await send({"type": "http.response.body", "body": stored["body"].encode()})

    return first, replay


# ------------------------------------------------------------------ the stores


# A store's setting up: (the store, the floor's apps or None, what the floor does).
Made = Tuple[Any, Optional[Tuple[ASGIApp, ASGIApp]], str]
Setup = Callable[[App], Any]


@asynccontextmanager
async def memory(app: App) -> AsyncIterator[Made]:
    yield AsyncMemoryStore(), None, "—"


@asynccontextmanager
async def redis(app: App) -> AsyncIterator[Made]:
    import redis.asyncio as redis_aio
    from intentkey.stores.redis import AsyncRedisStore

    client = redis_aio.Redis.from_url(REDIS_URL)
    prefix = f"ikphases-{os.getpid()}"
    try:
        await client.ping()
    except Exception as exc:  # noqa: BLE001
        await client.aclose()
        raise Skip(f"Redis not reachable at {REDIS_URL} ({exc})") from None
    try:
        async def claim(key: str) -> bool:
            return bool(await client.set(f"{prefix}:floor:{key}", "in_flight", nx=True))

        async def complete(key: str, stored: str) -> None:
            check(bool(await client.set(f"{prefix}:floor:{key}", stored, xx=True)), "the Redis floor lost its record")

        async def read(key: str) -> str:
            value = await client.get(f"{prefix}:floor:{key}")
            if not isinstance(value, bytes):
                raise BenchFailure("the Redis floor lost its record")
            return value.decode()

        yield AsyncRedisStore(client, prefix=prefix), floor_apps(app, claim, complete, read), \
            "`SET NX` + `SET XX`; replay: `GET`"
    finally:
        async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            await client.delete(key)
        await client.aclose()


@asynccontextmanager
async def postgres(app: App) -> AsyncIterator[Made]:
    import psycopg
    from psycopg_pool import AsyncConnectionPool
    from intentkey.stores.postgres import AsyncPostgresStore

    schema = f"ik_phases_{os.getpid()}"
    try:
        admin = await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True)
    except psycopg.OperationalError as exc:
        raise Skip(f"PostgreSQL not reachable at {PG_DSN!r} ({' '.join(str(exc).split())})") from None
    try:
        await admin.execute(f"CREATE SCHEMA {schema}")
        # What the store makes of a connection string: a pool of autocommit connections.
        pool = AsyncConnectionPool(PG_DSN, min_size=1, max_size=4, open=False, kwargs={"autocommit": True})
        await pool.open(wait=True)
        store = AsyncPostgresStore(pool, schema=schema)
        try:
            await store.migrate()
            await admin.execute(f"CREATE TABLE {schema}.floor (LIKE {schema}.intentkey_records INCLUDING ALL)")
            token = "0123456789abcdef0123456789abcdef"

            async def claim(key: str) -> bool:
                async with pool.connection() as conn:
                    cur = await conn.execute(
                        f"INSERT INTO {schema}.floor (key, fingerprint, tenant_id, action_type, status, owner_token, "
                        "created_at, lookups) VALUES (%s, 'fp', 'default', 'POST /orders', 'in_flight', %s, %s, 0) "
                        "ON CONFLICT (key) DO NOTHING", (key, token, int(time.time())), prepare=True)
                    return cur.rowcount == 1

            async def complete(key: str, stored: str) -> None:
                async with pool.connection() as conn:
                    cur = await conn.execute(
                        f"UPDATE {schema}.floor SET status = 'done', response_status = 201, "
                        "response_content_type = 'application/json', response_headers = NULL, "
                        "response_body_bytes = %s, expires_at = %s, next_lookup_at = NULL "
                        "WHERE key = %s AND status = 'in_flight' AND owner_token = %s",
                        (stored.encode(), int(time.time()) + 86400, key, token), prepare=True)
                    check(cur.rowcount == 1, "the PostgreSQL floor lost its record")

            async def read(key: str) -> str:
                async with pool.connection() as conn:
                    cur = await conn.execute(f"SELECT response_body_bytes FROM {schema}.floor WHERE key = %s", (key,),
                                             prepare=True)
                    row = await cur.fetchone()
                    if row is None:
                        raise BenchFailure("the PostgreSQL floor lost its record")
                    return bytes(row[0]).decode()

            yield store, floor_apps(app, claim, complete, read), "INSERT + UPDATE, two commits; replay: SELECT"
        finally:
            await store.close()
            await pool.close()
    finally:
        await admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await admin.close()


STORES: Dict[str, Tuple[str, Setup]] = {"memory": ("AsyncMemoryStore", memory),
                                        "redis": ("AsyncRedisStore", redis),
                                        "pg": ("AsyncPostgresStore", postgres)}


# ------------------------------------------------------------------ the bench

Samples = Dict[str, Dict[str, List[int]]]  # phase -> column -> ns per request


class Run:
    """One store's methods, interleaved call by call, and what they measured."""

    def __init__(self, app: App, mw: IdempotencyMiddleware, floors: Optional[Tuple[ASGIApp, ASGIApp]],
                 patches: Patches):
        self.app, self.mw, self.floors, self.patches = app, mw, floors, patches
        self.counting = False
        self.times: Dict[str, List[int]] = {}
        self.phases: Dict[str, Samples] = {"first": {}, "replay": {}}
        self.guest: Dict[str, Samples] = {"first": {}, "replay": {}}
        self.exports: Dict[str, Counter[str]] = {"first": Counter(), "replay": Counter()}
        self.guest_calls: Counter[str] = Counter()
        self.issued: List[str] = []  # the keys the application must run once each
        self.seeded: Dict[str, Answer] = {}
        self.replay_key = self.floor_key = ""
        self.guest_requests = 0

    def key(self) -> str:
        self.issued.append(str(uuid.uuid4()))
        return self.issued[-1]

    async def seed(self) -> None:
        self.replay_key = self.key()
        self.seeded["mw"] = await self.first("seed", self.mw, self.replay_key)
        if self.floors is not None:
            self.floor_key = self.key()
            self.seeded["floor"] = await self.first("floor seed", self.floors[0], self.floor_key)

    async def first(self, name: str, app: ASGIApp, key: str) -> Answer:
        ns, answer = await call(app, key)
        location = answer.headers.get("location", "")
        check(answer.status == 201 and location.startswith("/orders/ord_")
              and location == f"/orders/{json.loads(answer.body)['id']}" and "idempotent-replayed" not in answer.headers,
              f"{name}: {answer.status} {answer.headers} {answer.body[:100]!r}")
        self.keep(name, ns)
        return answer

    async def replay(self, name: str, app: ASGIApp, key: str, seeded: Answer, marked: bool) -> None:
        ns, answer = await call(app, key)
        check(answer.status == seeded.status and answer.body == seeded.body
              and answer.headers.get("location") == seeded.headers["location"]
              and (answer.headers.get("idempotent-replayed") == "true" or not marked),
              f"{name}: {answer.status} {answer.headers} {answer.body[:100]!r}")
        self.keep(name, ns)

    def keep(self, name: str, ns: int) -> None:
        if self.counting:
            self.times.setdefault(name, []).append(ns)

    async def stamped(self, kind: str, into: Optional[Dict[str, Samples]]) -> None:
        self.patches.on()
        try:
            if kind == "first":
                await self.first("first", self.mw, self.key())
            else:
                await self.replay("replay", self.mw, self.replay_key, self.seeded["mw"], marked=True)
        finally:
            self.patches.off()
        phases = probe.phases(kind)
        if into is not None:
            for label, values in phases.items():
                for column, value in values.items():
                    into[kind].setdefault(label, {}).setdefault(column, []).append(value)

    def methods(self) -> List[Callable[[], Awaitable[Any]]]:
        out: List[Callable[[], Awaitable[Any]]] = [
            lambda: self.first("bare", self.app, self.key()),
            lambda: self.first("plain first", self.mw, self.key()),
            lambda: self.stamped("first", self.phases if self.counting else None),
            lambda: self.stamped("replay", self.phases if self.counting else None),
            lambda: self.replay("plain replay", self.mw, self.replay_key, self.seeded["mw"], marked=True)]
        if self.floors is not None:
            floor_first, floor_replay = self.floors
            out += [lambda: self.first("floor first", floor_first, self.key()),
                    lambda: self.replay("floor replay", floor_replay, self.floor_key, self.seeded["floor"], False)]
        return out

    async def rounds(self, rounds: int, requests: int) -> None:
        """Every method once per turn, the order turning by one each turn."""
        methods = self.methods()
        for counted, turns in ((False, WARMUP), (True, rounds * requests)):
            self.counting = counted
            for i in range(turns):
                for j in range(len(methods)):
                    await methods[(i + j) % len(methods)]()
                if counted and (i + 1) % requests == 0:
                    print(f"  round {(i + 1) // requests} of {rounds}", end="\r", file=sys.stderr, flush=True)
        print(file=sys.stderr)

    async def guest_pass(self, requests: int) -> None:
        """The guest's time and the exports called, in a pass of their own:
        a wrapper around every core call would weigh on the other figures."""
        guest = guest_patches()
        self.counting = False
        for _ in range(requests):
            for kind in ("first", "replay"):
                guest.on()
                try:
                    await self.stamped(kind, self.guest)
                finally:
                    guest.off()
                self.exports[kind].update(probe.exports)
                self.guest_calls[kind] += probe.guest_calls
        self.guest_requests = requests

    def check_runs(self) -> None:
        """The application ran once per key it was given, never on a replay."""
        expected = Counter(self.issued)
        check(self.app.runs == expected and max(expected.values()) == 1,
              f"the application ran {self.app.total} times for {len(expected)} keys "
              f"({len(self.app.runs - expected)} keys ran too often, {len(expected - self.app.runs)} never ran)")


def median_us(values: List[int]) -> float:
    return statistics.median(values) / 1000


def table(name: str, run: Run, floor: str) -> str:
    """The store's markdown table."""
    def cells(kind: str, label: str) -> List[str]:
        got = run.phases[kind].get(label)
        if got is None:
            return ["—"] * 5
        touched = max(v + w for v, w in zip(got["store"], got["wait"])) > 0
        out = [f"{median_us(got['total']):.1f}"]
        out += [f"{median_us(got[c]):.1f}" if touched else "—" for c in ("store", "wait", "rest")]
        out.append(f"{median_us(run.guest[kind][label]['guest']):.1f}")
        return out

    def row(label: str, first: Any, replay: Any) -> str:
        return f"| {label} | {first} |  |  |  |  | {replay} |  |  |  |  |"

    t = run.times
    med = {k: median_us(v) for k, v in t.items()}
    lines = [f"| phase | first | store's methods | their task + wait | the rest | guest¹ "
             f"| replay | store's methods | their task + wait | the rest | guest¹ |", "|---" * 11 + "|"]
    for label, _, _ in PHASES:
        lines.append(f"| {label} | {' | '.join(cells('first', label) + cells('replay', label))} |")
    sums = {k: sum(median_us(v["total"]) for v in run.phases[k].values()) for k in ("first", "replay")}
    lines.append(row("sum of the phases", f"{sums['first']:.1f}", f"{sums['replay']:.1f}"))
    lines.append(row("the middleware's call, stamped", f"{med['first']:.1f}", f"{med['replay']:.1f}"))
    lines.append(row("the middleware's call, not stamped", f"{med['plain first']:.1f}", f"{med['plain replay']:.1f}"))
    lines.append(row("the bare app, called the same way", f"{med['bare']:.1f}", "—"))
    lines.append(row("**overhead over the bare app** (not stamped)", f"**{med['plain first'] - med['bare']:.1f}**",
                     f"**{med['plain replay'] - med['bare']:.1f}**"))
    if "floor first" in med:
        lines.append(row(f"the floor over the bare app ({floor})", f"{med['floor first'] - med['bare']:.1f}",
                         f"{med['floor replay'] - med['bare']:.1f}"))
    n = run.guest_requests

    def crossings(kind: str) -> str:
        exports = ", ".join(f"`{e}`" + (f" ×{c / n:g}" if c != n else "") for e, c in run.exports[kind].items())
        inside = [sum(request) for request in zip(*(v["guest"] for v in run.guest[kind].values()))]
        return (f"{sum(run.exports[kind].values()) / n:g} exports ({exports}); {run.guest_calls[kind] / n:g} "
                f"guest core calls, {median_us(inside):.1f} µs inside them")

    lines.append(row("calls into the component¹", crossings("first"), crossings("replay")))
    return (f"### {name}\n\n" + "\n".join(lines) + f"\n\nMedian µs of {len(t['first'])} requests of each method; "
            f"¹ the guest's column and the calls counted: a separate pass of {n} first requests and {n} replays "
            "with every core call wrapped (`_canon._call_unchecked`). The store's methods include their own calls "
            "into the component, if any.\n")


async def bench(name: str, setup: Setup, args: argparse.Namespace) -> str:
    app = App()
    async with setup(app) as (store, floors, floor):
        mw = IdempotencyMiddleware(app, secret=SECRET, store=store, profile="ietf")
        run = Run(app, mw, floors, phase_patches(mw, store))
        await run.seed()
        await run.rounds(args.rounds, args.requests)
        await run.guest_pass(args.requests)
        run.check_runs()
        return table(name, run, floor)


async def main_async(args: argparse.Namespace) -> int:
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in only if s not in STORES]
    if unknown:
        raise SystemExit(f"--only: unknown store {', '.join(unknown)} (memory, redis, pg)")
    rt = _binding.runtime()
    print(f"# intentkey {intentkey.__version__}, python {platform.python_version()}, canonical-ABI path "
          f"{'on' if rt.fastpath else 'off (no guest column)'}, {args.rounds} rounds × {args.requests} requests "
          f"per method, {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}\n")
    code = 0
    for key in only:
        name, setup = STORES[key]
        print(f"{name} ...", file=sys.stderr)
        try:
            print(await bench(name, setup, args), flush=True)
        except Skip as skip:
            print(f"{name} skipped: {skip}\n", flush=True)
            if os.environ.get("CI") == "true":
                code = 1
        except BenchFailure as failure:
            print(f"FAILED ({name}): {failure}; no figures are reported for it.", file=sys.stderr)
            code = 1
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=400, help="requests of each method per round")
    parser.add_argument("--only", default="memory,redis,pg", help="stores, of memory, redis, pg")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
