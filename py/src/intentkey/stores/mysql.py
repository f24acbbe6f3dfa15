"""A store in MySQL 8 or MariaDB through PyMySQL: :class:`MySQLStore` (sync).

The schema is the component's (the core's one SQL schema, translated for
MySQL by the core: backquoted identifiers, a binary ``VARBINARY(1020)`` key
compared byte for byte, ``LONGBLOB`` bodies, ``utf8mb4_bin`` text). MySQL
commits every DDL statement by itself, so the core's migration flow runs
with autocommit and no transaction on one dedicated connection, under a
named lock (``GET_LOCK``) the flow takes first and gives back last; on any
error that connection is closed, which frees the lock. Every statement is
the core's (``schema/mysql.sql`` through
:func:`intentkey.schema.sql_statements`), with the parameters the core makes,
bound to the positional ``?`` in the order the core names (``binds``), and
the rows the core decodes: this module only binds and runs.

The claim is a plain ``INSERT``: an existing key is the server's error 1062
(the core's :func:`intentkey.schema.sql_duplicate_key_error`), answered as
"not inserted"; the core's flow then reads the record (MySQL has no
one-round-trip claim and no ``complete-fast``: a fast completion is written
like any other). Every write after the claim is fenced on the owner token;
connections are opened with ``CLIENT_FOUND_ROWS``, so an ``UPDATE`` counts
the rows it matched, and with autocommit (each statement is one atomic
step).

>>> import intentkey
>>> from intentkey.stores import MySQLStore
>>> store = MySQLStore("mysql://root@127.0.0.1:3306/test")      # doctest: +SKIP
>>> intentkey.Guard(store).run(intentkey.Attempt("k1", "fp", "t", "a"),
...     lambda key: intentkey.Response.json(201, "{}")).outcome  # doctest: +SKIP
'ran'
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple
from urllib.parse import unquote, urlsplit

import pymysql
import pymysql.cursors
from pymysql.connections import Connection
from pymysql.constants import CLIENT

from .. import _binding as b
from .. import schema as sch
from .._watch import Changes
from ..claims import store_deadline_ms
from ..errors import IntentkeyError
from ..types import StoredRecord, StoreError
from ._sql import SqlStore, check_schema, first_int

__all__ = ["MySQLStore"]

#: Seconds to wait for the server when opening a connection.
DEFAULT_CONNECT_TIMEOUT = 10.0
#: Seconds an operation waits for a free connection (all `max_size` busy) before it is ``unavailable``.
DEFAULT_TIMEOUT = 10.0

#: The longest key the store holds, in characters: the core's MySQL key column
#: is ``VARBINARY(1020)``, 255 characters of UTF-8 (the core's own keys are 64
#: characters at most).
KEY_CHARS = 255

#: An idle connection unused for longer than this is pinged before it is used.
_PING_AFTER = 30.0


_SCHEMES = ("mysql", "mariadb")


def _pyformat(text: str) -> Tuple[str, int]:
    """`text` with each positional ``?`` placeholder as PyMySQL's ``%s``
    (paramstyle ``format``) and every literal ``%`` doubled, so that
    PyMySQL's ``text % values`` gives back the text: (the text, how many
    placeholders). A ``?`` inside quotes (``'…'``, ``"…"``, a backquoted
    identifier such as a database name) is text, not a placeholder.

    >>> _pyformat("SELECT a FROM `t?` WHERE b = ? AND c LIKE '10%?' LIMIT ?")
    ("SELECT a FROM `t?` WHERE b = %s AND c LIKE '10%%?' LIMIT %s", 2)
    """
    out: List[str] = []
    placeholders = 0
    quote = ""
    escaped = False
    for c in text:
        if quote:
            if escaped:
                escaped = False
            elif c == "\\" and quote != "`":
                escaped = True
            elif c == quote:
                quote = ""  # a doubled quote closes and reopens: the same text
        elif c in "'\"`":
            quote = c
        elif c == "?":
            out.append("%s")
            placeholders += 1
            continue
        out.append("%%" if c == "%" else c)
    return "".join(out), placeholders


def _checked_pyformat(text: str, values: int, what: str) -> str:
    """:func:`_pyformat` of one of the core's statements, which binds `values` values."""
    converted, placeholders = _pyformat(text)
    if placeholders != values:
        raise StoreError("failed", f"mysql: the core's {what} has {placeholders} placeholders for {values} values")
    return converted


