"""A store in PostgreSQL through psycopg 3: sync (:class:`PostgresStore`,
a ``psycopg_pool.ConnectionPool``) and ``asyncio`` (:class:`AsyncPostgresStore`,
an ``AsyncConnectionPool``).

The schema is the component's: on first use, one transaction holding
``pg_advisory_xact_lock`` on the core's migration lock creates the
migrations table, reads the highest version applied, applies each missing
migration and records it, so Python, Node and Rust processes can start
against one database at once. Every statement is the core's
(``schema/postgres.sql`` through :func:`intentkey.schema.sql_statements`,
the statements the Rust and Node stores prepare), run with PostgreSQL's own
``$1`` placeholders (psycopg's raw cursors) and prepared once per
connection; the core makes the parameters and decodes the rows. Every
operation is one statement; every write after the claim is fenced on the
owner token. A fast completion runs the core's ``complete-fast`` statement
(``synchronous_commit`` off for its own transaction only).

With ``schema="name"`` the tables live in that (existing) schema and every
statement names them qualified; without it they are found through the
connection's ``search_path``, as the Rust host's
``postgres://…?options=-csearch_path%3Dname`` finds them.

Waiting for the first attempt (``wait_max_ms``): a store's own writes wake
its waiters in this process. With ``notify=True`` a write that changed a
record (a completion, a release, a recovery's replacement) also sends the
core's ``notify`` statement (``pg_notify`` on the core's channel, the
record's key as payload), one more round trip per such write. An
:class:`AsyncPostgresStore` that has waiters keeps one connection of its
own (outside the pool) that runs the core's ``listen`` statement and wakes
them on every notification, whoever wrote; it reconnects when the
connection is lost (every waiter looks again then). Given an open
connection rather than a connection string or a pool, it cannot open one:
the writes of other processes are then seen at the core's next re-check.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from contextlib import asynccontextmanager, contextmanager
from typing import Any, AsyncIterator, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from .. import _binding as b
from .. import schema as sch
from .._watch import Changes
from ..claims import store_deadline_ms
from ..errors import IntentkeyError
from ..types import Completion, ReleaseRequest, Replacement, Status, StoredRecord, StoreError
from ._sql import SqlStore
from ._sql import check_schema as _check_schema
from ._sql import counted as _counted
from ._sql import first_int as _first_int

__all__ = ["AsyncPostgresStore", "PostgresStore"]

#: Seconds an owned pool waits for a connection before the operation is ``unavailable``.
DEFAULT_TIMEOUT = 10.0

_RETRYABLE_STATES = ("53300", "40001", "40P01")

#: Seconds before the listening connection is opened again after it failed (doubling up to the longest).
LISTEN_RETRY_FIRST = 0.2
LISTEN_RETRY_LONGEST = 5.0
#: TCP keepalives of the listening connection, so that a connection gone silent is noticed.
_LISTEN_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3}

log = logging.getLogger("intentkey")


def _check_notify(notify: Any) -> bool:
    if not isinstance(notify, bool):
        raise IntentkeyError("invalid-argument", "notify", f"notify must be bool, not {type(notify).__name__}")
    return notify


def _failure(e: BaseException) -> StoreError:
    """psycopg's error as a store error: a lost or refused connection, a
    connection exception (08…), an operator intervention (57P…), too many
    connections (53300), a serialization failure or deadlock (40001, 40P01)
    or a pool timeout is retryable; anything else failed."""
    state = getattr(e, "sqlstate", None)
    message = str(e).strip() or type(e).__name__
    if isinstance(state, str) and state:
        unavailable = state.startswith(("08", "57P")) or state in _RETRYABLE_STATES
        return StoreError("unavailable" if unavailable else "failed", f"postgres: {state}: {message}")
    unavailable = isinstance(e, (psycopg.OperationalError, psycopg.InterfaceError, OSError))
    return StoreError("unavailable" if unavailable else "failed", f"postgres: {message}")


def _check_timeout(timeout: float) -> float:
    return b.positive_seconds("timeout", timeout)


def _bounded(conninfo: str) -> Dict[str, Any]:
    """What a sync store's own connections add to `conninfo` (unless it says
    otherwise) to bound a store call as psycopg's sync API allows: a
    connection attempt (``connect_timeout``, whole seconds, at least 2) and
    data sent that the server's host does not acknowledge
    (``tcp_user_timeout``), each by the core's store deadline."""
    try:
        given = psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.Error:
        return {}  # psycopg says what is wrong with it when the pool connects
    deadline_ms = store_deadline_ms()
    bounds: Dict[str, Any] = {"connect_timeout": max(2, -(-deadline_ms // 1000))}
    if psycopg.pq.version() >= 120000:  # libpq 12 knows tcp_user_timeout
        bounds["tcp_user_timeout"] = deadline_ms
    return {name: value for name, value in bounds.items() if name not in given}


def _connect(where: str, given: Any, pool_class: Any, connection_class: Any, max_size: int,
             timeout: float, bounded: bool = False) -> Tuple[Any, Any, bool]:
    """(pool, connection, owned) of what a store was given: a connection
    string (an autocommit pool the store owns, opened on first use; with
    `bounded`, its connections bounded as :func:`_bounded` says), a pool or
    an open connection (the caller keeps either)."""
    if isinstance(given, str):
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
            raise IntentkeyError("invalid-argument", "max_size", "max_size must be a whole number of at least 1")
        kwargs: Dict[str, Any] = {"autocommit": True}
        if bounded:
            kwargs.update(_bounded(given))
        pool = pool_class(given, min_size=1, max_size=max_size, open=False, kwargs=kwargs,
                          timeout=_check_timeout(timeout), name="intentkey")
        return pool, None, True
    if isinstance(given, pool_class):
        return given, None, False
    if isinstance(given, connection_class):
        return None, given, False
    raise IntentkeyError("invalid-argument", "conninfo_or_pool",
                         f"{where} takes a connection string, a psycopg_pool.{pool_class.__name__} or a "
                         f"psycopg.{connection_class.__name__}, not {type(given).__name__}")


def _complete_name(completion: Completion, statements: Dict[str, sch.Statement]) -> str:
    return "complete-fast" if completion.fast and "complete-fast" in statements else "complete"


class PostgresStore(SqlStore):
    """A record store in PostgreSQL (sync: for :class:`intentkey.Guard`).

    `conninfo_or_pool`: a connection string (``"postgresql://user@host/db"``
    or ``"host=… dbname=…"``; the store makes a ``ConnectionPool`` of up to
    `max_size` autocommit connections and :meth:`close` closes it), a
    ``psycopg_pool.ConnectionPool`` or an open ``psycopg.Connection`` (the
    caller keeps either). `schema`: the tables' schema (must exist).
    `timeout`: how long an owned pool waits for a connection. `notify`:
    send the core's ``notify`` after each write that changed a record, so
    that the waiters of other processes (an :class:`AsyncPostgresStore`
    listening) wake at once.

    A store call is bounded only as psycopg's sync API allows: made from a
    connection string, the pool's connections time out connecting
    (``connect_timeout``) and drop data the server's host stops
    acknowledging (``tcp_user_timeout``) after the core's store deadline
    (unless the string sets them), and a connection is waited for at most
    `timeout`; a server that takes the statement and never answers is not
    bounded (there is no read timeout): :class:`AsyncPostgresStore` under
    :class:`intentkey.aio.AsyncGuard` cuts every call at its deadline."""

    #: The store's kind, as telemetry names it (``intentkey.store``).
    kind = "postgres"

    def __init__(self, conninfo_or_pool: Union[str, "ConnectionPool[Any]", "psycopg.Connection[Any]"],
                 schema: Optional[str] = None, *, max_size: int = 4, timeout: float = DEFAULT_TIMEOUT,
                 notify: bool = False, **unknown: Any):
        b.no_unknown("intentkey.stores.postgres.PostgresStore", unknown,
                     ("schema", "max_size", "timeout", "notify"))
        self.notify = _check_notify(notify)
        self._changes = Changes()
        self.schema = _check_schema(schema)
        self._statements = sch.sql_statements("postgres", self.schema)
        self._pool, self._conn, self._owned = _connect(
            "PostgresStore", conninfo_or_pool, ConnectionPool, psycopg.Connection, max_size, timeout, bounded=True)
        self._lock = threading.Lock()  # the migration; and a single connection's use
        self._migrated = False
        self._opened = False

    def __repr__(self) -> str:
        return f"PostgresStore(schema={self.schema!r}, owned={self._owned})"

    @contextmanager
    def _connection(self) -> Iterator["psycopg.Connection[Any]"]:
        if self._conn is not None:
            with self._lock:
                yield self._conn
            return
        pool = self._pool
        assert pool is not None
        if self._owned and not self._opened:
            with self._lock:
                if not self._opened:
                    pool.open(wait=False)
                    self._opened = True
        with pool.connection() as conn:
            yield conn

    def migrate(self) -> None:
        """Applies every missing migration (done on first use; idempotent)."""
        if self._migrated:
            return
        try:
            with self._connection() as conn:
                if self._migrated:
                    return
                with conn.transaction():
                    # The core's migration flow names each statement; this runs them.
                    cur = psycopg.RawCursor(conn)
                    flow = sch.MigrationFlow("postgres", self.schema)
                    step = flow.start()
                    while isinstance(step, sch.SqlCall):
                        cur.execute(step.text, step.params or None)
                        step = flow.resume(_first_int(cur.fetchone()) if step.query else None)
                self._migrated = True
        except StoreError:
            raise
        except IntentkeyError as e:  # the flow's: a database at a newer schema
            raise StoreError("failed", f"postgres: {e.message}") from None
        except (psycopg.Error, OSError) as e:
            raise _failure(e) from e

    def _execute(self, name: str, params: Sequence[Any], rows: bool) -> Any:
        self.migrate()
        text = self._statements[name].text
        try:
            with self._connection() as conn:
                if conn.autocommit or self._conn is None:
                    cur = psycopg.RawCursor(conn).execute(text, list(params), prepare=True)
                    return cur.fetchall() if rows else cur.rowcount
                with conn.transaction():
                    cur = psycopg.RawCursor(conn).execute(text, list(params), prepare=True)
                    return cur.fetchall() if rows else cur.rowcount
        except (psycopg.Error, OSError) as e:
            raise _failure(e) from e

    def _complete_statement(self, completion: Completion) -> str:
        return _complete_name(completion, self._statements)

    def _wrote(self, key: str) -> None:
        super()._wrote(key)
        if self.notify and "notify" in self._statements:
            try:
                self._execute("notify", [key], False)
            except StoreError as e:  # the write stands; the waiters elsewhere look again at their next re-check
                log.warning("intentkey: postgres: the notification of a changed record was not sent: %s", e)

    def close(self) -> None:
        """Closes the pool if this store made it."""
        if self._owned and self._pool is not None and self._opened:
            self._pool.close()


class AsyncPostgresStore:
    """A record store in PostgreSQL for ``asyncio`` (:class:`intentkey.aio.AsyncGuard`).

    `conninfo_or_pool`: a connection string (the store makes an
    ``AsyncConnectionPool`` of autocommit connections, opened on first use;
    :meth:`close` closes it), a ``psycopg_pool.AsyncConnectionPool`` or an
    open ``psycopg.AsyncConnection`` (the caller keeps either). As
    :class:`PostgresStore` otherwise (``notify`` included).

    A retry waiting for the first attempt (``wait_max_ms``) is woken by this
    store's own writes, and, once anything waits, by a listening connection
    of the store's own (the core's ``listen`` statement): the notifications
    of every writer that sends them (``notify=True``, in any process or
    language). :meth:`close` closes it."""

    #: The async flows claim through :meth:`_claim` (one round trip for a repeat).
    _INTENTKEY_CLAIM = True

    #: The store's kind, as telemetry names it (``intentkey.store``).
    kind = "postgres"

    def __init__(self, conninfo_or_pool: Union[str, "AsyncConnectionPool[Any]", "psycopg.AsyncConnection[Any]"],
                 schema: Optional[str] = None, *, max_size: int = 4, timeout: float = DEFAULT_TIMEOUT,
                 notify: bool = False, **unknown: Any):
        b.no_unknown("intentkey.stores.postgres.AsyncPostgresStore", unknown,
                     ("schema", "max_size", "timeout", "notify"))
        self.notify = _check_notify(notify)
        self._changes = Changes()
        self.schema = _check_schema(schema)
        self._statements = sch.sql_statements("postgres", self.schema)
        self._pool, self._conn, self._owned = _connect(
            "AsyncPostgresStore", conninfo_or_pool, AsyncConnectionPool, psycopg.AsyncConnection, max_size, timeout)
        self._given = conninfo_or_pool if isinstance(conninfo_or_pool, str) else None
        self._timeout = timeout
        self._lock: Optional[asyncio.Lock] = None
        self._migrated = False
        self._opened = False
        self._listener: Optional["asyncio.Task[None]"] = None
        self._listener_lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"AsyncPostgresStore(schema={self.schema!r}, owned={self._owned})"

    def _the_lock(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator["psycopg.AsyncConnection[Any]"]:
        if self._conn is not None:
            async with self._the_lock():
                yield self._conn
            return
        pool = self._pool
        assert pool is not None
        if self._owned and not self._opened:
            async with self._the_lock():
                if not self._opened:
                    await pool.open(wait=False)
                    self._opened = True
        async with pool.connection() as conn:
            yield conn

    async def migrate(self) -> None:
        """Applies every missing migration (done on first use; idempotent)."""
        if self._migrated:
            return
        try:
            async with self._connection() as conn:
                if self._migrated:
                    return
                async with conn.transaction():
                    # The core's migration flow names each statement; this runs them.
                    cur = psycopg.AsyncRawCursor(conn)
                    flow = sch.MigrationFlow("postgres", self.schema)
                    step = flow.start()
                    while isinstance(step, sch.SqlCall):
                        await cur.execute(step.text, step.params or None)
                        step = flow.resume(_first_int(await cur.fetchone()) if step.query else None)
                self._migrated = True
        except StoreError:
            raise
        except IntentkeyError as e:  # the flow's: a database at a newer schema
            raise StoreError("failed", f"postgres: {e.message}") from None
        except (psycopg.Error, OSError) as e:
            raise _failure(e) from e

    async def _execute(self, name: str, params: Sequence[Any], rows: bool) -> Any:
        await self.migrate()
        text = self._statements[name].text
        try:
            async with self._connection() as conn:
                if conn.autocommit or self._conn is None:
                    cur = await psycopg.AsyncRawCursor(conn).execute(text, list(params), prepare=True)
                    return await cur.fetchall() if rows else cur.rowcount
                async with conn.transaction():
                    cur = await psycopg.AsyncRawCursor(conn).execute(text, list(params), prepare=True)
                    return await cur.fetchall() if rows else cur.rowcount
        except (psycopg.Error, OSError) as e:
            raise _failure(e) from e

    async def _changed(self, name: str, params: Sequence[Any]) -> int:
        return int(await self._execute(name, params, False))

    async def _records(self, name: str, params: Sequence[Any]) -> List[StoredRecord]:
        return [sch.sql_decode_row(row) for row in await self._execute(name, params, True)]

    async def _written(self, key: str, changed: int) -> bool:
        """A write that changed record `key` wakes its waiters: here, and
        (``notify``) in every process listening."""
        if changed != 1:
            return False
        self._changes.notify(key)
        if self.notify and "notify" in self._statements:
            try:
                await self._execute("notify", [key], False)
            except StoreError as e:  # the write stands; the waiters elsewhere look again at their next re-check
                log.warning("intentkey: postgres: the notification of a changed record was not sent: %s", e)
        return True

    async def insert(self, record: StoredRecord) -> bool:
        return await self._changed("insert", sch.sql_insert_params(record)) == 1

    async def _claim(self, record: StoredRecord) -> Union[bool, StoredRecord]:
        """The claim in one statement (the core's ``claim``): whether it
        inserted, or the record it lost to, read in the same statement, so the
        flow needs no ``get`` (the async guard and middleware use it)."""
        rows = await self._execute("claim", sch.sql_insert_params(record), True)
        claimed = sch.sql_decode_claim(rows[0] if rows else [])
        if isinstance(claimed, sch.Existing):
            return claimed.record
        return isinstance(claimed, sch.Won)

    async def get(self, key: str) -> Optional[StoredRecord]:
        found = await self._records("get", sch.sql_get_params(key))
        return found[0] if found else None

    async def complete(self, completion: Completion) -> bool:
        name = _complete_name(completion, self._statements)
        return await self._written(completion.key, await self._changed(name, sch.sql_complete_params(completion)))

    async def replace(self, replacement: Replacement) -> bool:
        changed = await self._changed("replace", sch.sql_replace_params(replacement))
        return await self._written(replacement.record.key, changed)

    async def release(self, request: ReleaseRequest) -> bool:
        return await self._written(request.key, await self._changed("release", sch.sql_release_params(request)))

    async def watch(self, key: str, ms: int) -> None:
        """Returns when record `key` changes (a write of this store, or a
        notification), or after `ms` milliseconds."""
        await self._wake_ready()
        await self._changes.wait_async(key, ms / 1000)

    # -- the listening connection ------------------------------------------------------------

    def listening(self) -> bool:
        """Whether the listening connection's task is running (it may be between connections)."""
        task = self._listener
        return task is not None and not task.done()

    async def _wake_ready(self) -> None:
        """Starts the listening connection on this event loop, unless it
        runs already or the store cannot open one (given a connection)."""
        if self._closed or "listen" not in self._statements or (self._given is None and self._pool is None):
            return
        with self._listener_lock:
            task = self._listener
            if task is not None and not task.done():
                return
            self._listener = asyncio.get_running_loop().create_task(self._listen(), name="intentkey-postgres-listen")

    async def _listen_target(self) -> Tuple[str, Dict[str, Any]]:
        """The connection string and keyword arguments of the listening
        connection: the store's own, or its pool's."""
        if self._given is not None:
            conninfo: Any = self._given
            kwargs: Any = {}
        else:
            assert self._pool is not None
            conninfo, kwargs = self._pool.conninfo, self._pool.kwargs
            if callable(conninfo):
                conninfo = conninfo()
            if inspect.isawaitable(conninfo):
                conninfo = await conninfo
            if callable(kwargs):
                kwargs = kwargs()
            if inspect.isawaitable(kwargs):
                kwargs = await kwargs
        arguments: Dict[str, Any] = dict(_LISTEN_KEEPALIVES)
        arguments.update(kwargs or {})
        arguments["autocommit"] = True
        return str(conninfo or ""), arguments

    async def _listen(self) -> None:
        """The listening connection's life: connect, run the core's
        ``listen`` statement, wake every waiter (what changed while nobody
        listened is unknown), then wake the waiters of each key notified;
        on a failure, connect again after a pause."""
        delay = LISTEN_RETRY_FIRST
        listen = self._statements["listen"].text
        while not self._closed:
            conn: Optional["psycopg.AsyncConnection[Any]"] = None
            try:
                conninfo, kwargs = await self._listen_target()
                conn = await asyncio.wait_for(psycopg.AsyncConnection.connect(conninfo, **kwargs), self._timeout)
                await conn.execute(listen)
                self._changes.notify_all()
                delay = LISTEN_RETRY_FIRST
                async for note in conn.notifies():
                    self._changes.notify(note.payload)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the waiters fall back on the core's re-checks meanwhile
                if not self._closed:
                    log.warning("intentkey: postgres: the listening connection failed (%s); again in %.1f s",
                                _failure(e).message, delay)
            finally:
                if conn is not None:
                    try:
                        await conn.close()
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
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover - close() is a coroutine
            running = None
        if loop is running:
            task.cancel()
            await asyncio.wait({task})  # ended; a cancellation of this close itself still propagates
        elif not loop.is_closed():
            loop.call_soon_threadsafe(task.cancel)

    async def list(self, status: Status, limit: int) -> List[StoredRecord]:
        if limit <= 0:
            return []
        return await self._records("list", sch.sql_list_params(status, limit))

    async def purge(self, now: int) -> int:
        return await self._changed("purge", sch.sql_purge_params(now))

    async def count(self, status: Status) -> sch.StatusCount:
        """How many records have `status`, and the oldest claim among them (the core's ``count``)."""
        return _counted(Status(status), await self._execute("count", sch.sql_count_params(Status(status)), True))

    async def close(self) -> None:
        """Closes the listening connection, and the pool if this store made it."""
        self._closed = True
        await self._stop_listening()
        if self._owned and self._pool is not None and self._opened:
            await self._pool.close()

    async def __aenter__(self) -> "AsyncPostgresStore":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
