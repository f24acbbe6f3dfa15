"""A store in Redis, or a Redis Cluster, through redis-py: sync
(:class:`RedisStore`) and ``asyncio`` (:class:`AsyncRedisStore`,
``redis.asyncio``).

The record layout, every key name and every Lua script are the
component's (the core's Redis layout, through :mod:`intentkey.schema`:
:func:`~intentkey.schema.redis_scripts`, the script calls of
:func:`~intentkey.schema.redis_insert` and its siblings,
:func:`~intentkey.schema.redis_record_key`, the per-bucket calls of
:func:`~intentkey.schema.redis_list` and
:func:`~intentkey.schema.redis_purge`, merged by
:func:`~intentkey.schema.redis_listed`), the same the Rust and Node stores
run, so processes in every language share one Redis (or one cluster) and
the same records (docs/store-schema.md, "Redis"). This module only converts
types and does the I/O.

The claim is an insert with no expiry (an in-flight record is never
released by a TTL); completion, recovery writes and release are scripts
fenced on the owner token; only done records expire. Scripts run by
``EVALSHA``, falling back to ``EVAL`` when the server does not know them
yet. On a cluster (``redis+cluster://`` or a ``RedisCluster`` client) every
record lives with its bucket's indexes under one hash tag ``{prefix:NN}``,
so each script touches one slot and redis-py routes it by its first key;
listing and purging send one call per bucket. With ``wait=N`` a write that
wrote is followed by ``WAIT N timeout`` on the connection that carried it,
and the core judges the count.

Waiting for the first attempt (``wait_max_ms``): the core's completion,
release and recovery scripts publish the key they changed on their bucket's
change channel (``SPUBLISH``, sharded pub/sub). An :class:`AsyncRedisStore`
that has waiters keeps one pub/sub connection subscribed (``SSUBSCRIBE``) to
every channel of :func:`~intentkey.schema.redis_channels` and wakes the
waiters of each key published, whoever wrote it (any process, any
language); it subscribes again when the connection is lost (every waiter
looks again then). The sync :class:`RedisStore` does not listen: its waiters
sleep the core's intervals.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import re
import threading
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union
from urllib.parse import unquote

import redis as redis_py
import redis.asyncio as redis_aio
import redis.asyncio.cluster as redis_aio_cluster
import redis.cluster as redis_cluster
from redis import exceptions as rx

from .. import _binding as b
from .. import _packed
from .. import schema as sch
from .._watch import Changes
from ..errors import IntentkeyError
from ..types import Completion, ReleaseRequest, Replacement, Status, StoredRecord, StoreError

__all__ = ["AsyncRedisStore", "RedisStore"]

#: Seconds a store made from a URL waits to connect and for each reply.
DEFAULT_TIMEOUT = 5.0
#: Milliseconds ``WAIT`` waits for the replicas when no ``wait_timeout_ms`` is given.
DEFAULT_WAIT_TIMEOUT_MS = 1000

#: The options of the store a URL's query may carry (as the Rust and Node stores read them).
URL_OPTIONS = ("prefix", "wait", "wait_timeout_ms")
#: What a one-server URL's query may also carry: passed on to redis-py.
PASSED_ON = ("protocol", "db")
_KEYWORDS = ("prefix", "timeout", "wait", "wait_timeout_ms")

_CLUSTER_URL = re.compile(r"^(rediss?)\+cluster://", re.IGNORECASE)
_NODE = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[^:\[\]/@]+):([0-9]{1,5})$")
_RETRYABLE_REPLY = re.compile(r"^(LOADING|BUSY|TRYAGAIN|READONLY|MASTERDOWN|CLUSTERDOWN|NOREPLICAS)\b")
#: Server replies that mean "not now": the slot moved or is moving, its master is down or demoted.
_UNAVAILABLE_REPLIES = (rx.ReadOnlyError, rx.AskError, rx.TryAgainError, rx.ClusterDownError)
#: What redis-py raises: its errors, the cluster client's own (not RedisErrors), socket errors.
_DRIVER_ERRORS = (rx.RedisError, rx.RedisClusterException, OSError)

#: Seconds before the change subscription is made again after it failed (doubling up to the longest).
LISTEN_RETRY_FIRST = 0.2
LISTEN_RETRY_LONGEST = 5.0
#: Seconds one read of the subscription waits for a message (one server; on
#: a cluster, each node's connection in turn waits this long at most).
_LISTEN_READ = 1.0
_LISTEN_READ_CLUSTER = 0.05

log = logging.getLogger("intentkey")


def _failure(e: BaseException, secret: Optional[str] = None) -> StoreError:
    """redis-py's error as a store error: a server reply (a script's refusal,
    malformed data, a bad password) failed, unless the server is loading,
    busy, read-only, redirecting (``MOVED``, ``ASK``) or asks to try again;
    a closed or refused connection, a timeout, a cluster that cannot be
    reached or has a slot uncovered is unavailable. `secret` (the URL's
    password) never appears in the message."""
    message = str(e).strip() or type(e).__name__
    if isinstance(e, rx.AskError):
        message = f"{'MOVED' if isinstance(e, rx.MovedError) else 'ASK'} {message}"
    if isinstance(e, rx.ResponseError):
        unavailable = isinstance(e, _UNAVAILABLE_REPLIES) or bool(_RETRYABLE_REPLY.match(message))
    elif isinstance(e, (rx.ConnectionError, rx.TimeoutError, rx.ClusterError, rx.RedisClusterException, OSError)):
        unavailable = True
    else:
        unavailable = False
    if secret:
        message = message.replace(secret, "***")
    return StoreError("unavailable" if unavailable else "failed", f"redis: {message}")


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _exchange(conn: Any, command: bytes) -> Any:
    conn.send_packed_command([command])
    return conn.read_response(disable_decoding=True)


def _reply(raw: Any) -> Union[None, int, bytes]:
    """A reply read undecoded as the core reads it (``redis.reply``: its
    cases are told apart by type, so wasmtime-py takes them untagged)."""
    if raw is None or isinstance(raw, bytes) or (isinstance(raw, int) and not isinstance(raw, bool)):
        return raw
    raise StoreError("failed", f"redis: a command answered {type(raw).__name__}, not a nil, integer or bulk reply")


def _integer(raw: Any, what: str) -> int:
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise StoreError("failed", f"redis: {what} answered {raw!r}, not an integer") from None


def _purged(raw: Any) -> Tuple[int, int]:
    try:
        n, looked_at = raw
        return int(n), int(looked_at)
    except (TypeError, ValueError):
        raise StoreError("failed", f"redis: the purge script answered {raw!r}") from None


# -- options ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Wait:
    """``WAIT replicas timeout_ms`` after every write that wrote."""

    replicas: int
    timeout_ms: int


@dataclass
class _Url:
    """What a store URL says: where to connect, and the store's own options."""

    cluster: bool
    base: str = ""  # one server: the URL redis-py opens (its query: what is passed on)
    nodes: List[Tuple[str, int]] = field(default_factory=list)  # a cluster's
    username: Optional[str] = None
    password: Optional[str] = None
    ssl: bool = False
    options: Dict[str, str] = field(default_factory=dict)


