"""The claim flow over asynchronous stores (``asyncio``).

An :class:`AsyncGuard` drives the core's flows itself: the core returns each
store operation, the guard awaits it on the store and resumes the flow. The
order of operations and every decision stay the core's. An asynchronous store
has the methods of :class:`intentkey.Store`, each a coroutine.

>>> import asyncio, intentkey
>>> from intentkey.aio import AsyncGuard, AsyncMemoryStore
>>> async def main():
...     guard = AsyncGuard(AsyncMemoryStore())
...     attempt = intentkey.Attempt("k1", "fp", "tenant-acme", "pix.send")
...     first = await guard.run(attempt, lambda key: intentkey.Response.json(201, '{"id":1}'))
...     again = await guard.run(attempt, lambda key: intentkey.Response.json(201, '{"id":2}'))
...     return first.outcome, again.outcome, again.response.body
>>> asyncio.run(main())
('ran', 'replayed', b'{"id":1}')
"""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, Set, Tuple, TypeVar, Union

try:
    from typing import Protocol
except ImportError:  # pragma: no cover
    from typing_extensions import Protocol  # type: ignore

from wasmtime.component import Variant

from . import _binding as b
from ._watch import Changes, watch_async
from .claims import (
    GUARD_OPTIONS,
    GuardBase,
    MemoryStore,
    RunResult,
    claim_from_wit,
    effect_result,
    recovery_from_wit,
    run_result,
    store_deadline_ms,
)
from ._release import Report
from .errors import IntentkeyError, IntentkeyTrap
from .http import Endpoint, Raised, Request, Served, _run_handler, served_from_wit
from .schema import StatusCount
from .telemetry import Probe, current
from .types import (
    Attempt,
    Claim,
    Completion,
    EffectResult,
    Failed,
    Finished,
    Lookup,
    Recovery,
    ReleaseRequest,
    Replacement,
    Reply,
    Status,
    StoredRecord,
    StoreError,
    Unknown,
)

__all__ = ["AsyncGuard", "AsyncMemoryStore", "AsyncStore", "StoreCalls", "store_deadline_ms"]


class AsyncStore(Protocol):
    """What an asynchronous store performs: the methods of
    :class:`intentkey.Store`, awaited."""

    async def insert(self, record: StoredRecord) -> bool: ...
    async def get(self, key: str) -> Optional[StoredRecord]: ...
    async def complete(self, completion: Completion) -> bool: ...
    async def replace(self, replacement: Replacement) -> bool: ...
    async def release(self, request: ReleaseRequest) -> bool: ...
    async def list(self, status: Status, limit: int) -> List[StoredRecord]: ...
    async def purge(self, now: int) -> int: ...


class AsyncMemoryStore:
    """:class:`intentkey.MemoryStore` behind coroutines (tests and examples).
    Its writes wake the retries waiting for them (``wait_max_ms``), on any
    event loop or thread of this process."""

    #: The store's kind, as telemetry names it (``intentkey.store``).
    kind = "memory"

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self._changes: Changes = self.inner._changes

    async def insert(self, record: StoredRecord) -> bool:
        return self.inner.insert(record)

    async def get(self, key: str) -> Optional[StoredRecord]:
        return self.inner.get(key)

    async def complete(self, completion: Completion) -> bool:
        return self.inner.complete(completion)

    async def replace(self, replacement: Replacement) -> bool:
        return self.inner.replace(replacement)

    async def release(self, request: ReleaseRequest) -> bool:
        return self.inner.release(request)

    async def list(self, status: Status, limit: int) -> List[StoredRecord]:
        return self.inner.list(status, limit)

    async def purge(self, now: int) -> int:
        return self.inner.purge(now)

    async def count(self, status: Status) -> StatusCount:
        """How many records have `status`, and the oldest claim among them."""
        return self.inner.count(status)

    async def watch(self, key: str, ms: int) -> None:
        """Returns when record `key` is written here, or after `ms` milliseconds."""
        await self._changes.wait_async(key, ms / 1000)


AsyncLookup = Callable[[str], Union[Lookup, Awaitable[Lookup]]]

_T = TypeVar("_T")

#: The store operations a deadline bounds (not ``ask``, ``wait`` or ``watch``).
STORE_OPS = ("insert", "get", "complete", "replace", "release", "list", "purge")


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def check_store_deadline_ms(value: Any, name: str = "store_deadline_ms") -> int:
    """`value` as a store deadline: ``None`` (the core's default) or a whole
    number of milliseconds of at least 1; anything else is ``invalid-argument``."""
    if value is None:
        return store_deadline_ms()
    ms = b.uint(name, value, 32)
    if ms < 1:
        raise IntentkeyError("invalid-argument", name,
                             f"{name} must be at least 1 ms: a store call that is never given time never answers")
    return ms