def _code(e: BaseException) -> Optional[int]:
    args: Tuple[Any, ...] = tuple(e.args)
    return args[0] if isinstance(e, pymysql.err.MySQLError) and args and isinstance(args[0], int) else None


def _failure(e: BaseException) -> StoreError:
    """PyMySQL's error as a store error: a refused, lost or closed connection
    (``InterfaceError``, ``OSError``) or an error code the core's table calls
    a lost connection or retryable (:func:`intentkey.schema.sql_error_class`:
    client errors 2000-2999, a deadlock, a lock wait timeout, too many
    connections…) is ``unavailable``; anything else ``failed``. The message is the driver's (the server's text names the
    user, never the password)."""
    code = _code(e)
    args: Tuple[Any, ...] = tuple(e.args)
    if code is not None and len(args) > 1:
        text = str(args[1]).strip()
    else:
        text = str(e).strip()
    text = text or type(e).__name__
    if isinstance(e, (pymysql.err.InterfaceError, OSError)):
        unavailable = True
    elif code is not None and code != 0:
        unavailable = sch.sql_error_class("mysql", code) in ("connection-lost", "retryable")
    else:
        unavailable = isinstance(e, pymysql.err.OperationalError)
    where = f"mysql: {code}: " if code else "mysql: "
    return StoreError("unavailable" if unavailable else "failed", where + text)


def _reusable(e: BaseException) -> bool:
    """Whether a connection that raised `e` is still fit for the next
    statement: after a server's error on one statement (a duplicate key, a
    bad value) it is; after a lost connection, a client error or anything
    that is not the server's answer (an interrupted read) it is not."""
    code = _code(e)
    return (isinstance(e, pymysql.err.MySQLError) and not isinstance(e, pymysql.err.InterfaceError)
            and code is not None and 0 < code
            and sch.sql_error_class("mysql", code) != "connection-lost")


def _close_quietly(conn: Any) -> None:
    try:
        conn.close()
    except Exception:
        pass  # already closed, or the socket is gone: nothing left to free


def _check_key(key: str) -> None:
    """Refuses a key longer than the 255 characters the key column holds
    (counted as ``len`` does)."""
    if len(key) > KEY_CHARS:
        raise IntentkeyError(
            "invalid-argument", "key",
            f"key is {len(key)} characters long; a MySQL store holds keys of at most {KEY_CHARS} "
            f"(the column is VARCHAR({KEY_CHARS}); intentkey's own keys are 64 at most)")


def _url_params(url: str, schema: Optional[str], connect_timeout: float) -> Dict[str, Any]:
    """PyMySQL's connection arguments from ``mysql://user:password@host:port/database``.
    The URL is never echoed in an error: it may hold a password."""
    if not isinstance(url, str):
        raise IntentkeyError("invalid-argument", "url",
                             f"url must be a string mysql://user:password@host:port/database, not {type(url).__name__}")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise IntentkeyError("invalid-argument", "url",
                             "url is not a URL: mysql://user:password@host:port/database") from None
    if parts.scheme not in _SCHEMES:
        raise IntentkeyError("invalid-argument", "url",
                             f"url must start with mysql:// or mariadb:// (it starts with {parts.scheme or '(none)'}:)")
    if parts.query or parts.fragment:
        raise IntentkeyError("invalid-argument", "url",
                             "url takes no query string or fragment: mysql://user:password@host:port/database")
    database = unquote(parts.path[1:]) if parts.path.startswith("/") else unquote(parts.path)
    if "/" in database:
        raise IntentkeyError("invalid-argument", "url", "url names one database: mysql://user:password@host:port/database")
    if database == "" and schema is None:
        raise IntentkeyError("invalid-argument", "url",
                             "url names no database: add /database to the URL, or pass schema=")
    params: Dict[str, Any] = {
        "host": parts.hostname or "localhost",
        "port": port or 3306,
        "user": unquote(parts.username) if parts.username else None,
        "password": unquote(parts.password) if parts.password else "",
        "database": database or None,
    }
    deadline = store_deadline_ms() / 1000
    params.update(charset="utf8mb4", autocommit=True, client_flag=CLIENT.FOUND_ROWS,
                  connect_timeout=connect_timeout, read_timeout=deadline, write_timeout=deadline)
    return params