def _bad_url(message: str) -> IntentkeyError:
    return IntentkeyError("invalid-argument", "client_or_url", f"bad Redis URL: {message}")


def _parse_url(url: str) -> _Url:
    """``redis://…`` (one server) or ``redis+cluster://[user:password@]host:port[,host:port…]``,
    each with ``?prefix=P&wait=N&wait_timeout_ms=M``; any other option is
    refused naming it (a one-server URL passes ``protocol`` and ``db`` on to
    redis-py). No message holds the URL (it may hold a password)."""
    base, _, query = url.partition("?")
    scheme = _CLUSTER_URL.match(base)
    cluster = scheme is not None
    options: Dict[str, str] = {}
    passed: List[str] = []
    for pair in query.split("&"):
        if not pair:
            continue
        raw_name, _, raw_value = pair.partition("=")
        name = unquote(raw_name)
        if name in URL_OPTIONS:
            options[name] = unquote(raw_value)
        elif name in PASSED_ON and not cluster:
            passed.append(pair)
        else:
            takes = ", ".join(URL_OPTIONS) + ("" if cluster else f" (and passes {' and '.join(PASSED_ON)} on to redis-py)")
            raise IntentkeyError("invalid-argument", name,
                                 f"the Redis URL's query names {name!r}, which is not an option: the store takes {takes}")
    if scheme is None:
        return _Url(False, base=base + ("?" + "&".join(passed) if passed else ""), options=options)
    auth, _, hosts = base[scheme.end():].rpartition("@")
    hosts = hosts.rstrip("/")
    if "/" in hosts:
        raise _bad_url("a cluster URL names no database (a cluster has only database 0): "
                       "redis+cluster://host:port[,host:port…]")
    nodes: List[Tuple[str, int]] = []
    for host in hosts.split(","):
        if not host:
            continue
        m = _NODE.match(host)
        if m is None or not 0 < int(m.group(2)) < 65536:
            raise _bad_url(f"the cluster node {host!r} is not host:port (redis+cluster://host:port[,host:port…])")
        nodes.append((m.group(1).strip("[]"), int(m.group(2))))
    if not nodes:
        raise _bad_url("a cluster URL names at least one node: redis+cluster://host:port[,host:port…]")
    user, has_password, password = auth.partition(":")
    return _Url(True, nodes=nodes, username=unquote(user) or None, password=unquote(password) if has_password else None,
                ssl=scheme.group(1).lower() == "rediss", options=options)


