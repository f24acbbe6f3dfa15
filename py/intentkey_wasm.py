"""intentkey for Python: the same WebAssembly component every runtime runs.

A thin, hand-written binding over ``wasmtime`` (PyPI, pinned in
``requirements.txt``). All logic (policy validation, normalization, canonical
material, HMAC, UUIDs, the JSON-lines contract) lives once, in the Rust core
compiled to ``dist/intentkey.wasm`` (world ``intentkey``). This module only
converts Python values to component values and back, and supplies the
component's imports:

* ``intentkey:core/secrets@0.5.0`` ``get-secret``: answered from a dict that
  each :class:`Keyer` fills with its own secret under a private id;
* ``intentkey:core/random@0.5.0`` ``random-bytes``: ``os.urandom``;
* ``intentkey:core/store@0.5.0``: the store a :class:`Guard` is driving (a
  :class:`MemoryStore`), set for the length of each guard call;
* ``intentkey:core/gateway@0.5.0`` ``ask``: the destination look-up a
  :meth:`Guard.recover` call was given.

The claim flow itself (the order of store operations, fencing on owner
tokens, outcome classes, recovery) is the core's, run inside the component
through its ``guard`` export; this module never sequences a claim.

One compiled component, one ``Store`` and one instance are reused across calls
(guarded by a lock). If a call traps, or a host import fails, the instance is
poisoned: the binding raises :class:`IntentkeyTrap`, throws the store and
instance away and instantiates afresh on the next call; live :class:`Keyer`
objects re-create their guest resource transparently. Every call runs with a
fuel budget, so a runaway guest traps instead of hanging the process.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from dataclasses import dataclass
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from wasmtime import Config, Engine, Store
from wasmtime.component import Component, Linker, Record, ResourceAny, Variant

__all__ = [
    "ERROR_CODES",
    "Admission",
    "Attempt",
    "Endpoint",
    "Guard",
    "IntentkeyError",
    "IntentkeyTrap",
    "Keyer",
    "MemoryStore",
    "Reply",
    "Runtime",
    "answer_lines",
    "default_options",
    "default_component_path",
    "load",
    "new_uuid_key",
    "uuid_key",
]

_KEYS = "intentkey:core/keys@0.5.0"
_GUARD = "intentkey:core/guard@0.5.0"
_HTTP = "intentkey:core/http@0.5.0"
_SECRETS = "intentkey:core/secrets@0.5.0"
_RANDOM = "intentkey:core/random@0.5.0"
_STORE = "intentkey:core/store@0.5.0"
_GATEWAY = "intentkey:core/gateway@0.5.0"

_GUARD_EXPORTS = ("claim", "finish", "recover", "due", "purge")

_HTTP_EXPORTS = (
    "default-options",
    "[static]endpoint.create",
    "[static]endpoint.create-keyring",
    "[method]endpoint.header-name",
    "[method]endpoint.admit",
    "[method]endpoint.answer",
    "[method]endpoint.too-large",
    "[method]endpoint.unavailable",
    "[method]endpoint.failed",
)

_EXPORTS = (
    "[static]keyer.create",
    "[static]keyer.create-keyring",
    "[method]keyer.derive",
    "[method]keyer.derive-many",
    "[method]keyer.material",
    "[method]keyer.intent-key",
    "[method]keyer.intent-key-at",
    "[method]keyer.fingerprint",
    "[method]keyer.fingerprint-at",
    "[method]keyer.fingerprint-material",
    "[method]keyer.fingerprint-matches",
    "new-uuid-key",
    "uuid-key",
    "answer-lines",
)

#: Every code an :class:`IntentkeyError` can carry: the cases of the WIT
#: ``error-code`` enum, the same kebab-case strings as ``intentkey::ErrorCode``
#: and the npm package's ``ErrorCode`` (crates/intentkey/tests/error_vocabulary.rs
#: checks that the four agree).
ERROR_CODES = frozenset({
    "secret-too-short",
    "invalid-secret",
    "invalid-tenant-id",
    "invalid-action-type",
    "unknown-action-type",
    "invalid-epoch",
    "invalid-payload",
    "unclassified-fields",
    "invalid-field-type",
    "invalid-decimal",
    "decimal-out-of-range",
    "invalid-integer",
    "invalid-currency",
    "invalid-pix-key",
    "invalid-intent-id",
    "invalid-policy",
    "invalid-json",
    "invalid-key-length",
    "invalid-random",
    "store-unavailable",
    "store-failed",
    "record-vanished",
    "flow-misuse",
    "io-failed",
    "invalid-argument",
    "component-failed",
    "invalid-keyring",
    "secret-retired",
    "invalid-step-name",
    "invalid-step-output",
    "step-output-too-large",
    "step-in-flight",
    "step-input-changed",
})

#: Fuel (roughly: wasm instructions) one call may burn before it traps.
#: Far above any real call (a derive costs well under a million), far below a hang.
DEFAULT_FUEL_PER_CALL = 10_000_000_000


def default_component_path() -> str:
    """``dist/intentkey.wasm`` of the repository this file sits in."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dist", "intentkey.wasm")


