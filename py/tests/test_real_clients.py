"""Real clients retrying through failures against the ASGI middleware under uvicorn:
Stripe's official Python SDK (its own retries, its own Idempotency-Key) in the
``stripe`` profile, and an httpx client with a retry loop in the ``ietf``
profile. A raw TCP proxy in front of uvicorn drops the first answer after the
effect (the charge is recorded, the client never hears of it); a second
attempt racing a slow first one gets 409 and retries. Each time: one charge."""

import asyncio
import socket
import threading
import time
from urllib.parse import parse_qs

import httpx
import pytest
import stripe
import uvicorn
from fastapi import FastAPI, Request

from intentkey.aio import AsyncMemoryStore
from intentkey.asgi import IdempotencyMiddleware

SECRET = bytes(range(32))
KEEP = []  # apps and middleware stay referenced for the session (see test_asgi.py)


class Server:
    def __init__(self, app):
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                                    lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)


class DropFirstAnswers:
    """A TCP proxy to 127.0.0.1:`upstream` that closes the client's connection,
    instead of forwarding them, on the first `drops` answers the server sends."""

    def __init__(self, upstream, drops=1):
        self.upstream = upstream
        self.drops = drops
        self.dropped = 0
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while self.open:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._answers, args=(upstream, client), daemon=True).start()

    @staticmethod
    def _pipe(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _answers(self, upstream, client):
        try:
            while data := upstream.recv(65536):
                with self.lock:
                    drop = self.dropped < self.drops
                    if drop:
                        self.dropped += 1
                if drop:  # the answer is lost: the client's connection closes
                    for s in (client, upstream):
                        try:
                            s.shutdown(socket.SHUT_RDWR)
                        except OSError:
                            pass
                    return
                client.sendall(data)
        except OSError:
            pass
        finally:
            for s in (client, upstream):
                try:
                    s.close()
                except OSError:
                    pass

    def close(self):
        self.open = False
        self.listener.close()


class Payments:
    """A Stripe-shaped API: POST /v1/charges records a charge (form-encoded, as the SDK sends)."""

    def __init__(self, profile, delay=0.0):
        self.charges = []
        self.keys = []
        self.seen = []  # the Idempotency-Key of every request that reached the server
        app = self.inner = FastAPI()

        async def recorder(scope, receive, send):
            if scope["type"] == "http":
                self.seen.append(dict(scope["headers"]).get(b"idempotency-key", b"").decode() or None)
            await app(scope, receive, send)

        self.app = recorder

        @app.post("/v1/charges")
        async def create_charge(request: Request):
            form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}
            if request.headers.get("content-type", "").startswith("application/json"):
                form = await request.json()
            charge = {"id": f"ch_{len(self.charges) + 1:06d}", "object": "charge", "amount": int(form["amount"]),
                      "currency": form["currency"], "status": "succeeded", "livemode": False, "paid": True}
            self.charges.append(charge)  # the effect
            self.keys.append(request.headers.get("idempotency-key"))
            if delay:
                await asyncio.sleep(delay)
            return charge

        def tenant(scope):  # the account is the API key's (Stripe scopes keys per account)
            auth = dict(scope["headers"]).get(b"authorization", b"")
            return auth.decode().removeprefix("Bearer ") or "anonymous"

        app.add_middleware(IdempotencyMiddleware, secret=SECRET, store=AsyncMemoryStore(), profile=profile,
                           tenant=tenant, retry_after_seconds=1)
        # Built now, not on the first request (which would wait for the component to compile).
        app.middleware_stack = app.build_middleware_stack()
        KEEP.append(self)


@pytest.fixture
def stripe_sdk(monkeypatch):
    def point(port):
        monkeypatch.setattr(stripe, "api_key", "sk_test_intentkey_local")
        monkeypatch.setattr(stripe, "api_base", f"http://127.0.0.1:{port}")
        monkeypatch.setattr(stripe, "max_network_retries", 3)
        monkeypatch.setattr(stripe, "default_http_client", None)
        monkeypatch.setattr(stripe, "enable_telemetry", False)

    return point


