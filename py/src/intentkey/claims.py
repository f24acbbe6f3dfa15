"""The claim flow: run an effect at most once per key over a store.

The order of every store operation and every decision is the core's: a
:class:`Guard` hands a synchronous store to the component's ``store`` import
and advances the core's flows; the store only performs what it is asked,
each later write fenced on the owner token the claim wrote.

>>> import intentkey
>>> guard = intentkey.Guard(intentkey.MemoryStore())
>>> attempt = intentkey.Attempt("k1", "fp", "tenant-acme", "pix.send")
>>> claim = guard.claim(attempt, now=1_700_000_000)
>>> claim.state
<ClaimState.OWNED: 'owned'>
>>> guard.finish(attempt.key, claim.owner_token, intentkey.Answered(intentkey.Response.json(201, '{"id":1}')), now=1_700_000_001)
<Finished.STORED: 'stored'>
>>> guard.claim(attempt, now=1_700_000_002).response.body
b'{"id":1}'
"""

from __future__ import annotations

import inspect
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

try:
    from typing import Protocol
except ImportError:  # pragma: no cover
    from typing_extensions import Protocol  # type: ignore

from wasmtime.component import Variant

from . import _binding as b
from . import _packed
from ._watch import Changes, check_wait_max_ms, notify, watch_sync
from ._release import Releases
from .errors import IntentkeyError, IntentkeyTrap
from .keys import Keyer, _intent as intent_wit, _payload as payload_json
from .schema import StatusCount
from .telemetry import Probe, Telemetry, current, store_calls_timer
from .types import (
    Answered,
    Attempt,
    Claim,
    ClaimState,
    Completion,
    EffectResult,
    Failed,
    Finished,
    Lookup,
    Recovery,
    RecoveryAction,
    RecoveryState,
    Refused,
    ReleaseRequest,
    Replacement,
    Response,
    Status,
    StoredRecord,
)

__all__ = ["Guard", "MemoryStore", "RunResult", "Store", "default_rules", "store_deadline_ms"]


class Store(Protocol):
    """What a synchronous store performs (docs/store-schema.md). Each method
    is one atomic step; a failure raises :class:`intentkey.StoreError`."""

    def insert(self, record: StoredRecord) -> bool: ...
    def get(self, key: str) -> Optional[StoredRecord]: ...
    def complete(self, completion: Completion) -> bool: ...
    def replace(self, replacement: Replacement) -> bool: ...
    def release(self, request: ReleaseRequest) -> bool: ...
    def list(self, status: Status, limit: int) -> List[StoredRecord]: ...
    def purge(self, now: int) -> int: ...


@dataclass(frozen=True)
class Rules:
    """How a guard finishes outcomes: how long done records are kept, the
    answered statuses that release the claim, fast completion."""

    ttl_seconds: int
    release_statuses: Sequence[int]
    fast_completion: bool = False


def _statuses(statuses: Any) -> Tuple[int, ...]:
    if isinstance(statuses, (str, bytes)) or not isinstance(statuses, (list, tuple, set, frozenset)):
        raise IntentkeyError("invalid-argument", "release_statuses", "release_statuses is a list of HTTP statuses")
    return tuple(b.uint("release_statuses", s, 16) for s in statuses)


def default_rules() -> Rules:
    """The core's documented defaults (24 h, 429 and 503, durable completion)."""
    r = b.runtime("pure").call(b.CLAIMS, "default-rules")
    return Rules(b.get(r, "ttl_seconds"), tuple(b.get(r, "release_statuses")), b.get(r, "fast_completion"))


def store_deadline_ms() -> int:
    """The core's default deadline of one store call, in milliseconds (2000):
    the ``store_deadline_ms`` of :class:`intentkey.aio.AsyncGuard` and the
    ASGI middleware, and the socket timeouts of the SQL stores made from a URL."""
    return int(b.runtime("pure").call(b.CLAIMS, "store-deadline-ms"))


def default_stale_after_seconds() -> int:
    """How long a claim may run before a recovery may ask the destination."""
    return int(b.runtime("pure").call(b.CLAIMS, "default-stale-after-seconds"))


_U32_MAX = (1 << 32) - 1


def count_listed(status: Status, records: Sequence[StoredRecord]) -> StatusCount:
    """The count of `status` of a store that lists its records (the memory stores)."""
    return StatusCount(status, len(records), min((r.created_at for r in records), default=None))