class IntentkeyError(Exception):
    """An ``error`` returned by the core: a stable kebab-case ``code``
    (``"unclassified-fields"``..., one of :data:`ERROR_CODES`), the ``field``
    or policy path at fault (or ``None``) and a ``message``."""

    def __init__(self, code: str, field: Optional[str], message: str):
        super().__init__(f"{code}: {message}" + (f" (field {field!r})" if field is not None else ""))
        self.code = code
        self.field = field
        self.message = message

    @classmethod
    def _from_record(cls, rec: Any) -> "IntentkeyError":
        if rec.code not in ERROR_CODES:
            # A component newer (or older) than this binding: say so, never
            # pass on a code that callers cannot match.
            raise RuntimeError(
                f"the intentkey component reported error code {rec.code!r}, which this binding "
                f"does not know (message: {rec.message!r}); update py/intentkey_wasm.py "
                f"ERROR_CODES to match the component's wit/intentkey.wit"
            )
        return cls(rec.code, rec.field, rec.message)


class IntentkeyTrap(RuntimeError):
    """The guest trapped (or a host import failed). The instance was discarded;
    the next call runs on a fresh one."""


def _outcome(value: Any) -> Tuple[bool, Any]:
    """(ok, payload) of a lifted ``result<T, error>``.

    wasmtime-py lifts a result *untagged* when its ok and err Python classes
    differ (here: str/bool/ResourceAny vs Record): the ok value itself, or the
    error ``Record``. It only uses ``Variant('ok'|'err', payload)`` when the
    two cases would be ambiguous; accept both shapes.
    """
    if isinstance(value, Variant):
        return value.tag == "ok", value.payload
    if isinstance(value, Record):
        return False, value
    return True, value


def _unwrap(value: Any) -> Any:
    ok, payload = _outcome(value)
    if ok:
        return payload
    raise IntentkeyError._from_record(payload)


def _error_record(code: str, field: Optional[str], message: str) -> Record:
    rec = Record()
    rec.code = code
    rec.field = field
    rec.message = message
    return rec


def _intent(tenant_id: str, action_type: str, payload_json: str, intent_epoch: int) -> Record:
    # Record fields are looked up by their WIT (kebab-case) names.
    rec = Record()
    setattr(rec, "tenant-id", _text("tenant_id", tenant_id))
    setattr(rec, "action-type", _text("action_type", action_type))
    setattr(rec, "payload-json", _text("payload_json", payload_json))
    setattr(rec, "intent-epoch", _s64(intent_epoch))
    return rec


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be str, not {type(value).__name__}")
    return value


def _keyring_in(keyring: Iterable[Tuple[str, int, bytes]]) -> List[Tuple[str, int, bytes]]:
    """Checks the shape of ``(id, active_from, secret)`` entries (the core checks the rest)."""
    entries = []
    for secret_id, active_from, secret in keyring:
        if not isinstance(secret, (bytes, bytearray, memoryview)):
            raise TypeError(f"a keyring secret must be bytes, not {type(secret).__name__}")
        entries.append((_text("id", secret_id), _s64(active_from), bytes(secret)))
    return entries


def _create_with_keyring(rt: "Runtime", keyring: List[Tuple[str, int, bytes]], create: Any) -> Tuple[Any, int]:
    """Calls ``create(entries)`` with the keyring's secrets known to the
    ``secrets`` import only for the call (the guest keeps them inside the
    resource): (what it returned, the instance generation)."""
    ids = [rt.register_secret(secret) for _, _, secret in keyring]
    entries = [
        _record(id=name, active_from=active_from, secret_id=secret_id)
        for (name, active_from, _), secret_id in zip(keyring, ids)
    ]
    try:
        with rt._lock:
            return create(entries), rt.generation
    finally:
        for secret_id in ids:
            rt.forget_secret(secret_id)


def _key_length(key_hex_length: Optional[int]) -> None:
    if key_hex_length is not None and (isinstance(key_hex_length, bool) or not isinstance(key_hex_length, int)):
        raise TypeError("key_hex_length must be int or None")
    if key_hex_length is not None and not 0 <= key_hex_length < (1 << 32):
        raise IntentkeyError("invalid-key-length", None, f"key length {key_hex_length} is outside 32..=64")


def _s64(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"intent_epoch must be int, not {type(value).__name__}")
    if not -(1 << 63) <= value < (1 << 63):
        raise OverflowError("intent_epoch is outside the signed 64-bit range")
    return int(value)