def test_stripe_sdk_retries_through_a_dropped_answer(stripe_sdk):
    payments = Payments("stripe")
    with Server(payments.app) as server:
        proxy = DropFirstAnswers(server.port, drops=1)
        try:
            stripe_sdk(proxy.port)
            charge = stripe.Charge.create(amount=2000, currency="usd", source="tok_visa")
        finally:
            proxy.close()
    assert proxy.dropped == 1
    assert charge.id == "ch_000001" and charge.amount == 2000
    assert len(payments.charges) == 1  # one charge, though the SDK sent it twice
    # The SDK set its own key, and sent it again on the retry.
    assert payments.keys[0] is not None and len(payments.keys[0]) >= 16
    assert charge.last_response.headers.get("Idempotent-Replayed") == "true"
    assert payments.seen == [payments.keys[0]] * 2


def test_stripe_sdk_retries_a_409_while_the_first_attempt_runs(stripe_sdk):
    payments = Payments("stripe", delay=1.0)
    results = {}
    with Server(payments.app) as server:
        stripe_sdk(server.port)

        def attempt(name):
            results[name] = stripe.Charge.create(amount=500, currency="eur", source="tok_visa",
                                                 idempotency_key="order-77-payment")

        first = threading.Thread(target=attempt, args=("first",))
        first.start()
        deadline = time.monotonic() + 5
        while not payments.charges:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        # A second attempt (another worker, the same key) while the first is in flight.
        raw = httpx.post(f"http://127.0.0.1:{server.port}/v1/charges",
                         content=b"amount=500&currency=eur&source=tok_visa",
                         headers={"Idempotency-Key": "order-77-payment",
                                  "Content-Type": "application/x-www-form-urlencoded",
                                  "Authorization": "Bearer sk_test_intentkey_local"})
        assert raw.status_code == 409 and raw.json()["error"]["type"] == "idempotency_error"
        attempt("second")
        first.join()
    assert len(payments.charges) == 1
    assert results["first"].id == results["second"].id == "ch_000001"
    assert results["second"].last_response.headers.get("Idempotent-Replayed") == "true"
    # The second attempt: once by hand, then the SDK's own 409, its retry (and possibly one more).
    assert payments.seen.count("order-77-payment") >= 4


def test_httpx_client_retries_through_a_dropped_answer():
    payments = Payments("ietf", delay=0.5)
    with Server(payments.app) as server:
        proxy = DropFirstAnswers(server.port, drops=1)
        try:
            statuses = []
            answer = None
            with httpx.Client(base_url=f"http://127.0.0.1:{proxy.port}", timeout=10) as client:
                for _ in range(10):
                    try:
                        r = client.post("/v1/charges", json={"amount": 900, "currency": "brl"},
                                        headers={"Idempotency-Key": "pay-900", "Authorization": "Bearer acct_1"})
                    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.ConnectError) as e:
                        statuses.append(type(e).__name__)
                        continue
                    statuses.append(r.status_code)
                    if r.status_code == 409:
                        time.sleep(float(r.headers["Retry-After"]))
                        continue
                    answer = r
                    break
        finally:
            proxy.close()
    assert proxy.dropped == 1
    assert answer is not None, statuses
    assert answer.status_code == 200 and answer.headers["Idempotent-Replayed"] == "true"
    assert answer.json()["id"] == "ch_000001"
    assert statuses[0] in ("RemoteProtocolError", "ReadError") and statuses[1:] == [200]
    assert len(payments.charges) == 1


def test_a_concurrent_ietf_attempt_gets_409_then_the_replay():
    payments = Payments("ietf", delay=1.0)
    with Server(payments.app) as server:
        url = f"http://127.0.0.1:{server.port}/v1/charges"
        headers = {"Idempotency-Key": "pay-1", "Authorization": "Bearer acct_1"}
        results = {}
        t = threading.Thread(target=lambda: results.update(first=httpx.post(
            url, json={"amount": 100, "currency": "usd"}, headers=headers, timeout=10)))
        t.start()
        deadline = time.monotonic() + 5
        while not payments.charges:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        statuses = []
        while True:
            r = httpx.post(url, json={"amount": 100, "currency": "usd"}, headers=headers, timeout=10)
            statuses.append(r.status_code)
            if r.status_code != 409:
                break
            time.sleep(float(r.headers["Retry-After"]))
        t.join()
    assert statuses[0] == 409 and statuses[-1] == 200
    assert r.content == results["first"].content and r.headers["Idempotent-Replayed"] == "true"
    assert len(payments.charges) == 1
