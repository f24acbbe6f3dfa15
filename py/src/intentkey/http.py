"""HTTP: the core's rules for keys that clients send, and its serve flow.

An :class:`Endpoint` holds one server's rules (its secret, the profile's
options, route policies). :meth:`Endpoint.serve` runs one request through the
core's serve flow over a :class:`intentkey.Guard`'s store: admit (the key
header, the body bound, the tenant-scoped storage key, the fingerprint),
claim, the handler, capture, finish by the outcome class and the answer.
Python only runs the handler and the pauses the flow asks for; the ASGI and
WSGI middleware are drivers of this one method.

>>> import intentkey
>>> endpoint = intentkey.http.Endpoint(secret=bytes(range(32)), profile="ietf")
>>> guard = intentkey.Guard(intentkey.MemoryStore())
>>> request = intentkey.http.Request("tenant-1", "POST", "/orders", ["k-1"], "application/json", b'{"n":1}')
>>> handler = lambda key: intentkey.Reply(201, (("Content-Type", "application/json"),), b'{"id":1}')
>>> endpoint.serve(guard, request, handler, now=1_700_000_000).path
<ServePath.HANDLER: 'handler'>
>>> again = endpoint.serve(guard, request, handler, now=1_700_000_001)
>>> again.path, again.reply.status, again.reply.header("Idempotent-Replayed")
(<ServePath.REPLAY: 'replay'>, 201, 'true')
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from wasmtime.component import Variant

from . import _binding as b
from ._watch import notify, watch_sync
from ._release import Report
from .claims import Guard, advance, claim_to_wit, in_guest
from .errors import IntentkeyError, IntentkeyTrap
from .keys import Keyring, SecretInput, _policy
from .telemetry import Probe, current, store_calls_timer
from .types import Attempt, Claim, Finished, ReleaseRequest, Reply, StoreError

__all__ = ["Admission", "Endpoint", "Options", "PROFILES", "Raised", "Request", "ServePath", "Served",
           "default_methods", "default_options"]

#: The profiles: ``ietf`` (the IETF draft's ``Idempotency-Key``), ``stripe``
#: (Stripe's spelling and answers) and ``ofb`` (Open Finance Brasil's
#: ``x-idempotency-key``).
PROFILES = ("ietf", "stripe", "ofb")


@dataclass(frozen=True)
class Options:
    """A profile's options (the core's defaults, with what the server set)."""

    profile: str
    strict_key_syntax: bool
    retry_after_seconds: int
    replay_headers: Tuple[str, ...]
    key_required: bool
    max_body_bytes: int
    max_stored_bytes: int
    #: How long a retry that finds its key in flight (same payload) waits for
    #: the first attempt's answer, in milliseconds, before the 409 (0: no wait).
    wait_max_ms: int = 0

    def _wit(self) -> Any:
        return b.record(profile=self.profile, strict_key_syntax=self.strict_key_syntax,
                        retry_after_seconds=self.retry_after_seconds, replay_headers=list(self.replay_headers),
                        key_required=self.key_required, max_body_bytes=self.max_body_bytes,
                        max_stored_bytes=self.max_stored_bytes, wait_max_ms=self.wait_max_ms)


#: The options a server may set, by name (anything else is ``invalid-argument``).
OPTION_NAMES = ("strict_key_syntax", "retry_after_seconds", "replay_headers", "key_required", "max_body_bytes",
                "max_stored_bytes", "wait_max_ms")


def default_options(profile: str = "ietf") -> Options:
    """A profile's documented defaults, as the core gives them."""
    if profile not in PROFILES:
        raise IntentkeyError("invalid-argument", "profile", f"profile must be one of {', '.join(PROFILES)}, not {profile!r}")
    r = b.runtime("pure").call(b.HTTP, "default-options", profile)
    return Options(r.profile, b.get(r, "strict_key_syntax"), b.get(r, "retry_after_seconds"),
                   tuple(b.get(r, "replay_headers")), b.get(r, "key_required"), b.get(r, "max_body_bytes"),
                   b.get(r, "max_stored_bytes"), b.get(r, "wait_max_ms"))


