"""What the SQL stores (SQLite, PostgreSQL, MySQL) share, with no driver
imported: the checks of their common options and the migration flow's
reading of a query's answer."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from ..errors import IntentkeyError


def first_int(row: Optional[Sequence[Any]]) -> Optional[int]:
    """The first column of a query's first row, as the migration flow reads
    it (``None``: no row, or NULL)."""
    return None if row is None or row[0] is None else int(row[0])


def check_schema(schema: Optional[str]) -> Optional[str]:
    """The `schema` option: ``None`` or a non-empty string without NUL."""
    if schema is None:
        return None
    if not isinstance(schema, str) or schema == "" or "\x00" in schema:
        raise IntentkeyError("invalid-argument", "schema", "schema must be a non-empty string")
    return schema