class MemoryStore:
    """Records in a map inside the component instance: the core's memory
    store, for tests and single processes. Each operation is one atomic step
    (the runtime's lock serializes calls) and every later write is fenced on
    the owner token, exactly as in the SQL stores. A :class:`Guard` over it
    claims, replays and finishes in one call each, with no store round trip.

    The records live in the package's runtime instance: if that instance is
    ever discarded (a trap, a bug), they are gone, and every later use of the
    store raises :class:`intentkey.IntentkeyTrap` rather than starting empty.

    A retry waiting for the first attempt (``wait_max_ms``) is woken by the
    store's own writes (a completion, a release, a recovery's write): the
    store's waiters are in this process, threads or coroutines.
    """

    #: The store's kind, as telemetry names it (``intentkey.store``).
    kind = "memory"

    def __init__(self, *, _runtime: Optional[b.Runtime] = None) -> None:
        # `_runtime`: another instance than the package's (tests wrap a store
        # kept there in failure-injecting stores, which the guard calls
        # through the `store` import).
        self._rt = b.runtime() if _runtime is None else _runtime
        self._changes = Changes()
        with self._rt.lock:
            self._handle = self._rt.call(b.MEMORY, "[constructor]memory-store")
            self._generation = self._rt.generation

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise IntentkeyError("invalid-argument", "store",
                             "MemoryStore keeps its records inside the component and cannot be subclassed: "
                             "write a store of the Store protocol that wraps one")

    def handle(self) -> Any:
        """The guest resource (call with the runtime's lock held)."""
        if not self._rt.live(self._generation):
            raise IntentkeyTrap("this MemoryStore's records were in an instance discarded after a trap; "
                                "they are lost: make a new store")
        return self._handle

    def method(self, name: str, *args: Any, lookup: Optional[Callable[[str], Lookup]] = None) -> Any:
        """Calls method `name` of the guest store (`lookup` answers the gateway)."""
        with self._rt.lock:
            return self._rt.call_with(None, lookup, b.MEMORY, f"[method]memory-store.{name}", self.handle(), *args)

    def __del__(self) -> None:
        try:
            self._rt.drop(self._handle, self._generation, now=False)
        except Exception:
            pass

    @property
    def records(self) -> Dict[str, StoredRecord]:
        """A snapshot of every record, by key."""
        return {r.key: r for r in (b.stored_from_wit(w) for w in self.method("records"))}

    def insert(self, record: StoredRecord) -> bool:
        return bool(self.method("insert", b.stored_to_wit(record)))

    def get(self, key: str) -> Optional[StoredRecord]:
        found = self.method("get", b.text("key", key))
        return None if found is None else b.stored_from_wit(found)

    def complete(self, completion: Completion) -> bool:
        return self._wrote(completion.key, bool(self.method("complete", b.completion_to_wit(completion))))

    def replace(self, replacement: Replacement) -> bool:
        return self._wrote(replacement.record.key, bool(self.method("replace", b.replacement_to_wit(replacement))))

    def release(self, request: ReleaseRequest) -> bool:
        return self._wrote(request.key, bool(self.method("release", b.release_to_wit(request))))

    def _wrote(self, key: str, written: bool) -> bool:
        if written:
            self._changes.notify(key)
        return written

    def watch(self, key: str, ms: int) -> None:
        """Returns when record `key` is written here, or after `ms` milliseconds."""
        self._changes.wait(key, ms / 1000)

    def list(self, status: Status, limit: int) -> List[StoredRecord]:
        return [b.stored_from_wit(w) for w in self.method("list", b.status_to_wit(status), b.uint("limit", limit, 32))]

    def purge(self, now: int) -> int:
        return int(self.method("purge", b.s64("now", now)))

    def count(self, status: Status) -> StatusCount:
        """How many records have `status`, and the oldest claim among them (from its list)."""
        return count_listed(Status(status), self.list(Status(status), _U32_MAX))


@dataclass(frozen=True)
class RunResult:
    """How :meth:`Guard.run` ended. ``outcome``: ``ran`` (this attempt ran the
    effect; ``finished`` says what finishing did), ``replayed`` (the stored
    answer), ``conflict`` (same key, another payload: 422) or ``in-flight``
    (another attempt holds it: 409). ``response``: what to answer (the
    effect's, the stored one, or ``None`` for conflict and in-flight);
    ``value``: what the effect returned; ``recovered``: a stale record was
    settled first."""

    outcome: str
    response: Optional[Response]
    finished: Optional[Finished] = None
    recovered: bool = False
    value: Any = None
    recovery: Optional[Recovery] = None


