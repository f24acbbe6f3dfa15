"""What the SQL stores (SQLite, PostgreSQL, MySQL) share, with no driver
imported: the checks of their common options, the migration flow's reading
of a query's answer, and the record operations of a sync store
(:class:`SqlStore`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, List, Optional, Sequence, TypeVar

from .. import schema as sch
from .._watch import Changes
from ..errors import IntentkeyError
from ..types import Completion, ReleaseRequest, Replacement, Status, StoredRecord

_Store = TypeVar("_Store", bound="SqlStore")


def first_int(row: Optional[Sequence[Any]]) -> Optional[int]:
    """The first column of a query's first row, as the migration flow reads
    it (``None``: no row, or NULL)."""
    return None if row is None or row[0] is None else int(row[0])


def counted(status: Status, rows: Sequence[Sequence[Any]]) -> sch.StatusCount:
    """The count of `status` among the rows of the core's ``count`` statement."""
    for row in rows:
        found = sch.sql_decode_count(row)
        if found.status == status:
            return found
    return sch.StatusCount(status, 0, None)


def check_schema(schema: Optional[str]) -> Optional[str]:
    """The `schema` option: ``None`` or a non-empty string without NUL."""
    if schema is None:
        return None
    if not isinstance(schema, str) or schema == "" or "\x00" in schema:
        raise IntentkeyError("invalid-argument", "schema", "schema must be a non-empty string")
    return schema


class SqlStore(ABC):
    """The store protocol of a sync SQL store, written once: each operation
    is one of the core's statements, with the parameters the core makes
    (:mod:`intentkey.schema`), run by the store's :meth:`_execute`; the rows
    are decoded by the core. A store refines an operation by overriding it
    (MySQL checks a key's length before the insert) or by naming another
    statement for a completion (:meth:`_complete_statement`).

    A write that changed a record (a completion, a release, a recovery's
    replacement) wakes this store's waiters in this process (``wait_max_ms``):
    :meth:`_wrote`, which a store extends to tell other processes."""

    #: The store's in-process notifier of record changes (made by the store's constructor).
    _changes: Changes

    @abstractmethod
    def _execute(self, name: str, params: Sequence[sch.SqlValue], rows: bool) -> Any:
        """Runs the core's statement `name` with `params`: its rows (`rows`)
        or how many rows it changed."""

    @abstractmethod
    def close(self) -> None:
        """Frees what the store holds."""

    def _complete_statement(self, completion: Completion) -> str:
        """The statement that writes `completion` (``complete`` unless the store has another)."""
        return "complete"

    def _changed(self, name: str, params: Sequence[sch.SqlValue]) -> int:
        return int(self._execute(name, params, False))

    def _records(self, name: str, params: Sequence[sch.SqlValue]) -> List[StoredRecord]:
        return [sch.sql_decode_row(row) for row in self._execute(name, params, True)]

    def insert(self, record: StoredRecord) -> bool:
        return self._changed("insert", sch.sql_insert_params(record)) == 1

    def get(self, key: str) -> Optional[StoredRecord]:
        found = self._records("get", sch.sql_get_params(key))
        return found[0] if found else None

    def _wrote(self, key: str) -> None:
        """Record `key` changed: its waiters in this process look again."""
        changes = getattr(self, "_changes", None)
        if changes is not None:
            changes.notify(key)

    def _written(self, key: str, changed: int) -> bool:
        if changed == 1:
            self._wrote(key)
        return changed == 1

    def complete(self, completion: Completion) -> bool:
        changed = self._changed(self._complete_statement(completion), sch.sql_complete_params(completion))
        return self._written(completion.key, changed)

    def replace(self, replacement: Replacement) -> bool:
        return self._written(replacement.record.key, self._changed("replace", sch.sql_replace_params(replacement)))

    def release(self, request: ReleaseRequest) -> bool:
        return self._written(request.key, self._changed("release", sch.sql_release_params(request)))

    def watch(self, key: str, ms: int) -> None:
        """Returns when this store writes record `key`, or after `ms` milliseconds."""
        self._changes.wait(key, ms / 1000)

    def list(self, status: Status, limit: int) -> List[StoredRecord]:
        if limit <= 0:
            return []
        return self._records("list", sch.sql_list_params(status, limit))

    def purge(self, now: int) -> int:
        return self._changed("purge", sch.sql_purge_params(now))

    def count(self, status: Status) -> sch.StatusCount:
        """How many records have `status`, and the oldest claim among them:
        the core's ``count`` statement (one indexed aggregate; telemetry's
        records gauge and ``intentkey status`` read it)."""
        return counted(Status(status), self._execute("count", sch.sql_count_params(Status(status)), True))

    def __enter__(self: _Store) -> _Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
