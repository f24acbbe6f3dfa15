"""intentkey: idempotency keys born with the intent.

The same WebAssembly component every intentkey runtime runs (Rust, Node,
browsers, Python), run here by ``wasmtime``: byte-identical keys, and the
core's one claim flow over a store whose unique constraint picks the one
attempt that owns the effect.

>>> import intentkey
>>> keyer = intentkey.Keyer(secret=bytes(range(32)))
>>> len(keyer.intent_key("tenant-acme", "order-42"))
64
"""

from ._codes import ERROR_CODES, WIT_VERSION, ErrorCode
from . import http, journal, telemetry
from .claims import Guard, MemoryStore, RunResult, Store, default_rules
from .errors import IntentkeyError, IntentkeyTrap
from .keys import Keyer, Keyring, KeyringSecret, Run, answer_lines, new_uuid_key, unreadable_line_answer, uuid_key
from .types import (
    Absent,
    Answered,
    Attempt,
    Claim,
    ClaimState,
    Completion,
    EffectResult,
    Failed,
    Finished,
    Found,
    Lookup,
    Recovery,
    RecoveryAction,
    RecoveryState,
    Refused,
    ReleaseRequest,
    Replacement,
    Reply,
    Response,
    Status,
    StoredRecord,
    StoreError,
    Unknown,
)

__version__ = "0.6.0"

__all__ = [
    "ERROR_CODES", "WIT_VERSION", "Absent", "Answered", "Attempt", "Claim", "ClaimState", "Completion",
    "EffectResult", "ErrorCode", "Failed", "Finished", "Found", "Guard", "IntentkeyError", "IntentkeyTrap",
    "Keyer", "Keyring", "KeyringSecret", "Lookup", "MemoryStore", "Recovery", "RecoveryAction", "RecoveryState",
    "Refused", "ReleaseRequest", "Replacement", "Reply", "Response", "Run", "RunResult", "Status", "Store",
    "StoreError", "StoredRecord", "Unknown", "answer_lines", "default_rules", "new_uuid_key",
    "http", "journal", "telemetry", "unreadable_line_answer", "uuid_key",
]