def claim_from_wit(outcome: Any, token: str) -> Claim:
    if outcome.tag == "done":
        return Claim(ClaimState.DONE, token, b.response_from_wit(outcome.payload))
    return Claim(ClaimState(outcome.tag), token)


def claim_to_wit(claim: Claim) -> Variant:
    if claim.state is ClaimState.DONE:
        assert claim.response is not None
        return Variant("done", b.response_to_wit(claim.response))
    return Variant(claim.state.value)


def recovery_action_from_wit(v: Any) -> RecoveryAction:
    if v.tag == "record-done":
        return RecoveryAction("record-done", response=b.response_from_wit(v.payload))
    if v.tag == "check-later":
        return RecoveryAction("check-later", lookups=v.payload.lookups, next_lookup_at=b.get(v.payload, "next_lookup_at"))
    if v.tag == "reconcile":
        return RecoveryAction("reconcile", lookups=v.payload)
    return RecoveryAction(v.tag)


def recovery_action_to_wit(a: RecoveryAction) -> Variant:
    if a.kind == "record-done" and a.response is not None:
        return Variant("record-done", b.response_to_wit(a.response))
    if a.kind == "check-later":
        return Variant("check-later", b.record(lookups=a.lookups, next_lookup_at=a.next_lookup_at))
    if a.kind == "reconcile":
        return Variant("reconcile", a.lookups)
    return Variant(a.kind)


def recovery_to_wit(r: Recovery) -> Variant:
    """A recovery's outcome as the WIT ``recovered`` (the inverse of :func:`recovery_from_wit`)."""
    if r.state is RecoveryState.NOT_IN_FLIGHT and r.status is not None:
        return Variant("not-in-flight", b.status_to_wit(r.status))
    if r.state is RecoveryState.NOT_DUE:
        return Variant("not-due", r.due_at)
    if r.state in (RecoveryState.APPLIED, RecoveryState.LOST) and r.action is not None:
        return Variant(r.state.value, recovery_action_to_wit(r.action))
    return Variant(r.state.value)


@dataclass(frozen=True)
class Delivery:
    """What a queue delivery that found its intent in flight does (the
    core's ``in-flight-delivery``): retry at ``retry_at`` (``reason`` says
    why), or, when ``retry_at`` is ``None``, fail for good: the record needs
    reconciliation by hand."""

    retry_at: Optional[int]
    reason: str = ""


def in_flight_delivery(recovery: Optional[Recovery], now: int) -> Delivery:
    """The core's answer for a delivery of a run found in flight, from the
    recovery that ran (``None``: none could) at `now`."""
    answer = b.runtime("pure").call(b.CLAIMS, "in-flight-delivery",
                                    None if recovery is None else recovery_to_wit(recovery), b.s64("now", now))
    # `delivery`'s cases differ in kind (a record, nothing): wasmtime-py may hand the case over untagged.
    if isinstance(answer, Variant):
        answer = answer.payload if answer.tag == "retry" else None
    if answer is None:
        return Delivery(None)
    return Delivery(int(answer.at), str(answer.reason))


def recovery_from_wit(v: Any, token: str) -> Recovery:
    state = RecoveryState(v.tag)
    if state is RecoveryState.NOT_IN_FLIGHT:
        return Recovery(state, token, status=b.status_from_wit(v.payload))
    if state is RecoveryState.NOT_DUE:
        return Recovery(state, token, due_at=v.payload)
    if state in (RecoveryState.APPLIED, RecoveryState.LOST):
        return Recovery(state, token, action=recovery_action_from_wit(v.payload))
    return Recovery(state, token)


def effect_result(value: Any) -> EffectResult:
    """What an effect's return value means: an :class:`EffectResult` as is, a
    :class:`Response` answered."""
    if isinstance(value, (Answered, Refused, Failed)):
        return value
    if isinstance(value, Response):
        return Answered(value)
    raise IntentkeyError("invalid-argument", "effect",
                         f"an effect returns a Response or an EffectResult, not {type(value).__name__}")