class Runtime:
    """One compiled component plus the store/instance that runs it."""

    def __init__(self, component_path: Optional[str] = None, fuel_per_call: Optional[int] = DEFAULT_FUEL_PER_CALL):
        self.component_path = component_path or default_component_path()
        self.fuel_per_call = fuel_per_call
        config = Config()
        config.consume_fuel = fuel_per_call is not None
        self._engine = Engine(config)
        self._component = Component.from_file(self._engine, self.component_path)
        self._secrets: dict = {}
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._linker = Linker(self._engine)
        with self._linker.root() as root:
            with root.add_instance(_SECRETS) as secrets:
                secrets.add_func("get-secret", self._get_secret)
            with root.add_instance(_RANDOM) as random:
                random.add_func("random-bytes", self._random_bytes)
            # The guard's store and destination: whatever the running Guard call
            # set (a call with none set is a bug in this module and traps).
            with root.add_instance(_STORE) as store:
                for op in ("insert", "get", "complete", "replace", "release", "list", "purge"):
                    store.add_func(op, self._store_op(op))
            with root.add_instance(_GATEWAY) as gateway:
                gateway.add_func("ask", self._ask)
        # `intentkey:core/types` holds only types: nothing to define.
        self.generation = 0
        self._store: Optional[Store] = None
        self._funcs: dict = {}
        self._in_call = False
        self._pending_drops: List[Tuple[ResourceAny, int]] = []
        self._active_store: Optional["MemoryStore"] = None
        self._active_lookup: Optional[Any] = None

    # -- imports -----------------------------------------------------------
    def _get_secret(self, _store: Any, secret_id: str) -> Union[bytes, Record]:
        secret = self._secrets.get(secret_id)
        if secret is None:
            return _error_record("invalid-secret", None, f"no secret is registered under id {secret_id!r}")
        return secret

    @staticmethod
    def _random_bytes(_store: Any, length: int) -> bytes:
        return os.urandom(length)

    def _store_op(self, op: str) -> Any:
        method = op.replace("-", "_")

        def perform(_store: Any, *args: Any) -> Any:
            active = self._active_store
            if active is None:
                raise RuntimeError(f"the component asked for store.{op} outside a Guard call")
            return getattr(active, method)(*args)

        return perform

    def _ask(self, _store: Any, key: str) -> Variant:
        if self._active_lookup is None:
            raise RuntimeError("the component asked the destination outside Guard.recover")
        return _lookup(self._active_lookup(key))

    def call_guard(self, name: str, store: "MemoryStore", lookup: Optional[Any], *args: Any) -> Any:
        """Calls export `name` of ``guard`` with `store` (and `lookup`) serving the imports."""
        with self._lock:
            self._active_store, self._active_lookup = store, lookup
            try:
                return self.call(name, *args)
            finally:
                self._active_store, self._active_lookup = None, None

    # -- instance lifecycle --------------------------------------------------
    def _instantiate(self) -> None:
        store = Store(self._engine)
        if self.fuel_per_call is not None:
            store.set_fuel(self.fuel_per_call)
        instance = self._linker.instantiate(store, self._component)
        keys = instance.get_export_index(store, _KEYS)
        if keys is None:
            raise IntentkeyTrap(f"the component does not export {_KEYS}")
        funcs = {}
        for interface, names in ((_KEYS, _EXPORTS), (_GUARD, _GUARD_EXPORTS), (_HTTP, _HTTP_EXPORTS)):
            parent = instance.get_export_index(store, interface)
            if parent is None:
                raise IntentkeyTrap(f"the component does not export {interface}")
            for name in names:
                index = instance.get_export_index(store, name, parent)
                func = instance.get_func(store, index) if index is not None else None
                if func is None:
                    raise IntentkeyTrap(f"the component's {interface} lacks {name}")
                funcs[name] = func
        self._store, self._funcs = store, funcs
        self.generation += 1

    def _discard(self) -> None:
        self._store, self._funcs = None, {}

    def call(self, name: str, *args: Any) -> Any:
        """Calls export `name` of ``keys``; returns the lifted value as is."""
        with self._lock:
            if self._in_call:
                raise IntentkeyTrap(f"{name} called re-entrantly (from inside a host import)")
            self._drain_drops()
            if self._store is None:
                self._instantiate()
            store = self._store
            assert store is not None
            if self.fuel_per_call is not None:
                store.set_fuel(self.fuel_per_call)
            self._in_call = True
            try:
                return self._funcs[name](store, *args)
            except Exception as exc:  # a trap, or an exception out of an import
                self._discard()
                raise IntentkeyTrap(f"{name} trapped; the instance was discarded: {exc}") from exc
            finally:
                self._in_call = False

    def drop(self, resource: ResourceAny, generation: int, now: bool = True) -> None:
        """Drops a guest resource: at once when `now` and no call is running,
        otherwise before the next call (safe from ``__del__``: no lock, no wasm)."""
        self._pending_drops.append((resource, generation))
        if now:
            with self._lock:
                if not self._in_call:
                    self._drain_drops()

    def _drain_drops(self) -> None:
        while self._pending_drops:
            resource, generation = self._pending_drops.pop()
            if self._store is None or generation != self.generation:
                continue  # its instance is gone already
            if self.fuel_per_call is not None:
                self._store.set_fuel(self.fuel_per_call)
            try:
                resource.drop(self._store)
            except Exception:
                self._discard()

    def register_secret(self, secret: bytes) -> str:
        secret_id = f"keyer-{next(self._ids)}"
        self._secrets[secret_id] = bytes(secret)
        return secret_id

    def forget_secret(self, secret_id: str) -> None:
        self._secrets.pop(secret_id, None)


