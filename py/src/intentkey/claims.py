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
from .errors import IntentkeyError, IntentkeyTrap
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

__all__ = ["Guard", "MemoryStore", "RunResult", "Store", "default_rules"]


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


def default_stale_after_seconds() -> int:
    """How long a claim may run before a recovery may ask the destination."""
    return int(b.runtime("pure").call(b.CLAIMS, "default-stale-after-seconds"))


class MemoryStore:
    """A store in a dict (one process). Each operation is one atomic step
    (the runtime's lock serializes guard calls); the fenced writes compare the
    owner token exactly as the SQL stores do."""

    def __init__(self) -> None:
        self.records: Dict[str, StoredRecord] = {}
        self._wit: Dict[str, Any] = {}  # key -> (record, its conversion for the component)

    def _fenced(self, key: str, token: str) -> Optional[StoredRecord]:
        rec = self.records.get(key)
        if rec is None or rec.status is not Status.IN_FLIGHT or rec.owner_token != token:
            return None
        return rec

    def insert(self, record: StoredRecord) -> bool:
        return self.records.setdefault(record.key, record) is record

    def get(self, key: str) -> Optional[StoredRecord]:
        return self.records.get(key)

    def _wit_get(self, key: str, convert: Callable[[StoredRecord], Any]) -> Any:
        # get() as the component's store import answers it: each stored record
        # (immutable) is converted once and the conversion kept with its key.
        rec = self.get(key)
        if rec is None:
            return None
        kept = self._wit.get(key)
        if kept is None or kept[0] is not rec:
            if len(self._wit) > len(self.records):  # records removed behind the store's back
                self._wit = {k: v for k, v in self._wit.items() if self.records.get(k) is v[0]}
            kept = self._wit[key] = (rec, convert(rec))
        return kept[1]

    def complete(self, completion: Completion) -> bool:
        rec = self._fenced(completion.key, completion.owner_token)
        if rec is None:
            return False
        self.records[rec.key] = StoredRecord(
            rec.key, rec.fingerprint, rec.tenant_id, rec.action_type, Status.DONE, rec.owner_token,
            completion.response, rec.created_at, completion.expires_at, rec.lookups, None)
        return True

    def replace(self, replacement: Replacement) -> bool:
        nxt = replacement.record
        rec = self._fenced(nxt.key, replacement.expected_token)
        if rec is None or rec.lookups != replacement.expected_lookups:
            return False
        self.records[nxt.key] = StoredRecord(
            rec.key, rec.fingerprint, rec.tenant_id, rec.action_type, nxt.status, nxt.owner_token,
            nxt.response, nxt.created_at, nxt.expires_at, nxt.lookups, nxt.next_lookup_at)
        return True

    def release(self, request: ReleaseRequest) -> bool:
        if self._fenced(request.key, request.owner_token) is None:
            return False
        del self.records[request.key]
        self._wit.pop(request.key, None)
        return True

    def list(self, status: Status, limit: int) -> List[StoredRecord]:
        found = sorted((r for r in self.records.values() if r.status is status), key=lambda r: (r.created_at, r.key))
        return found[:limit]

    def purge(self, now: int) -> int:
        # Done records at or past their expiry (the core's rule, as the SQL stores' purge statement).
        gone = [k for k, r in self.records.items() if r.status is Status.DONE and r.expires_at is not None and r.expires_at <= now]
        for key in gone:
            del self.records[key]
            self._wit.pop(key, None)
        return len(gone)


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
                 clock: Callable[[], float] = time.time):
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
        self._wit_rules = b.lowered(b.record(ttl_seconds=self.rules.ttl_seconds,
                                             release_statuses=list(self.rules.release_statuses),
                                             fast_completion=self.rules.fast_completion))

    def now(self, now: Optional[int] = None) -> int:
        """`now` checked, or the clock's time in whole seconds."""
        return int(self._clock()) if now is None else b.s64("now", now)

    def recovery_rules(self, read_your_writes: bool) -> Any:
        return b.record(stale_after=self.stale_after_seconds, read_your_writes=bool(read_your_writes),
                        ttl_seconds=self.rules.ttl_seconds)


