"""Telemetry in the core's vocabulary (intentkey.telemetry), read back with
the OpenTelemetry SDK's in-memory span exporter and metric reader.

A scripted ASGI sequence, on the memory store and on PostgreSQL: owned,
replayed, conflict (422), in flight (409, no wait), waited then replayed
(a middleware with ``wait_max_ms``), released (the handler's 503, a release
status), a handler that fails (owned; the record stays in flight) and its
recovery through the guard (recovered-found). Asserted: one span per
request (and one for the recovery) named by the core with the primary
decision, profile, store kind, key digest, wait and store milliseconds; the
decision counter per decision; the store and wait histograms; the records
gauge from the store's cheap count. And nothing exported (span names,
attributes, events, metric attributes) holds a client key, the secret (hex
or raw) or the payload.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from typing import Any, Dict, Iterator, List, Optional, Tuple

import httpx
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import intentkey as ik
from intentkey import telemetry
from intentkey.aio import AsyncMemoryStore
from intentkey.asgi import IdempotencyMiddleware
from intentkey.wsgi import IdempotencyMiddleware as WsgiMiddleware

from support.servers import pg_conninfo, pg_schema

SECRET = bytes.fromhex("5ec2e7" * 10 + "ab0c")  # 32 bytes, recognizable in hex
KEEP: List[Any] = []
N = telemetry.names()

# Client keys and a payload marker that must never be exported.
KEYS = {name: f"client-key-{name}-{os.urandom(6).hex()}" for name in "ABCDE"}
MARKER = "payload-marker-9f1d2c"


class Otel:
    """An SDK tracer provider and meter provider, both in memory."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def metrics(self) -> Dict[str, List[Any]]:
        """Every data point, by metric name (cumulative)."""
        data = self.reader.get_metrics_data()
        out: Dict[str, List[Any]] = {}
        if data is None:
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                assert sm.scope.name == "intentkey"
                for m in sm.metrics:
                    out.setdefault(m.name, []).extend(m.data.data_points)
        return out


def _payload(n: int) -> Dict[str, Any]:
    return {"amount": n, "note": MARKER}


class Scripted:
    """The app under test: one guarded route whose handler does what the
    request's ``mode`` says, and remembers each storage key it saw."""

    def __init__(self) -> None:
        self.entered: Dict[str, asyncio.Event] = {}
        self.proceed: Dict[str, asyncio.Event] = {}
        self.storage: Dict[str, str] = {}  # client key -> storage key

    async def __call__(self, scope: Dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = dict((bytes(k).decode(), bytes(v).decode()) for k, v in scope["headers"])
        client_key = headers["idempotency-key"]
        self.storage[client_key] = scope["intentkey.idempotency"].key
        mode = headers.get("x-mode", "ok")
        if mode == "block":
            self.entered.setdefault(client_key, asyncio.Event()).set()
            await self.proceed.setdefault(client_key, asyncio.Event()).wait()
        if mode == "fail":
            raise RuntimeError("the handler failed")
        status = 503 if mode == "unavailable" else 201
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps({"ok": True}).encode()})