_default: Optional[Runtime] = None
_default_lock = threading.Lock()


def load(component_path: Optional[str] = None, **kwargs: Any) -> Runtime:
    """(Re)loads the module's default runtime from `component_path`."""
    global _default
    with _default_lock:
        _default = Runtime(component_path, **kwargs)
        return _default


def _runtime(runtime: Optional[Runtime]) -> Runtime:
    global _default
    if runtime is not None:
        return runtime
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Runtime()
    return _default


class Keyer:
    """A validated policy keyed with one secret (the component's ``keyer``).

    ``policy_json=None`` selects the built-in payments policy. Raises
    :class:`IntentkeyError` (``invalid-policy`` with ``.field`` = the dotted
    path, ``secret-too-short``...) when the core refuses either.
    """

    def __init__(self, policy_json: Optional[str], secret: bytes, *, runtime: Optional[Runtime] = None):
        if policy_json is not None:
            _text("policy_json", policy_json)
        if not isinstance(secret, (bytes, bytearray, memoryview)):
            raise TypeError(f"secret must be bytes, not {type(secret).__name__}")
        self._rt = _runtime(runtime)
        self._policy_json = policy_json
        self._secret = bytes(secret)
        self._keyring: List[Tuple[str, int, bytes]] = []
        self._resource: Optional[ResourceAny] = None
        self._generation = -1
        self._handle()  # validate now

    @classmethod
    def with_keyring(
        cls,
        policy_json: Optional[str],
        keyring: Iterable[Tuple[str, int, bytes]],
        *,
        runtime: Optional[Runtime] = None,
    ) -> "Keyer":
        """A keyer keyed by a keyring of ``(id, active_from, secret)``: each
        intent is keyed with the secret active at its own epoch, so a rotation
        gives no retried intent a new key. With more than one secret, the calls
        without an epoch (``intent_key``, ``fingerprint``) raise
        ``invalid-keyring``: use :meth:`intent_key_at` and :meth:`fingerprint_at`.
        """
        if policy_json is not None:
            _text("policy_json", policy_json)
        entries = _keyring_in(keyring)
        self = cls.__new__(cls)
        self._rt = _runtime(runtime)
        self._policy_json = policy_json
        self._secret = b""
        self._keyring = entries
        self._resource = None
        self._generation = -1
        self._handle()  # validate now
        return self

    def _handle(self) -> ResourceAny:
        rt = self._rt
        if self._resource is not None and self._generation == rt.generation and rt._store is not None:
            return self._resource
        # First use, or the instance was replaced after a trap: create anew.
        if self._keyring:
            created, generation = _create_with_keyring(
                rt, self._keyring, lambda entries: rt.call("[static]keyer.create-keyring", self._policy_json, entries)
            )
            self._resource = _unwrap(created)
            self._generation = generation
            return self._resource
        secret_id = rt.register_secret(self._secret)
        try:
            with rt._lock:
                created = rt.call("[static]keyer.create", self._policy_json, secret_id)
                generation = rt.generation
        finally:
            rt.forget_secret(secret_id)  # the guest keeps it inside the resource
        self._resource = _unwrap(created)
        self._generation = generation
        return self._resource

    def _method(self, name: str, *args: Any) -> Any:
        with self._rt._lock:
            return self._rt.call(name, self._handle(), *args)

    def derive(self, tenant_id: str, action_type: str, payload_json: str, intent_epoch: int) -> str:
        """The ``fields``-mode key (64 hex, or the policy's ``keyHexLength``)."""
        return _unwrap(self._method("[method]keyer.derive", _intent(tenant_id, action_type, payload_json, intent_epoch)))

    def derive_many(self, intents: Iterable[Sequence[Any]]) -> List[Union[str, IntentkeyError]]:
        """Keys for many ``(tenant_id, action_type, payload_json, intent_epoch)``
        in one call: a key or an :class:`IntentkeyError` per intent, in order."""
        records = [_intent(*intent) for intent in intents]
        answers = self._method("[method]keyer.derive-many", records)
        out: List[Union[str, IntentkeyError]] = []
        for answer in answers:
            ok, payload = _outcome(answer)
            out.append(payload if ok else IntentkeyError._from_record(payload))
        return out

    def material(self, tenant_id: str, action_type: str, payload_json: str, intent_epoch: int) -> str:
        """The canonical material the ``fields`` key is the HMAC of."""
        return _unwrap(self._method("[method]keyer.material", _intent(tenant_id, action_type, payload_json, intent_epoch)))

    def intent_key(self, tenant_id: str, intent_id: str, key_hex_length: Optional[int] = None) -> str:
        """The ``intent-hmac``-mode key; ``key_hex_length`` defaults to 64."""
        _key_length(key_hex_length)
        return _unwrap(self._method("[method]keyer.intent-key", _text("tenant_id", tenant_id), _text("intent_id", intent_id), key_hex_length))

    def intent_key_at(self, tenant_id: str, intent_id: str, intent_epoch: int, key_hex_length: Optional[int] = None) -> str:
        """The ``intent-hmac``-mode key under the secret active at the intent's epoch."""
        _key_length(key_hex_length)
        return _unwrap(self._method(
            "[method]keyer.intent-key-at",
            _text("tenant_id", tenant_id), _text("intent_id", intent_id), _s64(intent_epoch), key_hex_length,
        ))

    def fingerprint(self, tenant_id: str, action_type: str, payload_json: str) -> str:
        """The payload fingerprint (64 hex) stored beside the key."""
        return _unwrap(self._method("[method]keyer.fingerprint", *self._fp_args(tenant_id, action_type, payload_json)))

    def fingerprint_at(self, tenant_id: str, action_type: str, payload_json: str, intent_epoch: int) -> str:
        """The payload fingerprint under the secret active at the intent's epoch."""
        return _unwrap(self._method(
            "[method]keyer.fingerprint-at", *self._fp_args(tenant_id, action_type, payload_json), _s64(intent_epoch),
        ))

    def fingerprint_material(self, tenant_id: str, action_type: str, payload_json: str) -> str:
        """The fingerprint's canonical material."""
        return _unwrap(self._method("[method]keyer.fingerprint-material", *self._fp_args(tenant_id, action_type, payload_json)))

    def fingerprint_matches(self, tenant_id: str, action_type: str, payload_json: str, stored: str) -> bool:
        """Compares the payload's fingerprint with a stored one in constant time."""
        return _unwrap(self._method("[method]keyer.fingerprint-matches", *self._fp_args(tenant_id, action_type, payload_json), _text("stored", stored)))

    @staticmethod
    def _fp_args(tenant_id: str, action_type: str, payload_json: str) -> Tuple[str, str, str]:
        return _text("tenant_id", tenant_id), _text("action_type", action_type), _text("payload_json", payload_json)

    def close(self) -> None:
        """Drops the guest resource (and the secret the guest holds in it)."""
        self._release(now=True)

    def _release(self, now: bool) -> None:
        resource, self._resource = getattr(self, "_resource", None), None
        if resource is not None:
            self._rt.drop(resource, self._generation, now)

    def __enter__(self) -> "Keyer":
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._release(now=False)  # queued: dropped before the runtime's next call
        except Exception:
            pass