def default_methods() -> Tuple[str, ...]:
    """The methods guarded by default (the core's: POST and PATCH)."""
    return tuple(str(m) for m in b.runtime("pure").call(b.HTTP, "default-methods"))


def _checked(name: str, value: Any, kind: Any) -> Any:
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if not ok:
        raise IntentkeyError("invalid-argument", name, f"{name} must be {getattr(kind, '__name__', kind)}, not {type(value).__name__}")
    return value


def options_for(profile: str, overrides: Mapping[str, Any]) -> Options:
    """The profile's options with `overrides` applied, each name and type checked."""
    base = default_options(profile)
    changes: Dict[str, Any] = {}
    for name, value in overrides.items():
        if value is None:
            continue
        if name in ("strict_key_syntax", "key_required"):
            changes[name] = _checked(name, value, bool)
        elif name in ("retry_after_seconds", "wait_max_ms"):
            changes[name] = b.uint(name, value, 32)  # the wait's bound is the core's (checked when the endpoint is made)
        elif name in ("max_body_bytes", "max_stored_bytes"):
            changes[name] = b.uint(name, value, 64)
        elif name == "replay_headers":
            if isinstance(value, str):
                raise IntentkeyError("invalid-argument", name, "replay_headers is a list of header names, not one string")
            # Besides the profile's own (Location, Content-Type), as in npm.
            changes[name] = base.replay_headers + tuple(b.text("replay_headers", h) for h in value)
        else:
            raise IntentkeyError("invalid-argument", name,
                                 f"unknown option {name!r}; the options are {', '.join(OPTION_NAMES)}")
    return replace(base, **changes)


@dataclass(frozen=True)
class Request:
    """What the rules read of a request: the tenant (from the server, never
    the client), method, route, every value of the key header (one per
    header line), the content type and the body."""

    tenant_id: str
    method: str
    route: str
    key_values: Sequence[str]
    content_type: Optional[str]
    body: bytes

    def _wit(self) -> Any:
        if isinstance(self.key_values, (str, bytes)) or not isinstance(self.key_values, (list, tuple)):
            raise IntentkeyError("invalid-argument", "key_values",
                                 "key_values is a list of the key header's values, one per header line")
        content_type = None if self.content_type is None else b.text("content_type", self.content_type)
        return b.record(tenant_id=b.text("tenant_id", self.tenant_id), method=b.text("method", self.method),
                        route=b.text("route", self.route), key_values=[b.text("key value", v) for v in self.key_values],
                        content_type=content_type, body=b.body_bytes("body", self.body))


@dataclass(frozen=True)
class Admission:
    """What the rules make of a request: ``guarded`` (claim ``attempt``),
    ``unguarded`` (run the handler unguarded) or ``refused`` (send ``reply``)."""

    kind: str
    attempt: Optional[Attempt] = None
    reply: Optional[Reply] = None


@dataclass(frozen=True)
class Raised:
    """What a handler returns for an error that carries an HTTP status (a
    framework's HTTP exception): 4xx releases the claim, 5xx is ambiguous."""

    status: int


class ServePath(str, Enum):
    """Which way a request went through the serve flow."""

    REFUSED = "refused"
    UNGUARDED = "unguarded"
    REPLAY = "replay"
    IN_FLIGHT = "in-flight"
    PAYLOAD_CONFLICT = "payload-conflict"
    UNAVAILABLE = "unavailable"
    HANDLER = "handler"
    RELEASED = "released"
    FAILED = "failed"


@dataclass
class Served:
    """The answer of the serve flow. ``reply`` is the core's answer to send;
    ``None`` for ``HANDLER`` (send ``handler_reply``), ``RELEASED`` (the
    framework answers the raised error) and ``UNGUARDED`` (run the handler
    unguarded). ``finished``: what finishing the record did. ``claim_failure``
    and ``finish_failures``: the store failures met, for the host to report.
    ``ran``: whether the handler ran; ``handler_error``: what it raised.
    ``waited_ms``: how long the request waited for the first attempt
    (``wait_max_ms``; 0: it did not wait). ``unreleased``: a claim whose
    insert failed (its answer may have been lost; its handler never ran),
    which the serving released in the background (``None`` otherwise)."""

    path: ServePath
    reply: Optional[Reply]
    finished: Optional[Finished]
    finish_retries: int
    claim_failure: Optional[StoreError] = None
    finish_failures: List[StoreError] = field(default_factory=list)
    ran: bool = False
    handler_reply: Optional[Reply] = None
    handler_error: Optional[BaseException] = None
    waited_ms: int = 0
    unreleased: Optional[ReleaseRequest] = None


