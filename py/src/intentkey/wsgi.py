"""WSGI idempotency middleware (Flask, Django, any WSGI server).

>>> from flask import Flask                                     # doctest: +SKIP
>>> from intentkey.wsgi import IdempotencyMiddleware            # doctest: +SKIP
>>> app = Flask(__name__)                                       # doctest: +SKIP
>>> app.wsgi_app = IdempotencyMiddleware(app.wsgi_app, secret=SECRET, store=intentkey.MemoryStore())  # doctest: +SKIP

A driver of the core's serve flow (:meth:`intentkey.http.Endpoint.serve`
over a synchronous :class:`intentkey.Store`): it reads the key header and the
body (``wsgi.input``, at most one byte past ``max_body_bytes``), and the flow
admits, claims, decides and finishes. The application runs only when this
request owns the key; what it answers (``start_response`` and the body
iterable, which is closed) is held back until the record is finished, then
sent as written. An application that raises leaves the record in flight: the
client gets the core's 500 and ``on_error("handler", error)`` hears it.
"""

from __future__ import annotations

import io
from http import HTTPStatus
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from ._middleware import SCOPE_KEY, Config, Idempotency, OnError, configure, error_status
from .claims import Guard
from .http import Raised, Request, ServePath
from .keys import Keyring, SecretInput
from .types import Reply

__all__ = ["IdempotencyMiddleware", "Idempotency", "SCOPE_KEY"]

Environ = Dict[str, Any]
StartResponse = Callable[..., Any]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]

def _status_line(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} Unknown"