class GuardBase:
    """What a guard holds besides its store: the rules it finishes by, how
    long a claim runs before recovery may ask, the clock (shared by
    :class:`Guard` and :class:`intentkey.aio.AsyncGuard`)."""

    def __init__(self, *, ttl_seconds: Optional[int] = None, release_statuses: Optional[Sequence[int]] = None,
                 stale_after_seconds: Optional[int] = None, fast_completion: bool = False,
                 clock: Callable[[], float] = time.time, wait_max_ms: int = 0):
        self.wait_max_ms = check_wait_max_ms(wait_max_ms)
        #: The claims whose handler never ran being released in the background.
        self.releases = Releases()
        defaults = default_rules()
        self.rules = Rules(
            defaults.ttl_seconds if ttl_seconds is None else b.s64("ttl_seconds", ttl_seconds),
            defaults.release_statuses if release_statuses is None else _statuses(release_statuses),
            bool(fast_completion),
        )
        self.stale_after_seconds = default_stale_after_seconds() if stale_after_seconds is None else b.s64(
            "stale_after_seconds", stale_after_seconds)
        self._clock = clock
        self._rt = b.runtime()
        self._wit_rules = b.record(ttl_seconds=self.rules.ttl_seconds,
                                   release_statuses=list(self.rules.release_statuses),
                                   fast_completion=self.rules.fast_completion)

    def _telemetry_for(self, store: Any, tracer_provider: Any, meter_provider: Any) -> None:
        self.telemetry = Telemetry(store, tracer_provider, meter_provider)

    def _released(self, finished: Finished) -> None:
        """A background release ended: its decision is counted."""
        self.telemetry.released(finished)

    def now(self, now: Optional[int] = None) -> int:
        """`now` checked, or the clock's time in whole seconds."""
        return int(self._clock()) if now is None else b.s64("now", now)

    def recovery_rules(self, read_your_writes: bool) -> Any:
        return b.record(stale_after=self.stale_after_seconds, read_your_writes=bool(read_your_writes),
                        ttl_seconds=self.rules.ttl_seconds)

    def run_spec(self, attempt: Attempt, kind: str, recovery: Any, started: int, wait_max_ms: Optional[int]) -> Any:
        """The WIT ``run-spec`` of one run (`wait_max_ms`: this run's, else the guard's)."""
        if kind not in ("effect", "step", "tool-call"):
            raise IntentkeyError("invalid-argument", "kind", f"kind is effect, step or tool-call, not {kind!r}")
        wait = self.wait_max_ms if wait_max_ms is None else check_wait_max_ms(wait_max_ms)
        return b.record(attempt=b.attempt_to_wit(attempt), kind=kind, rules=self._wit_rules, recovery=recovery,
                        now=started, wait_max_ms=wait)


#: The options of :class:`Guard` and :class:`intentkey.aio.AsyncGuard`, by name.
GUARD_OPTIONS = ("ttl_seconds", "release_statuses", "stale_after_seconds", "fast_completion", "clock", "wait_max_ms",
                 "tracer_provider", "meter_provider")