def uuid_key(random_bytes: bytes, *, runtime: Optional[Runtime] = None) -> str:
    """A ``uuid``-mode key (32 lowercase hex) from 16 given random bytes."""
    if not isinstance(random_bytes, (bytes, bytearray, memoryview)):
        raise TypeError("random_bytes must be bytes")
    return _unwrap(_runtime(runtime).call("uuid-key", bytes(random_bytes)))


def new_uuid_key(*, runtime: Optional[Runtime] = None) -> str:
    """A ``uuid``-mode key from 16 bytes of ``os.urandom`` (via the import)."""
    return _unwrap(_runtime(runtime).call("new-uuid-key"))


def answer_lines(lines: Sequence[str], *, runtime: Optional[Runtime] = None) -> List[str]:
    """The JSON-lines batch contract: one JSON answer line per request line."""
    return list(_runtime(runtime).call("answer-lines", [_text("line", line) for line in lines]))


# -- claims: the core's guard over a store served from Python ----------------

#: How long done records are kept by default (the core's 24 hours).
DEFAULT_TTL_SECONDS = 86_400
#: Statuses that release a claim by default (the core's 429 and 503).
DEFAULT_RELEASE_STATUSES = (429, 503)
#: How long a claim may run before recovery may ask the destination (5 minutes).
DEFAULT_STALE_AFTER_SECONDS = 300


def _record(**fields: Any) -> Record:
    rec = Record()
    for name, value in fields.items():
        setattr(rec, name.replace("_", "-"), value)
    return rec


def _get(rec: Any, name: str) -> Any:
    return getattr(rec, name.replace("_", "-"))


def response(status: int, body: "str | bytes", content_type: str = "application/json",
             headers: Sequence[Tuple[str, str]] = ()) -> Record:
    """A response as the component takes it; a text body is encoded as UTF-8."""
    data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    return _record(status=status, content_type=content_type, headers=list(headers), body=data)


def _lookup(answer: Any) -> Variant:
    """A look-up answer: ``"absent"``, ``"unknown"`` or ``("found", response)``."""
    if answer in ("absent", "unknown"):
        return Variant(answer)
    if isinstance(answer, tuple) and len(answer) == 2 and answer[0] == "found":
        return Variant("found", answer[1])
    raise TypeError(f"a look-up answers 'absent', 'unknown' or ('found', response), not {answer!r}")


