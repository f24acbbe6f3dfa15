"""A store in SQLite through the standard library's ``sqlite3``.

WAL, ``synchronous=FULL`` and a busy timeout, so several processes (Python,
Node's better-sqlite3, the Rust host) can share one database file. The
schema is the component's, applied above ``PRAGMA user_version`` inside
``BEGIN IMMEDIATE`` as the other runtimes do; every statement is the core's
(``schema/sqlite.sql`` through :func:`intentkey.schema.sql_statements`),
with the parameters the core makes and the rows the core decodes. Every
operation is one statement; every write after the claim is fenced on the
owner token. Fast completions are written like any other.

>>> import intentkey
>>> from intentkey.stores import SQLiteStore
>>> store = SQLiteStore(":memory:")
>>> guard = intentkey.Guard(store)
>>> attempt = intentkey.Attempt("k1", "fp", "tenant-acme", "pix.send")
>>> guard.run(attempt, lambda key: intentkey.Response.json(201, '{"id":1}'), now=1_700_000_000).outcome
'ran'
>>> guard.run(attempt, lambda key: intentkey.Response.json(201, '{"id":2}'), now=1_700_000_001).response.body
b'{"id":1}'
>>> store.close()
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Any, Sequence, Union

from .. import _binding as b
from .. import schema as sch
from .._watch import Changes
from ..errors import IntentkeyError
from ..types import StoreError
from ._sql import SqlStore, first_int

__all__ = ["SQLiteStore"]


def _failure(e: BaseException) -> StoreError:
    """sqlite3's error as a store error: busy or locked is retryable."""
    name = str(getattr(e, "sqlite_errorname", "") or "")
    text = str(e)
    busy = name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or (
        not name and isinstance(e, sqlite3.OperationalError) and ("locked" in text or "busy" in text))
    return StoreError("unavailable" if busy else "failed", f"sqlite: {name + ': ' if name else ''}{text}")


class SQLiteStore(SqlStore):
    """A record store in SQLite (sync: for :class:`intentkey.Guard`).

    `path_or_connection`: a file path (``":memory:"`` for one process; opened
    here, closed by :meth:`close`) or an open :class:`sqlite3.Connection`
    (the caller keeps it; the store switches it to autocommit mode and runs
    its own transactions). `busy_timeout_ms`: how long a write waits for
    another writer before the operation is ``unavailable``.

    A retry waiting for the first attempt (``wait_max_ms``) is woken by this
    store's own writes; the writes of another store or process on the same
    file are seen at the core's next re-check (50 ms doubling to 1 s)."""

    #: The store's kind, as telemetry names it (``intentkey.store``).
    kind = "sqlite"

    def __init__(self, path_or_connection: Union[str, "sqlite3.Connection"], *, busy_timeout_ms: int = 10_000, **unknown: Any):
        b.no_unknown("intentkey.stores.sqlite.SQLiteStore", unknown)
        if isinstance(busy_timeout_ms, bool) or not isinstance(busy_timeout_ms, int) or busy_timeout_ms < 0:
            raise IntentkeyError("invalid-argument", "busy_timeout_ms",
                                 "busy_timeout_ms must be a whole number of milliseconds")
        self._owned = False
        self._changes = Changes()
        if isinstance(path_or_connection, str):
            try:
                db = sqlite3.connect(path_or_connection, isolation_level=None, check_same_thread=False,
                                     timeout=busy_timeout_ms / 1000)
            except sqlite3.Error as e:
                raise _failure(e) from e
            self._owned = True
        elif isinstance(path_or_connection, sqlite3.Connection):
            db = path_or_connection
            db.isolation_level = None
        else:
            raise IntentkeyError("invalid-argument", "path_or_connection",
                                 "SQLiteStore takes a file path or an open sqlite3.Connection, "
                                 f"not {type(path_or_connection).__name__}")
        self.db = db
        self._lock = threading.RLock()
        self._statements = sch.sql_statements("sqlite")
        try:
            with self._lock:
                db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
                db.execute("PRAGMA journal_mode = WAL")
                db.execute("PRAGMA synchronous = FULL")
                self._migrate()
        except BaseException:
            if self._owned:
                db.close()
            raise

    def __repr__(self) -> str:
        return f"SQLiteStore(owned={self._owned})"

    def _migrate(self) -> None:
        """The core's migration flow in one ``BEGIN IMMEDIATE`` transaction
        (one writer at a time): it reads ``PRAGMA user_version``, names each
        missing migration's statements and the new version; this runs them."""
        db = self.db
        try:
            flow = sch.MigrationFlow("sqlite")
            db.execute("BEGIN IMMEDIATE")
            try:
                step = flow.start()
                while isinstance(step, sch.SqlCall):
                    row = db.execute(step.text, step.params).fetchone()
                    step = flow.resume(first_int(row) if step.query else None)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except IntentkeyError as e:  # the flow's: a database at a newer schema
            raise StoreError("failed", f"sqlite: {e.message}") from None
        except sqlite3.Error as e:
            raise _failure(e) from e

    def _execute(self, name: str, params: Sequence[Any], rows: bool) -> Any:
        """Runs the core's statement `name`: its rows (`rows`), or the rows it changed."""
        with self._lock:
            try:
                cur = self.db.execute(self._statements[name].text, tuple(params))
                return cur.fetchall() if rows else cur.rowcount
            except sqlite3.Error as e:
                raise _failure(e) from e

    def close(self) -> None:
        """Closes the database if this store opened it."""
        if self._owned:
            with self._lock:
                self.db.close()
