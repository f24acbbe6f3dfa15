"""A file-backed store for the tests (several processes share one SQLite file):
an executor of the core's SQLite statements (the pure component's ``schema``
export, docs/stores.md). It holds no SQL text and no column order: it
prepares the statements it is given, binds the parameters the core makes and
hands rows back to the core's decoder. WAL and a busy timeout, so a crashed
process and its resumption share the file."""

import sqlite3

from wasmtime.component import Variant

import intentkey
from intentkey import _binding as b


def _value_in(v):
    # wasmtime-py lifts the sql-value variant untagged (its cases' Python types
    # differ): None, int, str, or the bytes.
    if isinstance(v, Variant):
        v = v.payload
    if isinstance(v, list):
        return bytes(v)
    return v


def _value_out(v):
    if isinstance(v, memoryview):
        return bytes(v)
    return v


class SqliteTestStore:
    def __init__(self, path):
        self._pure = b.runtime("pure")
        self._db = sqlite3.connect(path, timeout=10, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = FULL")
        self._migrate()
        self._st = {s.name: s.text for s in b.unwrap(self._pure.call(b.SCHEMA, "sql-statements", "sqlite", None))}

    def _migrate(self):
        target = self._pure.call(b.SCHEMA, "schema-version")
        self._db.execute("BEGIN IMMEDIATE")
        try:
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            for m in self._pure.call(b.SCHEMA, "migrations"):
                if m.version > version:
                    for statement in m.statements:
                        self._db.execute(statement)
            self._db.execute(f"PRAGMA user_version = {int(target)}")
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def _params(self, func, *args):
        return [_value_in(v) for v in self._pure.call(b.SCHEMA, func, *args)]

    def _changes(self, name, params):
        try:
            return self._db.execute(self._st[name], params).rowcount
        except sqlite3.Error as e:
            raise intentkey.StoreError("failed", f"sqlite: {e}") from None

    def _rows(self, name, params):
        try:
            rows = self._db.execute(self._st[name], params).fetchall()
        except sqlite3.Error as e:
            raise intentkey.StoreError("failed", f"sqlite: {e}") from None
        return [b.stored_from_wit(b.unwrap_record(self._pure.call(b.SCHEMA, "sql-decode-row", [_value_out(v) for v in row])))
                for row in rows]

    def insert(self, record):
        return self._changes("insert", self._params("sql-insert-params", b.stored_to_wit(record))) == 1

    def get(self, key):
        rows = self._rows("get", self._params("sql-get-params", key))
        return rows[0] if rows else None

    def complete(self, completion):
        return self._changes("complete", self._params("sql-complete-params", b.completion_to_wit(completion))) == 1

    def replace(self, replacement):
        return self._changes("replace", self._params("sql-replace-params", b.replacement_to_wit(replacement))) == 1

    def release(self, request):
        return self._changes("release", self._params("sql-release-params", b.release_to_wit(request))) == 1

    def list(self, status, limit):
        return self._rows("list", self._params("sql-list-params", b.status_to_wit(status), limit))

    def purge(self, now):
        return self._changes("purge", self._params("sql-purge-params", now))

    def close(self):
        self._db.close()
