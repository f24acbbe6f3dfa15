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
"""

from __future__ import annotations

import asyncio
import threading
from contextlib import asynccontextmanager, contextmanager
from typing import Any, AsyncIterator, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from .. import _binding as b
from .. import schema as sch
from ..errors import IntentkeyError
from ..types import Completion, ReleaseRequest, Replacement, Status, StoredRecord, StoreError
from ._sql import SqlStore
from ._sql import check_schema as _check_schema
from ._sql import first_int as _first_int

__all__ = ["AsyncPostgresStore", "PostgresStore"]

#: Seconds an owned pool waits for a connection before the operation is ``unavailable``.
DEFAULT_TIMEOUT = 10.0

_RETRYABLE_STATES = ("53300", "40001", "40P01")


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


def _connect(where: str, given: Any, pool_class: Any, connection_class: Any, max_size: int,
             timeout: float) -> Tuple[Any, Any, bool]:
    """(pool, connection, owned) of what a store was given: a connection
    string (an autocommit pool the store owns, opened on first use), a pool
    or an open connection (the caller keeps either)."""
    if isinstance(given, str):
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
            raise IntentkeyError("invalid-argument", "max_size", "max_size must be a whole number of at least 1")
        pool = pool_class(given, min_size=1, max_size=max_size, open=False, kwargs={"autocommit": True},
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
    `timeout`: how long an owned pool waits for a connection."""

    def __init__(self, conninfo_or_pool: Union[str, "ConnectionPool[Any]", "psycopg.Connection[Any]"],
                 schema: Optional[str] = None, *, max_size: int = 4, timeout: float = DEFAULT_TIMEOUT, **unknown: Any):
        b.no_unknown("intentkey.stores.postgres.PostgresStore", unknown)
        self.schema = _check_schema(schema)
        self._statements = sch.sql_statements("postgres", self.schema)
        self._pool, self._conn, self._owned = _connect(
            "PostgresStore", conninfo_or_pool, ConnectionPool, psycopg.Connection, max_size, timeout)
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
    :class:`PostgresStore` otherwise."""

    def __init__(self, conninfo_or_pool: Union[str, "AsyncConnectionPool[Any]", "psycopg.AsyncConnection[Any]"],
                 schema: Optional[str] = None, *, max_size: int = 4, timeout: float = DEFAULT_TIMEOUT, **unknown: Any):
        b.no_unknown("intentkey.stores.postgres.AsyncPostgresStore", unknown)
        self.schema = _check_schema(schema)
        self._statements = sch.sql_statements("postgres", self.schema)
        self._pool, self._conn, self._owned = _connect(
            "AsyncPostgresStore", conninfo_or_pool, AsyncConnectionPool, psycopg.AsyncConnection, max_size, timeout)
        self._lock: Optional[asyncio.Lock] = None
        self._migrated = False
        self._opened = False

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

    async def insert(self, record: StoredRecord) -> bool:
        return await self._changed("insert", sch.sql_insert_params(record)) == 1

    async def get(self, key: str) -> Optional[StoredRecord]:
        found = await self._records("get", sch.sql_get_params(key))
        return found[0] if found else None

    async def complete(self, completion: Completion) -> bool:
        name = _complete_name(completion, self._statements)
        return await self._changed(name, sch.sql_complete_params(completion)) == 1

    async def replace(self, replacement: Replacement) -> bool:
        return await self._changed("replace", sch.sql_replace_params(replacement)) == 1

    async def release(self, request: ReleaseRequest) -> bool:
        return await self._changed("release", sch.sql_release_params(request)) == 1

    async def list(self, status: Status, limit: int) -> List[StoredRecord]:
        if limit <= 0:
            return []
        return await self._records("list", sch.sql_list_params(status, limit))

    async def purge(self, now: int) -> int:
        return await self._changed("purge", sch.sql_purge_params(now))

    async def close(self) -> None:
        """Closes the pool if this store made it."""
        if self._owned and self._pool is not None and self._opened:
            await self._pool.close()

    async def __aenter__(self) -> "AsyncPostgresStore":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
