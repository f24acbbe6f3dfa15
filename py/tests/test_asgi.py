"""intentkey.asgi.IdempotencyMiddleware under uvicorn on a real port, hit by httpx."""

import asyncio
import json
import socket
import threading
import time

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

import intentkey
from intentkey.aio import AsyncMemoryStore
from intentkey.asgi import IdempotencyMiddleware

SECRET = bytes(range(32))
PROFILES = ("ietf", "stripe", "ofb")
# What each profile answers to a key reused with another payload.
CONFLICT = {"ietf": 422, "stripe": 400, "ofb": 422}
# Every app and middleware made here stays referenced until the session ends:
# an Endpoint collected by the cyclic GC queues the drop of a guest resource
# that wasmtime already closed, and the runtime discards its instance on the
# next call (a flow in progress then traps).
KEEP = []


class Server:
    """An ASGI app served by uvicorn on 127.0.0.1 (a free port), in a thread."""

    def __init__(self, app):
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert self.thread.is_alive(), "uvicorn did not start"
            assert time.monotonic() < deadline, "uvicorn did not start in 10 s"
            time.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)


def post_with_retries(client, url, key, header, payload, *, attempts=20, extra_headers=None):
    """A client's retry loop: the same key each time; a 409 is retried after
    its Retry-After, a dropped connection at once. Returns (response, tries)."""
    headers = {header: key, **(extra_headers or {})}
    statuses = []
    for _ in range(attempts):
        try:
            r = client.post(url, json=payload, headers=headers)
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.ConnectError, httpx.ReadTimeout) as e:
            statuses.append(type(e).__name__)
            time.sleep(0.05)
            continue
        statuses.append(r.status_code)
        if r.status_code == 409:
            time.sleep(float(r.headers.get("Retry-After", "1")))
            continue
        return r, statuses
    raise AssertionError(f"no answer after {attempts} attempts: {statuses}")


class Orders:
    """A FastAPI app whose POST /orders counts its executions."""

    def __init__(self, delay=0.0):
        self.count = 0
        self.finished = 0
        self.keys = []
        self.delay = delay
        self.gate = None
        app = self.app = FastAPI()

        @app.post("/orders")
        async def create(request: Request):
            payload = await request.json()
            self.count += 1
            n = self.count
            if "intentkey.idempotency" in request.scope:  # absent when run unguarded
                self.keys.append(request.scope["intentkey.idempotency"])
            if self.delay:
                await asyncio.sleep(self.delay)
            self.finished += 1
            return JSONResponse({"id": n, "amount": payload.get("amount")}, status_code=201,
                                headers={"Location": f"/orders/{n}", "X-Order": str(n)})

        @app.post("/boom")
        async def boom(request: Request):
            self.keys.append(request.scope["intentkey.idempotency"])
            raise RuntimeError("the payment provider timed out")

        @app.get("/orders")
        async def listing():
            self.count += 1
            return {"count": self.count}


def make(profile, store, **options):
    orders = Orders(options.pop("delay", 0.0))
    errors = []
    orders.app.add_middleware(IdempotencyMiddleware, secret=SECRET, store=store, profile=profile,
                              replay_headers=["X-Order"], on_error=lambda stage, e: errors.append((stage, e)),
                              **options)
    probe = IdempotencyMiddleware(orders.app, secret=SECRET, store=store, profile=profile)
    KEEP.extend([orders, probe])
    return orders, probe.endpoint.header_name, errors


def stores():
    return [pytest.param(AsyncMemoryStore, id="async-store"), pytest.param(intentkey.MemoryStore, id="sync-store")]


def record_of(store, key):
    inner = store.inner if isinstance(store, AsyncMemoryStore) else store
    return inner.get(key)