class Guard(GuardBase):
    """Runs effects at most once per key over a synchronous `store`, through
    the core's flows. Times are whole seconds; ``now=None`` reads ``clock()``.

    ``wait_max_ms`` (0 to 60000; default 0, off): how long a :meth:`run`
    that finds its key in flight (and not yet due a recovery) waits for the
    first attempt's answer before it answers ``in-flight``; the core decides
    the intervals and claims again after each. The wait sleeps in the
    calling thread, woken early by the writes of a store that notifies (see
    the README, "Waiting for the first attempt").

    ``tracer_provider``, ``meter_provider``: where the spans and metrics of
    :mod:`intentkey.telemetry` go (default: the global providers of
    ``opentelemetry-api``, when it is installed)."""

    def __init__(self, store: Store, *, ttl_seconds: Optional[int] = None,
                 release_statuses: Optional[Sequence[int]] = None, stale_after_seconds: Optional[int] = None,
                 fast_completion: bool = False, clock: Callable[[], float] = time.time, wait_max_ms: int = 0,
                 tracer_provider: Any = None, meter_provider: Any = None, **unknown: Any):
        b.no_unknown("intentkey.Guard", unknown, GUARD_OPTIONS)
        super().__init__(ttl_seconds=ttl_seconds, release_statuses=release_statuses,
                         stale_after_seconds=stale_after_seconds, fast_completion=fast_completion, clock=clock,
                         wait_max_ms=wait_max_ms)
        if inspect.iscoroutinefunction(getattr(store, "insert", None)):
            raise IntentkeyError("invalid-argument", "store",
                                 "this store is asynchronous: use intentkey.aio.AsyncGuard")
        self.store = store
        self._telemetry_for(store, tracer_provider, meter_provider)

    def _call(self, name: str, *args: Any, lookup: Optional[Callable[[str], Lookup]] = None,
              seeded: bool = False, observer: Optional[b.StoreObserver] = None) -> Any:
        # Over a MemoryStore the guest store is the store: its methods, with
        # the owner token's random bytes given (the `guard` export draws them
        # from the `random` import).
        mem = in_guest(self.store, self._rt)
        if mem is not None:
            return mem.method(name, *args, *((os.urandom(b.SEED_BYTES),) if seeded else ()), lookup=lookup)
        return self._rt.call_with(self.store, lookup, b.GUARD, name, *args, observer=observer)

    def claim(self, attempt: Attempt, *, now: Optional[int] = None) -> Claim:
        """Claims the attempt's key: ``OWNED`` (run the effect, then
        :meth:`finish`), ``IN_FLIGHT`` (409), ``DONE`` (replay ``response``) or
        ``PAYLOAD_CONFLICT`` (422)."""
        claimed = b.unwrap_record(self._call("claim", b.attempt_to_wit(attempt), self.now(now), seeded=True))
        return claim_from_wit(claimed.outcome, b.get(claimed, "owner_token"))

    def claim_intent(self, keyer: Keyer, tenant_id: str, action_type: str, payload: Any, intent_epoch: int, *,
                     intent_id: Optional[str] = None, key_hex_length: Optional[int] = None,
                     now: Optional[int] = None) -> Tuple[str, Claim]:
        """``keyer.intent_attempt(...)`` then :meth:`claim`: the attempt's key
        and its claim (finish with that key). Over a :class:`MemoryStore` both
        are one call into the core; over a
        :class:`intentkey.stores.redis.RedisStore` the claim flow runs inside
        the instance, one call per Redis command."""
        store = in_guest(self.store, self._rt)
        driver = None if store is not None else flow_driver(self.store)
        if (store is None and driver is None) or keyer._guest._rt is not self._rt:
            attempt = keyer.intent_attempt(tenant_id, action_type, payload, intent_epoch, intent_id, key_hex_length)
            return attempt.key, self.claim(attempt, now=now)
        at = self.now(now)
        tenant_id, action_type = b.text("tenant_id", tenant_id), b.text("action_type", action_type)
        text, intent_epoch = payload_json(payload), b.s64("intent_epoch", intent_epoch)
        intent_id = None if intent_id is None else b.text("intent_id", intent_id)
        key_hex_length = b.key_length(key_hex_length)
        request, header_len = _packed.claim_request(tenant_id, action_type, text, intent_epoch, intent_id,
                                                    key_hex_length, at)
        if driver is not None:
            rt = self._rt
            head, body = driver(rt, lambda flows, settled: rt.call(
                b.REDIS, "[method]redis-flows.claim-intent", flows, keyer._guest.handle(), request, header_len,
                settled))
            return _packed.claim_of(head[1:], body)
        assert store is not None
        with self._rt.lock:
            packed = self._rt.call(b.MEMORY, _packed.CLAIM, store.handle(), keyer._guest.handle(), request, header_len)
        return _packed.claimed(b.unwrap_record(packed))

    def finish(self, key: str, owner_token: str, result: EffectResult, *, now: Optional[int] = None) -> Finished:
        """Finishes an owned attempt by its outcome class: a terminal answer
        is stored, a release status or :class:`Refused` releases the claim,
        :class:`Failed` leaves it in flight for recovery."""
        key, owner_token, at = b.text("key", key), b.text("owner_token", owner_token), self.now(now)
        mem = in_guest(self.store, self._rt)
        driver = None if mem is not None else flow_driver(self.store)
        if mem is not None or driver is not None:
            rules = self.rules
            request, header_len = _packed.finish_request(key, owner_token, result, at, rules.ttl_seconds,
                                                         rules.release_statuses, rules.fast_completion)
            if driver is not None:
                rt = self._rt
                head, _ = driver(rt, lambda flows, settled: rt.call(
                    b.REDIS, "[method]redis-flows.finish", flows, request, header_len, settled))
                return Finished(head[1])
            assert mem is not None
            with self._rt.lock:
                finished = self._rt.call(b.MEMORY, _packed.FINISH, mem.handle(), request, header_len)
            notify(mem, key)  # written inside the instance: its waiters are told here
            return Finished(b.unwrap(finished))
        answer = self._call("finish", key, owner_token, b.effect_to_wit(result), at, self._wit_rules)
        return Finished(b.unwrap(answer))

    def recover(self, key: str, lookup: Callable[[str], Lookup], *, read_your_writes: bool = False,
                now: Optional[int] = None) -> Recovery:
        """Settles a record left in flight once stale, by asking the
        destination with ``lookup(key)``: found is recorded as done, unknown
        is asked again later and never re-executes, a trusted absent (a
        read-your-writes destination) hands the record to a new owner."""
        probe = self.telemetry.begin("effect")
        try:
            answer = b.unwrap_record(self._call("recover", b.text("key", key), self.now(now),
                                                self.recovery_rules(read_your_writes), lookup=_safe_lookup(lookup),
                                                seeded=True, observer=store_calls_timer(probe)))
        except BaseException as e:
            if probe is not None:
                probe.failed(e)
            raise
        mem = in_guest(self.store, self._rt)
        if mem is not None:
            notify(mem, key)  # a recovery's write inside the instance
        if probe is not None:
            probe.saw_key(key)
            probe.ran(Variant("recovery", answer.outcome), 0, recovery=True)
        return recovery_from_wit(answer.outcome, b.get(answer, "owner_token"))

    def due(self, *, limit: int = 100, now: Optional[int] = None) -> List[str]:
        """Keys in flight whose recovery is due, oldest first."""
        return [str(k) for k in b.unwrap(self._call("due", self.now(now), self.stale_after_seconds, b.uint("limit", limit, 32)))]

    def purge(self, *, now: Optional[int] = None) -> int:
        """Deletes done records past their expiry; how many."""
        purged = self._call("purge", self.now(now))
        return int(purged if in_guest(self.store, self._rt) is not None else b.unwrap(purged))

    def run(self, attempt: Attempt, effect: Callable[[str], Any], *, lookup: Optional[Callable[[str], Lookup]] = None,
            read_your_writes: bool = False, now: Optional[int] = None, kind: str = "effect",
            wait_max_ms: Optional[int] = None) -> RunResult:
        """Claims the key; the owner runs ``effect(key)`` (a :class:`Response`
        or an :class:`EffectResult`; an exception is a failure, re-raised after
        the record is left in flight); every other attempt gets the stored
        answer, 409 or 422. With ``lookup``, a record left in flight is
        recovered once stale. ``kind``: ``effect``, ``step`` or ``tool-call``
        (the journal's runs, :mod:`intentkey.journal`). ``wait_max_ms``: this
        run's wait for an attempt in flight (default: the guard's)."""
        recovery = None if lookup is None else self.recovery_rules(read_your_writes)
        started = self.now(now)
        spec = self.run_spec(attempt, kind, recovery, started, wait_max_ms)
        # A run given its time ends at that time too: one clock for the claim and the finish.
        ended: Callable[[], float] = self._clock if now is None else (lambda: started)
        probe = self.telemetry.begin(kind)
        if probe is not None:
            probe.saw_key(attempt.key)
        return drive_run(self._rt, self.store, spec, effect, None if lookup is None else _safe_lookup(lookup), ended,
                         probe)