class MemoryStore:
    """A store in a dict, served to the component's ``store`` import. Each
    operation is one atomic step (the runtime's lock serializes guard calls);
    the fenced writes compare the owner token exactly as the SQL stores do
    (docs/store-schema.md)."""

    def __init__(self) -> None:
        self.records: dict = {}

    def _fenced(self, key: str, token: str) -> Optional[Record]:
        rec = self.records.get(key)
        if rec is None or _get(rec, "status") != "in-flight" or _get(rec, "owner_token") != token:
            return None
        return rec

    def insert(self, record: Record) -> bool:
        if _get(record, "key") in self.records:
            return False
        self.records[_get(record, "key")] = record
        return True

    def get(self, key: str) -> Optional[Record]:
        return self.records.get(key)

    def complete(self, c: Record) -> bool:
        rec = self._fenced(c.key, _get(c, "owner_token"))
        if rec is None:
            return False
        rec.status = "done"
        rec.response = c.response
        setattr(rec, "expires-at", _get(c, "expires_at"))
        setattr(rec, "next-lookup-at", None)
        return True

    def replace(self, r: Record) -> bool:
        nxt = r.record
        rec = self._fenced(nxt.key, _get(r, "expected_token"))
        if rec is None or rec.lookups != _get(r, "expected_lookups"):
            return False
        for name in ("status", "owner-token", "response", "created-at", "expires-at", "lookups", "next-lookup-at"):
            setattr(rec, name, getattr(nxt, name))
        return True

    def release(self, r: Record) -> bool:
        if self._fenced(r.key, _get(r, "owner_token")) is None:
            return False
        del self.records[r.key]
        return True

    def list(self, status: str, limit: int) -> List[Record]:
        found = [rec for rec in self.records.values() if rec.status == status]
        found.sort(key=lambda rec: (_get(rec, "created_at"), rec.key))
        return found[:limit]

    def purge(self, now: int) -> int:
        # The core decided what may be purged: done records at or past their expiry.
        gone = [k for k, rec in self.records.items()
                if rec.status == "done" and _get(rec, "expires_at") is not None and _get(rec, "expires_at") <= now]
        for key in gone:
            del self.records[key]
        return len(gone)


class Guard:
    """Runs an effect at most once per key over `store`, through the core's
    ``guard`` export: the core claims (owner token from ``os.urandom``),
    finishes by outcome class (terminal stored, 429/503 or ``refused``
    released, ``failed`` left in flight) and recovers (fenced; ``unknown``
    never re-executes). Times are whole seconds the caller passes in."""

    def __init__(self, store: MemoryStore, *, ttl_seconds: int = DEFAULT_TTL_SECONDS,
                 release_statuses: Sequence[int] = DEFAULT_RELEASE_STATUSES,
                 stale_after_seconds: int = DEFAULT_STALE_AFTER_SECONDS,
                 runtime: Optional[Runtime] = None):
        self.store = store
        self._rt = _runtime(runtime)
        self._rules = _record(ttl_seconds=ttl_seconds, release_statuses=list(release_statuses), fast_completion=False)
        self._ttl = ttl_seconds
        self._stale_after = stale_after_seconds

    def _call(self, name: str, *args: Any, lookup: Optional[Any] = None) -> Any:
        return _unwrap(self._rt.call_guard(name, self.store, lookup, *args))

    def claim(self, key: str, fingerprint: str, tenant_id: str, action_type: str, now: int,
              prior: Optional[Tuple[str, str]] = None) -> Tuple[Variant, str]:
        """(outcome, owner token): the outcome is ``Variant('owned')``,
        ``Variant('in-flight')``, ``Variant('done', response)`` or
        ``Variant('payload-conflict')``. ``prior`` is an attempt's
        ``(key, fingerprint)`` under a keyring's previous secret: its record,
        if any, answers first."""
        wit_prior = None if prior is None else _record(key=prior[0], fingerprint=prior[1])
        attempt = _record(key=key, fingerprint=fingerprint, tenant_id=tenant_id, action_type=action_type, prior=wit_prior)
        claimed = self._call("claim", attempt, _s64(now))
        return claimed.outcome, _get(claimed, "owner_token")

    def claim_attempt(self, attempt: "Attempt", now: int) -> Tuple[Variant, str]:
        """:meth:`claim` of an :class:`Endpoint`'s admitted attempt (its prior key included)."""
        return self.claim(attempt.key, attempt.fingerprint, attempt.tenant_id, attempt.action_type, now, attempt.prior)

    def finish(self, key: str, owner_token: str, result: Variant, now: int) -> str:
        """``stored``, ``released``, ``left-in-flight`` or ``superseded``.
        `result` is ``Variant('answered', response)``,
        ``Variant('refused', response_or_None)`` or ``Variant('failed')``."""
        return self._call("finish", key, owner_token, result, _s64(now), self._rules)

    def run(self, key: str, fingerprint: str, tenant_id: str, action_type: str, now: int, effect: Any) -> Tuple[str, Any]:
        """Claims; runs ``effect(key) -> response`` if owned and finishes;
        returns ``(outcome tag, response or finished)``."""
        outcome, token = self.claim(key, fingerprint, tenant_id, action_type, now)
        if outcome.tag != "owned":
            return outcome.tag, getattr(outcome, "payload", None)
        answer = effect(key)
        return "owned", self.finish(key, token, Variant("answered", answer), now)

    def recover(self, key: str, now: int, lookup: Any, *, read_your_writes: bool = False) -> Tuple[Variant, str]:
        """(recovered, new owner token): asks ``lookup(key)`` only when due."""
        rules = _record(stale_after=self._stale_after, read_your_writes=read_your_writes, ttl_seconds=self._ttl)
        recovery = self._call("recover", key, _s64(now), rules, lookup=lookup)
        return recovery.outcome, _get(recovery, "owner_token")

    def purge(self, now: int) -> int:
        """Deletes done records past their expiry; never in-flight ones."""
        return self._call("purge", _s64(now))


