"""A store in Redis through redis-py: sync (:class:`RedisStore`) and
``asyncio`` (:class:`AsyncRedisStore`, ``redis.asyncio``).

The record layout and every Lua script are the component's (the core's
Redis layout, through :func:`intentkey.schema.redis_scripts` and the script
calls of :func:`intentkey.schema.redis_insert` and its siblings), the same
the Rust and Node stores run, so processes in every language share one
Redis and the same records (docs/store-schema.md, "Redis"). The claim is
an insert with no expiry (an in-flight record is never released by a TTL);
completion, recovery writes and release are scripts fenced on the owner
token; only done records expire. Scripts run by ``EVALSHA``, falling back to
``EVAL`` when the server does not know them yet.
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable, Dict, List, Optional, Tuple, Union
from urllib.parse import unquote

import redis as redis_py
import redis.asyncio as redis_aio
from redis import exceptions as rx

from .. import _binding as b
from .. import _packed
from .. import schema as sch
from ..errors import IntentkeyError
from ..types import Completion, ReleaseRequest, Replacement, Status, StoredRecord, StoreError

__all__ = ["AsyncRedisStore", "RedisStore"]

_RETRYABLE_REPLY = re.compile(r"^(LOADING|BUSY|TRYAGAIN|READONLY|MASTERDOWN|CLUSTERDOWN|NOREPLICAS)\b")

#: Seconds a store made from a URL waits to connect and for each reply.
DEFAULT_TIMEOUT = 5.0


def _failure(e: BaseException) -> StoreError:
    """redis-py's error as a store error: a server reply (a script's refusal,
    malformed data, a bad password) failed, unless the server is loading,
    busy, read-only or asks to try again; a closed or refused connection or a
    timeout is unavailable."""
    message = str(e).strip() or type(e).__name__
    if isinstance(e, rx.ResponseError):
        unavailable = bool(_RETRYABLE_REPLY.match(message)) or isinstance(e, rx.ReadOnlyError)
    elif isinstance(e, (rx.ConnectionError, rx.TimeoutError, OSError)):
        unavailable = True
    else:
        unavailable = False
    return StoreError("unavailable" if unavailable else "failed", f"redis: {message}")


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def split_prefix(url: str) -> Tuple[str, Optional[str]]:
    """Takes ``prefix=…`` out of a URL's query, as the Rust and Node stores do."""
    base, sep, query = url.partition("?")
    if not sep:
        return url, None
    prefix: Optional[str] = None
    rest = []
    for pair in query.split("&"):
        if pair.startswith("prefix="):
            prefix = unquote(pair[len("prefix="):])
        elif pair:
            rest.append(pair)
    return (base + "?" + "&".join(rest) if rest else base), prefix


def _check_prefix(prefix: Optional[str]) -> str:
    if prefix is None:
        return sch.redis_default_prefix()
    if not isinstance(prefix, str) or prefix == "" or any(c.isspace() for c in prefix):
        raise IntentkeyError("invalid-argument", "prefix", "prefix must be a non-empty string without spaces")
    return prefix


class _Layout:
    """The keys under a prefix, as the core's insert call names them:
    record keys, the per-status indexes and the expiry index."""

    def __init__(self, prefix: str):
        probe = "k"
        call = sch.redis_insert(prefix, StoredRecord(probe, "", "", "", Status.IN_FLIGHT, "", None, 0, None, 0, None))
        keys = call.keys
        if not keys or not keys[0].endswith(probe) or len(keys) != 2 + len(Status):
            raise IntentkeyError("component-failed", None, f"the core's Redis layout is not the one this package knows: {keys!r}")
        self.prefix = prefix
        self.record_prefix = keys[0][: -len(probe)]
        self.index: Dict[Status, str] = {}
        for status in Status:
            found = [k for k in keys[1:-1] if k.endswith(":" + status.value)]
            if len(found) != 1:
                raise IntentkeyError("component-failed", None, f"no Redis index for {status.value} in {keys!r}")
            self.index[status] = found[0]
        self.expiry = keys[-1]


def _pairs(raw: Any) -> List[StoredRecord]:
    items = list(raw or [])
    if len(items) % 2:
        raise StoreError("failed", "redis: the list script answered an odd count")
    return [sch.redis_decode(_text(items[i]), items[i + 1]) for i in range(0, len(items), 2)]


