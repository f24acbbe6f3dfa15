"""ASGI idempotency middleware (Starlette, FastAPI, any ASGI 3 server).

>>> from fastapi import FastAPI                                 # doctest: +SKIP
>>> from intentkey.asgi import IdempotencyMiddleware            # doctest: +SKIP
>>> app = FastAPI()                                             # doctest: +SKIP
>>> app.add_middleware(IdempotencyMiddleware, secret=SECRET, store=AsyncMemoryStore(), profile="ietf")  # doctest: +SKIP

The middleware is a driver of the core's serve flow: it reads the request
(the key header, the body up to ``max_body_bytes``), hands it to the flow,
which admits, claims, decides and finishes, and runs the application only when
this request owns the key. What the application answers is held back until
the record is finished, then sent as it was written; a replay is sent with the
headers and bytes the store kept.

With an asynchronous store (:class:`intentkey.aio.AsyncStore`, detected by
``store.insert`` being a coroutine function) the flow is driven on the event
loop by :meth:`intentkey.aio.AsyncGuard.serve`. With a synchronous store
(:class:`intentkey.Store`) :meth:`intentkey.http.Endpoint.serve` runs in a
worker thread and the application runs on the event loop.

A client that disconnects does not cancel the owner: the application runs to
its end and the record is finished (the serving runs in its own task, which a
cancelled request does not cancel). An application that raises leaves the
record in flight; the client gets the core's 500 and ``on_error("handler",
error)`` hears it.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Awaitable, Callable, Dict, List, MutableMapping, Optional, Sequence, Set, Tuple, Union

from ._middleware import SCOPE_KEY, Config, Idempotency, OnError, configure, error_status
from .aio import AsyncGuard
from .claims import Guard
from .http import Raised, Request, Served, ServePath
from .keys import Keyring, SecretInput
from .types import Reply

__all__ = ["IdempotencyMiddleware", "Idempotency", "SCOPE_KEY"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class _Incomplete(Exception):
    """The application returned (or raised after starting) without finishing its answer."""


class _Capture:
    """What the application sends, held back: status, headers, body."""

    def __init__(self) -> None:
        self.status: Optional[int] = None
        self.headers: List[Tuple[str, str]] = []
        self.chunks: List[bytes] = []
        self.complete = False

    async def send(self, message: Message) -> None:
        kind = message.get("type")
        if kind == "http.response.start":
            self.status = int(message["status"])
            self.headers = [(bytes(n).decode("latin-1"), bytes(v).decode("latin-1"))
                            for n, v in message.get("headers", ())]
        elif kind == "http.response.body":
            if self.complete:
                return
            self.chunks.append(bytes(message.get("body", b"")))
            if not message.get("more_body", False):
                self.complete = True

    def reply(self) -> Reply:
        assert self.status is not None
        return Reply(self.status, tuple(self.headers), b"".join(self.chunks))


def _report(config: Config) -> Callable[["asyncio.Future[Served]"], None]:
    def report(task: "asyncio.Future[Served]") -> None:
        if not task.cancelled() and task.exception() is None:
            served = task.result()
            if served.path != ServePath.UNGUARDED:
                config.report_served(served)

    return report


async def send_reply(send: Send, reply: Reply) -> None:
    """Sends a reply: its headers in order (``Content-Length`` set to the body's length)."""
    headers = [(n.lower().encode("latin-1"), v.encode("latin-1")) for n, v in reply.headers
               if n.lower() not in ("content-length", "transfer-encoding")]
    headers.append((b"content-length", str(len(reply.body)).encode("ascii")))
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": reply.body, "more_body": False})


async def _value(fn: Callable[[Any], Any], scope: Scope) -> Any:
    value = fn(scope)
    return await value if inspect.isawaitable(value) else value


class IdempotencyMiddleware:
    """Idempotency for an ASGI application: requests whose method is guarded
    (default ``intentkey.http.default_methods()``: POST and PATCH) run at most
    once per key.

    ``secret`` or ``keyring`` (exactly one) and ``store`` are required.
    ``profile``: ``ietf`` (``Idempotency-Key``), ``stripe`` or ``ofb``
    (``x-idempotency-key``). ``tenant``: a constant or ``tenant(scope)`` (may
    be a coroutine function) answering the tenant id the key is scoped to
    (default ``"default"``). ``route(scope)``: the route fingerprinted (default
    the path). ``methods``, ``policies``, ``release_statuses``, ``ttl_seconds``,
    ``fast_completion``, ``now`` (whole seconds) and the profile's options
    (``key_required``, ``max_body_bytes``, ``max_stored_bytes``,
    ``replay_headers``, ``strict_key_syntax``, ``retry_after_seconds``).
    ``wait_max_ms`` (0 to 60000; default 0, off): how long a retry that
    finds its key in flight with the same payload waits for the first
    attempt's answer (replayed when it comes) before the 409; the wait is
    ``asyncio.sleep`` (a worker thread's sleep with a synchronous store),
    woken early by a store that notifies.
    ``store_deadline_ms`` (an asynchronous store; default the core's,
    2000): the deadline of each store call. A call that has not answered by
    then is a failure (a claim's: 503 at once; a completion's: tried again);
    a claim whose insert did not answer (its answer may have been lost; the
    handler never ran) is released in a task of its own once the store
    answers, so a retry is not answered 409 until recovery.
    ``tracer_provider``, ``meter_provider``: where the spans and metrics of
    :mod:`intentkey.telemetry` go (default: the global providers, when
    ``opentelemetry-api`` is installed).
    ``on_error(stage, error)`` hears what the client does not see: stage
    ``"handler"`` (the application raised), ``"claim"`` or ``"complete"`` (a
    store failure), ``"release"`` (a claim whose handler never ran could not
    be released: recovery settles it). Any other option name is
    ``invalid-argument``.

    The owner's application finds :class:`Idempotency` (``key``,
    ``tenant_id``) under ``scope["intentkey.idempotency"]``."""

    def __init__(self, app: ASGIApp, *, secret: Optional[SecretInput] = None, keyring: Optional[Keyring] = None,
                 store: Any = None, profile: str = "ietf",
                 tenant: Union[str, Callable[[Scope], Union[str, Awaitable[str]]]] = "default",
                 route: Optional[Callable[[Scope], Union[str, Awaitable[str]]]] = None,
                 methods: Optional[Sequence[str]] = None, policies: Optional[Dict[str, Any]] = None,
                 release_statuses: Optional[Sequence[int]] = None, ttl_seconds: Optional[int] = None,
                 fast_completion: bool = False, now: Optional[Callable[[], float]] = None,
                 on_error: Optional[OnError] = None, key_required: Optional[bool] = None,
                 max_body_bytes: Optional[int] = None, max_stored_bytes: Optional[int] = None,
                 replay_headers: Optional[Sequence[str]] = None, strict_key_syntax: Optional[bool] = None,
                 retry_after_seconds: Optional[int] = None, wait_max_ms: int = 0,
                 store_deadline_ms: Optional[int] = None, tracer_provider: Any = None, meter_provider: Any = None,
                 **unknown: Any):
        self.app = app
        self.config: Config = configure(
            "intentkey.asgi.IdempotencyMiddleware", secret=secret, keyring=keyring, store=store, profile=profile,
            tenant=tenant, route=route, methods=methods, policies=policies, release_statuses=release_statuses,
            ttl_seconds=ttl_seconds, fast_completion=fast_completion, now=now, on_error=on_error, unknown=unknown,
            endpoint_options=dict(key_required=key_required, max_body_bytes=max_body_bytes,
                                  max_stored_bytes=max_stored_bytes, replay_headers=replay_headers,
                                  strict_key_syntax=strict_key_syntax, retry_after_seconds=retry_after_seconds,
                                  wait_max_ms=wait_max_ms),
            allow_async=True, store_deadline_ms=store_deadline_ms, tracer_provider=tracer_provider,
            meter_provider=meter_provider)
        self._header = self.config.header_name.lower().encode("latin-1")
        self._serving: Set["asyncio.Task[Any]"] = set()

    @property
    def endpoint(self) -> Any:
        """The :class:`intentkey.http.Endpoint` the middleware answers with."""
        return self.config.endpoint

    @property
    def guard(self) -> Union[Guard, AsyncGuard]:
        """The guard over the store."""
        return self.config.guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or not self.config.guards(str(scope.get("method", ""))):
            await self.app(scope, receive, send)
            return
        config = self.config
        tenant_id = config.tenant_value(config.tenant if isinstance(config.tenant, str)
                                        else await _value(config.tenant, scope))
        route = config.route_value(await _value(config.route, scope)) if config.route is not None else (
            str(scope.get("path") or "/"))
        key_values: List[str] = []
        content_type: Optional[str] = None
        for name, value in scope.get("headers", ()):
            lower = bytes(name).lower()
            if lower == self._header:
                key_values.append(bytes(value).decode("latin-1"))
            elif lower == b"content-type" and content_type is None:
                content_type = bytes(value).decode("latin-1")

        # The body, up to one byte past the limit (the core answers 413 past it).
        limit = config.max_body_bytes
        read: List[Message] = []
        size = 0
        complete = False
        while size <= limit:
            message = await receive()
            if message.get("type") == "http.disconnect":
                return  # gone before the request was whole: nothing was claimed
            read.append(message)
            size += len(message.get("body", b""))
            if not message.get("more_body", False):
                complete = True
                break
        body = b"".join(bytes(m.get("body", b"")) for m in read)[: limit + 1]
        request = Request(tenant_id, str(scope["method"]), route, key_values, content_type, body)

        # Served in its own task: a request cancelled (a client gone, a server
        # cancelling its handler) does not cancel the owner's application.
        task = asyncio.ensure_future(self._serve(scope, request, body if complete else None))
        self._serving.add(task)
        task.add_done_callback(self._serving.discard)
        # Reported when the serving ends, whether or not this request is still waiting for it.
        task.add_done_callback(_report(config))
        served = await asyncio.shield(task)

        if served.path == ServePath.UNGUARDED:
            await self.app(scope, _replaying(read, receive), send)
            return
        reply = served.reply
        if reply is None:
            if served.handler_reply is not None:
                reply = served.handler_reply
            else:  # released by an error with a 4xx status that escaped the application
                status = 500 if served.handler_error is None else (error_status(served.handler_error) or 500)
                reply = Reply(status, (), b"")
        await send_reply(send, reply)

    async def _serve(self, scope: Scope, request: Request, body: Optional[bytes]) -> Served:
        config = self.config
        escaped: List[BaseException] = []

        async def run_app(key: str) -> Union[Reply, Raised]:
            if body is None:
                raise _Incomplete("the request body was not read whole")
            inner = dict(scope)
            inner[SCOPE_KEY] = Idempotency(key, request.tenant_id)
            capture = _Capture()
            try:
                await self.app(inner, _body_then_wait(body), capture.send)
            except Exception as exc:
                if capture.complete:  # answered, then raised: the answer stands
                    config.report("handler", exc)
                    return capture.reply()
                status = error_status(exc)
                if status is None or capture.status is not None:
                    raise
                escaped.append(exc)
                return Raised(status)
            if not capture.complete:
                raise _Incomplete("the application returned without finishing its answer")
            return capture.reply()

        guard = config.guard
        if isinstance(guard, AsyncGuard):
            served = await guard.serve(config.endpoint, request, run_app, report=config.report)
        else:
            loop = asyncio.get_running_loop()
            sync_guard: Guard = guard

            def handler(key: str) -> Union[Reply, Raised]:
                return asyncio.run_coroutine_threadsafe(run_app(key), loop).result()

            served = await asyncio.to_thread(config.endpoint.serve, sync_guard, request, handler, clock=config.clock,
                                             report=config.report)
        if served.handler_error is None and escaped:
            served.handler_error = escaped[0]
        return served


def _body_then_wait(body: bytes) -> Receive:
    """The application's receive: the body, then nothing (the application is
    not told of a disconnect: it runs to its end)."""
    sent = False
    never = asyncio.Event()

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await never.wait()
        return {"type": "http.disconnect"}  # pragma: no cover

    return receive


def _replaying(read: List[Message], receive: Receive) -> Receive:
    """The messages already read, then the rest from the server."""
    pending = list(read)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay
