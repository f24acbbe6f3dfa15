"""intentkey.wsgi.IdempotencyMiddleware: a Flask app under werkzeug's server on a real port, hit by httpx."""

import threading
import time

import httpx
import pytest
from flask import Flask, abort, jsonify, request
from werkzeug.serving import make_server

import intentkey
from intentkey.aio import AsyncMemoryStore
from intentkey.wsgi import IdempotencyMiddleware

SECRET = bytes(range(32))
PROFILES = ("ietf", "stripe", "ofb")
CONFLICT = {"ietf": 422, "stripe": 400, "ofb": 422}
# Apps and middleware stay referenced for the session (see test_asgi.py).
KEEP = []


class Server:
    """A WSGI app served by werkzeug (threaded) on 127.0.0.1, in a thread."""

    def __init__(self, app):
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.thread.join(10)


def post_with_retries(client, url, key, header, payload, *, attempts=20):
    """A client's retry loop: the same key; 409 retried after Retry-After, a dropped connection at once."""
    statuses = []
    for _ in range(attempts):
        try:
            r = client.post(url, json=payload, headers={header: key})
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.ConnectError) as e:
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
    def __init__(self, delay=0.0):
        self.count = 0
        self.keys = []
        self.closed = 0
        app = self.app = Flask("orders")

        @app.post("/orders")
        def create():
            payload = request.get_json()
            self.count += 1
            n = self.count
            if "intentkey.idempotency" in request.environ:
                self.keys.append(request.environ["intentkey.idempotency"])
            if delay:
                time.sleep(delay)
            response = jsonify({"id": n, "amount": payload.get("amount")})
            response.status_code = 201
            response.headers["Location"] = f"/orders/{n}"
            response.headers["X-Order"] = str(n)
            response.call_on_close(self._closed)
            return response

        @app.post("/boom")
        def boom():
            self.keys.append(request.environ["intentkey.idempotency"])
            raise RuntimeError("the payment provider timed out")

        @app.post("/teapot")
        def teapot():
            self.count += 1
            abort(418)

        @app.get("/orders")
        def listing():
            self.count += 1
            return {"count": self.count}

    def _closed(self):
        self.closed += 1


def make(profile, store=None, **options):
    store = store or intentkey.MemoryStore()
    orders = Orders(options.pop("delay", 0.0))
    errors = []
    orders.app.config["PROPAGATE_EXCEPTIONS"] = True  # a route's exception reaches the middleware
    middleware = IdempotencyMiddleware(orders.app.wsgi_app, secret=SECRET, store=store, profile=profile,
                                       replay_headers=["X-Order"],
                                       on_error=lambda stage, e: errors.append((stage, e)), **options)
    orders.app.wsgi_app = middleware
    KEEP.extend([orders, middleware])
    return orders, middleware, store, errors


