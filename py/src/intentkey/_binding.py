"""The private binding: one compiled component run by ``wasmtime``, and the
conversions between its values and the public dataclasses.

All logic (policies, normalization, keys, every claim, replay, recovery and
HTTP decision, every store statement) is the Rust core's, compiled into the
component; this module only converts values and supplies the component's
imports:

* ``secrets.get-secret``: from a dict the package fills for the length of a
  call that creates a keyer or an endpoint (the guest keeps the secret);
* ``random.random-bytes``: ``os.urandom``;
* ``store``: the store a :class:`intentkey.Guard` call is driving;
* ``gateway.ask``: the destination look-up a recovery was given.

One ``Store`` and one instance are reused across calls, serialized by a lock.
With the pinned wasmtime-py (``PINNED_WASMTIME``), the component's core module
is called through the canonical ABI directly, as jco does for JavaScript
(:mod:`intentkey._canon`: converters compiled once per function type, values
lowered straight into linear memory); any other wasmtime-py version, or
``INTENTKEY_FASTPATH=0``, runs the component through wasmtime-py's component
API.
A call that traps (or an import that fails) discards the instance: the call
raises :class:`IntentkeyTrap` and the next one instantiates afresh; live
keyers and endpoints re-create their guest resource. Every call runs with a
fuel budget, so a runaway guest traps instead of hanging the process.
"""

from __future__ import annotations

import functools
import importlib.metadata
import itertools
import os
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from wasmtime import Config, Engine, Store
from wasmtime.component import Component, Linker, Record, ResourceAny, Variant
from wasmtime.component import _types as _wasmtime_types