async def _sequence(make_store: Any, otel: Otel) -> Tuple[Scripted, Any, Dict[str, List[Any]], Dict[str, List[Any]]]:
    """Runs the scripted sequence; (the app, the store, the metrics before
    the recovery, the metrics after)."""
    store = make_store()
    handler = Scripted()
    common = dict(secret=SECRET, store=store, tracer_provider=otel.tracer_provider,
                  meter_provider=otel.meter_provider, on_error=lambda stage, e: None)
    nowait = IdempotencyMiddleware(handler, **common)
    waits = IdempotencyMiddleware(handler, wait_max_ms=5000, **common)
    KEEP.extend([nowait, waits])
    stop = telemetry.observe_records(store, meter_provider=otel.meter_provider)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=nowait), base_url="http://t") as plain, \
                httpx.AsyncClient(transport=httpx.ASGITransport(app=waits), base_url="http://t") as waiting:

            async def post(client: httpx.AsyncClient, name: str, n: int, mode: str = "ok") -> int:
                r = await client.post("/orders", json=_payload(n),
                                      headers={"Idempotency-Key": KEYS[name], "x-mode": mode})
                return r.status_code

            assert await post(plain, "A", 1) == 201  # owned
            assert await post(plain, "A", 1) == 201  # replayed
            assert await post(plain, "A", 2) == 422  # conflict

            handler.proceed["B"] = asyncio.Event()
            first = asyncio.ensure_future(post(plain, "B", 1, "block"))
            await asyncio.wait_for(handler.entered.setdefault(KEYS["B"], asyncio.Event()).wait(), 5)
            assert await post(plain, "B", 1, "block") == 409  # in flight, no wait
            handler.proceed.setdefault(KEYS["B"], asyncio.Event()).set()
            assert await first == 201

            first = asyncio.ensure_future(post(waiting, "C", 1, "block"))
            await asyncio.wait_for(handler.entered.setdefault(KEYS["C"], asyncio.Event()).wait(), 5)
            second = asyncio.ensure_future(post(waiting, "C", 1, "block"))
            await asyncio.sleep(0.3)
            handler.proceed.setdefault(KEYS["C"], asyncio.Event()).set()
            assert await first == 201
            assert await second == 201  # waited, then replayed

            assert await post(plain, "D", 1, "unavailable") == 503  # a release status: released
            assert await post(plain, "E", 1, "fail") == 500  # owned; the record stays in flight

        before = await asyncio.to_thread(otel.metrics)
        guard = nowait.guard
        answer = ik.Response.json(201, '{"ok":true}')
        recovered = await guard.recover(handler.storage[KEYS["E"]], lambda key: ik.Found(answer),
                                        now=int(time.time()) + guard.stale_after_seconds + 1)
        assert recovered.state is ik.RecoveryState.APPLIED
        after = await asyncio.to_thread(otel.metrics)
    finally:
        stop()
        close = getattr(store, "close", None)
        if close is not None:
            await close()
    return handler, store, before, after


def _assert_sequence(kind: str, otel: Otel, handler: Scripted, before: Dict[str, List[Any]],
                     after: Dict[str, List[Any]]) -> None:
    spans = otel.spans.get_finished_spans()
    assert {s.name for s in spans} == {N.span}
    assert all(s.instrumentation_scope.name == "intentkey" for s in spans)
    requests = [s for s in spans if s.attributes[N.profile] == "ietf"]
    recoveries = [s for s in spans if s.attributes[N.profile] == "effect"]
    assert len(requests) == 9 and len(recoveries) == 1
    decided = Counter(s.attributes[N.decision] for s in requests)
    assert decided == Counter({"owned": 4, "replayed": 2, "conflict": 1, "in-flight": 1, "released": 1}), decided
    assert recoveries[0].attributes[N.decision] == "recovered-found"
    for s in spans:
        assert s.attributes[N.store] == kind
        assert set(s.attributes) == {N.decision, N.profile, N.store, N.key_digest, N.wait_ms, N.store_ms}, s.attributes
        assert s.attributes[N.store_ms] > 0, (s.attributes, "store calls are timed")
    # The key digest is the core's digest of the storage key (never the client's key).
    digests = {s.attributes[N.key_digest] for s in requests}
    assert digests == {telemetry.key_digest(handler.storage[KEYS[n]]) for n in "ABCDE"}
    assert recoveries[0].attributes[N.key_digest] == telemetry.key_digest(handler.storage[KEYS["E"]])
    waited = [s for s in requests if s.attributes[N.wait_ms] > 0]
    assert len(waited) == 1 and waited[0].attributes[N.decision] == "replayed"
    assert 200 <= waited[0].attributes[N.wait_ms] < 5000

    counted = {(p.attributes[N.decision], p.attributes[N.store]): p.value for p in after[N.decisions]}
    assert counted == {("owned", kind): 5, ("replayed", kind): 2, ("conflict", kind): 1, ("in-flight", kind): 1,
                       ("waited", kind): 1, ("released", kind): 1, ("recovered-found", kind): 1}, counted
    stores = after[N.store_duration]
    assert [p.attributes for p in stores] == [{N.store: kind}]
    assert stores[0].count >= 9 and stores[0].sum > 0
    waits = after[N.wait_duration]
    assert [(p.attributes, p.count) for p in waits] == [({N.store: kind}, 1)]
    assert waits[0].sum == waited[0].attributes[N.wait_ms]

    def gauge(points: List[Any]) -> Dict[str, int]:
        return {p.attributes[N.status]: p.value for p in points if p.attributes[N.store] == kind}

    assert gauge(before[N.records]) == {"in_flight": 1, "needs_reconciliation": 0}  # E's record
    assert gauge(after[N.records]) == {"in_flight": 0, "needs_reconciliation": 0}  # recovered: done