def _password(url: str) -> Optional[str]:
    """The password a URL holds, to keep it out of messages."""
    auth = url.partition("://")[2].partition("/")[0].rpartition("@")[0]
    user, has_password, password = auth.partition(":")
    return unquote(password) if has_password and password else None


def _count(name: str, value: Any, what: str) -> int:
    """A whole number from 1 to 2**32 - 1: an ``int`` option, or digits from a URL."""
    if isinstance(value, str) and value.isdigit() and value.isascii() and len(value) <= 10:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < (1 << 32):
        raise IntentkeyError("invalid-argument", name, f"{name} must be {what}: a whole number, 1 or more, not {value!r}")
    return value


def _settings(url_options: Dict[str, str], prefix: Optional[str], wait: Optional[int],
              wait_timeout_ms: Optional[int], reply_timeout: Optional[float]) -> Tuple[str, Optional[_Wait]]:
    """(prefix, wait) from the keyword options, else the URL's; `reply_timeout`:
    the seconds each reply may take on a client the store made (WAIT must
    answer within it)."""
    if prefix is None:
        prefix = url_options.get("prefix", sch.redis_default_prefix())
    b.text("prefix", prefix)
    replicas: Any = wait if wait is not None else url_options.get("wait")
    timeout_ms: Any = wait_timeout_ms if wait_timeout_ms is not None else url_options.get("wait_timeout_ms")
    if replicas is None:
        if timeout_ms is not None:
            raise IntentkeyError("invalid-argument", "wait_timeout_ms",
                                 "wait_timeout_ms is the timeout of WAIT: give wait (the replicas each write waits for) with it")
        return prefix, None
    n = _count("wait", replicas, "the number of replicas each write waits for")
    ms = DEFAULT_WAIT_TIMEOUT_MS if timeout_ms is None else _count(
        "wait_timeout_ms", timeout_ms, "milliseconds (WAIT 0 would block forever)")
    if reply_timeout is not None and ms >= reply_timeout * 1000:
        raise IntentkeyError("invalid-argument", "wait_timeout_ms",
                             f"wait_timeout_ms ({ms} ms) must be shorter than the store's timeout ({reply_timeout:g} s), "
                             "which bounds every reply, WAIT's included")
    return prefix, _Wait(n, ms)


def _check_cluster_client(client: Any) -> None:
    if getattr(client, "read_from_replicas", False) or getattr(client, "load_balancing_strategy", None) is not None:
        raise IntentkeyError("invalid-argument", "client_or_url",
                             "the RedisCluster client reads from replicas, which may not have a record just written: "
                             "pass one that reads from the masters (no read_from_replicas, no load_balancing_strategy)")


@dataclass
class _Opened:
    """What a store was given, sorted out: its client (or how to make it), layout and options."""

    client: Any
    make: Optional[Callable[[], Any]]
    cluster: bool
    owned: bool
    prefix: str
    wait: Optional[_Wait]
    secret: Optional[str]


def _open(where: str, given: Any, one: Any, many: Any, make_cluster: Callable[[_Url, float], Any],
          prefix: Optional[str], timeout: float, wait: Optional[int], wait_timeout_ms: Optional[int]) -> _Opened:
    """Sorts out what a store was given: a client of class `one` (one
    server) or `many` (a cluster; the caller keeps either), or a URL (the
    store makes the client: ``redis://`` with `one`, ``redis+cluster://``
    by `make_cluster`, called on first use)."""
    timeout = b.positive_seconds("timeout", timeout)
    if isinstance(given, str):
        url = _parse_url(given)
        name, wanted = _settings(url.options, prefix, wait, wait_timeout_ms, timeout)
        if url.cluster:
            return _Opened(None, lambda: make_cluster(url, timeout), True, True, name, wanted, url.password)
        try:
            client = one.from_url(url.base, socket_connect_timeout=timeout, socket_timeout=timeout)
        except (ValueError, rx.RedisError) as e:
            password = _password(url.base)
            raise _bad_url(str(e).replace(password, "***") if password else str(e)) from None
        secret = client.connection_pool.connection_kwargs.get("password")
        return _Opened(client, None, False, True, name, wanted, secret if isinstance(secret, str) else None)
    if isinstance(given, many):
        _check_cluster_client(given)
        cluster = True
    elif isinstance(given, one):
        cluster = False
    else:
        raise IntentkeyError("invalid-argument", "client_or_url",
                             f"{where} takes a {one.__module__}.{one.__name__} or {many.__module__}.{many.__name__} "
                             f"client, or a redis:// or redis+cluster:// URL, not {type(given).__name__}")
    name, wanted = _settings({}, prefix, wait, wait_timeout_ms, None)
    return _Opened(given, None, cluster, False, name, wanted, None)