def _read_outcome(task: "asyncio.Future[Any]") -> None:
    """Reads an abandoned call's outcome, so that nothing warns it was never retrieved."""
    if not task.cancelled():
        task.exception()


class StoreCalls:
    """The calls of an asynchronous guard to its store, each bounded by the
    store deadline: a call that has not answered within `deadline_ms` is a
    failure that trying again may cure (``StoreError("unavailable")``), and
    is cancelled without being waited for (a driver's own clean-up, such as
    psycopg asking the server to cancel the statement, may take longer than
    the deadline). It is kept referenced until it ends; an insert abandoned
    so is remembered by key, so that the background release of its claim
    waits for it to end before deleting the record."""

    def __init__(self, store: Any, deadline_ms: int):
        self.store = store
        self.deadline_ms = deadline_ms
        self._abandoned: Set["asyncio.Future[Any]"] = set()
        self._inserts: Dict[str, "asyncio.Future[Any]"] = {}

    def abandoned(self) -> int:
        """How many calls abandoned at their deadline are still ending."""
        return len(self._abandoned)

    def insert_of(self, key: str) -> Optional["asyncio.Future[Any]"]:
        """The insert of `key` abandoned at its deadline, while it is still ending."""
        return self._inserts.get(key)

    def _abandon(self, task: "asyncio.Future[Any]", insert_key: Optional[str]) -> None:
        task.cancel()
        self._abandoned.add(task)

        def ended(t: "asyncio.Future[Any]") -> None:
            self._abandoned.discard(t)
            if insert_key is not None and self._inserts.get(insert_key) is t:
                del self._inserts[insert_key]
            _read_outcome(t)

        if insert_key is not None:
            self._inserts[insert_key] = task
        task.add_done_callback(ended)

    async def call(self, op: str, make: Callable[[], Awaitable[_T]], insert_key: Optional[str] = None) -> _T:
        """``await make()`` within the deadline."""
        task = asyncio.ensure_future(make())
        try:
            done, _ = await asyncio.wait({task}, timeout=self.deadline_ms / 1000)
        except asyncio.CancelledError:
            self._abandon(task, insert_key)
            raise
        if task in done:
            return task.result()
        self._abandon(task, insert_key)
        raise StoreError("unavailable",
                         f"the store did not answer the {op} within {self.deadline_ms} ms (the store deadline)")

    async def release(self, request: ReleaseRequest) -> Any:
        """The store's release of `request`, within the deadline."""
        return await self.call("release", lambda: self.store.release(request))


async def _store_op(calls: StoreCalls, tag: str, arg: Any) -> Variant:
    store = calls.store
    if tag == "insert":
        record = b.stored_from_wit(arg)
        # The package's PostgreSQL and Redis stores claim in one round trip:
        # the record the insert lost to comes back with the answer, no get follows.
        claim = getattr(store, "_claim", None) if getattr(type(store), "_INTENTKEY_CLAIM", False) else None
        if claim is None:
            return Variant("inserted", bool(await calls.call(tag, lambda: store.insert(record), record.key)))
        answer = await calls.call(tag, lambda: claim(record), record.key)
        if isinstance(answer, bool):
            return Variant("inserted", answer)
        return Variant("existing", b.stored_to_wit(answer))
    if tag == "get":
        got = await calls.call(tag, lambda: store.get(arg))
        return Variant("got", None if got is None else b.stored_to_wit(got))
    if tag == "complete":
        completion = b.completion_from_wit(arg)
        return Variant("written", bool(await calls.call(tag, lambda: store.complete(completion))))
    if tag == "replace":
        replacement = b.replacement_from_wit(arg)
        return Variant("written", bool(await calls.call(tag, lambda: store.replace(replacement))))
    if tag == "release":
        request = b.release_from_wit(arg)
        return Variant("written", bool(await calls.call(tag, lambda: store.release(request))))
    if tag == "list":
        status, limit = b.status_from_wit(arg.status), arg.limit
        found = await calls.call(tag, lambda: store.list(status, limit))
        return Variant("listed", [b.stored_to_wit(r) for r in found])
    assert tag == "purge"
    return Variant("purged", int(await calls.call(tag, lambda: store.purge(arg))))