def _assert_nothing_secret(otel: Otel) -> None:
    """Nothing exported holds a client key, the secret (hex or raw) or the payload."""
    exported: List[str] = []
    for s in otel.spans.get_finished_spans():
        exported.append(s.name)
        exported.extend(f"{k}={v!r}" for k, v in (s.attributes or {}).items())
        for e in s.events:
            exported.append(e.name)
            exported.extend(f"{k}={v!r}" for k, v in (e.attributes or {}).items())
        exported.append(repr(s.status.description))
    for name, points in otel.metrics().items():
        exported.append(name)
        for p in points:
            exported.extend(f"{k}={v!r}" for k, v in (p.attributes or {}).items())
    text = "\n".join(exported)
    assert exported
    forbidden = list(KEYS.values()) + [SECRET.hex(), SECRET.hex().upper(), repr(SECRET), MARKER,
                                       SECRET.decode("latin-1")]
    for word in forbidden:
        assert word not in text, f"{word!r} was exported"


@pytest.mark.parametrize("kind", ["memory", "postgres"])
def test_a_scripted_asgi_sequence_reports_the_cores_decisions(kind: str) -> None:
    otel = Otel()
    if kind == "memory":
        handler, _, before, after = asyncio.run(_sequence(AsyncMemoryStore, otel))
        _assert_sequence("memory", otel, handler, before, after)
        _assert_nothing_secret(otel)
        return
    from intentkey.stores import AsyncPostgresStore

    conninfo = pg_conninfo()
    with pg_schema() as schema:
        handler, _, before, after = asyncio.run(_sequence(lambda: AsyncPostgresStore(conninfo, schema=schema), otel))
    _assert_sequence("postgres", otel, handler, before, after)
    _assert_nothing_secret(otel)