def _sync_cluster(url: _Url, timeout: float) -> Any:
    node: Any = redis_cluster.ClusterNode  # untyped in redis-py
    return redis_cluster.RedisCluster(
        startup_nodes=[node(host, port) for host, port in url.nodes],
        username=url.username, password=url.password, ssl=url.ssl,
        socket_connect_timeout=timeout, socket_timeout=timeout)


def _async_cluster(url: _Url, timeout: float) -> Any:
    return redis_aio_cluster.RedisCluster(
        startup_nodes=[redis_aio_cluster.ClusterNode(host, port) for host, port in url.nodes],
        username=url.username, password=url.password, ssl=url.ssl,
        socket_connect_timeout=timeout, socket_timeout=timeout)


class _Common:
    """What both stores hold: the layout, the options, the core's scripts."""

    prefix: str
    cluster: bool
    layout: sch.RedisLayout

    def _setup(self, opened: _Opened) -> None:
        self.prefix, self.cluster, self._owned = opened.prefix, opened.cluster, opened.owned
        self.layout = sch.RedisLayout(self.prefix, self.cluster)
        sch.redis_check_layout(self.layout)  # the core's: invalid-argument naming prefix
        self._wait, self._secret = opened.wait, opened.secret
        self._scripts = sch.redis_scripts()
        self._batch = sch.redis_batch()

    def _fail(self, e: BaseException) -> StoreError:
        return _failure(e, self._secret)

    def __repr__(self) -> str:
        wait = "" if self._wait is None else f", wait={self._wait.replicas}, wait_timeout_ms={self._wait.timeout_ms}"
        return f"{type(self).__name__}(prefix={self.prefix!r}, cluster={self.cluster}{wait}, owned={self._owned})"


def _script_args(script: sch.RedisScript, call: sch.RedisCall, sha: bool) -> Tuple[Any, ...]:
    return ("EVALSHA" if sha else "EVAL", script.sha1 if sha else script.source, len(call.keys), *call.keys, *call.args)


def _ask(conn: Any, *args: Any) -> Any:
    conn.send_command(*args)
    return conn.read_response()


async def _ask_async(conn: Any, *args: Any) -> Any:
    await conn.send_command(*args)
    return await conn.read_response()