@pytest.mark.parametrize("store_kind", stores())
@pytest.mark.parametrize("profile", PROFILES)
def test_replay_conflict_and_too_large(profile, store_kind):
    store = store_kind()
    orders, header, errors = make(profile, store, max_body_bytes=1000)
    assert header == {"ietf": "Idempotency-Key", "stripe": "Idempotency-Key", "ofb": "x-idempotency-key"}[profile]
    with Server(orders.app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        first = client.post("/orders", json={"amount": 10}, headers={header: "order-1"})
        assert first.status_code == 201, first.text
        assert json.loads(first.content) == {"id": 1, "amount": 10}
        assert first.headers.get("Idempotent-Replayed") is None
        again = client.post("/orders", json={"amount": 10}, headers={header: "order-1"})
        assert again.status_code == 201
        assert again.content == first.content  # byte-identical
        assert again.headers["Idempotent-Replayed"] == "true"
        for name in ("Content-Type", "Location", "X-Order"):
            assert again.headers[name] == first.headers[name], name
        assert orders.count == 1

        other = client.post("/orders", json={"amount": 11}, headers={header: "order-1"})
        assert other.status_code == CONFLICT[profile], other.text
        assert orders.count == 1

        big = client.post("/orders", content=b'{"amount":"' + b"9" * 2000 + b'"}',
                          headers={header: "order-2", "Content-Type": "application/json"})
        assert big.status_code == 413, big.text
        assert orders.count == 1
        # Not claimed: the same key with a body that fits runs.
        fits = client.post("/orders", json={"amount": 12}, headers={header: "order-2"})
        assert fits.status_code == 201 and orders.count == 2

        # Methods not guarded pass straight through, key or not.
        assert client.get("/orders", headers={header: "order-1"}).json() == {"count": 3}
        assert client.get("/orders", headers={header: "order-1"}).json() == {"count": 4}
    assert errors == []


@pytest.mark.parametrize("store_kind", stores())
@pytest.mark.parametrize("profile", PROFILES)
def test_in_flight_409_then_replay(profile, store_kind):
    store = store_kind()
    orders, header, _ = make(profile, store, delay=1.5, retry_after_seconds=1)
    with Server(orders.app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        results = {}

        def first():
            results["first"] = client.post("/orders", json={"amount": 5}, headers={header: "slow-1"})

        t = threading.Thread(target=first)
        t.start()
        deadline = time.monotonic() + 5
        while orders.count == 0:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        busy = client.post("/orders", json={"amount": 5}, headers={header: "slow-1"})
        assert busy.status_code == 409, busy.text
        assert busy.headers["Retry-After"] == "1"
        final, statuses = post_with_retries(client, "/orders", "slow-1", header, {"amount": 5})
        t.join()
        assert results["first"].status_code == 201
        assert final.status_code == 201 and final.content == results["first"].content
        assert final.headers["Idempotent-Replayed"] == "true"
        assert 409 in statuses
        assert orders.count == 1


@pytest.mark.parametrize("store_kind", stores())
@pytest.mark.parametrize("profile", PROFILES)
def test_handler_raising_leaves_record_in_flight(profile, store_kind):
    store = store_kind()
    orders, header, errors = make(profile, store)
    with Server(orders.app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        failed = client.post("/boom", json={}, headers={header: "boom-1"})
        probe = IdempotencyMiddleware(orders.app, secret=SECRET, store=store, profile=profile)
        KEEP.append(probe)
        expected = probe.endpoint.failed()
        assert failed.status_code == expected.status == 500
        assert b"timed out" not in failed.content  # no exception text reaches the client
        assert [stage for stage, _ in errors] == ["handler"]
        assert isinstance(errors[0][1], RuntimeError)
        record = record_of(store, orders.keys[0].key)
        assert record is not None and record.status == intentkey.Status.IN_FLIGHT
        # A retry does not run the handler again: the outcome is unknown.
        retry = client.post("/boom", json={}, headers={header: "boom-1"})
        assert retry.status_code == 409
        assert len(orders.keys) == 1


@pytest.mark.parametrize("store_kind", stores())
def test_disconnect_does_not_cancel_the_owner(store_kind):
    store = store_kind()
    orders, header, errors = make("ietf", store, delay=1.0)
    with Server(orders.app) as server:
        body = b'{"amount": 7}'
        raw = (f"POST /orders HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               f"Idempotency-Key: gone-1\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            s.sendall(raw)
            deadline = time.monotonic() + 5
            while orders.count == 0:
                assert time.monotonic() < deadline
                time.sleep(0.01)
        # The client is gone; the handler is still running.
        assert orders.finished == 0
        deadline = time.monotonic() + 5
        while orders.finished == 0:
            assert time.monotonic() < deadline, "the handler did not finish after the client left"
            time.sleep(0.02)
        with httpx.Client(base_url=server.url, timeout=10) as client:
            final, _ = post_with_retries(client, "/orders", "gone-1", header, {"amount": 7})
        assert final.status_code == 201
        assert final.headers["Idempotent-Replayed"] == "true"
        assert final.json() == {"id": 1, "amount": 7}
        assert orders.count == 1
        record = record_of(store, orders.keys[0].key)
        assert record.status == intentkey.Status.DONE
    assert errors == []


@pytest.mark.parametrize("store_kind", stores())
def test_tenants_are_isolated(store_kind):
    store = store_kind()
    tenant = lambda scope: dict(scope["headers"]).get(b"x-tenant", b"").decode() or "anonymous"
    orders, header, _ = make("ietf", store, tenant=tenant)
    with Server(orders.app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        a = client.post("/orders", json={"amount": 1}, headers={header: "same", "X-Tenant": "acme"})
        b = client.post("/orders", json={"amount": 1}, headers={header: "same", "X-Tenant": "globex"})
        assert a.status_code == b.status_code == 201
        assert a.json()["id"] == 1 and b.json()["id"] == 2
        assert orders.count == 2
        assert [k.tenant_id for k in orders.keys] == ["acme", "globex"]
        assert orders.keys[0].key != orders.keys[1].key
        again = client.post("/orders", json={"amount": 1}, headers={header: "same", "X-Tenant": "acme"})
        assert again.headers["Idempotent-Replayed"] == "true" and again.json()["id"] == 1
        assert orders.count == 2


async def _async_tenant(scope):
    return "from-a-coroutine"


def test_async_tenant_and_route_functions():
    store = AsyncMemoryStore()
    routes = []

    def route(scope):
        routes.append(scope["path"])
        return "/orders"

    orders, header, _ = make("ietf", store, tenant=_async_tenant, route=route)
    with Server(orders.app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        r = client.post("/orders", json={"amount": 1}, headers={header: "k"})
        assert r.status_code == 201
    assert orders.keys[0].tenant_id == "from-a-coroutine"
    assert routes == ["/orders"]


def test_missing_key_is_refused_and_key_required_false_runs_unguarded():
    orders, header, _ = make("ietf", AsyncMemoryStore())
    with Server(orders.app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        r = client.post("/orders", json={"amount": 1})
        assert r.status_code == 400 and orders.count == 0
    orders, header, _ = make("ietf", AsyncMemoryStore(), key_required=False)
    with Server(orders.app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        # The body (larger than one read) reaches the application whole.
        for _ in range(2):
            r = client.post("/orders", json={"amount": "1" * 100_000})
            assert r.status_code == 201 and r.json()["amount"] == "1" * 100_000
        assert orders.count == 2


@pytest.mark.parametrize("option", ["secrets", "max_body", "onError", "tenant_id"])
def test_unknown_option_is_named(option):
    with pytest.raises(intentkey.IntentkeyError) as e:
        IdempotencyMiddleware(FastAPI(), secret=SECRET, store=AsyncMemoryStore(), **{option: 1})
    assert e.value.code == "invalid-argument"
    assert option in str(e.value)


def test_option_values_are_checked():
    app = FastAPI()
    with pytest.raises(intentkey.IntentkeyError) as e:
        IdempotencyMiddleware(app, store=AsyncMemoryStore())
    assert e.value.code == "invalid-secret"
    with pytest.raises(intentkey.IntentkeyError) as e:
        IdempotencyMiddleware(app, secret=SECRET)
    assert e.value.code == "invalid-argument" and "store" in str(e.value)
    with pytest.raises(intentkey.IntentkeyError) as e:
        IdempotencyMiddleware(app, secret=SECRET, store=AsyncMemoryStore(), tenant=3)
    assert e.value.code == "invalid-argument" and "tenant" in str(e.value)
    with pytest.raises(intentkey.IntentkeyError) as e:
        IdempotencyMiddleware(app, secret=SECRET, store=AsyncMemoryStore(), max_body_bytes="1")
    assert e.value.code == "invalid-argument" and "max_body_bytes" in str(e.value)
    with pytest.raises(intentkey.IntentkeyError) as e:
        IdempotencyMiddleware(app, secret=SECRET, store=AsyncMemoryStore(), profile="paypal")
    assert e.value.code == "invalid-argument" and "profile" in str(e.value)
    middleware = IdempotencyMiddleware(app, secret=SECRET, store=AsyncMemoryStore())
    KEEP.append(middleware)
    assert SECRET.hex() not in repr(middleware.endpoint)


@pytest.mark.parametrize("store_kind", stores())
def test_a_cancelled_request_does_not_cancel_the_owner(store_kind):
    """A server that cancels the request's task when its client leaves: the
    application still runs to its end and the record is finished."""
    store = store_kind()
    orders, header, errors = make("ietf", store, delay=0.5)
    middleware = orders.app.build_middleware_stack()
    KEEP.append(middleware)
    body = b'{"amount": 3}'
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/orders", "raw_path": b"/orders", "root_path": "", "query_string": b"",
             "headers": [(b"content-type", b"application/json"), (b"idempotency-key", b"cancel-1"),
                         (b"content-length", str(len(body)).encode())],
             "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1234)}

    async def main():
        sent = []

        async def receive():
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message):
            sent.append(message)

        task = asyncio.ensure_future(middleware(dict(scope), receive, send))
        while orders.count == 0:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert orders.finished == 0 and sent == []
        for _ in range(200):
            if orders.finished and record_of(store, orders.keys[0].key).status == intentkey.Status.DONE:
                break
            await asyncio.sleep(0.01)
        assert orders.finished == 1
        assert record_of(store, orders.keys[0].key).status == intentkey.Status.DONE
        replayed = []

        async def send2(message):
            replayed.append(message)

        await middleware(dict(scope), receive, send2)
        assert replayed[0]["status"] == 201
        assert (b"idempotent-replayed", b"true") in replayed[0]["headers"]
        assert json.loads(replayed[1]["body"]) == {"id": 1, "amount": 3}

    asyncio.run(main())
    assert orders.count == 1


def _load_example(name):
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parent.parent / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"intentkey_example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    KEEP.append(module)
    return module


def test_the_documented_asgi_example_runs():
    example = _load_example("asgi_app")
    with Server(example.app) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        headers = {"Idempotency-Key": "order-1", "X-Tenant": "acme"}
        first = client.post("/orders", json={"sku": "tea", "qty": 2}, headers=headers)
        again = client.post("/orders", json={"sku": "tea", "qty": 2}, headers=headers)
        other = client.post("/orders", json={"sku": "tea", "qty": 3}, headers=headers)
    assert first.status_code == 201 and first.json() == {"id": 1, "order": {"sku": "tea", "qty": 2}, "tenant": "acme"}
    assert again.content == first.content and again.headers["Idempotent-Replayed"] == "true"
    assert other.status_code == 422
    assert len(example.orders) == 1