def test_nothing_exported_holds_a_client_key_the_secret_or_the_payload() -> None:
    """Every kind of request at once (the scripted sequence, a refused key,
    a store that fails with the key in its message, a run that raises), and
    nothing exported holds what it must not."""
    from test_faults import LosesFirstInsertAnswer
    from intentkey.http import Endpoint, Request

    otel = Otel()
    asyncio.run(_sequence(AsyncMemoryStore, otel))
    endpoint = Endpoint(secret=SECRET)
    KEEP.append(endpoint)
    store = LosesFirstInsertAnswer()
    guard = ik.Guard(store, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    body = json.dumps(_payload(1)).encode()
    for key in (KEYS["A"], KEYS["B"] + "\x01", "x" * 300):  # an insert that fails; refused keys
        endpoint.serve(guard, Request("tenant-1", "POST", "/orders", [key], "application/json", body),
                       lambda k: ik.Reply(201, (), b"{}"))
    with pytest.raises(RuntimeError):
        guard.run(ik.Attempt(KEYS["C"], "fp", "t", "a"), lambda k: (_ for _ in ()).throw(RuntimeError(MARKER)))
    assert guard.releases.wait(5)
    decided = Counter(s.attributes.get(N.decision) for s in otel.spans.get_finished_spans())
    assert decided["unavailable"] == 1 and decided["refused"] == 2, decided
    _assert_nothing_secret(otel)


def test_wsgi_and_guard_runs_report_spans_and_counts() -> None:
    """The sync path: a span per WSGI request (the memory store's calls run
    inside the component: its key digest comes from the admission), and per
    Guard.run (the run's kind as its profile)."""
    otel = Otel()
    store = ik.MemoryStore()

    def app(environ: Dict[str, Any], start_response: Any) -> List[bytes]:
        start_response("201 Created", [("Content-Type", "application/json")])
        return [b"{}"]

    wsgi = WsgiMiddleware(app, secret=SECRET, store=store, tracer_provider=otel.tracer_provider,
                          meter_provider=otel.meter_provider)
    KEEP.append(wsgi)

    def post(key: str) -> str:
        import io

        body = json.dumps(_payload(1)).encode()
        status: List[str] = []
        environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/orders", "HTTP_IDEMPOTENCY_KEY": key,
                   "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body)}
        b"".join(wsgi(environ, lambda s, h, e=None: status.append(s)))
        return status[0]

    assert post(KEYS["A"]).startswith("201") and post(KEYS["A"]).startswith("201")
    guard = ik.Guard(store, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    attempt = ik.Attempt("storage-key-run", "fp", "t", "a")
    assert guard.run(attempt, lambda key: ik.Response.json(201, "{}")).outcome == "ran"
    assert guard.run(attempt, lambda key: ik.Response.json(201, "{}")).outcome == "replayed"
    assert guard.run(attempt, lambda key: ik.Response.json(201, "{}"), kind="step").outcome == "replayed"
    spans = otel.spans.get_finished_spans()
    got = [(s.attributes[N.profile], s.attributes[N.decision], s.attributes[N.store]) for s in spans]
    assert got == [("ietf", "owned", "memory"), ("ietf", "replayed", "memory"), ("effect", "owned", "memory"),
                   ("effect", "replayed", "memory"), ("step", "replayed", "memory")], got
    assert len({s.attributes[N.key_digest] for s in spans[:2]}) == 1
    assert {s.attributes[N.key_digest] for s in spans[2:]} == {telemetry.key_digest("storage-key-run")}
    counted = {p.attributes[N.decision]: p.value for p in otel.metrics()[N.decisions]}
    assert counted == {"owned": 2, "replayed": 3}
    _assert_nothing_secret(otel)


def test_a_background_release_is_counted_by_the_cores_decision() -> None:
    """A claim whose insert's answer was lost: the request counts
    unavailable, the background release counts released."""
    from test_faults import LosesFirstInsertAnswer, _handler, _request
    from intentkey.http import Endpoint

    otel = Otel()
    guard = ik.Guard(LosesFirstInsertAnswer(), tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    endpoint = Endpoint(secret=SECRET)
    KEEP.append(endpoint)
    served = endpoint.serve(guard, _request(), _handler([]))
    assert served.reply is not None and served.reply.status == 503
    assert guard.releases.wait(5)
    counted = {p.attributes[N.decision]: p.value for p in otel.metrics()[N.decisions]}
    assert counted == {"unavailable": 1, "released": 1}
    [span] = otel.spans.get_finished_spans()
    assert span.attributes[N.decision] == "unavailable"


def test_store_kinds_and_cheap_counts() -> None:
    from intentkey.stores import SQLiteStore

    assert telemetry.store_kind(ik.MemoryStore()) == "memory"
    assert telemetry.store_kind(AsyncMemoryStore()) == "memory"
    assert telemetry.store_kind(object()) == "custom"

    class Mine(AsyncMemoryStore):
        pass

    class Claims(AsyncMemoryStore):
        kind = "postgres"  # a store's own claim is not believed: what it is made of is

    assert telemetry.store_kind(Mine()) == "memory"
    assert telemetry.store_kind(Claims()) == "memory"
    store = SQLiteStore(":memory:")
    assert telemetry.store_kind(store) == "sqlite"
    guard = ik.Guard(store)
    guard.claim(ik.Attempt("k1", "fp", "t", "a"), now=100)
    guard.claim(ik.Attempt("k2", "fp", "t", "a"), now=90)
    assert store.count(ik.Status.IN_FLIGHT) == ik.schema.StatusCount(ik.Status.IN_FLIGHT, 2, 90)
    assert store.count(ik.Status.NEEDS_RECONCILIATION) == ik.schema.StatusCount(ik.Status.NEEDS_RECONCILIATION, 0, None)
    mem = ik.MemoryStore()
    ik.Guard(mem).claim(ik.Attempt("k1", "fp", "t", "a"), now=100)
    assert mem.count(ik.Status.IN_FLIGHT).count == 1
    with pytest.raises(ik.IntentkeyError) as e:
        telemetry.observe_records(object())
    assert (e.value.code, e.value.field) == ("invalid-argument", "store")
    with pytest.raises(ik.IntentkeyError) as e:
        ik.Guard(mem, tracer_provider="not a provider")
    assert (e.value.code, e.value.field) == ("invalid-argument", "tracer_provider")


def test_the_redis_store_counts_by_its_index_keys() -> None:
    from intentkey.stores import RedisStore

    from support.servers import redis_prefix, redis_url

    url = redis_url()
    with redis_prefix() as prefix:
        store = RedisStore(url, prefix=prefix)
        try:
            guard = ik.Guard(store)
            for i in range(3):
                guard.claim(ik.Attempt(f"k{i}", "fp", "t", "a"), now=100)
            assert store.count(ik.Status.IN_FLIGHT).count == 3
            assert store.count(ik.Status.DONE).count == 0
        finally:
            store.close()


def test_without_opentelemetry_the_package_works_and_reports_nothing() -> None:
    """opentelemetry is optional: with it unimportable, the middleware and
    guards work, and telemetry is off."""
    script = r"""
import sys
sys.modules["opentelemetry"] = None  # not installed
import asyncio, intentkey
from intentkey import telemetry
from intentkey.aio import AsyncGuard, AsyncMemoryStore
assert telemetry.AVAILABLE is False
guard = intentkey.Guard(intentkey.MemoryStore())
a = intentkey.Attempt("k", "fp", "t", "a")
assert guard.run(a, lambda k: intentkey.Response.json(201, "{}")).outcome == "ran"
async def main():
    g = AsyncGuard(AsyncMemoryStore())
    return (await g.run(a, lambda k: intentkey.Response.json(201, "{}"))).outcome
assert asyncio.run(main()) == "ran"
try:
    telemetry.observe_records(intentkey.MemoryStore())
except intentkey.IntentkeyError as e:
    assert "intentkey[otel]" in e.message
else:
    raise AssertionError("observe_records without opentelemetry")
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def _readme_telemetry_example() -> str:
    """The Python block that follows the ``telemetry-example`` marker in py/README.md, verbatim."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    marker = readme.index("<!-- telemetry-example")
    start = readme.index("```python\n", marker) + len("```python\n")
    return readme[start:readme.index("```", start)]


def test_the_readme_telemetry_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: Dict[str, Any] = {"__name__": "readme_telemetry_example"}
    exec(compile(_readme_telemetry_example(), "README.md (telemetry-example)", "exec"), namespace)
    KEEP.append(namespace)
    out = capsys.readouterr().out.splitlines()
    assert out == ["['owned', 'replayed']", "[('owned', 1), ('replayed', 1)]",
                   "[('in_flight', 0), ('needs_reconciliation', 0)]"], out