from ._codes import ERROR_CODES, WIT_VERSION, ErrorCode
from .errors import IntentkeyError, IntentkeyTrap
from .types import (
    Absent,
    Answered,
    Attempt,
    Completion,
    EffectResult,
    Failed,
    Found,
    Lookup,
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

#: Fuel (roughly: wasm instructions) one call may burn before it traps.
#: Far above any real call (a derive costs well under a million), far below a hang.
DEFAULT_FUEL_PER_CALL = 10_000_000_000

KEYS = f"intentkey:core/keys@{WIT_VERSION}"
CLAIMS = f"intentkey:core/claims@{WIT_VERSION}"
GUARD = f"intentkey:core/guard@{WIT_VERSION}"
HTTP = f"intentkey:core/http@{WIT_VERSION}"
FLOWS = f"intentkey:core/flows@{WIT_VERSION}"
MEMORY = f"intentkey:core/memory@{WIT_VERSION}"
REDIS = f"intentkey:core/redis@{WIT_VERSION}"
#: The bytes of randomness one owner token is made of (the core's OWNER_TOKEN_BYTES).
SEED_BYTES = 16
SCHEMA = f"intentkey:core/schema@{WIT_VERSION}"
_SECRETS = f"intentkey:core/secrets@{WIT_VERSION}"
_RANDOM = f"intentkey:core/random@{WIT_VERSION}"
_STORE = f"intentkey:core/store@{WIT_VERSION}"
_GATEWAY = f"intentkey:core/gateway@{WIT_VERSION}"

#: The wasmtime-py release the direct call path (:mod:`intentkey._canon`) is written for.
PINNED_WASMTIME = "50.0.1"

_WASM_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wasm")


def component_path(world: str = "intentkey") -> str:
    """The component file of `world` (``intentkey`` or ``pure``) shipped in the package."""
    name = "intentkey.wasm" if world == "intentkey" else "intentkey-pure.wasm"
    return os.path.join(_WASM_DIR, name)


# -- wasmtime-py's untagged option -------------------------------------------------
# wasmtime-py picks the case of an untagged variant (a `result` whose cases are
# distinct Python classes) by the classes each case accepts, and it says that an
# `option` accepts `object` for its none case: every value. The store import's
# `get` returns `result<option<record>, store-error>`, so its error (a Variant)
# was taken for the ok case and could not be lowered. An untagged option accepts
# None and its payload's classes, nothing else; its own lowering and lifting
# are unchanged (they do not ask these classes).
_add_classes = _wasmtime_types.VariantLikeType.add_classes


def _option_classes(self: Any, s: Any) -> None:
    if isinstance(self, _wasmtime_types.OptionType) and not self._tagged():
        s.add(type(None))
        self.payload.add_classes(s)
    else:
        _add_classes(self, s)


_wasmtime_types.VariantLikeType.add_classes = _option_classes  # type: ignore[method-assign]


# -- the canonical-ABI call path (intentkey._canon) ------------------------------

def fastpath_supported() -> bool:
    """Whether calls may run through the core module directly: the pinned
    wasmtime-py, and ``INTENTKEY_FASTPATH`` not ``0``."""
    if os.environ.get("INTENTKEY_FASTPATH", "1") == "0":
        return False
    return _pinned_wasmtime()


@functools.lru_cache(maxsize=None)
def _pinned_wasmtime() -> bool:
    try:
        if importlib.metadata.version("wasmtime") != PINNED_WASMTIME:
            return False
    except importlib.metadata.PackageNotFoundError:
        return False
    try:
        from . import _canon  # noqa: F401
    except Exception:  # wasmtime-py internals not as expected: plain wasmtime-py
        return False
    return True


# -- results ------------------------------------------------------------------

def error_from_wit(rec: Any) -> IntentkeyError:
    code = rec.code
    if code not in ERROR_CODES:
        # A component newer (or older) than this package: say so, never pass
        # on a code that callers cannot match.
        return IntentkeyTrap(
            f"the component reported error code {code!r}, which this package does not know "
            f"(message: {rec.message!r}); the package and its component are out of step"
        )
    return IntentkeyError(code, rec.field, rec.message)


def outcome(value: Any) -> Tuple[bool, Any]:
    """(ok, payload) of a lifted ``result<T, error>``.

    wasmtime-py lifts a result *untagged* when its ok and err Python classes
    differ (str/bool/ResourceAny vs Record): the ok value itself, or the error
    ``Record``. It uses ``Variant('ok'|'err', payload)`` only when the two
    cases would be ambiguous; both shapes are accepted.
    """
    if isinstance(value, Variant):
        return value.tag == "ok", value.payload
    if isinstance(value, Record):
        return False, value
    return True, value


def unwrap(value: Any) -> Any:
    ok, payload = outcome(value)
    if ok:
        return payload
    raise error_from_wit(payload)


def unwrap_record(value: Any) -> Any:
    """The ok value of a lifted ``result<R, error>`` whose ok type is a record
    (both lift to ``Record``: wasmtime-py tags them)."""
    if isinstance(value, Variant) and value.tag in ("ok", "err"):
        if value.tag == "err":
            raise error_from_wit(value.payload)
        return value.payload
    return value


def unwrap_variant(value: Any) -> Any:
    """The ok value of a lifted ``result<V, error>`` whose ok type is a
    variant: the ok ``Variant`` itself, or the error ``Record``."""
    if isinstance(value, Record):
        raise error_from_wit(value)
    if isinstance(value, Variant) and value.tag in ("ok", "err"):
        return unwrap(value)
    return value


def error_record(code: str, field: Optional[str], message: str) -> Record:
    return record(code=code, field=field, message=message)


# -- argument checks ------------------------------------------------------------

def text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise IntentkeyError("invalid-argument", name, f"{name} must be str, not {type(value).__name__}")
    if not value.isascii():
        unicode_text(name, value)
    return value


def unicode_text(name: str, value: str, code: ErrorCode = "invalid-argument") -> None:
    """Refuses text that is not Unicode scalar values (a lone surrogate, as
    Python strings may hold): the component takes only UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise IntentkeyError(code, name, f"{name} holds {value[e.start:e.end]!r} at {e.start}, a lone surrogate: "
                                         "not Unicode text, which is all the component takes") from None


def s64(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise IntentkeyError("invalid-argument", name, f"{name} must be int (seconds), not {type(value).__name__}")
    if not -(1 << 63) <= value < (1 << 63):
        raise IntentkeyError("invalid-argument", name, f"{name} is outside the signed 64-bit range")
    return int(value)


def secret_bytes(name: str, value: Any) -> bytes:
    if isinstance(value, str):
        try:
            return bytes.fromhex(value)
        except ValueError:
            raise IntentkeyError("invalid-secret", name, f"{name} given as text must be hex") from None
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise IntentkeyError("invalid-secret", name, f"{name} must be bytes or hex text, not {type(value).__name__}")
    return bytes(value)


def no_unknown(where: str, unknown: Dict[str, Any], known: Sequence[str] = ()) -> None:
    """Options are checked by name: the first unknown one is ``invalid-argument`` naming it."""
    for name in unknown:
        listed = f"; the options are {', '.join(known)}" if known else ""
        raise IntentkeyError("invalid-argument", name, f"{where} has no option {name!r}{listed}")


def positive_seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise IntentkeyError("invalid-argument", name, f"{name} must be a positive number of seconds")
    return float(value)


def uint(name: str, value: Any, bits: int) -> int:
    """`value` as an unsigned integer of `bits` bits (the WIT u16/u32/u64),
    never wrapped: anything else is ``invalid-argument`` naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise IntentkeyError("invalid-argument", name, f"{name} must be int, not {type(value).__name__}")
    if not 0 <= value < (1 << bits):
        raise IntentkeyError("invalid-argument", name, f"{name} {value} is outside 0..{(1 << bits) - 1}")
    return int(value)


def body_bytes(name: str, value: Any) -> bytes:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise IntentkeyError("invalid-argument", name, f"{name} must be bytes, not {type(value).__name__}")
    return bytes(value)


def headers_in(name: str, headers: Any) -> List[Tuple[str, str]]:
    if isinstance(headers, (str, bytes)) or not isinstance(headers, (list, tuple)):
        raise IntentkeyError("invalid-argument", name, f"{name} is a sequence of (name, value) pairs")
    out = []
    for pair in headers:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise IntentkeyError("invalid-argument", name, f"each of {name} is a (name, value) pair, not {pair!r}")
        out.append((text("header name", pair[0]), text("header value", pair[1])))
    return out


def key_length(value: Optional[int]) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < (1 << 32):
        raise IntentkeyError("invalid-key-length", "key_hex_length", f"key length {value!r} is outside 32..=64")
    return value


# -- WIT values <-> dataclasses ---------------------------------------------------

def record(**fields: Any) -> Record:
    rec = Record()
    for name, value in fields.items():
        setattr(rec, name.replace("_", "-"), value)
    return rec


def get(rec: Any, name: str) -> Any:
    return getattr(rec, name.replace("_", "-"))


def redis_layout(prefix: str, cluster: bool) -> Record:
    """The WIT ``redis-layout``: the records under `prefix`, on one server or over a cluster."""
    if not isinstance(cluster, bool):
        raise IntentkeyError("invalid-argument", "cluster", f"cluster must be bool, not {type(cluster).__name__}")
    return record(prefix=text("prefix", prefix), cluster=cluster)


_STATUS_IN = {"in-flight": Status.IN_FLIGHT, "done": Status.DONE, "needs-reconciliation": Status.NEEDS_RECONCILIATION}
_STATUS_OUT = {v: k for k, v in _STATUS_IN.items()}


def status_from_wit(value: str) -> Status:
    return _STATUS_IN[value]


def status_to_wit(value: Status) -> str:
    return _STATUS_OUT[Status(value)]


def response_from_wit(rec: Any) -> Response:
    return Response(rec.status, bytes(rec.body), get(rec, "content_type"), tuple((str(n), str(v)) for n, v in rec.headers))


def response_to_wit(r: Response) -> Record:
    if not isinstance(r, Response):
        raise IntentkeyError("invalid-argument", "response", f"a response is an intentkey.Response, not {type(r).__name__}")
    return record(status=uint("status", r.status, 16), content_type=text("content_type", r.content_type),
                  headers=headers_in("headers", r.headers), body=body_bytes("body", r.body))


def opt_response_from_wit(rec: Any) -> Optional[Response]:
    return None if rec is None else response_from_wit(rec)


def stored_from_wit(rec: Any) -> StoredRecord:
    return StoredRecord(
        key=rec.key,
        fingerprint=rec.fingerprint,
        tenant_id=get(rec, "tenant_id"),
        action_type=get(rec, "action_type"),
        status=status_from_wit(rec.status),
        owner_token=get(rec, "owner_token"),
        response=opt_response_from_wit(rec.response),
        created_at=get(rec, "created_at"),
        expires_at=get(rec, "expires_at"),
        lookups=rec.lookups,
        next_lookup_at=get(rec, "next_lookup_at"),
    )


def stored_to_wit(r: StoredRecord) -> Record:
    return record(
        key=r.key,
        fingerprint=r.fingerprint,
        tenant_id=r.tenant_id,
        action_type=r.action_type,
        status=status_to_wit(r.status),
        owner_token=r.owner_token,
        response=None if r.response is None else response_to_wit(r.response),
        created_at=r.created_at,
        expires_at=r.expires_at,
        lookups=r.lookups,
        next_lookup_at=r.next_lookup_at,
    )


def completion_from_wit(c: Any) -> Completion:
    return Completion(c.key, get(c, "owner_token"), response_from_wit(c.response), get(c, "expires_at"), c.fast)


def completion_to_wit(c: Completion) -> Record:
    return record(key=c.key, owner_token=c.owner_token, response=response_to_wit(c.response),
                  expires_at=c.expires_at, fast=c.fast)


def replacement_from_wit(r: Any) -> Replacement:
    return Replacement(get(r, "expected_token"), get(r, "expected_lookups"), stored_from_wit(r.record))


def replacement_to_wit(r: Replacement) -> Record:
    return record(expected_token=r.expected_token, expected_lookups=r.expected_lookups, record=stored_to_wit(r.record))


def release_from_wit(r: Any) -> ReleaseRequest:
    return ReleaseRequest(r.key, get(r, "owner_token"))


def release_to_wit(r: ReleaseRequest) -> Record:
    return record(key=r.key, owner_token=r.owner_token)


def attempt_from_wit(a: Any) -> Attempt:
    prior = None if a.prior is None else (a.prior.key, a.prior.fingerprint)
    return Attempt(a.key, a.fingerprint, get(a, "tenant_id"), get(a, "action_type"), prior)


def attempt_to_wit(a: Attempt) -> Record:
    prior = None if a.prior is None else record(key=a.prior[0], fingerprint=a.prior[1])
    return record(key=text("key", a.key), fingerprint=text("fingerprint", a.fingerprint),
                  tenant_id=text("tenant_id", a.tenant_id), action_type=text("action_type", a.action_type), prior=prior)


def effect_to_wit(result: EffectResult) -> Variant:
    if isinstance(result, Answered):
        return Variant("answered", response_to_wit(result.response))
    if isinstance(result, Refused):
        return Variant("refused", None if result.response is None else response_to_wit(result.response))
    if isinstance(result, Failed):
        return Variant("failed")
    raise IntentkeyError("invalid-argument", "result", f"an effect result is Answered, Refused or Failed, not {type(result).__name__}")


def lookup_to_wit(answer: Lookup) -> Variant:
    if isinstance(answer, Found):
        return Variant("found", response_to_wit(answer.response))
    if isinstance(answer, Absent):
        return Variant("absent")
    if isinstance(answer, Unknown):
        return Variant("unknown")
    raise IntentkeyError("invalid-argument", "lookup", f"a look-up answers Found, Absent or Unknown, not {answer!r}")


def reply_from_wit(rec: Any) -> Reply:
    return Reply(rec.status, tuple((str(n), str(v)) for n, v in rec.headers), bytes(rec.body))


def reply_to_wit(reply: Reply) -> Record:
    if not isinstance(reply, Reply):
        raise IntentkeyError("invalid-argument", "reply", f"a reply is an intentkey.Reply, not {type(reply).__name__}")
    return record(status=uint("status", reply.status, 16), headers=headers_in("headers", reply.headers),
                  body=body_bytes("body", reply.body))


def store_error_to_wit(e: StoreError) -> Variant:
    return Variant(e.kind, e.message)


# -- the store import ---------------------------------------------------------------

def _answered(op: str, kind: Any) -> Callable[[Any], Any]:
    """Checks a store's answer to `op` (a coroutine here is an asynchronous
    store given to a synchronous guard: refused, never taken as true)."""

    def check(value: Any) -> Any:
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            if hasattr(value, "__await__") and hasattr(value, "close"):
                value.close()  # never awaited: closed, not left to warn
            raise IntentkeyError("invalid-argument", "store",
                                 f"a store's {op} answers {kind.__name__}, not {type(value).__name__}"
                                 + (" (an asynchronous store needs intentkey.aio.AsyncGuard)"
                                    if hasattr(value, "__await__") else ""))
        return value

    return check


def _stored_answer(value: Any) -> Any:
    if value is not None and not isinstance(value, StoredRecord):
        raise IntentkeyError("invalid-argument", "store",
                             f"a store's get answers a StoredRecord or None, not {type(value).__name__}")
    return None if value is None else stored_to_wit(value)


_STORE_OPS: Dict[str, Tuple[Callable[..., Any], Callable[[Any], Any]]] = {
    # op: (convert the WIT arguments in, check and convert the answer out)
    "insert": (lambda r: (stored_from_wit(r),), _answered("insert", bool)),
    "get": (lambda k: (k,), _stored_answer),
    "complete": (lambda c: (completion_from_wit(c),), _answered("complete", bool)),
    "replace": (lambda r: (replacement_from_wit(r),), _answered("replace", bool)),
    "release": (lambda r: (release_from_wit(r),), _answered("release", bool)),
    "list": (lambda status, limit: (status_from_wit(status), limit),
             lambda rs: [stored_to_wit(r) for r in _answered("list", list)(rs)]),
    "purge": (lambda now: (now,), _answered("purge", int)),
}


def perform(store: Any, op: str, args: Sequence[Any]) -> Any:
    """Runs one WIT store operation on a store of the public protocol."""
    try:
        if op == "get":
            return _stored_answer(store.get(args[0]))
        into, out = _STORE_OPS[op]
        return out(getattr(store, op)(*into(*args)))
    except StoreError as e:
        return store_error_to_wit(e)


# -- the runtime ----------------------------------------------------------------------

#: What hears each store call made through the ``store`` import: (op, WIT arguments, milliseconds).
StoreObserver = Callable[[str, Sequence[Any], float], None]


class Runtime:
    """One compiled component plus the store and instance that run it."""

    def __init__(self, world: str = "intentkey", path: Optional[str] = None,
                 fuel_per_call: Optional[int] = DEFAULT_FUEL_PER_CALL, fastpath: Optional[bool] = None):
        self.world = world
        #: Calls go to the core module directly (see :func:`fastpath_supported`).
        self.fastpath = fastpath_supported() if fastpath is None else bool(fastpath) and _pinned_wasmtime()
        self.path = path or component_path(world)
        if not os.path.exists(self.path):
            raise IntentkeyError(
                "component-failed", None,
                f"the component {self.path} is missing: build it with `cargo xtask build-component` "
                "before installing the package from a checkout",
            )
        self.fuel_per_call = fuel_per_call
        config = Config()
        config.consume_fuel = fuel_per_call is not None
        if os.environ.get("INTENTKEY_WASM_CACHE", "1") != "0":
            # wasmtime's compilation cache (~/.cache/wasmtime): a new process
            # loads the component's machine code instead of compiling it again
            # (about 2 s of CPU). INTENTKEY_WASM_CACHE=0 turns it off.
            try:
                config.cache = True
            except Exception:
                pass  # no writable cache directory: compile every time
        self._engine = Engine(config)
        try:
            with open(self.path, "rb") as f:
                binary = f.read()
            self._component = Component(self._engine, binary)
        except Exception as exc:
            raise IntentkeyError("component-failed", None, f"cannot load the component {self.path}: {exc}") from exc
        self._secrets: Dict[str, bytes] = {}
        self._ids = itertools.count(1)
        self.lock = threading.RLock()
        # The host's imports, each a callable func(store, *args) of WIT values.
        self._host: Dict[Tuple[str, str], Callable[..., Any]] = {
            (_SECRETS, "get-secret"): self._get_secret,
            (_RANDOM, "random-bytes"): self._random_bytes,
        }
        if world == "intentkey":
            self._host.update({(_STORE, op): self._store_op(op) for op in _STORE_OPS})
            self._host[(_GATEWAY, "ask")] = self._ask
        self._canon: Any = None
        if self.fastpath:
            from ._canon import Canon, Unsupported
            try:
                self._canon = Canon(self._engine, self._component, binary)
            except Unsupported:  # a component this binding cannot take apart: the component API
                self.fastpath = False
        self._linker: Any = None
        if not self.fastpath:
            self._linker = Linker(self._engine)
            with self._linker.root() as root:
                for iface in dict.fromkeys(iface for iface, _ in self._host):
                    with root.add_instance(iface) as instance:
                        for (owner, name), func in self._host.items():
                            if owner == iface:
                                instance.add_func(name, func)
        self.generation = 0
        self._store: Optional[Store] = None
        self._funcs: Dict[Tuple[str, str], Any] = {}
        self._set_fuel: Callable[[int], None] = lambda fuel: None  # the store's, once instantiated
        self._instance: Any = None
        self._in_call = False
        self._pending_drops: List[Tuple[ResourceAny, int]] = []
        self._active_store: Any = None
        self._active_lookup: Optional[Callable[[str], Lookup]] = None
        self._active_observer: Optional[StoreObserver] = None

    # imports
    def _get_secret(self, _store: Any, secret_id: str) -> Union[bytes, Record]:
        secret = self._secrets.get(secret_id)
        if secret is None:
            return error_record("invalid-secret", None, f"no secret is registered under id {secret_id!r}")
        return secret

    @staticmethod
    def _random_bytes(_store: Any, length: int) -> bytes:
        return os.urandom(length)

    def _store_op(self, op: str) -> Callable[..., Any]:
        def run(_store: Any, *args: Any) -> Any:
            active = self._active_store
            if active is None:
                raise RuntimeError(f"the component asked for store.{op} outside a guard call")
            observer = self._active_observer
            if observer is None:
                return perform(active, op, args)
            started = time.perf_counter()
            try:
                return perform(active, op, args)
            finally:
                observer(op, args, (time.perf_counter() - started) * 1000)

        return run

    def _ask(self, _store: Any, key: str) -> Variant:
        if self._active_lookup is None:
            raise RuntimeError("the component asked the destination outside a recovery")
        return lookup_to_wit(self._active_lookup(key))

    def call_with(self, store: Any, lookup: Optional[Callable[[str], Lookup]], iface: str, name: str, *args: Any,
                  observer: Optional[StoreObserver] = None) -> Any:
        """Calls an export with `store` (and `lookup`) serving the imports;
        `observer(op, args, ms)` hears each store call it made (telemetry)."""
        with self.lock:
            self._active_store, self._active_lookup, self._active_observer = store, lookup, observer
            try:
                return self.call(iface, name, *args)
            finally:
                self._active_store, self._active_lookup, self._active_observer = None, None, None

    # lifecycle
    def _instantiate(self) -> None:
        store = Store(self._engine)
        if self.fuel_per_call is not None:
            store.set_fuel(self.fuel_per_call)
        try:
            if self._canon is not None:
                from ._canon import CanonInstance
                self._instance = CanonInstance(self._canon, store, self._host)
            else:
                self._instance = self._linker.instantiate(store, self._component)
        except Exception as exc:
            raise IntentkeyError("component-failed", None, f"cannot instantiate {self.path}: {exc}") from exc
        self._store, self._funcs = store, {}
        self._set_fuel = self._instance.set_fuel if self._canon is not None else store.set_fuel
        self.generation += 1

    def _func(self, iface: str, name: str) -> Any:
        func = self._funcs.get((iface, name))
        if func is None:
            assert self._store is not None
            if self._canon is not None:
                func = self._instance.func(iface, name)  # converters compiled once per component
            else:
                parent = self._instance.get_export_index(self._store, iface)
                index = None if parent is None else self._instance.get_export_index(self._store, name, parent)
                func = None if index is None else self._instance.get_func(self._store, index)
            if func is None:
                raise IntentkeyTrap(f"the component {self.path} lacks {iface} {name}")
            self._funcs[(iface, name)] = func
        return func

    def _discard(self) -> None:
        self._store, self._funcs, self._instance = None, {}, None

    def live(self, generation: int) -> bool:
        return self._store is not None and generation == self.generation

    def call(self, iface: str, name: str, *args: Any) -> Any:
        """Calls export `name` of `iface`; returns the lifted value as is."""
        with self.lock:
            if self._in_call:
                raise IntentkeyTrap(f"{name} called re-entrantly (from inside a host import)")
            if self._pending_drops:
                self._drain_drops()
            if self._store is None:
                self._instantiate()
            store = self._store
            assert store is not None
            func = self._funcs.get((iface, name)) or self._func(iface, name)
            if self.fuel_per_call is not None:
                self._set_fuel(self.fuel_per_call)
            self._in_call = True
            try:
                return func(store, *args)
            except IntentkeyError:
                self._discard()
                raise
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
            with self.lock:
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
            except ValueError:
                # wasmtime-py closed the handle first (the garbage collector
                # finalized it before its owner): the guest resource stays
                # in this instance; nothing else is wrong.
                continue
            except Exception:
                self._discard()

    def with_secrets(self, secrets: Sequence[bytes], create: Callable[[List[str]], Any]) -> Tuple[Any, int]:
        """Calls ``create(ids)`` with `secrets` known to the ``secrets`` import
        only for the call (the guest keeps them inside the resource it makes):
        (what it returned, the instance generation)."""
        ids = []
        for secret in secrets:
            secret_id = f"secret-{next(self._ids)}"
            self._secrets[secret_id] = secret
            ids.append(secret_id)
        try:
            with self.lock:
                return create(ids), self.generation
        finally:
            for secret_id in ids:
                self._secrets.pop(secret_id, None)


class GuestResource:
    """A guest resource (a keyer, an endpoint) that is re-created after the
    instance holding it was discarded."""

    def __init__(self, rt: Runtime, secrets: Sequence[bytes], create: Callable[[List[str]], Any]):
        self._rt = rt
        self._secrets = list(secrets)
        self._create = create
        self._resource: Optional[ResourceAny] = None
        self._generation = -1
        self._closed = False
        self.handle()  # validate now

    def handle(self) -> ResourceAny:
        rt = self._rt
        if self._resource is not None and rt.live(self._generation):
            return self._resource
        if self._closed:
            raise IntentkeyError("invalid-argument", None, "this keyer or endpoint was closed; make a new one")
        created, generation = rt.with_secrets(self._secrets, self._create)
        self._resource = unwrap(created)
        self._generation = generation
        return self._resource

    def call(self, iface: str, method: str, *args: Any) -> Any:
        with self._rt.lock:
            return self._rt.call(iface, method, self.handle(), *args)

    def close(self, now: bool = True) -> None:
        self._closed = True
        self._secrets = []  # the host's copy goes now; the guest's with the resource
        resource, self._resource = self._resource, None
        if resource is not None:
            self._rt.drop(resource, self._generation, now)

    def __del__(self) -> None:
        try:
            self.close(now=False)  # queued: dropped before the runtime's next call
        except Exception:
            pass


_runtimes: Dict[str, Runtime] = {}
_runtimes_lock = threading.Lock()


def runtime(world: str = "intentkey") -> Runtime:
    """The package's shared runtime of `world`, made on first use."""
    rt = _runtimes.get(world)
    if rt is None:
        with _runtimes_lock:
            rt = _runtimes.get(world)
            if rt is None:
                rt = _runtimes[world] = Runtime(world)
    return rt


def keyring_entries(rt: Runtime, names: Iterable[Tuple[str, int]], ids: Sequence[str]) -> List[Record]:
    return [record(id=name, active_from=active_from, secret_id=secret_id) for (name, active_from), secret_id in zip(names, ids)]