def _exchange(conn: Any, command: bytes) -> Any:
    conn.send_packed_command([command])
    return conn.read_response(disable_decoding=True)


def _reply(raw: Any) -> Union[None, int, bytes]:
    """A reply read undecoded as the core reads it (``redis.reply``: its
    cases are told apart by type, so wasmtime-py takes them untagged)."""
    if raw is None or isinstance(raw, bytes) or (isinstance(raw, int) and not isinstance(raw, bool)):
        return raw
    raise StoreError("failed", f"redis: a command answered {type(raw).__name__}, not a nil, integer or bulk reply")


def _purged(raw: Any) -> Tuple[int, int]:
    try:
        n, looked_at = raw
        return int(n), int(looked_at)
    except (TypeError, ValueError):
        raise StoreError("failed", f"redis: the purge script answered {raw!r}") from None


def _connect(where: str, given: Any, client_class: Any, prefix: Optional[str],
             timeout: float) -> Tuple[Any, Optional[str], bool]:
    """(client, prefix, owned) of what a store was given: a client (the
    caller keeps it) or a ``redis://`` URL (the store makes the client, and
    the URL's ``?prefix=`` is the prefix unless one was given)."""
    timeout = b.positive_seconds("timeout", timeout)
    if isinstance(given, str):
        url, url_prefix = split_prefix(given)
        try:
            client = client_class.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
        except (ValueError, rx.RedisError) as e:
            raise IntentkeyError("invalid-argument", "client_or_url", f"bad Redis URL: {e}") from None
        return client, prefix if prefix is not None else url_prefix, True
    if isinstance(given, client_class):
        return given, prefix, False
    raise IntentkeyError("invalid-argument", "client_or_url",
                         f"{where} takes a {client_class.__module__}.{client_class.__name__} client or a redis:// URL, "
                         f"not {type(given).__name__}")