# -- HTTP: the core's rules for keys that clients send ---------------------------

#: The profiles: which header carries the key, its syntax and limits, the answers' shape.
PROFILES = ("ietf", "stripe", "ofb")


@dataclass(frozen=True)
class Reply:
    """An HTTP answer: status, headers (``Content-Type`` among them) as
    ``(name, value)`` pairs in order, body bytes."""

    status: int
    headers: List[Tuple[str, str]]
    body: bytes

    def header(self, name: str) -> Optional[str]:
        """The first value of a header, matched case-insensitively."""
        for n, v in self.headers:
            if n.lower() == name.lower():
                return v
        return None


@dataclass(frozen=True)
class Attempt:
    """What a claim needs: the tenant-scoped storage key, the request
    fingerprint, the tenant and ``METHOD route``."""

    key: str
    fingerprint: str
    tenant_id: str
    action_type: str
    #: ``(key, fingerprint)`` under the previous secret during a keyring's
    #: rotation window; the claim reads that record first.
    prior: Optional[Tuple[str, str]] = None


@dataclass(frozen=True)
class Admission:
    """What the endpoint does with a request: ``tag`` ``"guarded"`` (claim
    ``attempt``, run the handler only if owned), ``"unguarded"`` (no key,
    keys optional: run the handler) or ``"refused"`` (send ``reply``, run
    nothing)."""

    tag: str
    attempt: Optional[Attempt] = None
    reply: Optional[Reply] = None


def _reply(rec: Any) -> Reply:
    return Reply(rec.status, [(str(n), str(v)) for n, v in rec.headers], bytes(rec.body))


def _options_dict(rec: Any) -> dict:
    return {
        "profile": rec.profile,
        "strict_key_syntax": _get(rec, "strict_key_syntax"),
        "retry_after_seconds": _get(rec, "retry_after_seconds"),
        "replay_headers": list(_get(rec, "replay_headers")),
        "key_required": _get(rec, "key_required"),
        "max_body_bytes": _get(rec, "max_body_bytes"),
        "max_stored_bytes": _get(rec, "max_stored_bytes"),
    }


def default_options(profile: str = "ietf", *, runtime: Optional[Runtime] = None) -> dict:
    """A profile's documented defaults, as the component gives them."""
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, not {profile!r}")
    return _options_dict(_runtime(runtime).call("default-options", profile))