def _store_failure(v: Any) -> StoreError:
    return StoreError(str(v.tag), str(v.payload))


Handler = Callable[[str], Union[Reply, Raised]]


class Endpoint:
    """One server's HTTP rules, run by the component's ``http`` export.

    Give exactly one of ``secret`` and ``keyring``. ``profile``: ``ietf``,
    ``stripe`` or ``ofb``; the profile's options (:data:`OPTION_NAMES`) may
    be overridden by name, and an unknown name is ``invalid-argument``.
    ``wait_max_ms`` (0 to 60000, default 0): how long a retry that finds its
    key in flight waits for the first attempt's answer before the 409.
    ``policies`` maps ``"METHOD route"`` to a policy (JSON text or a dict)
    whose ignored fields leave that route's fingerprints."""

    def __init__(self, *, secret: Optional[SecretInput] = None, keyring: Optional[Keyring] = None,
                 profile: str = "ietf", policies: Optional[Mapping[str, Any]] = None, **options: Any):
        if (secret is None) == (keyring is None):
            raise IntentkeyError("invalid-argument", "secret", "give exactly one of secret and keyring")
        self.options = options_for(profile, options)
        wit_options = self.options._wit()
        checked = [(b.text("policies", action), _policy(policy)) for action, policy in (policies or {}).items()]
        self._policies = checked
        rt = self._rt = b.runtime()
        # The create calls capture locals only: a closure over self would
        # make a reference cycle, and the garbage collector may then close
        # the guest handle before its drop is queued.
        try:
            if keyring is not None:
                names, secrets = keyring._parts()
                window = None if keyring.window_seconds is None else b.s64("window_seconds", keyring.window_seconds)
                self._guest = b.GuestResource(rt, secrets, lambda ids: rt.call(
                    b.HTTP, "[static]endpoint.create-keyring", b.keyring_entries(rt, names, ids), window, wit_options,
                    checked))
            else:
                assert secret is not None
                one = b.secret_bytes("secret", secret)
                self._guest = b.GuestResource(rt, [one], lambda ids: rt.call(
                    b.HTTP, "[static]endpoint.create", ids[0], wit_options, checked))
        except IntentkeyError as e:
            if e.field in _WIT_OPTION_FIELDS and type(e) is IntentkeyError:
                # The core's check of an option, named as Python spells it.
                name = _WIT_OPTION_FIELDS[e.field]
                raise IntentkeyError(e.code, name, e.message.replace(str(e.field), name)) from None
            raise
        self._header = str(self._call("header-name"))

    def __repr__(self) -> str:
        return f"Endpoint(profile={self.options.profile!r}, policies={[a for a, _ in self._policies]!r})"

    def _call(self, method: str, *args: Any) -> Any:
        return self._guest.call(b.HTTP, f"[method]endpoint.{method}", *args)

    @property
    def header_name(self) -> str:
        """The profile's key header name, as the profile spells it."""
        return self._header

    def admit(self, request: Request, *, now: Optional[int] = None) -> Admission:
        """Applies the rules to a request (see :class:`Admission`)."""
        answer = self._call("admit", request._wit(), _now(now))
        if isinstance(answer, Variant) and answer.tag in ("ok", "err"):
            answer = b.unwrap(answer)
        elif not isinstance(answer, Variant):
            raise b.error_from_wit(answer)
        if answer.tag == "guarded":
            return Admission("guarded", attempt=b.attempt_from_wit(answer.payload))
        if answer.tag == "refused":
            return Admission("refused", reply=b.reply_from_wit(answer.payload))
        return Admission(str(answer.tag))

    def answer(self, claim: Claim, *, now: Optional[int] = None) -> Optional[Reply]:
        """The answer to a claim that this request does not own (the replay,
        409 or 422); ``None`` when it owns it."""
        reply = self._call("answer", claim_to_wit(claim), _now(now))
        return None if reply is None else b.reply_from_wit(reply)

    def too_large(self, *, now: Optional[int] = None) -> Reply:
        """413: the body is larger than ``max_body_bytes``."""
        return b.reply_from_wit(self._call("too-large", _now(now)))

    def unavailable(self, *, now: Optional[int] = None) -> Reply:
        """503 with ``Retry-After``: the store could not be reached."""
        return b.reply_from_wit(self._call("unavailable", _now(now)))

    def failed(self, *, now: Optional[int] = None) -> Reply:
        """500: the handler failed and its outcome is unknown."""
        return b.reply_from_wit(self._call("failed", _now(now)))

    def serve(self, guard: Guard, request: Request, handler: Handler, *, now: Optional[int] = None,
              clock: Callable[[], float] = time.time, sleep: Callable[[float], Any] = time.sleep,
              report: Optional[Report] = None) -> Served:
        """Serves one request through the core's serve flow over `guard`'s
        store and rules. ``handler(key)`` runs only when this request owns
        the key: a :class:`Reply` is its answer, :class:`Raised` an error with
        an HTTP status, an exception a failure (the record stays in flight,
        the client gets 500). ``sleep(seconds)`` is the pause before a
        completion the store could not take is tried again, and the wait of a
        retry for the first attempt (``wait_max_ms``) with a store that
        cannot tell when a record changed; a store that can (the memory and
        SQL stores, for their own writes) wakes it early.

        A claim whose insert failed (the request is answered 503 at once;
        its handler never ran) is released in the background, on the process's
        release threads (the core's ``flow.release-claim``;
        ``guard.releases``); ``report(stage, error)``
        hears one that gave up (stage ``"release"``), else it is logged.
        The request's span and metrics go where `guard`'s telemetry says
        (:mod:`intentkey.telemetry`)."""
        rt = self._rt
        if not isinstance(guard, Guard):
            raise IntentkeyError("invalid-argument", "guard",
                                 "Endpoint.serve takes an intentkey.Guard (an AsyncGuard serves with AsyncGuard.serve)")
        if not isinstance(request, Request):
            raise IntentkeyError("invalid-argument", "request", f"a request is an intentkey.http.Request, not {type(request).__name__}")
        started = _now(now) if now is not None else int(clock())
        with rt.lock:
            created = rt.call(b.FLOWS, "[static]flow.serve", self._guest.handle(), request._wit(), guard._wit_rules,
                              os.urandom(b.SEED_BYTES), started)
            generation = rt.generation
        flow = b.unwrap(created)
        ran = False
        handler_reply: Optional[Reply] = None
        handler_error: Optional[BaseException] = None
        done: Optional[Variant] = None
        owned: Optional[str] = None  # the key this request owns, once its handler ran
        store = guard.store
        probe = guard.telemetry.begin(self.options.profile)
        observer = store_calls_timer(probe)
        try:
            while True:
                since = time.monotonic()
                with rt.lock:
                    if not rt.live(generation):
                        raise IntentkeyTrap("the instance serving this request was discarded (a trap in another call)")
                    step = b.unwrap_variant(advance(rt, store, None, flow, done, observer))
                if owned is not None and in_guest(store, rt) is not None:
                    notify(store, owned)  # finished inside the instance: its waiters are told here
                if step.tag == "done":
                    if step.payload.tag != "served":
                        raise IntentkeyTrap(f"the serve flow answered {step.payload.tag!r}, not served")
                    served = _served(step.payload.payload, ran, handler_reply, handler_error)
                    if served.unreleased is not None:
                        guard.releases.start_thread(rt, store, served.unreleased, guard._released, report)
                    if probe is not None:
                        self._observed(probe, served, request, started)
                    return served
                op: Any = step.payload
                if op.tag == "effect":
                    ran, owned = True, str(op.payload)
                    if probe is not None:
                        probe.saw_key(owned)
                    with current(probe):
                        handled, handler_reply, handler_error = _run_handler(handler, op.payload)
                    ended = started if now is not None else int(clock())
                    done = Variant("handled", b.record(handled=handled, now=ended))
                elif op.tag == "wait":
                    sleep(op.payload / 1000)
                    done = Variant("waited")
                elif op.tag == "watch":  # the key is in flight: wait for its first attempt, as the core says
                    elapsed = watch_sync(store, str(op.payload.key), int(op.payload.ms), since, sleep)
                    ended = started if now is not None else int(clock())
                    done = Variant("watched", b.record(elapsed_ms=elapsed, now=ended))
                else:
                    raise IntentkeyTrap(f"the serve flow asked the host for {op.tag!r}, which it never does")
        except BaseException as e:
            if probe is not None:
                probe.failed(e)
            raise
        finally:
            rt.drop(flow, generation, now=True)

    def _observed(self, probe: Probe, served: Served, request: Request, now: int) -> None:
        """Ends a served request's span and counts its decisions. The storage
        key comes from the store calls or the handler; a request answered
        with no call this host saw (a store inside the component) is
        admitted again for it (the core's HMAC, no store call)."""
        if probe.key is None and served.path not in (ServePath.REFUSED, ServePath.UNGUARDED):
            try:
                admission = self.admit(request, now=now)
                if admission.attempt is not None:
                    probe.saw_key(admission.attempt.key)
            except IntentkeyError:
                pass
        probe.served(served.path.value, None if served.finished is None else served.finished.value, served.waited_ms)

    def close(self) -> None:
        """Drops the guest resource (and the secret the guest holds in it)."""
        self._guest.close()

    def __enter__(self) -> "Endpoint":
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.close()


