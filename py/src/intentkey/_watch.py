"""Waiting for the first attempt: the host's side of the core's op ``watch``.

A retry that finds its key in flight may wait for the first attempt's answer
(``wait_max_ms``). Everything about that wait is the core's: the intervals
(50 ms doubling to 1 s, with jitter), the budget, claiming again after each
watch, the 409 once the budget is spent. The host only waits: it returns
when the store says the record changed, or when the interval is over, and
tells the core how long it waited (measured with :func:`time.monotonic`).

Stores that can say so carry a :class:`Changes`: an in-process notifier
keyed by record key, fed by the store's own writes (the memory and SQL
stores) and, for :class:`~intentkey.stores.postgres.AsyncPostgresStore` and
:class:`~intentkey.stores.redis.AsyncRedisStore`, by a listener that hears
the writes of other processes (``LISTEN``, ``SSUBSCRIBE``). Any other store
is polled: the host sleeps each interval (a store of the public protocol may
also have ``watch(key, ms)``, which is called instead).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional

from . import _binding as b

__all__ = ["Changes", "changes_of", "check_wait_max_ms", "elapsed_ms", "notify", "watch_async",
           "watch_sync"]

_U32_MAX = (1 << 32) - 1


def check_wait_max_ms(value: Any, name: str = "wait_max_ms") -> int:
    """`value` as a wait budget: a whole number of milliseconds, checked by
    the core's ``check-wait-max-ms`` (0, no wait, to 60000); anything else is
    ``invalid-argument`` naming `name`."""
    ms = b.uint(name, value, 32)
    return int(b.unwrap(b.runtime("pure").call(b.FLOWS, "check-wait-max-ms", name, ms)))


def _settle(future: "asyncio.Future[None]") -> None:
    if not future.done():
        future.set_result(None)


class Changes:
    """Record changes heard in this process, keyed by record key: waiters
    (threads or coroutines, on any event loop) wait on a key; a store's
    write, or its listener, notifies it. Thread-safe; a coroutine's wake-up
    goes through its loop's ``call_soon_threadsafe``.

    A wait given ``since`` (a :func:`time.monotonic` time) returns at once
    when the key was notified after it: the notification came between the
    claim that found the record in flight and the wait."""

    #: How many keys' last notification times are kept (the oldest go first).
    KEEP = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: Dict[str, List[Callable[[], None]]] = {}
        self._last: "OrderedDict[str, float]" = OrderedDict()
        self._all_at = float("-inf")

    def notify(self, key: str) -> None:
        """Record `key` changed: its waiters return."""
        at = time.monotonic()
        with self._lock:
            self._last[key] = at
            self._last.move_to_end(key)
            while len(self._last) > self.KEEP:
                self._last.popitem(last=False)
            wakes = self._waiters.pop(key, None)
        for wake in wakes or ():
            wake()

    def notify_all(self) -> None:
        """Anything may have changed (a listener (re)connected and cannot
        tell what it missed): every waiter returns and looks again."""
        with self._lock:
            self._all_at = time.monotonic()
            waiters, self._waiters = self._waiters, {}
        for wakes in waiters.values():
            for wake in wakes:
                wake()

    def waiting(self) -> int:
        """How many waits are in progress (for tests and metrics)."""
        with self._lock:
            return sum(len(w) for w in self._waiters.values())

    def _add(self, key: str, wake: Callable[[], None], since: Optional[float]) -> bool:
        with self._lock:
            if since is not None and (self._all_at > since or self._last.get(key, float("-inf")) > since):
                return False
            self._waiters.setdefault(key, []).append(wake)
            return True

    def _remove(self, key: str, wake: Callable[[], None]) -> None:
        with self._lock:
            wakes = self._waiters.get(key)
            if wakes is not None:
                try:
                    wakes.remove(wake)
                except ValueError:
                    pass
                if not wakes:
                    del self._waiters[key]

    def wait(self, key: str, seconds: float, since: Optional[float] = None) -> bool:
        """Blocks until `key` is notified or `seconds` pass: whether it was notified."""
        event = threading.Event()
        wake = event.set
        if not self._add(key, wake, since):
            return True
        try:
            return event.wait(max(seconds, 0.0))
        finally:
            self._remove(key, wake)

    async def wait_async(self, key: str, seconds: float, since: Optional[float] = None) -> bool:
        """:meth:`wait` for a coroutine."""
        loop = asyncio.get_running_loop()
        future: "asyncio.Future[None]" = loop.create_future()

        def wake() -> None:
            try:
                loop.call_soon_threadsafe(_settle, future)
            except RuntimeError:  # its loop is closed: nobody waits any more
                pass

        if not self._add(key, wake, since):
            return True
        try:
            done, _ = await asyncio.wait({future}, timeout=max(seconds, 0.0))
            return bool(done)
        finally:
            self._remove(key, wake)
            if not future.done():
                future.cancel()


def changes_of(store: Any) -> Optional[Changes]:
    """The in-process notifier of `store`, when it has one."""
    changes = getattr(store, "_changes", None)
    return changes if isinstance(changes, Changes) else None


def elapsed_ms(started: float) -> int:
    """Milliseconds since `started` (a :func:`time.monotonic` time), as the core's u32."""
    return min(max(int((time.monotonic() - started) * 1000), 0), _U32_MAX)


def watch_sync(store: Any, key: str, ms: int, since: Optional[float],
               sleep: Callable[[float], Any] = time.sleep) -> int:
    """Waits as op ``watch`` asks, in this thread: until `store` says record
    `key` changed, or `ms` milliseconds. How long it waited, in milliseconds."""
    started = time.monotonic()
    changes = changes_of(store)
    if changes is not None:
        changes.wait(key, ms / 1000, since)
    else:
        own = getattr(store, "watch", None)
        if callable(own) and not inspect.iscoroutinefunction(own):
            own(key, ms)
        else:
            sleep(ms / 1000)
    return elapsed_ms(started)


async def watch_async(store: Any, key: str, ms: int, since: Optional[float]) -> int:
    """:func:`watch_sync` on the event loop (``asyncio.sleep`` when the store
    cannot tell); a store with a listener starts it first (``_wake_ready``)."""
    started = time.monotonic()
    changes = changes_of(store)
    if changes is not None:
        ready = getattr(store, "_wake_ready", None)
        if callable(ready):
            await ready()
        await changes.wait_async(key, ms / 1000, since)
    else:
        own = getattr(store, "watch", None)
        if callable(own):
            value = own(key, ms)
            if inspect.isawaitable(value):
                await value
        else:
            await asyncio.sleep(ms / 1000)
    return elapsed_ms(started)


def notify(store: Any, key: str) -> None:
    """Wakes the waiters of record `key` in this process, when `store` has a notifier."""
    changes = changes_of(store)
    if changes is not None:
        changes.notify(key)
