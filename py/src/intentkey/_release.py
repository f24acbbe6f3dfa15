"""Releasing, in the background, a claim whose handler never ran.

When a claim's insert fails (the connection dropped, the store call's
deadline passed), the insert may still have been committed and only its
answer lost. The core's serve flow answers 503 at once and hands that claim
back (``Served.unreleased``); the host releases it with the core's
``flow.release-claim``: the fenced release (it deletes the record only while
it is in flight under this owner's token), tried again after each pause the
flow asks for (op ``wait``) while the store cannot be reached, for at most
300 s. Its answer: ``released``, ``superseded`` (nothing of this owner's was
there) or ``left-in-flight`` (it gave up: recovery settles the record).

A synchronous host queues each release for a few daemon threads (a release
waiting out a pause holds none); an asynchronous one runs each in an
``asyncio`` task, kept referenced until it ends. The
host's ``report(stage, error)`` (the middleware's ``on_error``) hears a
release that gave up, at stage ``"release"``; without one it is logged.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import threading
import time
from typing import Any, Awaitable, Callable, List, Optional, Set, Tuple

from wasmtime.component import Variant

from . import _binding as b
from ._codes import ErrorCode
from .errors import IntentkeyError, IntentkeyTrap
from .types import Finished, ReleaseRequest, StoreError

__all__ = ["Releases", "release_async", "release_sync"]

log = logging.getLogger("intentkey")

#: What a release that gave up is reported as (the record stays in flight for recovery).
GAVE_UP = "a claim whose answer was lost could not be released (its handler never ran): recovery settles it"

#: The stage a release that gave up is reported at (``on_error(stage, error)``).
STAGE = "release"

Report = Callable[[str, BaseException], Any]
Done = Callable[[Finished], Any]


class _ReleaseFlow:
    """One ``flow.release-claim`` of the component, started and resumed here."""

    def __init__(self, rt: b.Runtime, request: ReleaseRequest):
        self._rt = rt
        with rt.lock:
            self._flow = rt.call(b.FLOWS, "[static]flow.release-claim", b.release_to_wit(request))
            self._generation = rt.generation

    def step(self, done: Optional[Variant]) -> Any:
        rt = self._rt
        with rt.lock:
            if not rt.live(self._generation):
                raise IntentkeyTrap("the instance running this release was discarded (a trap in another call)")
            if done is None:
                return rt.call(b.FLOWS, "[method]flow.start", self._flow)
            return b.unwrap_variant(rt.call(b.FLOWS, "[method]flow.resume", self._flow, done))

    def close(self) -> None:
        self._rt.drop(self._flow, self._generation, now=True)


def _finished(step: Any) -> Finished:
    out = step.payload
    if out.tag != "finished":
        raise IntentkeyTrap(f"the release flow answered {out.tag!r}, not finished")
    return Finished(out.payload)


def _failed(e: StoreError) -> Variant:
    return Variant("failed", b.store_error_to_wit(e))


def _written(value: Any) -> Variant:
    if not isinstance(value, bool):
        raise StoreError("failed", f"a store's release answers bool, not {type(value).__name__}")
    return Variant("written", value)


def _release_once(store: Any, wit_request: Any) -> Tuple[Variant, Optional[StoreError]]:
    """One fenced release on a synchronous store: the op-result, and the failure met."""
    try:
        return _written(store.release(b.release_from_wit(wit_request))), None
    except StoreError as e:
        return _failed(e), e
    except IntentkeyError:
        raise
    except Exception as e:  # a store of the public protocol that raised something else
        failure = StoreError("failed", f"the store's release raised {type(e).__name__}: {e}")
        return _failed(failure), failure


def release_sync(rt: b.Runtime, store: Any, request: ReleaseRequest,
                 sleep: Callable[[float], Any] = time.sleep) -> Tuple[Finished, Optional[StoreError]]:
    """Releases `request` over the synchronous `store`, in this thread: what
    the flow finished with, and the last store failure it met."""
    flow = _ReleaseFlow(rt, request)
    last: Optional[StoreError] = None
    try:
        step = flow.step(None)
        while step.tag == "io":
            op = step.payload
            if op.tag == "wait":
                sleep(int(op.payload) / 1000)
                done = Variant("waited")
            elif op.tag == "release":
                done, failure = _release_once(store, op.payload)
                last = failure or last
            else:
                raise IntentkeyTrap(f"the release flow asked for {op.tag!r}, which it never does")
            step = flow.step(done)
        return _finished(step), last
    finally:
        flow.close()


async def release_async(rt: b.Runtime, release: Callable[[ReleaseRequest], Awaitable[Any]],
                        request: ReleaseRequest) -> Tuple[Finished, Optional[StoreError]]:
    """:func:`release_sync` on the event loop: ``release(request)`` is the
    store's release (bounded by the caller's deadline); pauses are ``asyncio.sleep``."""
    flow = _ReleaseFlow(rt, request)
    last: Optional[StoreError] = None
    try:
        step = flow.step(None)
        while step.tag == "io":
            op = step.payload
            if op.tag == "wait":
                await asyncio.sleep(int(op.payload) / 1000)
                done = Variant("waited")
            elif op.tag == "release":
                try:
                    done = _written(await release(b.release_from_wit(op.payload)))
                except StoreError as e:
                    last, done = e, _failed(e)
                except IntentkeyError:
                    raise
                except Exception as e:
                    last = StoreError("failed", f"the store's release raised {type(e).__name__}: {e}")
                    done = _failed(last)
            else:
                raise IntentkeyTrap(f"the release flow asked for {op.tag!r}, which it never does")
            step = flow.step(done)
        return _finished(step), last
    finally:
        flow.close()


def report_gave_up(report: Optional[Report], last: Optional[StoreError]) -> None:
    """Tells the host that a release gave up (the record stays in flight)."""
    code: ErrorCode = "store-failed" if last is not None and last.kind == "failed" else "store-unavailable"
    error = IntentkeyError(code, None, GAVE_UP if last is None else f"{GAVE_UP}; the store said: {last.message}")
    try:
        if report is not None:
            report(STAGE, error)
        else:
            log.error("intentkey: %s: %r", STAGE, error)
    except Exception:  # a report that raises must not end the release's thread or task noisily
        log.exception("intentkey: on_error raised")


class _Pending:
    """One release in the queue of synchronous hosts: its flow, where it
    stands, whom it tells, and the guard's :class:`Releases` it counts in."""

    __slots__ = ("flow", "store", "step", "last", "done", "report", "owner")

    def __init__(self, flow: _ReleaseFlow, store: Any, done: Optional[Done], report: Optional[Report],
                 owner: "Releases"):
        self.flow, self.store, self.done, self.report, self.owner = flow, store, done, report, owner
        self.step: Any = None
        self.last: Optional[StoreError] = None


