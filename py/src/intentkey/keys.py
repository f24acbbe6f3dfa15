"""Keys in the three modes, and secret rotation with a keyring.

>>> import intentkey
>>> keyer = intentkey.Keyer(secret=bytes(range(32)))
>>> first = '{"creditor_key": "123.456.789-09", "amount": 10.5, "currency": "brl", "request_id": "r-1"}'
>>> again = '{"currency": " BRL ", "amount": "10.50", "creditor_key": "12345678909", "request_id": "r-2", "attempt": 2}'
>>> key = keyer.derive("tenant-acme", "pix.send", first, 1_700_000_000)
>>> len(key), key == keyer.derive("tenant-acme", "pix.send", again, 1_700_000_000)
(64, True)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple, Union

from . import _binding as b
from .errors import IntentkeyError
from .types import Attempt

__all__ = ["Keyer", "Keyring", "KeyringSecret", "Run", "answer_lines", "new_uuid_key", "unreadable_line_answer", "uuid_key"]

SecretInput = Union[bytes, bytearray, memoryview, str]


@dataclass(frozen=True)
class KeyringSecret:
    """One secret of a keyring: its id (1 to 64 printable ASCII characters;
    not secret, it may be logged), the epoch from which it is active, and its
    bytes (or hex text). The bytes never appear in ``repr``."""

    id: str
    active_from: int
    secret: SecretInput

    def __repr__(self) -> str:
        return f"KeyringSecret(id={self.id!r}, active_from={self.active_from!r}, secret=<redacted>)"


@dataclass(frozen=True)
class Keyring:
    """Secrets with ids and activation epochs, to rotate without a duplicate
    window: ``fields`` and ``intent-hmac`` keys use the secret active at the
    intent's own epoch; client keys (HTTP) use the one active now and, for
    ``window_seconds`` after an activation (default 24 h), also look up the
    request under the previous secret. Add a secret with a future
    ``active_from`` everywhere first; drop the previous one after the window."""

    secrets: Tuple[KeyringSecret, ...]
    window_seconds: Optional[int] = None

    def __init__(self, secrets: Sequence[Union[KeyringSecret, Tuple[str, int, SecretInput]]],
                 window_seconds: Optional[int] = None):
        entries = tuple(s if isinstance(s, KeyringSecret) else KeyringSecret(*s) for s in secrets)
        object.__setattr__(self, "secrets", entries)
        object.__setattr__(self, "window_seconds", window_seconds)

    def _parts(self) -> Tuple[List[Tuple[str, int]], List[bytes]]:
        names = [(b.text("keyring id", s.id), b.s64("active_from", s.active_from)) for s in self.secrets]
        return names, [b.secret_bytes("keyring secret", s.secret) for s in self.secrets]


@dataclass(frozen=True)
class Run:
    """One run of an agent or workflow: the recorded intent every attempt of
    it resumes. The intent id and epoch come from where the run was
    recorded, never from the attempt."""

    tenant_id: str
    intent_id: str
    intent_epoch: int

    def _wit(self) -> Any:
        return b.record(tenant_id=b.text("tenant_id", self.tenant_id), intent_id=b.text("intent_id", self.intent_id),
                        intent_epoch=b.s64("intent_epoch", self.intent_epoch))


def _policy(policy: Any) -> Optional[str]:
    if policy is None or isinstance(policy, str):
        return policy
    if isinstance(policy, dict):
        return json.dumps(policy)
    raise IntentkeyError("invalid-policy", None, f"a policy is JSON text or a dict, not {type(policy).__name__}")


def _payload(payload: Any) -> str:
    """JSON text as given (number literals kept as written), or a dict dumped."""
    if isinstance(payload, str):
        if not payload.isascii():
            b.unicode_text("payload_json", payload, "invalid-payload")
        return payload
    if isinstance(payload, dict):
        return json.dumps(payload)
    raise IntentkeyError("invalid-payload", "payload_json", f"a payload is JSON object text or a dict, not {type(payload).__name__}")


def _intent(tenant_id: str, action_type: str, payload: Any, intent_epoch: int) -> Any:
    return b.record(tenant_id=b.text("tenant_id", tenant_id), action_type=b.text("action_type", action_type),
                    payload_json=_payload(payload), intent_epoch=b.s64("intent_epoch", intent_epoch))


class Keyer:
    """A validated policy keyed with one secret or a :class:`Keyring`.

    ``policy``: JSON text or a dict; ``None`` selects the built-in payments
    policy. Give exactly one of ``secret`` (at least 32 random bytes, or hex
    text) and ``keyring``. Raises :class:`IntentkeyError` (``invalid-policy``
    with ``.field`` the dotted path, ``secret-too-short``, ``invalid-keyring``)
    when the core refuses either. A payload is JSON object text (its number
    literals are kept as written) or a dict.
    """

    def __init__(self, *, secret: Optional[SecretInput] = None, keyring: Optional[Keyring] = None,
                 policy: Any = None, **unknown: Any):
        b.no_unknown("intentkey.Keyer", unknown, ('secret', 'keyring', 'policy'))
        if (secret is None) == (keyring is None):
            raise IntentkeyError("invalid-argument", "secret", "give exactly one of secret and keyring")
        rt = b.runtime()
        policy_json = _policy(policy)
        self._keyring = keyring is not None
        if keyring is not None:
            names, secrets = keyring._parts()
            self._guest = b.GuestResource(rt, secrets, lambda ids: rt.call(
                b.KEYS, "[static]keyer.create-keyring", policy_json, b.keyring_entries(rt, names, ids)))
        else:
            assert secret is not None
            one = b.secret_bytes("secret", secret)
            self._guest = b.GuestResource(rt, [one], lambda ids: rt.call(b.KEYS, "[static]keyer.create", policy_json, ids[0]))

    def __repr__(self) -> str:
        return f"Keyer({'keyring' if self._keyring else 'secret'}=<redacted>)"

    def _call(self, method: str, *args: Any) -> Any:
        return b.unwrap(self._guest.call(b.KEYS, f"[method]keyer.{method}", *args))

    def derive(self, tenant_id: str, action_type: str, payload: Any, intent_epoch: int) -> str:
        """The ``fields``-mode key (64 hex, or the policy's ``keyHexLength``)."""
        return str(self._call("derive", _intent(tenant_id, action_type, payload, intent_epoch)))

    def derive_many(self, intents: Sequence[Tuple[str, str, Any, int]]) -> List[Union[str, IntentkeyError]]:
        """Keys for many ``(tenant_id, action_type, payload, intent_epoch)`` in
        one call: a key or an :class:`IntentkeyError` per intent, in order."""
        answers = self._guest.call(b.KEYS, "[method]keyer.derive-many", [_intent(*i) for i in intents])
        out: List[Union[str, IntentkeyError]] = []
        for answer in answers:
            ok, value = b.outcome(answer)
            out.append(value if ok else b.error_from_wit(value))
        return out

    def material(self, tenant_id: str, action_type: str, payload: Any, intent_epoch: int) -> str:
        """The canonical material the ``fields`` key is the HMAC of."""
        return str(self._call("material", _intent(tenant_id, action_type, payload, intent_epoch)))

    def intent_key(self, tenant_id: str, intent_id: str, key_hex_length: Optional[int] = None) -> str:
        """The ``intent-hmac``-mode key of a recorded intent id (32..=64 hex, default 64).
        A keyer of several secrets raises ``invalid-keyring``: use :meth:`intent_key_at`."""
        return str(self._call("intent-key", b.text("tenant_id", tenant_id), b.text("intent_id", intent_id),
                              b.key_length(key_hex_length)))

    def intent_key_at(self, tenant_id: str, intent_id: str, intent_epoch: int, key_hex_length: Optional[int] = None) -> str:
        """The ``intent-hmac``-mode key under the secret active at the intent's epoch."""
        return str(self._call("intent-key-at", b.text("tenant_id", tenant_id), b.text("intent_id", intent_id),
                              b.s64("intent_epoch", intent_epoch), b.key_length(key_hex_length)))

    def _fp(self, tenant_id: str, action_type: str, payload: Any) -> Tuple[str, str, str]:
        return b.text("tenant_id", tenant_id), b.text("action_type", action_type), _payload(payload)

    def fingerprint(self, tenant_id: str, action_type: str, payload: Any) -> str:
        """The payload fingerprint (64 hex) stored beside the key."""
        return str(self._call("fingerprint", *self._fp(tenant_id, action_type, payload)))

    def fingerprint_at(self, tenant_id: str, action_type: str, payload: Any, intent_epoch: int) -> str:
        """The payload fingerprint under the secret active at the intent's epoch."""
        return str(self._call("fingerprint-at", *self._fp(tenant_id, action_type, payload), b.s64("intent_epoch", intent_epoch)))

    def fingerprint_material(self, tenant_id: str, action_type: str, payload: Any) -> str:
        """The fingerprint's canonical material."""
        return str(self._call("fingerprint-material", *self._fp(tenant_id, action_type, payload)))

    def fingerprint_matches(self, tenant_id: str, action_type: str, payload: Any, stored: str) -> bool:
        """Compares the payload's fingerprint with a stored one in constant time."""
        return bool(self._call("fingerprint-matches", *self._fp(tenant_id, action_type, payload), b.text("stored", stored)))

    def intent_attempt(self, tenant_id: str, action_type: str, payload: Any, intent_epoch: int,
                       intent_id: Optional[str] = None, key_hex_length: Optional[int] = None) -> Attempt:
        """The claim attempt of an intent: keyed by its recorded ``intent_id``
        (``intent-hmac``) when given, else by its fields; the fingerprint
        covers the payload under the policy."""
        answer = self._guest.call(b.KEYS, "[method]keyer.intent-attempt",
                                  _intent(tenant_id, action_type, payload, intent_epoch),
                                  None if intent_id is None else b.text("intent_id", intent_id), b.key_length(key_hex_length))
        return b.attempt_from_wit(b.unwrap_record(answer))

    def step_attempt(self, run: Run, step: str, input: Any = None) -> Attempt:
        """The claim attempt of step `step` of `run` (the journal's): keyed by
        the run and the name; the fingerprint also covers `input` (any JSON value)."""
        input_json = None if input is None else json.dumps(input, separators=(",", ":"), ensure_ascii=False)
        answer = self._guest.call(b.KEYS, "[method]keyer.step-attempt", run._wit(), b.text("step", step), input_json)
        return b.attempt_from_wit(b.unwrap_record(answer))

    def tool_call_attempt(self, run: Run, tool: str, arguments: Any) -> Attempt:
        """The claim attempt of a validated tool call of `run`: keyed by the
        run, the tool and the arguments' key fields under the policy. The
        model's text and its tool_call_id never enter."""
        answer = self._guest.call(b.KEYS, "[method]keyer.tool-call-attempt", run._wit(), b.text("tool", tool), _payload(arguments))
        return b.attempt_from_wit(b.unwrap_record(answer))

    def close(self) -> None:
        """Frees the keyer and the guest's copy of its secret now (else when collected)."""
        self._guest.close()

    def __enter__(self) -> "Keyer":
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.close()


def uuid_key(random_bytes: bytes) -> str:
    """A ``uuid``-mode key (UUID v4 as 32 lowercase hex) from 16 given random bytes."""
    if not isinstance(random_bytes, (bytes, bytearray, memoryview)):
        raise IntentkeyError("invalid-random", "random_bytes", "random_bytes must be 16 bytes")
    return str(b.unwrap(b.runtime().call(b.KEYS, "uuid-key", bytes(random_bytes))))


def new_uuid_key() -> str:
    """A ``uuid``-mode key from 16 bytes of ``os.urandom``."""
    return str(b.unwrap(b.runtime().call(b.KEYS, "new-uuid-key")))


def answer_lines(lines: Sequence[str], *, policy: Any = None) -> List[str]:
    """The JSON-lines batch contract of ``intentkey derive --jsonl``: one
    answer line per request line, in order."""
    checked = [b.text("line", line) for line in lines]
    rt = b.runtime()
    if policy is None:
        return [str(x) for x in rt.call(b.KEYS, "answer-lines", checked)]
    policy_json = _policy(policy)
    return [str(x) for x in b.unwrap(rt.call(b.KEYS, "answer-lines-with-policy", policy_json, checked))]


def unreadable_line_answer() -> str:
    """The core's answer line for an input line that is not UTF-8 text."""
    return str(b.runtime().call(b.KEYS, "unreadable-line-answer"))