def _safe_lookup(lookup: Callable[[str], Lookup]) -> Callable[[str], Lookup]:
    """A look-up that raises could not tell: unknown (never re-executes)."""
    from .types import Unknown

    def ask(key: str) -> Lookup:
        try:
            return lookup(key)
        except IntentkeyError:
            raise  # a malformed answer is the caller's bug, not the destination's silence
        except Exception:
            return Unknown()

    return ask


def flow_driver(store: Any) -> Optional[Callable[[b.Runtime, Callable[[Any, List[int]], Any]], Tuple[List[Any], bytes]]]:
    """`store`'s driver of the core's flows run inside the instance (a
    :class:`intentkey.stores.redis.RedisStore`, not a subclass: a subclass's
    own methods are called through the ``store`` import), or ``None``."""
    packed = getattr(store, "_flow_driver", None)
    return packed() if callable(packed) else None


def in_guest(store: Any, rt: b.Runtime) -> Optional[MemoryStore]:
    """`store` when it is a :class:`MemoryStore` in `rt`'s instance: the guard
    then calls its methods (one call per claim, finish or flow step); any
    other store is performed through the ``store`` import."""
    return store if isinstance(store, MemoryStore) and store._rt is rt else None


def advance(rt: b.Runtime, store: Any, lookup: Optional[Callable[[str], Lookup]], flow: Any,
            done: Optional[Variant], observer: Optional[b.StoreObserver] = None) -> Any:
    """One ``advance`` of `flow` over `store` (call with the runtime's lock
    held): a :class:`MemoryStore`'s own, else the ``guard`` export's over the
    ``store`` import (`observer` hears each store call)."""
    mem = in_guest(store, rt)
    if mem is not None:
        return rt.call_with(None, lookup, b.MEMORY, "[method]memory-store.advance", mem.handle(), flow, done)
    return rt.call_with(store, lookup, b.GUARD, "advance", flow, done, observer=observer)