#: How many threads of this process release claims of synchronous stores at
#: once (a release waiting out a pause holds none, so an outage that fails
#: many claims does not make a thread each).
RELEASE_THREADS = 4
#: Seconds an idle release thread waits for work before it ends.
_IDLE_S = 30.0


class _Queue:
    """The releases of every synchronous guard of the process, by when each
    is due next, worked by at most :data:`RELEASE_THREADS` daemon threads."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._heap: List[Tuple[float, int, _Pending]] = []
        self._order = itertools.count()
        self._threads = 0
        self._idle = 0

    def threads(self) -> int:
        """How many release threads there are now (tests)."""
        with self._lock:
            return self._threads

    def push(self, when: float, pending: _Pending) -> None:
        with self._lock:
            heapq.heappush(self._heap, (when, next(self._order), pending))
            if self._idle == 0 and self._threads < RELEASE_THREADS:
                self._threads += 1
                threading.Thread(target=self._work, name="intentkey-release", daemon=True).start()
            else:
                self._lock.notify()

    def _next(self) -> Optional[_Pending]:
        """The next release due (waiting until one is), or ``None`` after a long idle spell."""
        with self._lock:
            idle_since = time.monotonic()
            self._idle += 1
            try:
                while True:
                    now = time.monotonic()
                    if self._heap and self._heap[0][0] <= now:
                        return heapq.heappop(self._heap)[2]
                    if not self._heap and now - idle_since >= _IDLE_S:
                        self._threads -= 1
                        return None
                    self._lock.wait(self._heap[0][0] - now if self._heap else _IDLE_S)
            finally:
                self._idle -= 1

    def _work(self) -> None:
        while True:
            pending = self._next()
            if pending is None:
                return
            try:
                when = _advance(pending)
            except Exception as e:  # a trap: the record stays in flight for recovery
                log.exception("intentkey: the background release failed")
                pending.flow.close()
                report_gave_up(pending.report, StoreError("failed", f"{type(e).__name__}: {e}"))
                when = None
            if when is not None:
                self.push(when, pending)
            else:
                pending.owner._sync_ended()


_QUEUE = _Queue()


def _advance(pending: _Pending) -> Optional[float]:
    """Sends `pending`'s release (its first, or its next after a pause):
    when to take it up again, or ``None`` once it ended (and was settled)."""
    flow = pending.flow
    step = flow.step(None) if pending.step is None else flow.step(Variant("waited"))
    while True:
        if step.tag != "io":
            flow.close()
            _settled(_finished(step), pending.last, pending.done, pending.report)
            return None
        op = step.payload
        if op.tag == "wait":
            pending.step = step
            return time.monotonic() + int(op.payload) / 1000
        if op.tag != "release":
            raise IntentkeyTrap(f"the release flow asked for {op.tag!r}, which it never does")
        done, failure = _release_once(pending.store, op.payload)
        if failure is not None:
            pending.last = failure
        step = flow.step(done)


class Releases:
    """The releases a guard runs in the background, each until it ends: for
    a synchronous store, on the process's release threads (at most
    :data:`RELEASE_THREADS`; a release waiting out a pause holds none); for
    an asynchronous one, an ``asyncio`` task each, kept referenced."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._running: Set[Any] = set()  # the tasks
        self._busy = 0  # the releases of a synchronous store not ended yet

    def pending(self) -> int:
        """How many releases are still running (queued, waiting out a pause, or sending)."""
        with self._lock:
            return len(self._running) + self._busy

    def _ended(self, item: Any) -> None:
        with self._lock:
            self._running.discard(item)

    def _sync_ended(self) -> None:
        with self._lock:
            self._busy -= 1
            self._lock.notify_all()

    # -- a synchronous store: the process's queue ------------------------------------------------

    def start_thread(self, rt: b.Runtime, store: Any, request: ReleaseRequest, done: Optional[Done],
                     report: Optional[Report]) -> None:
        """Releases `request` in the background, on the process's release threads."""
        pending = _Pending(_ReleaseFlow(rt, request), store, done, report, self)
        with self._lock:
            self._busy += 1
        _QUEUE.push(time.monotonic(), pending)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits for the releases of a synchronous store (tests, a graceful
        shutdown): whether every one ended within `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._busy:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._lock.wait(left)
            return True

    # -- an asynchronous store: a task each ------------------------------------------------------

    def start_task(self, rt: b.Runtime, release: Callable[[ReleaseRequest], Awaitable[Any]],
                   request: ReleaseRequest, done: Optional[Done], report: Optional[Report],
                   first: Optional["asyncio.Future[Any]"] = None) -> "asyncio.Task[None]":
        """Releases `request` in a task on the running event loop; `first`:
        a call to wait for before the first try (the claim's own insert,
        abandoned at its deadline and still ending)."""

        async def run() -> None:
            try:
                if first is not None and not first.done():
                    await asyncio.wait({first}, timeout=wait_for_insert_s())
                finished, last = await release_async(rt, release, request)
                _settled(finished, last, done, report)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.exception("intentkey: the background release failed")
                report_gave_up(report, StoreError("failed", f"{type(e).__name__}: {e}"))

        task = asyncio.get_running_loop().create_task(run(), name="intentkey-release")
        with self._lock:
            self._running.add(task)
        task.add_done_callback(self._ended)
        return task

    async def wait_async(self, timeout: Optional[float] = None) -> bool:
        """Waits for the releases running as tasks on this loop (tests, a
        graceful shutdown): whether every one ended within `timeout` seconds."""
        loop = asyncio.get_running_loop()
        with self._lock:
            tasks = {t for t in self._running if isinstance(t, asyncio.Task) and t.get_loop() is loop}
        if not tasks:
            return True
        _, pending = await asyncio.wait(tasks, timeout=timeout)
        return not pending


_give_up_s: Optional[float] = None


def wait_for_insert_s() -> float:
    """How long a release waits for the claim's own insert, abandoned at its
    deadline, to end before its first try (seconds): the core's
    ``release-give-up-ms``, how long the release itself is tried."""
    global _give_up_s
    if _give_up_s is None:
        _give_up_s = int(b.runtime("pure").call(b.CLAIMS, "release-give-up-ms")) / 1000
    return _give_up_s


def _settled(finished: Finished, last: Optional[StoreError], done: Optional[Done], report: Optional[Report]) -> None:
    if done is not None:
        try:
            done(finished)
        except Exception:
            log.exception("intentkey: reporting a release failed")
    if finished is Finished.LEFT_IN_FLIGHT:
        report_gave_up(report, last)
