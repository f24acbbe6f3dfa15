"""The store schema, from the component's ``schema`` export (world ``pure``).

Every store of every intentkey runtime (Rust, Node, Python) executes the
same statements against the same tables and runs the same Redis scripts:
the core's ``crates/intentkey/schema/`` (the DDL, ``sqlite.sql``,
``postgres.sql``, ``mysql.sql`` with their parameter order and row decoding) and the Lua
scripts of its Redis layout (docs/store-schema.md), and every request of
its DynamoDB layout (docs/stores.md, "DynamoDB"). This module only hands
them over as Python values: the migrations, the statements of a dialect,
the parameters the core makes from a record, the record the core decodes
from a row, a stored Redis value or a DynamoDB item, the script call of each
fenced write and the DynamoDB request of each operation. A store prepares,
binds and runs them; it never writes SQL, Lua or a DynamoDB expression.

>>> from intentkey import schema
>>> schema.schema_version() >= 1
True
>>> sorted(schema.sql_statements("sqlite"))[:3]
['complete', 'get', 'insert']
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from wasmtime.component import Variant

from . import _binding as b
from .errors import IntentkeyError
from .types import Completion, ReleaseRequest, Replacement, Status, StoredRecord, StoreError

__all__ = [
    "DynamoRequest",
    "Existing",
    "Lost",
    "Migration",
    "RedisCall",
    "RedisLayout",
    "RedisScript",
    "SqlClaimed",
    "SqlValue",
    "Statement",
    "StatusCount",
    "Won",
    "dynamo_check_table",
    "dynamo_classify_error",
    "dynamo_complete",
    "dynamo_create_table",
    "dynamo_decode",
    "dynamo_default_table",
    "dynamo_describe_table",
    "dynamo_get",
    "dynamo_insert",
    "dynamo_list",
    "dynamo_listed",
    "dynamo_next_page",
    "dynamo_purge",
    "dynamo_purge_deletes",
    "dynamo_release",
    "dynamo_replace",
    "dynamo_table_ready",
    "migration_lock",
    "migrations",
    "migrations_table",
    "redis_batch",
    "redis_channel",
    "redis_channels",
    "redis_check_layout",
    "redis_claim",
    "redis_claimed",
    "redis_check_replicas",
    "redis_cluster_buckets",
    "redis_complete",
    "redis_decode",
    "redis_default_prefix",
    "redis_index_keys",
    "redis_insert",
    "redis_list",
    "redis_listed",
    "redis_purge",
    "redis_record_key",
    "redis_release",
    "redis_replace",
    "redis_scripts",
    "schema_version",
    "sql_complete_params",
    "sql_count_params",
    "sql_decode_claim",
    "sql_decode_count",
    "sql_decode_row",
    "sql_duplicate_key_error",
    "sql_error_class",
    "sql_get_params",
    "sql_insert_params",
    "sql_list_params",
    "sql_params",
    "sql_purge_params",
    "sql_release_params",
    "sql_replace_params",
    "sql_statements",
    "MigrationFlow",
    "Migrated",
    "SqlCall",
]

#: One SQL parameter or column value (WIT ``sql-value``): NULL, an integer
#: (bound at the parameter's width), text or bytes.
SqlValue = Union[None, int, str, bytes]

DIALECTS = ("sqlite", "postgres", "mysql")


@dataclass(frozen=True)
class Migration:
    """One migration: the version it brings the schema to, its statements in order."""

    version: int
    statements: Tuple[str, ...]


@dataclass(frozen=True)
class Statement:
    """One of the core's statements: what it does (``insert``, ``get``, …),
    a short prepared-statement name unique per statement and table, its text
    (``?1`` … for SQLite, ``$1`` … for PostgreSQL, positional ``?`` for
    MySQL), what binds to each parameter, in order, and `binds`: for each
    placeholder of the text, in text order, the index of the value (of the
    ``sql_*_params`` values) bound there (``0, 1, 2, …`` for SQLite and
    PostgreSQL; MySQL's ``?`` may bind one value twice): bind
    ``[values[i] for i in statement.binds]``."""

    name: str
    prepared_name: str
    text: str
    params: Tuple[str, ...]
    binds: Tuple[int, ...]


@dataclass(frozen=True)
class RedisScript:
    """One of the core's Lua scripts, with its SHA-1 (for ``EVALSHA``)."""

    name: str
    source: str
    sha1: str


@dataclass(frozen=True)
class RedisCall:
    """One call of a Redis script: its name, ``KEYS`` and ``ARGV``."""

    script: str
    keys: Tuple[str, ...]
    args: Tuple[str, ...]


@dataclass(frozen=True)
class RedisLayout:
    """Where a Redis store keeps its records (WIT ``redis-layout``): every
    key under `prefix` on one server, or, with `cluster`, spread by the core
    over slot-local buckets tagged ``{prefix:NN}`` so that no script touches
    two slots (``CROSSSLOT``). Which key goes where is the core's: ask
    :func:`redis_record_key`, :func:`redis_insert`, :func:`redis_list`, …"""

    prefix: str
    cluster: bool = False


@dataclass(frozen=True)
class StatusCount:
    """How many records have a status, and the oldest claim among them
    (``created_at``, seconds; ``None`` when the store cannot tell cheaply,
    or none has the status): what a store's cheap ``count(status)`` answers."""

    status: Status
    count: int
    oldest: Optional[int] = None


@dataclass(frozen=True)
class Won:
    """The ``claim`` statement's insert won."""


@dataclass(frozen=True)
class Lost:
    """The insert lost to a record the statement could not see: read it with ``get``."""


@dataclass(frozen=True)
class Existing:
    """The insert lost to this record."""

    record: StoredRecord


SqlClaimed = Union[Won, Lost, Existing]


def _call(name: str, *args: Any) -> Any:
    return b.runtime("pure").call(b.SCHEMA, name, *args)


_cache: Dict[Any, Any] = {}
_cache_lock = threading.Lock()


def _cached(key: Any, make: Any) -> Any:
    value = _cache.get(key)
    if value is None:
        value = make()
        with _cache_lock:
            _cache.setdefault(key, value)
    return value


# -- the schema ----------------------------------------------------------------------

def migrations() -> Tuple[Migration, ...]:
    """Every migration, in version order (the DDL names the unqualified tables)."""
    result: Tuple[Migration, ...] = _cached("migrations", lambda: tuple(
        Migration(int(m.version), tuple(str(s) for s in m.statements)) for m in _call("migrations")))
    return result


def migrations_table() -> str:
    """The statement creating the migrations table (PostgreSQL)."""
    return str(_cached("migrations-table", lambda: str(_call("migrations-table"))))


def schema_version() -> int:
    """The latest schema version."""
    return int(_cached("schema-version", lambda: int(_call("schema-version"))))


def migration_lock() -> int:
    """The advisory lock every PostgreSQL migration holds (``pg_advisory_xact_lock``)."""
    return int(_cached("migration-lock", lambda: int(_call("migration-lock"))))


def _dialect(dialect: str) -> str:
    if dialect not in DIALECTS:
        raise IntentkeyError("invalid-argument", "dialect",
                             f"dialect must be 'sqlite', 'postgres' or 'mysql', not {dialect!r}")
    return dialect


def sql_statements(dialect: str, schema: Optional[str] = None) -> Dict[str, Statement]:
    """The core's statements of `dialect` (``"sqlite"``, ``"postgres"`` or
    ``"mysql"``) by name, for the records table in `schema` (quoted and
    qualified by the core: the PostgreSQL schema, the MySQL database;
    ``None``: the unqualified table). ``invalid-argument`` for an empty schema."""
    if schema is not None:
        b.text("schema", schema)

    def make() -> Dict[str, Statement]:
        listed = b.unwrap(_call("sql-statements", _dialect(dialect), schema))
        return {str(s.name): Statement(str(s.name), str(b.get(s, "prepared_name")), str(s.text),
                                       tuple(str(p) for p in s.params), tuple(int(i) for i in s.binds))
                for s in listed}

    found: Dict[str, Statement] = _cached(("sql-statements", dialect, schema), make)
    return dict(found)


def sql_duplicate_key_error(dialect: str) -> Optional[int]:
    """The server error code with which `dialect`'s ``insert`` reports an
    existing key (MySQL: 1062, ``ER_DUP_ENTRY``), which the store answers as
    not inserted; ``None`` where the insert reports no row instead."""
    def make() -> Tuple[Optional[int]]:
        code = _call("sql-duplicate-key-error", _dialect(dialect))
        return (None if code is None else int(code),)

    found: Tuple[Optional[int]] = _cached(("sql-duplicate-key-error", dialect), make)
    return found[0]


def sql_error_class(dialect: str, code: int) -> str:
    """What the server error `code` means under `dialect`, by the core's one
    table (WIT ``sql-classify-error``): ``duplicate-key``, ``connection-lost``
    (retryable; close the connection), ``retryable`` (the connection is fine)
    or ``failed``. Every code of a dialect without numbered errors is
    ``failed``."""
    if not 0 <= code <= 0xFFFF:
        return "failed"

    def make() -> Tuple[str]:
        return (str(_call("sql-classify-error", _dialect(dialect), code)),)

    found: Tuple[str] = _cached(("sql-classify-error", dialect, code), make)
    return found[0]


# -- the migration flow --------------------------------------------------------------------

@dataclass(frozen=True)
class SqlCall:
    """A statement the migration flow asks for: run it (``query=False``), or
    run it and answer the first column of its first row as an integer."""

    text: str
    params: List[SqlValue]
    query: bool


@dataclass(frozen=True)
class Migrated:
    """Where the schema stood and stands."""

    from_version: int
    to_version: int


class MigrationFlow:
    """The core's migration flow: the one order in which every SQL store of
    every runtime brings its schema up to date (PostgreSQL: the advisory
    lock, the search path, the migrations table, the version, each missing
    migration and its record; SQLite: ``PRAGMA user_version``, each missing
    migration, the new version; MySQL: ``GET_LOCK``, the migrations table,
    the version, the tables, the version records, ``RELEASE_LOCK``). A store
    opens one transaction (SQLite: ``BEGIN IMMEDIATE``), performs each
    :class:`SqlCall` that :meth:`start` and :meth:`resume` hand it, commits
    at :class:`Migrated` and rolls back on any error; MySQL, whose DDL
    commits by itself, runs them with autocommit on one connection and
    closes that connection on any error (freeing the lock). A database at a
    newer version raises ``store-failed``; a MySQL lock not had in time,
    ``store-unavailable``.

    >>> flow = MigrationFlow("sqlite")
    >>> step = flow.start()
    >>> step.text, step.query
    ('PRAGMA user_version', True)
    >>> flow.resume(schema_version())  # up to date: nothing to apply
    Migrated(from_version=3, to_version=3)
    """

    def __init__(self, dialect: str, schema: Optional[str] = None):
        if schema is not None:
            b.text("schema", schema)
        self._rt = rt = b.runtime("pure")
        with rt.lock:
            self._flow = b.unwrap(rt.call(b.SCHEMA, "[static]migration-flow.create", _dialect(dialect), schema))
            self._generation = rt.generation

    def __del__(self) -> None:
        try:
            self._rt.drop(self._flow, self._generation, now=False)
        except Exception:
            pass

    def _step(self, method: str, *args: Any) -> Union[SqlCall, Migrated]:
        rt = self._rt
        with rt.lock:
            if not rt.live(self._generation):
                raise IntentkeyError("component-failed", None, "the instance running this migration was discarded")
            step = rt.call(b.SCHEMA, f"[method]migration-flow.{method}", self._flow, *args)
        if method == "resume":
            step = b.unwrap_variant(step)
        # migration-step's cases differ in kind (a variant, a record), so
        # wasmtime-py hands over the case's value untagged.
        if not isinstance(step, Variant):
            return Migrated(int(b.get(step, "from_version")), int(b.get(step, "to_version")))
        call: Any = step.payload
        return SqlCall(str(call.text), _values(call.params), step.tag == "query")

    def start(self) -> Union[SqlCall, Migrated]:
        """The first statement."""
        return self._step("start")

    def resume(self, value: Optional[int] = None) -> Union[SqlCall, Migrated]:
        """The next statement, after the last one ran; `value`: the last
        query's value (``None`` for a statement, or a query with no row)."""
        return self._step("resume", None if value is None else b.s64("value", value))


# -- SQL parameters and rows -------------------------------------------------------------

def _values(raw: Any) -> List[SqlValue]:
    out: List[SqlValue] = []
    for v in raw:
        out.append(bytes(v) if isinstance(v, (bytearray, memoryview, list)) else v)
    return out


def sql_insert_params(record: StoredRecord) -> List[SqlValue]:
    """The parameters of ``insert`` and ``claim``."""
    return _values(_call("sql-insert-params", b.stored_to_wit(record)))


def sql_get_params(key: str) -> List[SqlValue]:
    """The parameters of ``get``."""
    return _values(_call("sql-get-params", b.text("key", key)))


def sql_complete_params(completion: Completion) -> List[SqlValue]:
    """The parameters of ``complete`` and ``complete-fast``."""
    return _values(_call("sql-complete-params", b.completion_to_wit(completion)))


def sql_replace_params(replacement: Replacement) -> List[SqlValue]:
    """The parameters of ``replace``."""
    return _values(_call("sql-replace-params", b.replacement_to_wit(replacement)))


def sql_release_params(request: ReleaseRequest) -> List[SqlValue]:
    """The parameters of ``release``."""
    return _values(_call("sql-release-params", b.release_to_wit(request)))


def sql_list_params(status: Optional[Status], limit: int) -> List[SqlValue]:
    """The parameters of ``list``: one status (every status when ``None``), at most `limit` rows."""
    wit_status = None if status is None else b.status_to_wit(status)
    return _values(_call("sql-list-params", wit_status, max(0, min(int(limit), (1 << 32) - 1))))


def sql_purge_params(now: int) -> List[SqlValue]:
    """The parameters of ``purge``."""
    return _values(_call("sql-purge-params", b.s64("now", now)))


def sql_count_params(status: Optional[Status]) -> List[SqlValue]:
    """The parameters of ``count``: one status, or every status when ``None``."""
    return _values(_call("sql-count-params", None if status is None else b.status_to_wit(status)))


def sql_params(op: str, *args: Any) -> List[SqlValue]:
    """The parameters of the statement for store operation `op`
    (``insert``, ``get``, ``complete``, ``replace``, ``release``, ``list``, ``purge``)."""
    makers: Dict[str, Any] = {
        "insert": sql_insert_params, "get": sql_get_params, "complete": sql_complete_params,
        "replace": sql_replace_params, "release": sql_release_params, "list": sql_list_params,
        "purge": sql_purge_params,
    }
    maker = makers.get(op)
    if maker is None:
        raise IntentkeyError("invalid-argument", "op", f"no SQL statement for store operation {op!r}")
    result: List[SqlValue] = maker(*args)
    return result


def _lower(row: Sequence[Any]) -> List[SqlValue]:
    out: List[SqlValue] = []
    for v in row:
        if v is None or isinstance(v, (str, bytes)):
            out.append(v)
        elif isinstance(v, bool):
            out.append(int(v))
        elif isinstance(v, int):
            out.append(v)
        elif isinstance(v, (bytearray, memoryview)):
            out.append(bytes(v))
        else:
            out.append(str(v))
    return out


def _failed(e: IntentkeyError, where: str) -> StoreError:
    return StoreError("failed", f"{where}: {e.message}")


def sql_decode_row(row: Sequence[Any]) -> StoredRecord:
    """A row of ``get`` or ``list`` (the record columns, in order) as the
    record; a row intentkey did not write is ``StoreError("failed", …)``
    naming the column."""
    try:
        return b.stored_from_wit(b.unwrap_record(_call("sql-decode-row", _lower(row))))
    except IntentkeyError as e:
        raise _failed(e, "sql") from None


def sql_decode_count(row: Sequence[Any]) -> StatusCount:
    """A row of ``count`` (status, count, oldest ``created_at``)."""
    try:
        counted = b.unwrap_record(_call("sql-decode-count", _lower(row)))
    except IntentkeyError as e:
        raise _failed(e, "sql") from None
    oldest = counted.oldest
    return StatusCount(b.status_from_wit(counted.status), int(counted.count), None if oldest is None else int(oldest))


def sql_decode_claim(row: Sequence[Any]) -> SqlClaimed:
    """The row of ``claim`` (``inserted``, then the record columns)."""
    return _claimed("sql", "sql-decode-claim", "a claim row", _lower(row))


def _claimed(store: str, name: str, what: str, *args: Any) -> SqlClaimed:
    """The core's sql-claimed answer of `name` (args) as Won, Lost or Existing."""
    try:
        claimed = b.unwrap_variant(_call(name, *args))
    except IntentkeyError as e:
        raise _failed(e, store) from None
    if not isinstance(claimed, Variant):
        raise StoreError("failed", f"{store}: the core answered {claimed!r} for {what}")
    if claimed.tag == "won":
        return Won()
    if claimed.tag == "lost":
        return Lost()
    return Existing(b.stored_from_wit(claimed.payload))


# -- Redis ------------------------------------------------------------------------------------

def redis_scripts() -> Dict[str, RedisScript]:
    """Every Redis script by name (``insert``, ``complete``, ``replace``,
    ``release``, ``list``, ``purge``): the record layout and every atomic
    operation, written once in the core."""
    def make() -> Dict[str, RedisScript]:
        return {str(s.name): RedisScript(str(s.name), str(s.source),
                                         hashlib.sha1(str(s.source).encode("utf-8")).hexdigest())
                for s in _call("redis-scripts")}

    found: Dict[str, RedisScript] = _cached("redis-scripts", make)
    return dict(found)


def redis_default_prefix() -> str:
    """The key prefix when none is configured (``intentkey``)."""
    return str(_cached("redis-default-prefix", lambda: str(_call("redis-default-prefix"))))


def redis_batch() -> int:
    """How many index members one ``list`` or ``purge`` script call reads at a time."""
    return int(_cached("redis-batch", lambda: int(_call("redis-batch"))))


def _redis_call(raw: Any) -> RedisCall:
    return RedisCall(str(raw.script), tuple(str(k) for k in raw.keys), tuple(str(a) for a in raw.args))


def _layout(layout: Union[RedisLayout, str]) -> Any:
    """`layout` as the WIT ``redis-layout`` (a prefix alone: the one-server layout under it)."""
    if isinstance(layout, str):
        layout = RedisLayout(layout)
    if not isinstance(layout, RedisLayout):
        raise IntentkeyError("invalid-argument", "layout",
                             f"layout must be a RedisLayout (or a prefix), not {type(layout).__name__}")
    return b.redis_layout(layout.prefix, layout.cluster)


def redis_check_layout(layout: Union[RedisLayout, str]) -> None:
    """Raises ``invalid-argument`` naming ``prefix`` for a layout the core
    cannot use: an empty prefix, one with whitespace, or (on a cluster) one
    with a brace (the cluster layout writes the hash tags itself)."""
    b.unwrap(_call("redis-check-layout", _layout(layout)))


def redis_cluster_buckets() -> int:
    """How many slot-local buckets the cluster layout spreads records over."""
    return int(_cached("redis-cluster-buckets", lambda: int(_call("redis-cluster-buckets"))))


def redis_record_key(layout: Union[RedisLayout, str], key: str) -> str:
    """The Redis key that holds record `key` (the key a ``GET`` reads)."""
    return str(_call("redis-record-key", _layout(layout), b.text("key", key)))


def redis_channel(layout: Union[RedisLayout, str], key: str) -> str:
    """The sharded pub/sub channel on which the writes of record `key`
    (completion, release, recovery) publish its key: ``SSUBSCRIBE`` to it to
    wake the record's waiters."""
    return str(_call("redis-channel", _layout(layout), b.text("key", key)))


def redis_channels(layout: Union[RedisLayout, str]) -> List[str]:
    """Every bucket's change channel, in bucket order (one on one server):
    a process that wakes waiters ``SSUBSCRIBE``s to them all once."""
    return [str(c) for c in _call("redis-channels", _layout(layout))]


def redis_index_keys(layout: Union[RedisLayout, str], status: Status) -> List[str]:
    """The status index of every bucket: the sum of their ``ZCARD`` replies
    counts the records with `status` (a store's cheap count)."""
    return [str(k) for k in _call("redis-index-keys", _layout(layout), b.status_to_wit(Status(status)))]


def redis_insert(layout: Union[RedisLayout, str], record: StoredRecord) -> RedisCall:
    """The script call that inserts `record` unless its key exists, in `layout`
    (a :class:`RedisLayout`; a prefix alone is the one-server layout under it)."""
    return _redis_call(_call("redis-insert", _layout(layout), b.stored_to_wit(record)))


def redis_claim(layout: Union[RedisLayout, str], record: StoredRecord) -> RedisCall:
    """The claim: the script call that inserts `record` unless its key exists
    and otherwise answers the stored value of the record it lost to (read
    the reply with :func:`redis_claimed`), so a repeat is one round trip."""
    return _redis_call(_call("redis-claim", _layout(layout), b.stored_to_wit(record)))


def redis_claimed(key: str, reply: Any) -> SqlClaimed:
    """What the reply to :func:`redis_claim`'s call means for the record under
    `key`, read as a ``claim`` row is: :class:`Won` for 1, :class:`Lost` for 0
    or nil, :class:`Existing` with the record it lost to for a stored value;
    ``StoreError("failed", …)`` for any other reply."""
    # WIT redis-reply's cases have distinct Python types, so wasmtime-py takes
    # the value itself: None (nil), an int (integer) or a str (bulk).
    wit: Union[None, int, str]
    if reply is None:
        wit = None
    elif isinstance(reply, int) and not isinstance(reply, bool):
        wit = reply
    elif isinstance(reply, (bytes, str)):
        try:
            wit = reply.decode("utf-8") if isinstance(reply, bytes) else reply
        except UnicodeDecodeError:
            raise StoreError("failed", f"redis: the value under {key!r} is not UTF-8 text") from None
    else:
        raise StoreError("failed", f"redis: the claim of {key!r} answered {type(reply).__name__}")
    return _claimed("redis", "redis-claimed", "a claim reply", key, wit)


def redis_complete(layout: Union[RedisLayout, str], completion: Completion) -> RedisCall:
    """The script call of a fenced completion, in `layout`."""
    return _redis_call(_call("redis-complete", _layout(layout), b.completion_to_wit(completion)))


def redis_replace(layout: Union[RedisLayout, str], replacement: Replacement) -> RedisCall:
    """The script call of a fenced recovery write, in `layout`."""
    return _redis_call(_call("redis-replace", _layout(layout), b.replacement_to_wit(replacement)))


def redis_release(layout: Union[RedisLayout, str], request: ReleaseRequest) -> RedisCall:
    """The script call of a fenced release, in `layout`."""
    return _redis_call(_call("redis-release", _layout(layout), b.release_to_wit(request)))


def _u32(value: int) -> int:
    return max(0, min(int(value), (1 << 32) - 1))


def redis_list(layout: Union[RedisLayout, str], status: Optional[Status], limit: int) -> List[RedisCall]:
    """The ``list`` script calls that together hold the records with
    `status` (every status when ``None``), at most `limit` from each: one
    per bucket and status (none for a `limit` of 0). Run each (its keys name
    its slot) and hand the replies, in this order, to :func:`redis_listed`."""
    wit_status = None if status is None else b.status_to_wit(Status(status))
    return [_redis_call(c) for c in _call("redis-list", _layout(layout), wit_status, _u32(limit))]


def _reply_text(value: Any) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise StoreError("failed", "redis: the list script answered a value that is not UTF-8 text") from None
    if isinstance(value, str):
        return value
    raise StoreError("failed", f"redis: the list script answered {type(value).__name__}, not text")


def redis_listed(limit: int, replies: Sequence[Optional[Sequence[Union[str, bytes]]]]) -> List[StoredRecord]:
    """The records of the replies to :func:`redis_list`'s calls (each a flat
    ``[key, value, key, value, …]``, bytes or text), oldest first
    (``created_at``, then key), at most `limit`: the core decodes and merges
    them. ``StoreError("failed", …)`` for a reply not in the core's layout."""
    lists = [[_reply_text(v) for v in (reply or [])] for reply in replies]
    try:
        listed = b.unwrap(_call("redis-listed", _u32(limit), lists))
    except IntentkeyError as e:
        raise _failed(e, "redis") from None
    return [b.stored_from_wit(r) for r in listed]


def redis_purge(layout: Union[RedisLayout, str], now: int) -> List[RedisCall]:
    """The ``purge`` script calls, one per bucket. Each answers ``[deleted,
    looked_at]``: send the same call again while ``looked_at`` equals
    :func:`redis_batch`."""
    return [_redis_call(c) for c in _call("redis-purge", _layout(layout), b.s64("now", now))]


def redis_check_replicas(wanted: int, acked: int) -> None:
    """What ``WAIT`` answering `acked` replicas means after a write that
    asked for `wanted`: nothing when enough acknowledged it, else
    ``StoreError("unavailable", …)`` (the write is on the master only: a
    failover could lose it, so it is not acknowledged)."""
    args = (b.uint("wanted", wanted, 32), b.s64("acked", acked))
    try:
        b.unwrap(_call("redis-check-replicas", *args))
    except IntentkeyError as e:
        kind = "unavailable" if e.code == "store-unavailable" else "failed"
        raise StoreError(kind, f"redis: {e.message}") from None


def redis_decode(key: str, value: Union[str, bytes]) -> StoredRecord:
    """A stored Redis value (the core's layout) as the record under `key`;
    ``StoreError("failed", …)`` when something other than intentkey wrote it."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            raise StoreError("failed", f"redis: the value under {key!r} is not UTF-8 text") from None
    try:
        return b.stored_from_wit(b.unwrap_record(_call("redis-decode", key, value)))
    except IntentkeyError as e:
        raise _failed(e, "redis") from None


# -- DynamoDB ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DynamoRequest:
    """One of the core's DynamoDB requests (WIT ``dynamo-request``): the API
    `action` (``PutItem``, ``GetItem``, ``UpdateItem``, ``DeleteItem``,
    ``Query``, ``CreateTable``, ``DescribeTable``) and its `input`, JSON text
    in DynamoDB's own form (binary values base64 under ``"B"``). A store
    sends it as it is with its SDK's low-level client, converting only the
    binary values, and hands the output back as JSON text."""

    action: str
    input: str

    def params(self) -> Dict[str, Any]:
        """The input, parsed (binary values still base64 text)."""
        parsed: Dict[str, Any] = json.loads(self.input)
        return parsed


#: What a DynamoDB error means, by its name (:func:`dynamo_classify_error`).
DYNAMO_ERROR_CLASSES = ("condition-failed", "retryable", "failed")


def _dynamo_request(raw: Any) -> DynamoRequest:
    return DynamoRequest(str(raw.action), str(raw.input))


def _dynamo_requests(raw: Any) -> List[DynamoRequest]:
    return [_dynamo_request(r) for r in raw]


def _dynamo_wit(request: DynamoRequest) -> Any:
    if not isinstance(request, DynamoRequest):
        raise IntentkeyError("invalid-argument", "request",
                             f"request must be a DynamoRequest, not {type(request).__name__}")
    return b.record(action=b.text("action", request.action), input=b.text("input", request.input))


def _json_text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise IntentkeyError("invalid-argument", name, f"{name} must be JSON text (str), not {type(value).__name__}")
    return b.text(name, value)


def dynamo_default_table() -> str:
    """The table name when none is configured (``intentkey``)."""
    return str(_cached("dynamo-default-table", lambda: str(_call("dynamo-default-table"))))


def dynamo_check_table(table: str) -> None:
    """Raises ``invalid-argument`` naming ``table`` for a name DynamoDB
    refuses (3 to 255 of ``a-z A-Z 0-9 _ . -``). The other ``dynamo_*``
    functions take the name unchecked: check it once."""
    b.unwrap(_call("dynamo-check-table", b.text("table", table)))


def dynamo_create_table(table: str) -> DynamoRequest:
    """``CreateTable``: the key, the ``by_status`` and ``by_expiry`` indexes, on-demand capacity."""
    return _dynamo_request(_call("dynamo-create-table", b.text("table", table)))


def dynamo_describe_table(table: str) -> DynamoRequest:
    """``DescribeTable`` (its output goes to :func:`dynamo_table_ready`)."""
    return _dynamo_request(_call("dynamo-describe-table", b.text("table", table)))


def dynamo_table_ready(output: str) -> bool:
    """Whether a ``DescribeTable`` output (JSON text) shows the table and both its indexes ``ACTIVE``."""
    return bool(_call("dynamo-table-ready", _json_text("output", output)))


def dynamo_insert(table: str, record: StoredRecord) -> DynamoRequest:
    """The ``PutItem`` of a claim, conditioned on the key being absent.
    ``IntentkeyError`` ``response-too-large`` (field ``response``) for a
    record whose item would exceed DynamoDB's 400 KB: send nothing."""
    return _dynamo_request(b.unwrap_record(_call("dynamo-insert", b.text("table", table), b.stored_to_wit(record))))


def dynamo_get(table: str, key: str) -> DynamoRequest:
    """The strongly consistent ``GetItem`` of one record."""
    return _dynamo_request(_call("dynamo-get", b.text("table", table), b.text("key", key)))


def dynamo_complete(table: str, completion: Completion) -> DynamoRequest:
    """The ``UpdateItem`` of a completion, fenced on the owner token;
    ``response-too-large`` as for :func:`dynamo_insert`."""
    return _dynamo_request(b.unwrap_record(
        _call("dynamo-complete", b.text("table", table), b.completion_to_wit(completion))))


def dynamo_replace(table: str, replacement: Replacement) -> DynamoRequest:
    """The ``UpdateItem`` of a recovery write, fenced on the owner token and
    the look-up count; ``response-too-large`` as for :func:`dynamo_insert`."""
    return _dynamo_request(b.unwrap_record(
        _call("dynamo-replace", b.text("table", table), b.replacement_to_wit(replacement))))


def dynamo_release(table: str, request: ReleaseRequest) -> DynamoRequest:
    """The ``DeleteItem`` of a release, fenced on the owner token."""
    return _dynamo_request(_call("dynamo-release", b.text("table", table), b.release_to_wit(request)))


def dynamo_decode(item: str) -> StoredRecord:
    """An item (JSON text: ``GetItem``'s ``Item``, binary values base64) as
    its record; ``StoreError("failed", …)`` for one intentkey did not write."""
    try:
        return b.stored_from_wit(b.unwrap_record(_call("dynamo-decode", _json_text("item", item))))
    except IntentkeyError as e:
        if e.code == "invalid-argument":
            raise
        raise _failed(e, "dynamodb") from None


def dynamo_list(table: str, status: Optional[Status], limit: int) -> List[DynamoRequest]:
    """The ``Query`` requests that together hold the records with `status`
    (every status when ``None``), at most `limit` from each: one per bucket
    and status (none for a `limit` of 0). Follow each with
    :func:`dynamo_next_page` and hand every page, in order, to :func:`dynamo_listed`."""
    wit_status = None if status is None else b.status_to_wit(Status(status))
    return _dynamo_requests(_call("dynamo-list", b.text("table", table), wit_status, _u32(limit)))


def dynamo_next_page(request: DynamoRequest, output: str, got: int, want: Optional[int]) -> Optional[DynamoRequest]:
    """The request for the next page of the ``Query`` `request`, whose
    output (JSON text) was `output`, when it has a ``LastEvaluatedKey`` and
    fewer than `want` items (``None``: every page) came so far (`got`, every
    page of this request counted); ``None`` when there is nothing more to read."""
    next_page = _call("dynamo-next-page", _dynamo_wit(request), _json_text("output", output), _u32(got),
                      None if want is None else _u32(want))
    return None if next_page is None else _dynamo_request(next_page)


def dynamo_listed(limit: int, pages: Sequence[str]) -> List[StoredRecord]:
    """The records of the list pages (each a ``Query`` output, JSON text),
    oldest first (``created_at``, then key), at most `limit`: the core
    decodes and merges them. ``StoreError("failed", …)`` for a page or an
    item not in the core's layout."""
    texts = [_json_text("pages", p) for p in pages]
    try:
        listed = b.unwrap(_call("dynamo-listed", _u32(limit), texts))
    except IntentkeyError as e:
        raise _failed(e, "dynamodb") from None
    return [b.stored_from_wit(r) for r in listed]


def dynamo_purge(table: str, now: int) -> List[DynamoRequest]:
    """The purge ``Query`` requests, one per bucket (the keys of the ``done``
    records expired at `now`): hand each page to
    :func:`dynamo_purge_deletes`, and follow it with :func:`dynamo_next_page`."""
    return _dynamo_requests(_call("dynamo-purge", b.text("table", table), b.s64("now", now)))


def dynamo_purge_deletes(table: str, now: int, page: str) -> List[DynamoRequest]:
    """The ``DeleteItem`` of each record a purge page (JSON text) names,
    each conditioned on ``done`` and expired at `now` (an index lags its
    table): count those whose condition held. ``StoreError("failed", …)``
    for a page that is not a ``Query`` output."""
    try:
        deletes = b.unwrap(_call("dynamo-purge-deletes", b.text("table", table), b.s64("now", now),
                                 _json_text("page", page)))
    except IntentkeyError as e:
        raise _failed(e, "dynamodb") from None
    return _dynamo_requests(deletes)


def dynamo_classify_error(name: str, http_status: Optional[int] = None) -> str:
    """What the DynamoDB error `name` (the SDK's error code, or ``__type``
    with its namespace), answered with HTTP status `http_status` when known,
    means: ``condition-failed`` (the write's condition did not hold: not
    written), ``retryable`` (throttling, a server error, a 5xx under a name
    the core does not list: ``StoreError("unavailable")``) or ``failed``
    (anything else)."""
    if not isinstance(name, str) or not name.isascii():
        return "failed"
    if not (isinstance(http_status, int) and not isinstance(http_status, bool) and 0 <= http_status <= 0xFFFF):
        http_status = None
    return str(_call("dynamo-classify-error", name, http_status))
