"""The values of the public API: plain dataclasses and string enums, the WIT
types of ``intentkey:core`` as Python sees them. No wasmtime type is part of
the API; the binding converts at the boundary."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Optional, Tuple, Union

__all__ = [
    "Absent",
    "Answered",
    "Attempt",
    "Claim",
    "ClaimState",
    "Completion",
    "EffectResult",
    "Failed",
    "Finished",
    "Found",
    "Lookup",
    "RecoveryAction",
    "Recovery",
    "RecoveryState",
    "Refused",
    "ReleaseRequest",
    "Replacement",
    "Reply",
    "Response",
    "Status",
    "StoreError",
    "StoredRecord",
    "Unknown",
]

Headers = Tuple[Tuple[str, str], ...]


class Status(str, Enum):
    """A record's state, in its stored spelling (the ``status`` column, as
    the npm package spells it)."""

    IN_FLIGHT = "in_flight"
    DONE = "done"
    NEEDS_RECONCILIATION = "needs_reconciliation"


@dataclass(frozen=True)
class Response:
    """A stored answer, replayed byte for byte: status, media type, the
    replayable headers in order and the body."""

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: Headers = ()

    @classmethod
    def json(cls, status: int, text: str, headers: Headers = ()) -> "Response":
        """A JSON answer from its text (encoded as UTF-8)."""
        return cls(status, text.encode("utf-8"), "application/json", tuple(headers))


@dataclass(frozen=True)
class Reply:
    """An HTTP answer as a server sends it: status, every header, body."""

    status: int
    headers: Headers = ()
    body: bytes = b""

    def header(self, name: str) -> Optional[str]:
        """The first value of header `name` (case-insensitive), or ``None``."""
        lower = name.lower()
        for n, v in self.headers:
            if n.lower() == lower:
                return v
        return None


@dataclass(frozen=True)
class StoredRecord:
    """One intent's record in the store (docs/store-schema.md)."""

    key: str
    fingerprint: str
    tenant_id: str
    action_type: str
    status: Status
    owner_token: str
    response: Optional[Response]
    created_at: int
    expires_at: Optional[int]
    lookups: int
    next_lookup_at: Optional[int]


@dataclass(frozen=True)
class Completion:
    """A fenced completion: store `response` if the record still carries `owner_token`."""

    key: str
    owner_token: str
    response: Response
    expires_at: int
    fast: bool


@dataclass(frozen=True)
class Replacement:
    """A fenced recovery write: every mutable column from `record`, if the
    stored record still carries `expected_token` and `expected_lookups`."""

    expected_token: str
    expected_lookups: int
    record: StoredRecord


@dataclass(frozen=True)
class ReleaseRequest:
    """A fenced delete."""

    key: str
    owner_token: str


class StoreError(Exception):
    """A store operation that failed, as a store raises it: ``kind``
    ``"unavailable"`` (the store could not be reached or was busy; retryable,
    nothing was decided) or ``"failed"`` (it refused the operation or holds
    data intentkey did not write)."""

    def __init__(self, kind: str, message: str):
        if kind not in ("unavailable", "failed"):
            raise ValueError(f"a store error is 'unavailable' or 'failed', not {kind!r}")
        super().__init__(f"store {kind}: {message}")
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class Attempt:
    """One attempt at an intent: the storage key, the fingerprint, the tenant
    and action, and during a secret rotation the same attempt's ``(key,
    fingerprint)`` under the previous secret."""

    key: str
    fingerprint: str
    tenant_id: str
    action_type: str
    prior: Optional[Tuple[str, str]] = None


class ClaimState(str, Enum):
    """What an attempt gets from its claim."""

    OWNED = "owned"
    IN_FLIGHT = "in-flight"
    DONE = "done"
    PAYLOAD_CONFLICT = "payload-conflict"


@dataclass(frozen=True)
class Claim:
    """A claim's outcome: ``state``, the owner token (meaningful when
    ``OWNED``) and, when ``DONE``, the stored response to replay."""

    state: ClaimState
    owner_token: str
    response: Optional[Response] = None


@dataclass(frozen=True)
class Answered:
    """The effect answered (success or error): terminal unless its status is a release status."""

    response: Response


@dataclass(frozen=True)
class Refused:
    """The effect declares nothing happened: the claim is released; the
    answer, if any, goes to the caller unstored."""

    response: Optional[Response] = None


@dataclass(frozen=True)
class Failed:
    """A throw, a crash, a timeout: ambiguous, the record stays in flight."""


EffectResult = Union[Answered, Refused, Failed]


class Finished(str, Enum):
    """What finishing an owned attempt did."""

    STORED = "stored"
    RELEASED = "released"
    LEFT_IN_FLIGHT = "left-in-flight"
    SUPERSEDED = "superseded"


@dataclass(frozen=True)
class Found:
    """The destination has the effect; this is its outcome."""

    response: Response


@dataclass(frozen=True)
class Absent:
    """The destination has no record of the key."""


@dataclass(frozen=True)
class Unknown:
    """The destination could not tell (timeout, 5xx, a lagging replica):
    the effect is never run again on this answer."""


Lookup = Union[Found, Absent, Unknown]


@dataclass(frozen=True)
class RecoveryAction:
    """What recovery decided after a look-up: ``kind`` is ``record-done``
    (with ``response``), ``re-execute``, ``check-later`` (with ``lookups``
    and ``next_lookup_at``) or ``reconcile`` (with ``lookups``)."""

    kind: str
    response: Optional[Response] = None
    lookups: Optional[int] = None
    next_lookup_at: Optional[int] = None


class RecoveryState(str, Enum):
    """What a recovery did."""

    MISSING = "missing"
    NOT_IN_FLIGHT = "not-in-flight"
    NOT_DUE = "not-due"
    APPLIED = "applied"
    LOST = "lost"


@dataclass(frozen=True)
class Recovery:
    """A recovery's outcome: ``state``; ``status`` when not in flight;
    ``due_at`` when not due; ``action`` when applied or lost; and the owner
    token a re-execute runs under."""

    state: RecoveryState
    owner_token: str
    status: Optional[Status] = None
    due_at: Optional[int] = None
    action: Optional[RecoveryAction] = field(default=None)
