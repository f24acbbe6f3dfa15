"""A trial-only store over the standard library's sqlite3, shared by worker
processes through one database file (WAL, synchronous=FULL, a busy timeout).

It holds no SQL of its own: the schema is the core's migrations and every
statement is the core's (the component's ``schema`` export, dialect
``sqlite``), with the parameters the core makes and the rows the core
decodes. It only prepares, binds and runs (docs/stores.md), as
``intentkey.stores.sqlite`` does once it lands; the trials use that one when
it is installed.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Dict, List, Optional

import intentkey._binding as b
from intentkey import Completion, ReleaseRequest, Replacement, Status, StoredRecord, StoreError


def _pure() -> Any:
    return b.runtime("pure")


class TrialSQLiteStore:
    def __init__(self, path: str, busy_timeout_ms: int = 30_000):
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_ms / 1000, check_same_thread=False)
        self.db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = FULL")
        self._migrate()
        rt = _pure()
        self.statements: Dict[str, str] = {
            s.name: s.text for s in b.unwrap(rt.call(b.SCHEMA, "sql-statements", "sqlite", None))}

    def _migrate(self) -> None:
        rt = _pure()
        latest = int(rt.call(b.SCHEMA, "schema-version"))
        if self.db.execute("PRAGMA user_version").fetchone()[0] == latest:
            return
        self.db.execute("BEGIN IMMEDIATE")
        try:
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            for m in rt.call(b.SCHEMA, "migrations"):
                if m.version > version:
                    for statement in m.statements:
                        self.db.execute(statement)
            self.db.execute(f"PRAGMA user_version = {latest}")
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self.db.close()

    # -- executing the core's statements --------------------------------------------------
    @staticmethod
    def _failure(e: sqlite3.Error) -> StoreError:
        text = str(e)
        busy = isinstance(e, sqlite3.OperationalError) and ("locked" in text or "busy" in text)
        return StoreError("unavailable" if busy else "failed", f"sqlite: {text}")

    def _run(self, name: str, params: List[Any]) -> int:
        try:
            return int(self.db.execute(self.statements[name], tuple(params)).rowcount)
        except sqlite3.Error as e:
            raise self._failure(e) from e

    def _rows(self, name: str, params: List[Any]) -> List[StoredRecord]:
        try:
            rows = self.db.execute(self.statements[name], tuple(params)).fetchall()
        except sqlite3.Error as e:
            raise self._failure(e) from e
        rt = _pure()
        return [b.stored_from_wit(b.unwrap(rt.call(b.SCHEMA, "sql-decode-row", list(row)))) for row in rows]

    # -- the intentkey.Store protocol -------------------------------------------------------------
    def insert(self, record: StoredRecord) -> bool:
        return self._run("insert", _pure().call(b.SCHEMA, "sql-insert-params", b.stored_to_wit(record))) == 1

    def get(self, key: str) -> Optional[StoredRecord]:
        found = self._rows("get", _pure().call(b.SCHEMA, "sql-get-params", key))
        return found[0] if found else None

    def complete(self, completion: Completion) -> bool:
        return self._run("complete", _pure().call(b.SCHEMA, "sql-complete-params", b.completion_to_wit(completion))) == 1

    def replace(self, replacement: Replacement) -> bool:
        return self._run("replace", _pure().call(b.SCHEMA, "sql-replace-params", b.replacement_to_wit(replacement))) == 1

    def release(self, request: ReleaseRequest) -> bool:
        return self._run("release", _pure().call(b.SCHEMA, "sql-release-params", b.release_to_wit(request))) == 1

    def list(self, status: Status, limit: int) -> List[StoredRecord]:
        return self._rows("list", _pure().call(b.SCHEMA, "sql-list-params", b.status_to_wit(status), limit))

    def purge(self, now: int) -> int:
        return self._run("purge", _pure().call(b.SCHEMA, "sql-purge-params", now))


def open_store(path: str) -> Any:
    """intentkey.stores.sqlite.SQLiteStore when it exists, else the trial store."""
    try:
        from intentkey.stores.sqlite import SQLiteStore  # type: ignore[import-not-found]
    except ImportError:
        return TrialSQLiteStore(path)
    return SQLiteStore(path)