async def perform(calls: StoreCalls, op: Any, lookup: Optional[AsyncLookup],
                  probe: Optional[Probe] = None) -> Tuple[Variant, Optional[StoreError]]:
    """Performs one store operation (each within the store deadline) or a
    look-up the core asked for: the WIT op-result, and the store failure met
    (handed to the flow as ``failed``)."""
    tag, arg = op.tag, op.payload
    if tag == "ask":
        if lookup is None:
            raise IntentkeyTrap("the core asked the destination, and this flow was given no look-up")
        try:
            answer = await _maybe_await(lookup(arg))
        except IntentkeyError:
            raise  # a malformed answer is the caller's bug, not the destination's silence
        except Exception:
            answer = Unknown()  # a look-up that fails could not tell
        return Variant("answered", b.lookup_to_wit(answer)), None
    if tag not in STORE_OPS:
        raise IntentkeyTrap(f"the core asked for an unknown operation {tag!r}")
    started = time.perf_counter()
    try:
        return await _store_op(calls, tag, arg), None
    except StoreError as e:
        return Variant("failed", b.store_error_to_wit(e)), e
    finally:
        if probe is not None:
            probe.store_call(tag, arg, (time.perf_counter() - started) * 1000)


class Flow:
    """One flow of the component's ``flows`` resource, started and resumed here."""

    def __init__(self, rt: b.Runtime, created: Any):
        self._rt = rt
        with rt.lock:
            self._flow = b.unwrap(created())
            self._generation = rt.generation

    def step(self, done: Optional[Variant]) -> Any:
        rt = self._rt
        with rt.lock:
            if not rt.live(self._generation):
                raise IntentkeyTrap("the instance running this flow was discarded (a trap in another call)")
            if done is None:
                return rt.call(b.FLOWS, "[method]flow.start", self._flow)
            return b.unwrap_variant(rt.call(b.FLOWS, "[method]flow.resume", self._flow, done))

    def owner_token(self) -> str:
        with self._rt.lock:
            return str(self._rt.call(b.FLOWS, "[method]flow.owner-token", self._flow))

    def close(self) -> None:
        self._rt.drop(self._flow, self._generation, now=True)


class _Driven:
    """What driving a flow measured: how long it waited for another attempt (ms)."""

    waited_ms = 0


async def drive(flow: Flow, calls: StoreCalls, lookup: Optional[AsyncLookup] = None,
                host: Optional[Callable[[Any], Awaitable[Variant]]] = None, *, hand_failures: bool = False,
                clock: Callable[[], int] = lambda: int(time.time()), probe: Optional[Probe] = None,
                driven: Optional[_Driven] = None) -> Any:
    """Drives `flow` to its output: store operations on the store of
    `calls` (each within the store deadline), a watch (waiting for another
    attempt, woken by the store when it can tell, else ``asyncio.sleep``;
    ``clock()``: the time it ends at), anything else (the effect, a pause,
    the handler) through ``host(op)``. A store failure is handed to the flow
    when `hand_failures` (a serve flow), else raised as
    ``store-unavailable`` or ``store-failed``."""
    store = calls.store
    try:
        since = time.monotonic()
        step = flow.step(None)
        while step.tag == "io":
            op = step.payload
            if op.tag == "watch":
                elapsed = await watch_async(store, str(op.payload.key), int(op.payload.ms), since)
                if driven is not None:
                    driven.waited_ms += elapsed
                done = Variant("watched", b.record(elapsed_ms=elapsed, now=clock()))
            elif op.tag in ("effect", "wait"):
                if host is None:
                    raise IntentkeyTrap(f"the flow asked the host for {op.tag!r}, which it never does here")
                done = await host(op)
            else:
                since = time.monotonic()  # what a watch after this operation may have missed
                done, failure = await perform(calls, op, lookup, probe)
                if failure is not None and not hand_failures:
                    # Only a serve flow decides what a failed operation means
                    # (503, the profile's 500, a retried completion); every
                    # other flow stops here, as the sync guard does.
                    if failure.kind == "unavailable":
                        raise IntentkeyError("store-unavailable", None, failure.message)
                    raise IntentkeyError("store-failed", None, failure.message)
            step = flow.step(done)
        return step.payload
    finally:
        flow.close()


#: The options of :class:`AsyncGuard`, by name.
ASYNC_GUARD_OPTIONS = GUARD_OPTIONS + ("store_deadline_ms",)