#: The endpoint options the core checks, by their WIT name: the Python name.
_WIT_OPTION_FIELDS = {"wait-max-ms": "wait_max_ms"}


def _now(now: Optional[int]) -> int:
    return int(time.time()) if now is None else b.s64("now", now)


def _run_handler(handler: Handler, key: str) -> Tuple[Any, Optional[Reply], Optional[BaseException]]:
    """The WIT ``handled`` of one handler run (wasmtime-py lowers it untagged:
    answered is the reply record, raised the int status, failed ``None``)."""
    try:
        outcome = handler(key)
    except Exception as exc:  # a failure: the record stays in flight
        return None, None, exc
    if isinstance(outcome, Reply):
        return b.reply_to_wit(outcome), outcome, None
    if isinstance(outcome, Raised):
        return int(outcome.status), None, None
    return None, None, IntentkeyError("invalid-argument", "handler",
                                      f"a handler returns a Reply or a Raised, not {type(outcome).__name__}")


def handled_to_wit(handled: Union[Reply, Raised, None]) -> Any:
    """The WIT ``handled`` of what a handler ended with (``None``: it failed)."""
    if isinstance(handled, Reply):
        return b.reply_to_wit(handled)
    if isinstance(handled, Raised):
        return int(handled.status)
    return None


def served_from_wit(rec: Any, ran: bool, handler_reply: Optional[Reply],
                    handler_error: Optional[BaseException]) -> Served:
    return _served(rec, ran, handler_reply, handler_error)


def _served(rec: Any, ran: bool, handler_reply: Optional[Reply], handler_error: Optional[BaseException]) -> Served:
    claim_failure = b.get(rec, "claim_failure")
    unreleased = rec.unreleased
    return Served(
        path=ServePath(rec.path),
        reply=None if rec.reply is None else b.reply_from_wit(rec.reply),
        finished=None if rec.finished is None else Finished(rec.finished),
        finish_retries=b.get(rec, "finish_retries"),
        claim_failure=None if claim_failure is None else _store_failure(claim_failure),
        finish_failures=[_store_failure(f) for f in b.get(rec, "finish_failures")],
        ran=ran,
        handler_reply=handler_reply,
        handler_error=handler_error,
        waited_ms=int(b.get(rec, "waited_ms")),
        unreleased=None if unreleased is None else b.release_from_wit(unreleased),
    )