class RedisStore(_Common):
    """A record store in Redis or a Redis Cluster (sync: for :class:`intentkey.Guard`).

    `client_or_url`: a ``redis.Redis`` or ``redis.cluster.RedisCluster``
    client (the caller keeps it), or a URL (the store makes the client;
    :meth:`close` closes it): ``redis://host:port/db`` or
    ``redis+cluster://[user:password@]host:port[,host:port…]`` (``rediss``
    for TLS; any node of the cluster), with ``?prefix=P&wait=N&wait_timeout_ms=M``.
    `prefix` (default ``intentkey``, or the URL's) starts every key the
    store writes (on a cluster inside the hash tags ``{prefix:NN}``, so it
    has no brace). `wait`: every write that wrote waits for that many
    replicas (``WAIT``, `wait_timeout_ms`, default 1000) and fewer is
    ``StoreError("unavailable")``. `timeout`: seconds to connect and for each
    reply (a client the store makes)."""

    #: The store's kind, as telemetry names it (``intentkey.store``).
    kind = "redis"

    def __init__(self, client_or_url: Union[str, "redis_py.Redis", "redis_cluster.RedisCluster"],
                 prefix: Optional[str] = None, *, timeout: float = DEFAULT_TIMEOUT, wait: Optional[int] = None,
                 wait_timeout_ms: Optional[int] = None, **unknown: Any):
        b.no_unknown("intentkey.stores.redis.RedisStore", unknown, _KEYWORDS)
        opened = _open("RedisStore", client_or_url, redis_py.Redis, redis_cluster.RedisCluster, _sync_cluster,
                       prefix, timeout, wait, wait_timeout_ms)
        self._setup(opened)
        self._client: Any = opened.client
        self._make = opened.make
        self._lock = threading.Lock()
        self._guest: Any = None
        self._settled: List[int] = []
        self._idle: List[Any] = []
        self._idle_pid = os.getpid()

    @property
    def client(self) -> Any:
        """The redis-py client: a ``redis.Redis``, or a
        ``redis.cluster.RedisCluster`` (made from a cluster URL on first use;
        ``StoreError("unavailable")`` while no node can be reached)."""
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None and self._make is not None:
                    try:
                        self._client = self._make()
                    except _DRIVER_ERRORS as e:
                        raise self._fail(e) from e
                client = self._client
        return client

    # -- the generic path: one script call or GET at a time --------------------------------

    def _run(self, call: sch.RedisCall) -> Any:
        script = self._scripts[call.script]
        client = self.client
        try:
            try:
                return client.evalsha(script.sha1, len(call.keys), *call.keys, *call.args)
            except rx.NoScriptError:
                return client.eval(script.source, len(call.keys), *call.keys, *call.args)
        except _DRIVER_ERRORS as e:
            raise self._fail(e) from e

    def _write(self, call: sch.RedisCall) -> bool:
        if self._wait is None:
            return _integer(self._run(call), call.script) == 1
        return self._write_and_wait(call, self._wait)

    def _write_and_wait(self, call: sch.RedisCall, wait: _Wait) -> bool:
        """The write script, then (when it wrote) ``WAIT`` on the same
        connection: WAIT counts the replicas that have the writes of the
        connection it runs on. The core judges the count."""
        script = self._scripts[call.script]
        try:
            with self._pinned(call.keys[0]) as conn:
                try:
                    value = _ask(conn, *_script_args(script, call, True))
                except rx.NoScriptError:
                    value = _ask(conn, *_script_args(script, call, False))
                if _integer(value, call.script) != 1:
                    return False
                acked = _ask(conn, "WAIT", wait.replicas, wait.timeout_ms)
        except _DRIVER_ERRORS as e:
            raise self._fail(e) from e
        sch.redis_check_replicas(wait.replicas, _integer(acked, "WAIT"))
        return True

    @contextmanager
    def _pinned(self, key: str) -> Iterator[Any]:
        """One connection to the server that holds `key` (on a cluster, the
        master of its slot), for the length of the block: disconnected when
        it failed short of a reply, handed back to its pool after."""
        client = self.client
        if not self.cluster and client.connection is not None:  # a single-connection client
            with client.single_connection_lock:
                conn = client.connection
                try:
                    yield conn
                except rx.ResponseError:
                    raise
                except BaseException:
                    conn.disconnect()
                    raise
            return
        try:
            pool = (client.get_redis_connection(client.get_node_from_key(key)).connection_pool if self.cluster
                    else client.connection_pool)
            conn = pool.get_connection()
        except BaseException:
            self._refresh(client)
            raise
        try:
            yield conn
        except _UNAVAILABLE_REPLIES:
            self._refresh(client)  # the slot moved, or its master went away: ask the cluster again
            raise
        except rx.ResponseError:
            raise  # the server answered: the connection is clean
        except BaseException:
            conn.disconnect()
            self._refresh(client)
            raise
        finally:
            pool.release(conn)

    def _refresh(self, client: Any) -> None:
        """Reads the cluster's slots again (after a failover or a move), so the next write finds the master."""
        if self.cluster:
            try:
                client.nodes_manager.initialize()
            except Exception:
                pass  # the cluster cannot be reached: the next operation says so

    # -- the fast path: the core's flows over raw RESP on one server --------------------------

    def _flows(self, rt: b.Runtime) -> Any:
        """The guest's ``redis-flows`` over this store's layout in `rt` (call
        with the runtime's lock held), made again after the instance was discarded."""
        if self._guest is None or self._guest[0] is not rt or not rt.live(self._guest[1]):
            handle = rt.call(b.REDIS, "[constructor]redis-flows", b.redis_layout(self.prefix, self.cluster))
            self._guest, self._settled = (rt, rt.generation, handle), []
        return self._guest[2]

    def _flow_driver(self) -> Optional[Callable[[b.Runtime, Callable[[Any, List[int]], Any]], Tuple[List[Any], bytes]]]:
        """:meth:`drive`, for the guard, on one server without ``wait``: a
        subclass's own methods, a cluster and a store that waits for
        replicas go through the ``store`` import."""
        return self.drive if type(self) is RedisStore and not self.cluster and self._wait is None else None

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
        except _DRIVER_ERRORS as e:
            raise self._fail(e) from e

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

    # -- the store protocol ---------------------------------------------------------------------

    def _get_value(self, record_key: str) -> Any:
        client = self.client
        try:
            return client.get(record_key)
        except _DRIVER_ERRORS as e:
            raise self._fail(e) from e

    def insert(self, record: StoredRecord) -> bool:
        return self._write(sch.redis_insert(self.layout, record))

    def get(self, key: str) -> Optional[StoredRecord]:
        value = self._get_value(sch.redis_record_key(self.layout, key))
        return None if value is None else sch.redis_decode(key, value)

    def complete(self, completion: Completion) -> bool:
        return self._write(sch.redis_complete(self.layout, completion))

    def replace(self, replacement: Replacement) -> bool:
        return self._write(sch.redis_replace(self.layout, replacement))

    def release(self, request: ReleaseRequest) -> bool:
        return self._write(sch.redis_release(self.layout, request))

    def list(self, status: Status, limit: int) -> List[StoredRecord]:
        if limit <= 0:
            return []
        calls = sch.redis_list(self.layout, Status(status), limit)
        return sch.redis_listed(limit, [self._run(call) for call in calls])

    def purge(self, now: int) -> int:
        deleted = 0
        for call in sch.redis_purge(self.layout, now):
            while True:
                n, looked_at = _purged(self._run(call))
                deleted += n
                if looked_at < self._batch:
                    break
        return deleted

    def count(self, status: Status) -> sch.StatusCount:
        """How many records have `status`: the sum of the ``ZCARD`` of every
        bucket's status index (the core's ``redis-index-keys``); the oldest
        claim is not read (``None``)."""
        client = self.client
        try:
            total = sum(_integer(client.zcard(k), "ZCARD") for k in sch.redis_index_keys(self.layout, Status(status)))
        except _DRIVER_ERRORS as e:
            raise self._fail(e) from e
        return sch.StatusCount(Status(status), total, None)

    def close(self) -> None:
        """Hands the connections the store kept back to the client's pool,
        and closes the client if this store made it."""
        idle, self._idle = self._idle, []
        client = self._client
        if self._idle_pid == os.getpid() and client is not None:
            for conn in idle:
                client.connection_pool.release(conn)
        self._drop_guest(now=True)
        if self._owned and client is not None:
            client.close()

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