class Guard(GuardBase):
    """Runs effects at most once per key over a synchronous `store`, through
    the core's flows. Times are whole seconds; ``now=None`` reads ``clock()``."""

    def __init__(self, store: Store, *, ttl_seconds: Optional[int] = None,
                 release_statuses: Optional[Sequence[int]] = None, stale_after_seconds: Optional[int] = None,
                 fast_completion: bool = False, clock: Callable[[], float] = time.time, **unknown: Any):
        b.no_unknown("intentkey.Guard", unknown, ('ttl_seconds', 'release_statuses', 'stale_after_seconds', 'fast_completion', 'clock'))
        super().__init__(ttl_seconds=ttl_seconds, release_statuses=release_statuses,
                         stale_after_seconds=stale_after_seconds, fast_completion=fast_completion, clock=clock)
        if inspect.iscoroutinefunction(getattr(store, "insert", None)):
            raise IntentkeyError("invalid-argument", "store",
                                 "this store is asynchronous: use intentkey.aio.AsyncGuard")
        self.store = store

    def _call(self, name: str, *args: Any, lookup: Optional[Callable[[str], Lookup]] = None) -> Any:
        return self._rt.call_with(self.store, lookup, b.GUARD, name, *args)

    def claim(self, attempt: Attempt, *, now: Optional[int] = None) -> Claim:
        """Claims the attempt's key: ``OWNED`` (run the effect, then
        :meth:`finish`), ``IN_FLIGHT`` (409), ``DONE`` (replay ``response``) or
        ``PAYLOAD_CONFLICT`` (422)."""
        claimed = b.unwrap_record(self._call("claim", b.attempt_to_wit(attempt), self.now(now)))
        return claim_from_wit(claimed.outcome, b.get(claimed, "owner_token"))

    def finish(self, key: str, owner_token: str, result: EffectResult, *, now: Optional[int] = None) -> Finished:
        """Finishes an owned attempt by its outcome class: a terminal answer
        is stored, a release status or :class:`Refused` releases the claim,
        :class:`Failed` leaves it in flight for recovery."""
        answer = self._call("finish", b.text("key", key), b.text("owner_token", owner_token),
                            b.effect_to_wit(result), self.now(now), self._wit_rules)
        return Finished(b.unwrap(answer))

    def recover(self, key: str, lookup: Callable[[str], Lookup], *, read_your_writes: bool = False,
                now: Optional[int] = None) -> Recovery:
        """Settles a record left in flight once stale, by asking the
        destination with ``lookup(key)``: found is recorded as done, unknown
        is asked again later and never re-executes, a trusted absent (a
        read-your-writes destination) hands the record to a new owner."""
        answer = b.unwrap_record(self._call("recover", b.text("key", key), self.now(now),
                                            self.recovery_rules(read_your_writes), lookup=_safe_lookup(lookup)))
        return recovery_from_wit(answer.outcome, b.get(answer, "owner_token"))

    def due(self, *, limit: int = 100, now: Optional[int] = None) -> List[str]:
        """Keys in flight whose recovery is due, oldest first."""
        return [str(k) for k in b.unwrap(self._call("due", self.now(now), self.stale_after_seconds, b.uint("limit", limit, 32)))]

    def purge(self, *, now: Optional[int] = None) -> int:
        """Deletes done records past their expiry; how many."""
        return int(b.unwrap(self._call("purge", self.now(now))))

    def run(self, attempt: Attempt, effect: Callable[[str], Any], *, lookup: Optional[Callable[[str], Lookup]] = None,
            read_your_writes: bool = False, now: Optional[int] = None, kind: str = "effect") -> RunResult:
        """Claims the key; the owner runs ``effect(key)`` (a :class:`Response`
        or an :class:`EffectResult`; an exception is a failure, re-raised after
        the record is left in flight); every other attempt gets the stored
        answer, 409 or 422. With ``lookup``, a record left in flight is
        recovered once stale. ``kind``: ``effect``, ``step`` or ``tool-call``
        (the journal's runs, :mod:`intentkey.journal`)."""
        if kind not in ("effect", "step", "tool-call"):
            raise IntentkeyError("invalid-argument", "kind", f"kind is effect, step or tool-call, not {kind!r}")
        recovery = None if lookup is None else self.recovery_rules(read_your_writes)
        started = self.now(now)
        spec = b.record(attempt=b.attempt_to_wit(attempt), kind=kind, rules=self._wit_rules, recovery=recovery,
                        now=started)
        # A run given its time ends at that time too: one clock for the claim and the finish.
        ended: Callable[[], float] = self._clock if now is None else (lambda: started)
        return drive_run(self._rt, self.store, spec, effect, None if lookup is None else _safe_lookup(lookup), ended)


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


def drive_run(rt: b.Runtime, store: Any, spec: Any, effect: Callable[[str], Any],
              lookup: Optional[Callable[[str], Lookup]], clock: Callable[[], float]) -> RunResult:
    """Drives one run flow of the core over a synchronous store: the flow
    sequences, the store performs through the import, this runs the effect
    when the flow says so."""
    with rt.lock:
        flow = b.unwrap(rt.call(b.FLOWS, "[static]flow.run", spec, os.urandom(16)))
        generation = rt.generation
    value: Any = None
    error: Optional[BaseException] = None
    result: Optional[EffectResult] = None
    done: Optional[Variant] = None
    try:
        while True:
            with rt.lock:
                if not rt.live(generation):
                    raise IntentkeyTrap("the instance running this flow was discarded (a trap in another call)")
                step = b.unwrap_variant(rt.call_with(store, lookup, b.GUARD, "advance", flow, done))
            if step.tag == "done":
                return run_result(step.payload, result, value, error)
            op: Any = step.payload
            if op.tag == "ask" and lookup is not None:  # the destination's look-up of a recovery
                done = Variant("answered", b.lookup_to_wit(lookup(op.payload)))
                continue
            if op.tag != "effect":
                raise IntentkeyTrap(f"the run flow asked the host for {op.tag!r}, which it performs itself")
            try:
                value = effect(op.payload)
                result = effect_result(value)
            except IntentkeyError:
                raise
            except Exception as exc:  # ambiguous: the record stays in flight
                error, result = exc, Failed()
            done = Variant("effected", b.record(result=b.effect_to_wit(result), now=int(clock())))
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