def drive_run(rt: b.Runtime, store: Any, spec: Any, effect: Callable[[str], Any],
              lookup: Optional[Callable[[str], Lookup]], clock: Callable[[], float],
              probe: Optional[Probe] = None) -> RunResult:
    """Drives one run flow of the core over a synchronous store: the flow
    sequences, the store performs through the import, this runs the effect
    when the flow says so. `probe`: the run's telemetry."""
    with rt.lock:
        flow = b.unwrap(rt.call(b.FLOWS, "[static]flow.run", spec, os.urandom(b.SEED_BYTES)))
        generation = rt.generation
    value: Any = None
    error: Optional[BaseException] = None
    result: Optional[EffectResult] = None
    done: Optional[Variant] = None
    owned: Optional[str] = None  # the key this run owns, once its effect ran
    waited = 0
    observer = store_calls_timer(probe)
    try:
        while True:
            since = time.monotonic()
            with rt.lock:
                if not rt.live(generation):
                    raise IntentkeyTrap("the instance running this flow was discarded (a trap in another call)")
                step = b.unwrap_variant(advance(rt, store, lookup, flow, done, observer))
            if (owned is not None or step.tag == "done") and in_guest(store, rt) is not None:
                # Finished (or settled by a recovery) inside the instance: its waiters are told here.
                notify(store, owned or str(spec.attempt.key))
            if step.tag == "done":
                if probe is not None and step.payload.tag == "ran":
                    probe.ran(step.payload.payload, waited)
                return run_result(step.payload, result, value, error)
            op: Any = step.payload
            if op.tag == "ask" and lookup is not None:  # the destination's look-up of a recovery
                done = Variant("answered", b.lookup_to_wit(lookup(op.payload)))
                continue
            if op.tag == "watch":  # another attempt holds the key: wait for it, as long as the core says
                elapsed = watch_sync(store, str(op.payload.key), int(op.payload.ms), since)
                waited += elapsed
                done = Variant("watched", b.record(elapsed_ms=elapsed, now=int(clock())))
                continue
            if op.tag != "effect":
                raise IntentkeyTrap(f"the run flow asked the host for {op.tag!r}, which it performs itself")
            owned = str(op.payload)
            try:
                with current(probe):
                    value = effect(op.payload)
                result = effect_result(value)
            except IntentkeyError:
                raise
            except Exception as exc:  # ambiguous: the record stays in flight
                error, result = exc, Failed()
            done = Variant("effected", b.record(result=b.effect_to_wit(result), now=int(clock())))
    except BaseException as e:
        if probe is not None:
            probe.failed(e)
        raise
    finally:
        rt.drop(flow, generation, now=True)


def run_result(output: Any, result: Optional[EffectResult], value: Any, error: Optional[BaseException]) -> RunResult:
    if output.tag != "ran":
        raise IntentkeyTrap(f"the run flow answered {output.tag!r}, not ran")
    out = output.payload
    if out.tag == "ran":
        if error is not None:
            raise error
        response = result.response if isinstance(result, (Answered, Refused)) else None
        return RunResult("ran", response, Finished(out.payload.finished), out.payload.recovered, value)
    if out.tag == "replayed":
        return RunResult("replayed", b.response_from_wit(out.payload.response), recovered=out.payload.recovered)
    if out.tag == "conflict":
        return RunResult("conflict", None)
    if out.tag == "in-flight":
        recovery = None if out.payload is None else recovery_from_wit(out.payload, "")
        return RunResult("in-flight", None, recovery=recovery)
    return RunResult("recovery", None, recovery=recovery_from_wit(out.payload, ""))