class AsyncGuard(GuardBase):
    """:class:`intentkey.Guard` over an asynchronous store (``wait_max_ms``
    as there: the wait is ``asyncio.sleep``, or a wake-up from a store that
    notifies).

    ``store_deadline_ms`` (default: the core's, 2000): the deadline of each
    store call (insert, get, complete, replace, release, list, purge; not a
    wait): a call that has not answered by then is a failure that trying
    again may cure, never a hang (a serve flow answers 503 at once, or
    tries a completion again; any other flow raises ``store-unavailable``).
    ``tracer_provider``, ``meter_provider``: as :class:`intentkey.Guard`."""

    def __init__(self, store: AsyncStore, *, ttl_seconds: Optional[int] = None,
                 release_statuses: Optional[Sequence[int]] = None, stale_after_seconds: Optional[int] = None,
                 fast_completion: bool = False, clock: Callable[[], float] = time.time, wait_max_ms: int = 0,
                 store_deadline_ms: Optional[int] = None, tracer_provider: Any = None, meter_provider: Any = None,
                 **unknown: Any):
        b.no_unknown("intentkey.aio.AsyncGuard", unknown, ASYNC_GUARD_OPTIONS)
        super().__init__(ttl_seconds=ttl_seconds, release_statuses=release_statuses,
                         stale_after_seconds=stale_after_seconds, fast_completion=fast_completion, clock=clock,
                         wait_max_ms=wait_max_ms)
        self.store = store
        self.store_deadline_ms = check_store_deadline_ms(store_deadline_ms)
        self.calls = StoreCalls(store, self.store_deadline_ms)
        self._telemetry_for(store, tracer_provider, meter_provider)

    def _flow(self, name: str, *args: Any) -> Flow:
        rt = self._rt
        return Flow(rt, lambda: rt.call(b.FLOWS, f"[static]flow.{name}", *args))

    def _token(self) -> str:
        return str(b.unwrap(b.runtime("pure").call(b.CLAIMS, "owner-token", os.urandom(b.SEED_BYTES))))

    async def claim(self, attempt: Attempt, *, now: Optional[int] = None) -> Claim:
        """As :meth:`intentkey.Guard.claim`."""
        token = self._token()
        flow = Flow(self._rt, lambda: Variant("ok", self._rt.call(
            b.FLOWS, "[static]flow.claim", b.attempt_to_wit(attempt), token, self.now(now))))
        out = await drive(flow, self.calls)
        return claim_from_wit(_output(out, "claimed"), token)

    async def finish(self, key: str, owner_token: str, result: EffectResult, *, now: Optional[int] = None) -> Finished:
        """As :meth:`intentkey.Guard.finish`."""
        flow = Flow(self._rt, lambda: Variant("ok", self._rt.call(
            b.FLOWS, "[static]flow.finish", b.text("key", key), b.text("owner_token", owner_token),
            b.effect_to_wit(result), self.now(now), self._wit_rules)))
        return Finished(_output(await drive(flow, self.calls), "finished"))

    async def recover(self, key: str, lookup: AsyncLookup, *, read_your_writes: bool = False,
                      now: Optional[int] = None) -> Recovery:
        """As :meth:`intentkey.Guard.recover`; `lookup` may be a coroutine function."""
        token = self._token()
        flow = Flow(self._rt, lambda: Variant("ok", self._rt.call(
            b.FLOWS, "[static]flow.recover", b.text("key", key), token, self.now(now),
            self.recovery_rules(read_your_writes))))
        probe = self.telemetry.begin("effect")
        try:
            out = _output(await drive(flow, self.calls, lookup, probe=probe), "recovered")
        except BaseException as e:
            if probe is not None:
                probe.failed(e)
            raise
        if probe is not None:
            probe.saw_key(key)
            probe.ran(Variant("recovery", out), 0, recovery=True)
        return recovery_from_wit(out, token)

    async def due(self, *, limit: int = 100, now: Optional[int] = None) -> List[str]:
        """Keys in flight whose recovery is due, oldest first."""
        flow = Flow(self._rt, lambda: Variant("ok", self._rt.call(
            b.FLOWS, "[static]flow.due", self.now(now), self.stale_after_seconds, b.uint("limit", limit, 32))))
        return [str(k) for k in _output(await drive(flow, self.calls), "due")]

    async def purge(self, *, now: Optional[int] = None) -> int:
        """Deletes done records past their expiry; how many."""
        flow = Flow(self._rt, lambda: Variant("ok", self._rt.call(b.FLOWS, "[static]flow.purge", self.now(now))))
        return int(_output(await drive(flow, self.calls), "purged"))

    async def run(self, attempt: Attempt, effect: Callable[[str], Any], *, lookup: Optional[AsyncLookup] = None,
                  read_your_writes: bool = False, now: Optional[int] = None, kind: str = "effect",
                  wait_max_ms: Optional[int] = None) -> RunResult:
        """As :meth:`intentkey.Guard.run`; `effect` and `lookup` may be coroutine functions."""
        recovery = None if lookup is None else self.recovery_rules(read_your_writes)
        started = self.now(now)
        spec = self.run_spec(attempt, kind, recovery, started, wait_max_ms)
        flow = self._flow("run", spec, os.urandom(b.SEED_BYTES))
        state: Dict[str, Any] = {"value": None, "error": None, "result": None}
        probe = self.telemetry.begin(kind)
        if probe is not None:
            probe.saw_key(attempt.key)
        driven = _Driven()

        async def host(op: Any) -> Variant:
            result: EffectResult
            try:
                with current(probe):
                    state["value"] = await _maybe_await(effect(op.payload))
                result = effect_result(state["value"])
            except IntentkeyError:
                raise
            except Exception as exc:  # ambiguous: the record stays in flight
                state["error"], result = exc, Failed()
            state["result"] = result
            ended = started if now is not None else int(self._clock())  # one clock for claim and finish
            return Variant("effected", b.record(result=b.effect_to_wit(result), now=ended))

        try:
            out = await drive(flow, self.calls, lookup, host, clock=self._ended(started, now), probe=probe,
                              driven=driven)
        except BaseException as e:
            if probe is not None:
                probe.failed(e)
            raise
        if probe is not None and out.tag == "ran":
            probe.ran(out.payload, driven.waited_ms)
        return run_result(out, state["result"], state["value"], state["error"])

    def _ended(self, started: int, now: Optional[int]) -> Callable[[], int]:
        """The clock of a flow's later steps: a flow given its time keeps it."""
        if now is not None:
            return lambda: started
        clock = self._clock
        return lambda: int(clock())

    async def serve(self, endpoint: Endpoint, request: Request,
                    handler: Callable[[str], Union[Reply, Raised, Awaitable[Union[Reply, Raised]]]], *,
                    now: Optional[int] = None, report: Optional[Report] = None) -> Served:
        """:meth:`intentkey.http.Endpoint.serve` over this guard's store:
        the handler may be a coroutine function; pauses are ``asyncio.sleep``,
        and a retry waiting for the first attempt (the endpoint's
        ``wait_max_ms``) is woken by the store when it can tell. Each store
        call is bounded by ``store_deadline_ms``: a claim whose insert did
        not answer in time is answered 503 at once, and released in a task
        of its own once the store answers (``report(stage, error)`` hears one
        that gave up, at stage ``"release"``)."""
        started = self.now(now)
        rt = self._rt
        flow = Flow(rt, lambda: rt.call(b.FLOWS, "[static]flow.serve", endpoint._guest.handle(), request._wit(),
                                        self._wit_rules, os.urandom(b.SEED_BYTES), started))
        state: Dict[str, Any] = {"ran": False, "reply": None, "error": None}
        probe = self.telemetry.begin(endpoint.options.profile)

        async def host(op: Any) -> Variant:
            if op.tag == "wait":
                await asyncio.sleep(op.payload / 1000)
                return Variant("waited")
            state["ran"] = True
            if probe is not None:
                probe.saw_key(str(op.payload))
            try:
                with current(probe):
                    outcome = await _maybe_await(handler(op.payload))
            except Exception as exc:
                state["error"] = exc
                handled = None
            else:
                handled, state["reply"], state["error"] = _run_handler(lambda _k: outcome, op.payload)
            ended = started if now is not None else int(self._clock())
            return Variant("handled", b.record(handled=handled, now=ended))

        try:
            out = await drive(flow, self.calls, None, host, hand_failures=True, clock=self._ended(started, now),
                              probe=probe)
            served = served_from_wit(_output(out, "served"), state["ran"], state["reply"], state["error"])
        except BaseException as e:
            if probe is not None:
                probe.failed(e)
            raise
        if served.unreleased is not None:
            self.releases.start_task(rt, self.calls.release, served.unreleased, self._released, report,
                                     self.calls.insert_of(served.unreleased.key))
        if probe is not None:
            endpoint._observed(probe, served, request, started)
        return served


def _output(out: Any, tag: str) -> Any:
    if out.tag != tag:
        raise IntentkeyTrap(f"the flow answered {out.tag!r}, not {tag}")
    return out.payload