class MySQLStore(SqlStore):
    """A record store in MySQL 8 or MariaDB (sync: for :class:`intentkey.Guard`).

    `url`: ``mysql://user:password@host:port/database`` (``mariadb://`` too;
    user, password and database percent-encoded where needed); or `connect`:
    a function that opens a new ``pymysql.connections.Connection``, which
    must have ``client_flag`` with ``CLIENT.FOUND_ROWS`` and PyMySQL's
    defaults ``use_unicode=True`` and ``charset="utf8mb4"`` (the store
    switches it to autocommit). Either way the store opens connections as it
    needs them, uses up to `max_size` at once and closes them all in
    :meth:`close`. `schema`: the database that holds the tables (it must
    exist; the statements name the tables qualified); without it the tables
    are in the connection's database. `connect_timeout`: seconds to wait for
    the server when connecting; `timeout`: seconds an operation waits for a
    free connection. Connections made from `url` bound each read and write
    of a statement by the core's store deadline (2 s: PyMySQL's
    ``read_timeout`` and ``write_timeout``; a statement that does not answer
    in time is ``unavailable`` and its connection closed); the migration's
    connection, which waits for the named lock, is not bounded.

    The tables are created on first use (or by :meth:`migrate`) under the
    core's named lock, so processes in any language can start at once. The
    store is safe to share between threads: each operation takes a
    connection of its own."""

    #: The store's kind, as telemetry names it (``intentkey.store``).
    kind = "mysql"

    def __init__(self, url: Optional[str] = None, *, connect: Optional[Callable[[], Connection]] = None,
                 schema: Optional[str] = None, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
                 max_size: int = 4, timeout: float = DEFAULT_TIMEOUT, **unknown: Any):
        b.no_unknown("intentkey.stores.mysql.MySQLStore", unknown,
                     ("url", "connect", "schema", "connect_timeout", "max_size", "timeout"))
        self.schema = check_schema(schema)
        self._changes = Changes()  # its own writes wake its waiters (wait_max_ms)
        connect_timeout = b.positive_seconds("connect_timeout", connect_timeout)
        self._timeout = b.positive_seconds("timeout", timeout)
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
            raise IntentkeyError("invalid-argument", "max_size", "max_size must be a whole number of at least 1")
        if (url is None) == (connect is None):
            raise IntentkeyError("invalid-argument", "url" if url is None else "connect",
                                 "MySQLStore takes either url (mysql://user:password@host:port/database) "
                                 "or connect (a function opening a pymysql connection), not both and not neither")
        self._params: Optional[Dict[str, Any]] = None
        if url is not None:
            self._params = _url_params(url, self.schema, connect_timeout)
        elif not callable(connect):
            raise IntentkeyError("invalid-argument", "connect",
                                 f"connect must be a function opening a pymysql connection, not {type(connect).__name__}")
        self._connect = connect
        # Each of the core's statements as PyMySQL runs it, with the order of its values.
        self._statements: Dict[str, Tuple[str, Tuple[int, ...]]] = {
            name: (_checked_pyformat(st.text, len(st.binds), f"statement {name}"), st.binds)
            for name, st in sch.sql_statements("mysql", self.schema).items()}
        self._duplicate = sch.sql_duplicate_key_error("mysql")
        self._idle: List[Tuple[Connection, float]] = []
        self._slots = threading.BoundedSemaphore(max_size)
        self._max_size = max_size
        self._lock = threading.Lock()  # the idle connections and the closed flag
        self._migrating = threading.Lock()
        self._migrated = False
        self._closed = False

    def __repr__(self) -> str:
        if self._params is None:
            return f"MySQLStore(connect=..., schema={self.schema!r})"
        return (f"MySQLStore(host={self._params['host']!r}, port={self._params['port']}, "
                f"database={self._params['database']!r}, schema={self.schema!r})")

    # -- connections ------------------------------------------------------------------------------

    def _open(self, bounded: bool = True) -> Connection:
        """A new connection, with autocommit and CLIENT_FOUND_ROWS (from the
        URL: each read and write bounded by the store deadline, unless not
        `bounded`: the migration's, which waits for the named lock)."""
        if self._params is not None:
            params = self._params if bounded else dict(self._params, read_timeout=None, write_timeout=None)
            try:
                return pymysql.connect(**params)
            except (pymysql.err.MySQLError, OSError) as e:
                raise _failure(e) from e
        assert self._connect is not None
        try:
            conn = self._connect()
        except (pymysql.err.MySQLError, OSError) as e:
            raise _failure(e) from e
        if not isinstance(conn, Connection):
            raise IntentkeyError("invalid-argument", "connect",
                                 f"connect must return a pymysql connection, not {type(conn).__name__}")
        problem = None
        if not conn.client_flag & CLIENT.FOUND_ROWS:
            problem = ("connects without client_flag=CLIENT.FOUND_ROWS: the fenced UPDATEs would count the "
                       "rows they changed, not the rows they matched")
        elif not conn.use_unicode:
            problem = "connects with use_unicode=False: text columns would come back as bytes"
        elif conn.charset != "utf8mb4":
            problem = f"connects with charset={conn.charset!r}: the store needs utf8mb4 (the tables' character set)"
        if problem is not None:
            _close_quietly(conn)
            raise IntentkeyError("invalid-argument", "connect", f"connect {problem}")
        try:
            conn.autocommit(True)
        except (pymysql.err.MySQLError, OSError) as e:
            _close_quietly(conn)
            raise _failure(e) from e
        return conn

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("failed", "mysql: the store is closed")

    def _idle_connection(self) -> Optional[Connection]:
        """The most recently used idle connection (pinged when it sat idle long)."""
        while True:
            with self._lock:
                self._check_open()
                if not self._idle:
                    return None
                conn, since = self._idle.pop()
            if time.monotonic() - since < _PING_AFTER:
                return conn
            try:
                conn.ping(reconnect=False)
                return conn
            except (pymysql.err.MySQLError, OSError):
                _close_quietly(conn)  # gone while idle (wait_timeout, a restart): the next one

    def _give_back(self, conn: Connection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._max_size:
                self._idle.append((conn, time.monotonic()))
                return
        _close_quietly(conn)

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        """A connection for one operation: an idle one, or a new one while
        fewer than `max_size` are in use."""
        if not self._slots.acquire(timeout=self._timeout):
            raise StoreError("unavailable", f"mysql: no connection free within {self._timeout:g} s "
                                            f"({self._max_size} in use; max_size)")
        try:
            conn = self._idle_connection() or self._open()
            try:
                yield conn
            except BaseException as e:
                if not _reusable(e):
                    _close_quietly(conn)
                    raise
                self._give_back(conn)
                raise
            self._give_back(conn)
        finally:
            self._slots.release()

    # -- the schema ---------------------------------------------------------------------------------

    def migrate(self) -> None:
        """Applies every missing migration (done on first use; idempotent):
        the core's migration flow, with autocommit on one dedicated
        connection, closed on any error (which frees the named lock)."""
        if self._migrated:
            return
        with self._migrating:
            if self._migrated:
                return
            self._check_open()
            conn = self._open(bounded=False)
            try:
                flow = sch.MigrationFlow("mysql", self.schema)
                with conn.cursor(pymysql.cursors.Cursor) as cur:
                    step = flow.start()
                    while isinstance(step, sch.SqlCall):
                        text = _checked_pyformat(step.text, len(step.params), "migration statement")
                        cur.execute(text, tuple(step.params))
                        step = flow.resume(first_int(cur.fetchone()) if step.query else None)
            except BaseException as e:
                _close_quietly(conn)
                if isinstance(e, IntentkeyError):  # the flow's: the lock not had, a newer schema
                    kind = "unavailable" if e.code == "store-unavailable" else "failed"
                    raise StoreError(kind, f"mysql: {e.message}") from None
                if isinstance(e, (pymysql.err.MySQLError, OSError)):
                    raise _failure(e) from e
                raise
            if self._params is not None:
                _close_quietly(conn)  # unbounded: not kept for the record statements
            else:
                self._give_back(conn)
            self._migrated = True

    # -- the operations -------------------------------------------------------------------------------

    def _execute(self, name: str, values: Sequence[sch.SqlValue], rows: bool) -> Any:
        """Runs the core's statement `name` with `values` bound in its
        placeholders' order: the rows, or the rows it matched; a duplicate
        key (the core's error) matched none."""
        self.migrate()
        text, binds = self._statements[name]
        try:
            with self._connection() as conn:
                with conn.cursor(pymysql.cursors.Cursor) as cur:
                    cur.execute(text, tuple(values[i] for i in binds))
                    return cur.fetchall() if rows else cur.rowcount
        except pymysql.err.IntegrityError as e:
            if self._duplicate is not None and _code(e) == self._duplicate:
                return 0
            raise _failure(e) from e
        except (pymysql.err.MySQLError, OSError) as e:
            raise _failure(e) from e

    def insert(self, record: StoredRecord) -> bool:
        # A plain INSERT: an existing key is error 1062, "not inserted".
        _check_key(record.key)
        return super().insert(record)

    def close(self) -> None:
        """Closes every connection the store opened (one in use is closed when it is given back)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            _close_quietly(conn)
