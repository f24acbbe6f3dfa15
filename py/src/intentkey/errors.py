"""The errors the package raises."""

from __future__ import annotations

from typing import Optional

from ._codes import ERROR_CODES, ErrorCode

__all__ = ["ERROR_CODES", "ErrorCode", "IntentkeyError", "IntentkeyTrap"]


class IntentkeyError(Exception):
    """What the core (or the package, for what it checks itself) refused: a
    stable kebab-case ``code`` (one of :data:`ERROR_CODES`, the same strings
    as the Rust core and the npm package), the ``field`` or policy path at
    fault (or ``None``) and a ``message`` saying what to do. Never carries a
    secret.

    >>> from intentkey import IntentkeyError
    >>> e = IntentkeyError("invalid-argument", "profile", "profile must be ietf, stripe or ofb")
    >>> (e.code, e.field)
    ('invalid-argument', 'profile')
    """

    code: ErrorCode

    def __init__(self, code: ErrorCode, field: Optional[str], message: str):
        if code not in ERROR_CODES:
            raise ValueError(f"{code!r} is not an intentkey error code")
        super().__init__(f"{code}: {message}" + (f" (field {field!r})" if field is not None else ""))
        self.code = code
        self.field = field
        self.message = message


class IntentkeyTrap(IntentkeyError):
    """The component trapped, or a host import (a store, a look-up) raised
    something that is not a :class:`intentkey.StoreError`: code
    ``component-failed``. The instance was discarded; the next call runs on a
    fresh one."""

    def __init__(self, message: str):
        super().__init__("component-failed", None, message)