class Endpoint:
    """One server's HTTP rules, run by the component's ``http`` export: its
    secret, profile options and route policies.

    :meth:`admit` parses the key header, checks the body, derives the
    tenant-scoped storage key and the request fingerprint; :meth:`answer`
    turns a claim outcome (as :meth:`Guard.claim` returns it) into the
    replay, the 409 or the conflict answer; :meth:`too_large`,
    :meth:`unavailable` and :meth:`failed` are the other fixed answers.
    Options left ``None`` take the profile's defaults. ``policies`` maps
    ``"METHOD route"`` to a policy document (JSON text or a dict) whose
    ignored fields leave that route's fingerprints.
    """

    def __init__(self, secret: Optional[bytes] = None, *, profile: str = "ietf", strict_key_syntax: Optional[bool] = None,
                 retry_after_seconds: Optional[int] = None, replay_headers: Optional[Sequence[str]] = None,
                 key_required: Optional[bool] = None, max_body_bytes: Optional[int] = None,
                 policies: Optional[Mapping[str, Any]] = None, runtime: Optional[Runtime] = None,
                 keyring: Optional[Iterable[Tuple[str, int, bytes]]] = None, window_seconds: Optional[int] = None):
        # ``keyring`` (``(id, active_from, secret)`` entries) instead of ``secret``
        # rotates the secret: the one active now keys requests, and for
        # ``window_seconds`` after an activation (None: 24 h) each guarded
        # attempt carries its prior key, which the claim reads first.
        if (secret is None) == (keyring is None):
            raise TypeError("give either secret (bytes) or keyring ((id, active_from, secret) entries), not both")
        if secret is not None and not isinstance(secret, (bytes, bytearray, memoryview)):
            raise TypeError(f"secret must be bytes, not {type(secret).__name__}")
        self._keyring = [] if keyring is None else _keyring_in(keyring)
        self._window = None if window_seconds is None else _s64(window_seconds)
        self._rt = _runtime(runtime)
        options = default_options(profile, runtime=self._rt)
        given = {"strict_key_syntax": strict_key_syntax, "retry_after_seconds": retry_after_seconds,
                 "replay_headers": None if replay_headers is None else list(replay_headers),
                 "key_required": key_required, "max_body_bytes": max_body_bytes}
        options.update({k: v for k, v in given.items() if v is not None})
        self.options = options
        self._options = _record(**options)
        self._policies = [
            (_text("policy action", action), policy if isinstance(policy, str) else json.dumps(policy))
            for action, policy in (policies or {}).items()
        ]
        self._secret = b"" if secret is None else bytes(secret)
        self._resource: Optional[ResourceAny] = None
        self._generation = -1
        self._handle()  # validate now

    def _handle(self) -> ResourceAny:
        rt = self._rt
        if self._resource is not None and self._generation == rt.generation and rt._store is not None:
            return self._resource
        if self._keyring:
            created, generation = _create_with_keyring(
                rt,
                self._keyring,
                lambda entries: rt.call("[static]endpoint.create-keyring", entries, self._window, self._options, self._policies),
            )
            self._resource = _unwrap(created)
            self._generation = generation
            return self._resource
        secret_id = rt.register_secret(self._secret)
        try:
            with rt._lock:
                created = rt.call("[static]endpoint.create", secret_id, self._options, self._policies)
                generation = rt.generation
        finally:
            rt.forget_secret(secret_id)  # the guest keeps it inside the resource
        self._resource = _unwrap(created)
        self._generation = generation
        return self._resource

    def _method(self, name: str, *args: Any) -> Any:
        with self._rt._lock:
            return self._rt.call(f"[method]endpoint.{name}", self._handle(), *args)

    def header_name(self) -> str:
        """The profile's key header name, as the profile spells it."""
        return self._method("header-name")

    def admit(self, tenant_id: str, method: str, route: str, key_values: Sequence[str],
              content_type: Optional[str], body: bytes, now: int) -> Admission:
        """Applies the rules to a request. ``key_values``: the values of every
        header named :meth:`header_name` (case-insensitively), one per line.
        Raises :class:`IntentkeyError` only for what the server got wrong (an
        empty tenant, method or route)."""
        request = _record(tenant_id=_text("tenant_id", tenant_id), method=_text("method", method),
                          route=_text("route", route), key_values=[_text("key value", v) for v in key_values],
                          content_type=content_type, body=bytes(body))
        answer = self._method("admit", request, _s64(now))
        # result<admission, error>: the admission is a tagged Variant, an error a Record.
        if isinstance(answer, Record):
            raise IntentkeyError._from_record(answer)
        if isinstance(answer, Variant) and answer.tag == "ok":
            answer = answer.payload
        if answer.tag == "guarded":
            a = answer.payload
            prior = None if a.prior is None else (a.prior.key, a.prior.fingerprint)
            return Admission(
                "guarded", attempt=Attempt(a.key, a.fingerprint, _get(a, "tenant_id"), _get(a, "action_type"), prior)
            )
        if answer.tag == "refused":
            return Admission("refused", reply=_reply(answer.payload))
        return Admission(answer.tag)

    def answer(self, outcome: Variant, now: int) -> Optional[Reply]:
        """The answer to a claim outcome (``Variant('done', response)``,
        ``Variant('in-flight')``, ``Variant('payload-conflict')``); ``None``
        for ``Variant('owned')``: run the handler."""
        reply = self._method("answer", outcome, _s64(now))
        return None if reply is None else _reply(reply)

    def too_large(self, now: int) -> Reply:
        """413: the body is larger than ``max_body_bytes``."""
        return _reply(self._method("too-large", _s64(now)))

    def unavailable(self, now: int) -> Reply:
        """503 with ``Retry-After``: the store could not be reached."""
        return _reply(self._method("unavailable", _s64(now)))

    def failed(self, now: int) -> Reply:
        """500: the handler failed and its outcome is unknown (the record stays in flight)."""
        return _reply(self._method("failed", _s64(now)))

    def close(self) -> None:
        """Drops the guest resource (and the secret the guest holds in it)."""
        self._release(now=True)

    def _release(self, now: bool) -> None:
        resource, self._resource = getattr(self, "_resource", None), None
        if resource is not None:
            self._rt.drop(resource, self._generation, now)

    def __repr__(self) -> str:
        return f"Endpoint(profile={self.options['profile']!r}, policies={[a for a, _ in self._policies]!r})"

    def __enter__(self) -> "Endpoint":
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._release(now=False)
        except Exception:
            pass