async def _settle(value: Any) -> None:
    if inspect.isawaitable(value):
        await value


class AsyncRedisStore(_Common):
    """A record store in Redis or a Redis Cluster for ``asyncio``
    (:class:`intentkey.aio.AsyncGuard`): a ``redis.asyncio.Redis`` or
    ``redis.asyncio.cluster.RedisCluster`` client, or a URL, with the
    options of :class:`RedisStore`. On a cluster, listing and purging send
    the calls of every bucket at once."""

    #: The async flows claim through :meth:`_claim` (one round trip for a repeat).
    _INTENTKEY_CLAIM = True

    #: The store's kind, as telemetry names it (``intentkey.store``).
    kind = "redis"

    def __init__(self, client_or_url: Union[str, "redis_aio.Redis", "redis_aio_cluster.RedisCluster"],
                 prefix: Optional[str] = None, *, timeout: float = DEFAULT_TIMEOUT, wait: Optional[int] = None,
                 wait_timeout_ms: Optional[int] = None, **unknown: Any):
        b.no_unknown("intentkey.stores.redis.AsyncRedisStore", unknown, _KEYWORDS)
        opened = _open("AsyncRedisStore", client_or_url, redis_aio.Redis, redis_aio_cluster.RedisCluster,
                       _async_cluster, prefix, timeout, wait, wait_timeout_ms)
        self._setup(opened)
        # The asyncio cluster client connects on its first command: made now.
        self.client: Any = opened.client if opened.make is None else opened.make()
        self._ready = not self.cluster
        self._ready_lock: Optional[asyncio.Lock] = None
        self._changes = Changes()
        self._listener: Optional["asyncio.Task[None]"] = None
        self._listener_lock = threading.Lock()
        self._closed = False

    async def _client(self) -> Any:
        """The client, a cluster's read its slots first, once, by one task:
        redis-py 8.1's asyncio ``RedisCluster`` meets commands that arrive at
        once on a client that has not read them yet with connections closed
        under them (``AttributeError``)."""
        client = self.client
        if not self._ready:
            if self._ready_lock is None:
                self._ready_lock = asyncio.Lock()
            async with self._ready_lock:
                if not self._ready:
                    try:
                        await client.initialize()
                    except _DRIVER_ERRORS as e:
                        raise self._fail(e) from e
                    self._ready = True
        return client

    async def _run(self, call: sch.RedisCall) -> Any:
        script = self._scripts[call.script]
        client = await self._client()
        try:
            try:
                return await client.evalsha(script.sha1, len(call.keys), *call.keys, *call.args)
            except rx.NoScriptError:
                return await client.eval(script.source, len(call.keys), *call.keys, *call.args)
        except _DRIVER_ERRORS as e:
            raise self._fail(e) from e

    async def _write(self, call: sch.RedisCall) -> bool:
        if self._wait is None:
            return _integer(await self._run(call), call.script) == 1
        return await self._write_and_wait(call, self._wait)

    async def _write_and_wait(self, call: sch.RedisCall, wait: _Wait) -> bool:
        """As :meth:`RedisStore._write_and_wait`."""
        script = self._scripts[call.script]
        try:
            async with self._pinned(call.keys[0]) as conn:
                try:
                    value = await _ask_async(conn, *_script_args(script, call, True))
                except rx.NoScriptError:
                    value = await _ask_async(conn, *_script_args(script, call, False))
                if _integer(value, call.script) != 1:
                    return False
                acked = await _ask_async(conn, "WAIT", wait.replicas, wait.timeout_ms)
        except _DRIVER_ERRORS as e:
            raise self._fail(e) from e
        sch.redis_check_replicas(wait.replicas, _integer(acked, "WAIT"))
        return True

    @asynccontextmanager
    async def _pinned(self, key: str) -> AsyncIterator[Any]:
        """As :meth:`RedisStore._pinned`."""
        client = await self._client()
        if not self.cluster and client.single_connection_client:
            await client.initialize()
            async with client._single_conn_lock:  # the lock the client's own commands take
                conn = client.connection
                try:
                    yield conn
                except rx.ResponseError:
                    raise
                except BaseException:
                    await conn.disconnect()
                    raise
            return
        release: Callable[[Any], Any]
        try:
            if self.cluster:
                node = client.get_node_from_key(key)
                conn = node.acquire_connection()
                release = getattr(node, "release", None) or node._free.append
            else:
                pool = client.connection_pool
                conn = await pool.get_connection()
                release = pool.release
        except BaseException:
            await self._refresh(client)
            raise
        try:
            yield conn
        except _UNAVAILABLE_REPLIES:
            await self._refresh(client)
            raise
        except rx.ResponseError:
            raise
        except BaseException:
            await conn.disconnect()
            await self._refresh(client)
            raise
        finally:
            await _settle(release(conn))

    async def _refresh(self, client: Any) -> None:
        if self.cluster:
            try:
                await client.nodes_manager.initialize()
            except Exception:
                pass

    async def insert(self, record: StoredRecord) -> bool:
        return await self._write(sch.redis_insert(self.layout, record))

    async def _claim(self, record: StoredRecord) -> Union[bool, StoredRecord]:
        """The claim with the core's ``claim`` script: whether it inserted, or
        the record it lost to, read in the same script, so the flow needs no
        ``GET`` (the async guard and middleware use it). With ``wait`` the
        plain insert, whose write is followed by ``WAIT`` on its connection."""
        if self._wait is not None:
            return await self.insert(record)
        claimed = sch.redis_claimed(record.key, await self._run(sch.redis_claim(self.layout, record)))
        if isinstance(claimed, sch.Existing):
            return claimed.record
        return isinstance(claimed, sch.Won)

    async def get(self, key: str) -> Optional[StoredRecord]:
        client = await self._client()
        try:
            value = await client.get(sch.redis_record_key(self.layout, key))
        except _DRIVER_ERRORS as e:
            raise self._fail(e) from e
        return None if value is None else sch.redis_decode(key, value)

    async def complete(self, completion: Completion) -> bool:
        return self._wrote(completion.key, await self._write(sch.redis_complete(self.layout, completion)))

    async def replace(self, replacement: Replacement) -> bool:
        return self._wrote(replacement.record.key, await self._write(sch.redis_replace(self.layout, replacement)))

    async def release(self, request: ReleaseRequest) -> bool:
        return self._wrote(request.key, await self._write(sch.redis_release(self.layout, request)))

    def _wrote(self, key: str, written: bool) -> bool:
        """A write of this store changed record `key`: its waiters here look
        again at once (the script's ``SPUBLISH`` tells everyone else)."""
        if written:
            self._changes.notify(key)
        return written

    async def watch(self, key: str, ms: int) -> None:
        """Returns when record `key` changes (a write published on its
        bucket's change channel), or after `ms` milliseconds."""
        await self._wake_ready()
        await self._changes.wait_async(key, ms / 1000)

    # -- the change subscription ----------------------------------------------------------------

    def listening(self) -> bool:
        """Whether the subscription's task is running (it may be between connections)."""
        task = self._listener
        return task is not None and not task.done()

    async def _wake_ready(self) -> None:
        """Starts the change subscription on this event loop, unless it runs already."""
        if self._closed:
            return
        with self._listener_lock:
            task = self._listener
            if task is not None and not task.done():
                return
            self._listener = asyncio.get_running_loop().create_task(self._listen(), name="intentkey-redis-listen")

    async def _listen(self) -> None:
        """The subscription's life: ``SSUBSCRIBE`` to every bucket's change
        channel, wake every waiter (what changed while nobody listened is
        unknown), then wake the waiters of each key published; on a failure,
        subscribe again after a pause."""
        channels = sch.redis_channels(self.layout)
        delay = LISTEN_RETRY_FIRST
        while not self._closed:
            pubsub: Any = None
            try:
                client = await self._client()
                pubsub = client.pubsub()
                await pubsub.ssubscribe(*channels)
                self._changes.notify_all()
                delay = LISTEN_RETRY_FIRST
                while True:
                    if self.cluster:
                        message = await pubsub.get_sharded_message(ignore_subscribe_messages=True,
                                                                   timeout=_LISTEN_READ_CLUSTER)
                        if message is None:
                            await asyncio.sleep(0.005)  # every node's connection was read: none had a message
                    else:
                        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=_LISTEN_READ)
                    if message is not None and _text(message.get("type")) == "smessage":
                        self._changes.notify(_text(message.get("data")))
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the waiters fall back on the core's re-checks meanwhile
                if not self._closed:
                    log.warning("intentkey: redis: the change subscription failed (%s); again in %.1f s",
                                self._fail(e).message, delay)
            finally:
                if pubsub is not None:
                    try:
                        await pubsub.aclose()
                    except Exception:
                        pass
            await asyncio.sleep(delay)
            delay = min(delay * 2, LISTEN_RETRY_LONGEST)

    async def _stop_listening(self) -> None:
        with self._listener_lock:
            task, self._listener = self._listener, None
        if task is None or task.done():
            return
        loop = task.get_loop()
        if loop is asyncio.get_running_loop():
            task.cancel()
            await asyncio.wait({task})  # ended; a cancellation of this close itself still propagates
        elif not loop.is_closed():
            loop.call_soon_threadsafe(task.cancel)

    async def list(self, status: Status, limit: int) -> List[StoredRecord]:
        if limit <= 0:
            return []
        calls = sch.redis_list(self.layout, Status(status), limit)
        replies: Sequence[Any] = await asyncio.gather(*(self._run(call) for call in calls))
        return sch.redis_listed(limit, replies)

    async def _purge_bucket(self, call: sch.RedisCall) -> int:
        deleted = 0
        while True:
            n, looked_at = _purged(await self._run(call))
            deleted += n
            if looked_at < self._batch:
                return deleted

    async def purge(self, now: int) -> int:
        counts = await asyncio.gather(*(self._purge_bucket(call) for call in sch.redis_purge(self.layout, now)))
        return sum(counts)

    async def count(self, status: Status) -> sch.StatusCount:
        """How many records have `status`: the sum of the ``ZCARD`` of every
        bucket's status index (the core's ``redis-index-keys``); the oldest
        claim is not read (``None``)."""
        client = await self._client()
        try:
            sizes = await asyncio.gather(*(client.zcard(k) for k in sch.redis_index_keys(self.layout, Status(status))))
        except _DRIVER_ERRORS as e:
            raise self._fail(e) from e
        return sch.StatusCount(Status(status), sum(_integer(n, "ZCARD") for n in sizes), None)

    async def close(self) -> None:
        """Ends the change subscription, and closes the client if this store made it."""
        self._closed = True
        await self._stop_listening()
        if self._owned:
            await self.client.aclose()

    async def __aenter__(self) -> "AsyncRedisStore":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