class _Prefixed(io.RawIOBase):
    """``wsgi.input`` for an application run unguarded: the bytes already read, then the rest."""

    def __init__(self, head: bytes, rest: Any, remaining: Optional[int]):
        self._head = io.BytesIO(head)
        self._rest = rest
        self._remaining = remaining

    def readable(self) -> bool:
        return True

    def _read_rest(self, size: int) -> bytes:
        if self._remaining is not None:
            if self._remaining <= 0:
                return b""
            size = self._remaining if size < 0 else min(size, self._remaining)
        data = bytes(self._rest.read(size) if size >= 0 else self._rest.read())
        if self._remaining is not None:
            self._remaining -= len(data)
        return data

    def read(self, size: Optional[int] = -1) -> bytes:
        n = -1 if size is None else size
        data = self._head.read(n)
        if n < 0:
            return data + self._read_rest(-1)
        if len(data) < n:
            data += self._read_rest(n - len(data))
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class IdempotencyMiddleware:
    """Idempotency for a WSGI application; the options of
    :class:`intentkey.asgi.IdempotencyMiddleware` (``tenant`` and ``route``
    are functions of the environ), with a synchronous store. The owner's
    application finds :class:`Idempotency` under
    ``environ["intentkey.idempotency"]``. With ``wait_max_ms`` a retry
    that finds its key in flight waits in its worker thread (woken early by
    the memory and SQL stores' own writes). A claim whose insert failed (its
    handler never ran) is answered 503 and released in the background, on
    the process's release threads (``on_error("release", error)`` hears one
    that gave up). A synchronous
    store's calls are bounded by its own timeouts, not by
    ``store_deadline_ms`` (refused here); ``tracer_provider`` and
    ``meter_provider`` as in ASGI."""

    def __init__(self, app: WSGIApp, *, secret: Optional[SecretInput] = None, keyring: Optional[Keyring] = None,
                 store: Any = None, profile: str = "ietf",
                 tenant: Union[str, Callable[[Environ], str]] = "default",
                 route: Optional[Callable[[Environ], str]] = None,
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
            "intentkey.wsgi.IdempotencyMiddleware", secret=secret, keyring=keyring, store=store, profile=profile,
            tenant=tenant, route=route, methods=methods, policies=policies, release_statuses=release_statuses,
            ttl_seconds=ttl_seconds, fast_completion=fast_completion, now=now, on_error=on_error, unknown=unknown,
            endpoint_options=dict(key_required=key_required, max_body_bytes=max_body_bytes,
                                  max_stored_bytes=max_stored_bytes, replay_headers=replay_headers,
                                  strict_key_syntax=strict_key_syntax, retry_after_seconds=retry_after_seconds,
                                  wait_max_ms=wait_max_ms),
            allow_async=False, store_deadline_ms=store_deadline_ms, tracer_provider=tracer_provider,
            meter_provider=meter_provider)
        self._environ_key = "HTTP_" + self.config.header_name.upper().replace("-", "_")

    @property
    def endpoint(self) -> Any:
        """The :class:`intentkey.http.Endpoint` the middleware answers with."""
        return self.config.endpoint

    @property
    def guard(self) -> Any:
        """The guard over the store."""
        return self.config.guard

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        config = self.config
        method = str(environ.get("REQUEST_METHOD", "GET"))
        if not config.guards(method):
            return self.app(environ, start_response)
        tenant_id = config.tenant_value(config.tenant if isinstance(config.tenant, str) else config.tenant(environ))
        route = config.route_value(config.route(environ)) if config.route is not None else (
            str(environ.get("PATH_INFO") or "/"))
        # WSGI joins repeated header lines with ", " into one value; the core reads it as one.
        raw_key = environ.get(self._environ_key)
        key_values = [] if raw_key is None else [str(raw_key)]
        content_type = environ.get("CONTENT_TYPE") or None

        limit = config.max_body_bytes
        stream = environ.get("wsgi.input")
        length_text = str(environ.get("CONTENT_LENGTH") or "").strip()
        length: Optional[int] = int(length_text) if length_text.isdigit() else None
        if stream is None:
            body = b""
        elif length is not None:
            body = _read(stream, min(length, limit + 1))
        elif environ.get("wsgi.input_terminated"):
            body = _read(stream, limit + 1)
        else:
            body = b""
        if length is not None and len(body) < min(length, limit + 1):
            # The client sent less than it announced (it went away): nothing
            # is claimed and nothing runs; the answer goes nowhere.
            start_response("400 Bad Request", [("Content-Type", "text/plain"), ("Content-Length", "0")])
            return [b""]
        complete = len(body) <= limit and (length is None or len(body) == length)
        request = Request(tenant_id, method, route, key_values, content_type, body)
        escaped: List[BaseException] = []

        def handler(key: str) -> Union[Reply, Raised]:
            if not complete:
                raise RuntimeError("the request body was not read whole")
            inner = dict(environ)
            inner[SCOPE_KEY] = Idempotency(key, tenant_id)
            inner["wsgi.input"] = io.BytesIO(body)
            inner["CONTENT_LENGTH"] = str(len(body))
            try:
                return _run(self.app, inner)
            except Exception as exc:
                status = error_status(exc)
                if status is None:
                    raise
                escaped.append(exc)
                return Raised(status)

        guard = config.guard
        assert isinstance(guard, Guard)
        served = config.endpoint.serve(guard, request, handler, clock=config.clock, report=config.report)
        if served.handler_error is None and escaped:
            served.handler_error = escaped[0]
        if served.path == ServePath.UNGUARDED:
            remaining = None if length is None else length - len(body)
            environ["wsgi.input"] = _Prefixed(body, stream, remaining)
            return self.app(environ, start_response)
        config.report_served(served)
        reply = served.reply
        if reply is None:
            if served.handler_reply is not None:
                reply = served.handler_reply
            else:
                status = 500 if served.handler_error is None else (error_status(served.handler_error) or 500)
                reply = Reply(status, (), b"")
        headers = [(n, v) for n, v in reply.headers if n.lower() not in ("content-length", "transfer-encoding")]
        headers.append(("Content-Length", str(len(reply.body))))
        start_response(_status_line(reply.status), headers)
        return [reply.body]


def _read(stream: Any, size: int) -> bytes:
    chunks: List[bytes] = []
    left = size
    while left > 0:
        chunk = stream.read(min(left, 65536))
        if not chunk:
            break
        chunks.append(bytes(chunk))
        left -= len(chunk)
    return b"".join(chunks)


def _run(app: WSGIApp, environ: Environ) -> Reply:
    """Runs the application, capturing its status, headers and body (the iterable closed)."""
    started: List[Tuple[str, List[Tuple[str, str]]]] = []
    written: List[bytes] = []

    def start_response(status: str, headers: List[Tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], Any]:
        if exc_info is not None and started:
            raise exc_info[1].with_traceback(exc_info[2])
        started[:] = [(status, list(headers))]
        return written.append

    result = app(environ, start_response)
    try:
        iterator: Iterator[bytes] = iter(result)
        for chunk in iterator:
            written.append(bytes(chunk))
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    if not started:
        raise RuntimeError("the application returned without calling start_response")
    status_text, headers = started[0]
    return Reply(int(status_text.split(" ", 1)[0]), tuple((str(n), str(v)) for n, v in headers), b"".join(written))