class RedisStore:
    """A record store in Redis (sync: for :class:`intentkey.Guard`).

    `client_or_url`: a ``redis.Redis`` client (the caller keeps it) or a URL
    ``redis://host:port/db[?prefix=P]`` (the store makes the client;
    :meth:`close` closes it). `prefix` (default ``intentkey``, or the URL's)
    starts every key the store writes."""

    def __init__(self, client_or_url: Union[str, "redis_py.Redis"], prefix: Optional[str] = None, *,
                 timeout: float = DEFAULT_TIMEOUT, **unknown: Any):
        b.no_unknown("intentkey.stores.redis.RedisStore", unknown)
        self.client, prefix, self._owned = _connect("RedisStore", client_or_url, redis_py.Redis, prefix, timeout)
        self.prefix = _check_prefix(prefix)
        self._layout = _Layout(self.prefix)
        self._scripts = sch.redis_scripts()
        self._batch = sch.redis_batch()
        self._guest: Any = None
        self._settled: List[int] = []
        self._idle: List[Any] = []
        self._idle_pid = os.getpid()

    def __repr__(self) -> str:
        return f"RedisStore(prefix={self.prefix!r}, owned={self._owned})"

    def _run(self, name: str, keys: Tuple[str, ...], args: Tuple[str, ...]) -> Any:
        script = self._scripts[name]
        try:
            try:
                return self.client.evalsha(script.sha1, len(keys), *keys, *args)
            except rx.NoScriptError:
                return self.client.eval(script.source, len(keys), *keys, *args)
        except rx.RedisError as e:
            raise _failure(e) from e
        except OSError as e:
            raise _failure(e) from e

    def _write(self, call: sch.RedisCall) -> bool:
        return int(self._run(call.script, call.keys, call.args)) == 1

    def _flows(self, rt: b.Runtime) -> Any:
        """The guest's ``redis-flows`` under this prefix in `rt` (call with
        the runtime's lock held), made again after the instance was discarded."""
        if self._guest is None or self._guest[0] is not rt or not rt.live(self._guest[1]):
            handle = rt.call(b.REDIS, "[constructor]redis-flows", self.prefix)
            self._guest, self._settled = (rt, rt.generation, handle), []
        return self._guest[2]

    def _flow_driver(self) -> Optional[Callable[[b.Runtime, Callable[[Any, List[int]], Any]], Tuple[List[Any], bytes]]]:
        """:meth:`drive`, for the guard: a subclass's own methods go through the ``store`` import."""
        return self.drive if type(self) is RedisStore else None

    def drive(self, rt: b.Runtime, start: Callable[[Any, List[int]], Any]) -> Tuple[List[Any], bytes]:
        """Runs one of the core's flows over this store: ``start(flows,
        settled)`` makes its first step (in `rt`, a packed answer of
        ``redis-flows``); each step names one command, whose reply resumes
        the flow, until the end, which is returned (header and body). A reply
        of 1 to a step that says what it leads to (`then`) ends there with
        no resume; the flow is named among the next start's `settled`. A
        command that fails abandons the flow and raises the store's error."""
        with rt.lock:
            flows = self._flows(rt)
            settled, self._settled = self._settled, []
            step = b.unwrap_record(start(flows, settled))
            generation = rt.generation
        while True:
            head = _packed.loads(step.header)
            if head[0] != "send":
                return head, bytes(step.body)
            try:
                reply = _reply(self._send(step.body))
            except BaseException:
                with rt.lock:
                    if rt.live(generation):
                        rt.call(b.REDIS, "[method]redis-flows.abandon", flows, head[1])
                raise
            then = head[2]
            if reply == 1 and then is not None:
                with rt.lock:
                    if rt.live(generation):
                        self._settled.append(head[1])
                return then, b""
            with rt.lock:
                step = b.unwrap_record(rt.call(b.REDIS, "[method]redis-flows.resume", flows, head[1], reply))

    def _send(self, command: bytes) -> Any:
        """Sends one command the core wrote out (RESP bytes) and reads the
        reply with redis-py's parser; a script the server does not know yet
        is loaded, and the same bytes sent again."""
        try:
            try:
                return self._round_trip(command)
            except rx.NoScriptError:
                self._load_scripts()
                return self._round_trip(command)
        except (rx.RedisError, OSError) as e:
            raise _failure(e) from e

    def _round_trip(self, command: bytes) -> Any:
        """One command on a connection of the client's pool, under that
        connection's retry policy, as the client's own commands are (a
        single-connection client: its connection, under its lock). The
        store keeps the pool connections it used (each reply is read whole,
        so none has data waiting) and hands them back on :meth:`close`; one
        that failed short of a reply is disconnected and returned at once."""
        client = self.client
        if client.connection is not None:
            with client.single_connection_lock:
                conn = client.connection
                try:
                    return _exchange(conn, command)
                except rx.ResponseError:
                    raise
                except BaseException:
                    conn.disconnect()
                    raise
        conn = self._connection()
        kept = False
        try:
            reply = conn.retry.call_with_retry(lambda: _exchange(conn, command), lambda error: conn.disconnect())
            kept = True
            return reply
        except rx.ResponseError:
            kept = True  # the server answered: the connection is clean
            raise
        finally:
            if kept:
                self._idle.append(conn)
            else:
                conn.disconnect()
                client.connection_pool.release(conn)

    def _connection(self) -> Any:
        pid = os.getpid()
        if pid != self._idle_pid:  # a forked child: the parent's sockets are not its own
            self._idle, self._idle_pid = [], pid
        try:
            return self._idle.pop()
        except IndexError:
            return self.client.connection_pool.get_connection()

    def _load_scripts(self) -> None:
        for script in self._scripts.values():
            self.client.script_load(script.source)

    def _get_value(self, record_key: str) -> Any:
        try:
            return self.client.get(record_key)
        except (rx.RedisError, OSError) as e:
            raise _failure(e) from e

    def insert(self, record: StoredRecord) -> bool:
        return self._write(sch.redis_insert(self.prefix, record))

    def get(self, key: str) -> Optional[StoredRecord]:
        value = self._get_value(self._layout.record_prefix + key)
        return None if value is None else sch.redis_decode(key, value)

    def complete(self, completion: Completion) -> bool:
        return self._write(sch.redis_complete(self.prefix, completion))

    def replace(self, replacement: Replacement) -> bool:
        return self._write(sch.redis_replace(self.prefix, replacement))

    def release(self, request: ReleaseRequest) -> bool:
        return self._write(sch.redis_release(self.prefix, request))

    def list(self, status: Status, limit: int) -> List[StoredRecord]:
        if limit <= 0:
            return []
        status = Status(status)
        return _pairs(self._run("list", (self._layout.index[status],),
                                (status.value, str(int(limit)), self._layout.record_prefix, str(self._batch))))

    def purge(self, now: int) -> int:
        deleted = 0
        while True:
            n, looked_at = _purged(self._run("purge", (self._layout.expiry, self._layout.index[Status.DONE]),
                                             (str(int(now)), str(self._batch), self._layout.record_prefix)))
            deleted += n
            if looked_at < self._batch:
                return deleted

    def close(self) -> None:
        """Hands the connections the store kept back to the client's pool,
        and closes the client if this store made it."""
        idle, self._idle = self._idle, []
        if self._idle_pid == os.getpid():
            for conn in idle:
                self.client.connection_pool.release(conn)
        self._drop_guest(now=True)
        if self._owned:
            self.client.close()

    def _drop_guest(self, now: bool) -> None:
        guest, self._guest = self._guest, None
        if guest is not None:
            rt, generation, handle = guest
            rt.drop(handle, generation, now=now)

    def __del__(self) -> None:
        try:
            self._drop_guest(now=False)
        except Exception:
            pass

    def __enter__(self) -> "RedisStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncRedisStore:
    """A record store in Redis for ``asyncio`` (:class:`intentkey.aio.AsyncGuard`):
    a ``redis.asyncio.Redis`` client or a URL, as :class:`RedisStore`."""

    def __init__(self, client_or_url: Union[str, "redis_aio.Redis"], prefix: Optional[str] = None, *,
                 timeout: float = DEFAULT_TIMEOUT, **unknown: Any):
        b.no_unknown("intentkey.stores.redis.AsyncRedisStore", unknown)
        self.client, prefix, self._owned = _connect("AsyncRedisStore", client_or_url, redis_aio.Redis, prefix, timeout)
        self.prefix = _check_prefix(prefix)
        self._layout = _Layout(self.prefix)
        self._scripts = sch.redis_scripts()
        self._batch = sch.redis_batch()

    def __repr__(self) -> str:
        return f"AsyncRedisStore(prefix={self.prefix!r}, owned={self._owned})"

    async def _run(self, name: str, keys: Tuple[str, ...], args: Tuple[str, ...]) -> Any:
        script = self._scripts[name]
        try:
            try:
                return await self.client.evalsha(script.sha1, len(keys), *keys, *args)
            except rx.NoScriptError:
                return await self.client.eval(script.source, len(keys), *keys, *args)
        except (rx.RedisError, OSError) as e:
            raise _failure(e) from e

    async def _write(self, call: sch.RedisCall) -> bool:
        return int(await self._run(call.script, call.keys, call.args)) == 1

    async def insert(self, record: StoredRecord) -> bool:
        return await self._write(sch.redis_insert(self.prefix, record))

    async def get(self, key: str) -> Optional[StoredRecord]:
        try:
            value = await self.client.get(self._layout.record_prefix + key)
        except (rx.RedisError, OSError) as e:
            raise _failure(e) from e
        return None if value is None else sch.redis_decode(key, value)

    async def complete(self, completion: Completion) -> bool:
        return await self._write(sch.redis_complete(self.prefix, completion))

    async def replace(self, replacement: Replacement) -> bool:
        return await self._write(sch.redis_replace(self.prefix, replacement))

    async def release(self, request: ReleaseRequest) -> bool:
        return await self._write(sch.redis_release(self.prefix, request))

    async def list(self, status: Status, limit: int) -> List[StoredRecord]:
        if limit <= 0:
            return []
        status = Status(status)
        return _pairs(await self._run("list", (self._layout.index[status],),
                                      (status.value, str(int(limit)), self._layout.record_prefix, str(self._batch))))

    async def purge(self, now: int) -> int:
        deleted = 0
        while True:
            n, looked_at = _purged(await self._run("purge", (self._layout.expiry, self._layout.index[Status.DONE]),
                                                   (str(int(now)), str(self._batch), self._layout.record_prefix)))
            deleted += n
            if looked_at < self._batch:
                return deleted

    async def close(self) -> None:
        """Closes the client if this store made it."""
        if self._owned:
            await self.client.aclose()

    async def __aenter__(self) -> "AsyncRedisStore":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