@pytest.mark.parametrize("profile", PROFILES)
def test_replay_conflict_and_too_large(profile):
    orders, middleware, store, errors = make(profile, max_body_bytes=1000)
    header = middleware.endpoint.header_name
    with Server(orders.app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        first = client.post("/orders", json={"amount": 10}, headers={header: "order-1"})
        assert first.status_code == 201, first.text
        again = client.post("/orders", json={"amount": 10}, headers={header: "order-1"})
        assert again.status_code == 201 and again.content == first.content
        assert again.headers["Idempotent-Replayed"] == "true"
        for name in ("Content-Type", "Location", "X-Order"):
            assert again.headers[name] == first.headers[name], name
        assert orders.count == 1 and orders.closed == 1  # the body iterable was closed

        other = client.post("/orders", json={"amount": 11}, headers={header: "order-1"})
        assert other.status_code == CONFLICT[profile], other.text

        big = client.post("/orders", content=b'{"amount":"' + b"9" * 5000 + b'"}',
                          headers={header: "order-2", "Content-Type": "application/json"})
        assert big.status_code == 413, big.text
        fits = client.post("/orders", json={"amount": 12}, headers={header: "order-2"})
        assert fits.status_code == 201 and orders.count == 2

        assert client.get("/orders", headers={header: "order-1"}).json() == {"count": 3}
        assert client.get("/orders", headers={header: "order-1"}).json() == {"count": 4}
    assert errors == []


@pytest.mark.parametrize("profile", PROFILES)
def test_in_flight_409_then_replay(profile):
    orders, middleware, store, _ = make(profile, delay=1.5, retry_after_seconds=1)
    header = middleware.endpoint.header_name
    with Server(orders.app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        results = {}
        t = threading.Thread(target=lambda: results.update(
            first=httpx.post(server.url + "/orders", json={"amount": 5}, headers={header: "slow-1"}, timeout=10)))
        t.start()
        deadline = time.monotonic() + 5
        while orders.count == 0:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        busy = client.post("/orders", json={"amount": 5}, headers={header: "slow-1"})
        assert busy.status_code == 409 and busy.headers["Retry-After"] == "1"
        final, statuses = post_with_retries(client, "/orders", "slow-1", header, {"amount": 5})
        t.join()
        assert results["first"].status_code == 201
        assert final.content == results["first"].content and final.headers["Idempotent-Replayed"] == "true"
        assert 409 in statuses and orders.count == 1


@pytest.mark.parametrize("profile", PROFILES)
def test_handler_raising_leaves_record_in_flight(profile):
    orders, middleware, store, errors = make(profile)
    header = middleware.endpoint.header_name
    with Server(orders.app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        failed = client.post("/boom", json={}, headers={header: "boom-1"})
        assert failed.status_code == middleware.endpoint.failed().status == 500
        assert b"timed out" not in failed.content
        assert [stage for stage, _ in errors] == ["handler"] and isinstance(errors[0][1], RuntimeError)
        assert store.get(orders.keys[0].key).status == intentkey.Status.IN_FLIGHT
        assert client.post("/boom", json={}, headers={header: "boom-1"}).status_code == 409
        assert len(orders.keys) == 1


def test_an_http_error_answered_by_flask_is_stored():
    orders, middleware, store, errors = make("ietf")
    with Server(orders.app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        a = client.post("/teapot", json={}, headers={"Idempotency-Key": "tea"})
        b = client.post("/teapot", json={}, headers={"Idempotency-Key": "tea"})
        assert a.status_code == b.status_code == 418
        assert b.headers["Idempotent-Replayed"] == "true" and orders.count == 1


def test_tenants_are_isolated():
    orders, middleware, store, _ = make("ietf", tenant=lambda environ: environ.get("HTTP_X_TENANT", "anonymous"))
    with Server(orders.app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        a = client.post("/orders", json={"amount": 1}, headers={"Idempotency-Key": "same", "X-Tenant": "acme"})
        b = client.post("/orders", json={"amount": 1}, headers={"Idempotency-Key": "same", "X-Tenant": "globex"})
        assert (a.json()["id"], b.json()["id"]) == (1, 2) and orders.count == 2
        assert [k.tenant_id for k in orders.keys] == ["acme", "globex"]
        again = client.post("/orders", json={"amount": 1}, headers={"Idempotency-Key": "same", "X-Tenant": "globex"})
        assert again.headers["Idempotent-Replayed"] == "true" and again.json()["id"] == 2 and orders.count == 2


def test_unguarded_request_reads_its_whole_body():
    orders, middleware, store, _ = make("ietf", key_required=False, max_body_bytes=1000)
    with Server(orders.app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        r = client.post("/orders", json={"amount": "1" * 50_000})
        assert r.status_code == 201 and r.json()["amount"] == "1" * 50_000


@pytest.mark.parametrize("option", ["secrets", "max_body", "onError", "store_url"])
def test_unknown_option_is_named(option):
    with pytest.raises(intentkey.IntentkeyError) as e:
        IdempotencyMiddleware(Flask("x").wsgi_app, secret=SECRET, store=intentkey.MemoryStore(), **{option: 1})
    assert e.value.code == "invalid-argument" and option in str(e.value)


def test_an_async_store_is_refused():
    with pytest.raises(intentkey.IntentkeyError) as e:
        IdempotencyMiddleware(Flask("x").wsgi_app, secret=SECRET, store=AsyncMemoryStore())
    assert e.value.code == "invalid-argument" and "store" in str(e.value)


def test_the_documented_wsgi_example_runs():
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parent.parent / "examples" / "wsgi_app.py"
    spec = importlib.util.spec_from_file_location("intentkey_example_wsgi_app", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    KEEP.append(example)
    with Server(example.app) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        headers = {"Idempotency-Key": "order-1"}
        first = client.post("/orders", json={"sku": "tea"}, headers=headers)
        again = client.post("/orders", json={"sku": "tea"}, headers=headers)
    assert first.status_code == 201 and first.json() == {"id": 1, "tenant": "public"}
    assert again.content == first.content and again.headers["Idempotent-Replayed"] == "true"
    assert len(example.orders) == 1


def test_a_body_shorter_than_announced_claims_nothing():
    import io

    store = intentkey.MemoryStore()
    ran = []

    def app(environ, start_response):
        ran.append(environ["wsgi.input"].read())
        start_response("201 Created", [("Content-Type", "application/json")])
        return [b"{}"]

    guarded = IdempotencyMiddleware(app, secret=b"w" * 32, store=store)
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/orders", "CONTENT_TYPE": "application/json",
               "CONTENT_LENGTH": "10", "HTTP_IDEMPOTENCY_KEY": '"k-short"', "wsgi.input": io.BytesIO(b'{"a"')}
    statuses = []
    body = b"".join(guarded(environ, lambda status, headers, exc_info=None: statuses.append(status)))
    assert statuses == ["400 Bad Request"] and body == b""
    assert ran == [] and store.records == {}, "a truncated body must neither run the app nor claim the key"


def test_repeated_key_header_lines_are_refused_as_in_asgi():
    # A WSGI server joins repeated header lines into one value ("a, b"); in
    # the ietf profile the core reads that value as a list of two keys and
    # refuses it, as it refuses two lines seen apart (ASGI, Node): the handler
    # never runs, nothing is claimed. (stripe and ofb keys may hold ", ": the
    # limit docs/http.md states.)
    profile = "ietf"
    orders, middleware, store, errors = make(profile)
    header = middleware.endpoint.header_name
    endpoint = intentkey.http.Endpoint(secret=SECRET, profile=profile)
    apart = endpoint.admit(intentkey.http.Request("t", "POST", "/orders", ['"k-1"', '"k-2"'], "application/json", b"{}"),
                           now=1_700_000_000)
    assert apart.reply is not None and apart.reply.status == 400
    with Server(orders.app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        both = client.post("/orders", json={"amount": 10}, headers=[(header, '"k-1"'), (header, '"k-2"')])
        assert both.status_code == apart.reply.status, both.text
        assert orders.count == 0 and store.records == {}
