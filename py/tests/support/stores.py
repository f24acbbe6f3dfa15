"""What the store tests share beyond the servers (support/servers.py):
functions run in threads all at once, stores on a fresh MySQL database,
the races every shared store must decide (many contenders for many keys,
many recoverers of one stale record), and the checks of a store that
cannot be reached."""

from __future__ import annotations

import asyncio
import random
import threading
import time
import uuid
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterable, Iterator, List, Sequence, Tuple, TypeVar

import pytest

import intentkey as ik
from intentkey.aio import AsyncGuard
from intentkey.stores import MySQLStore

from .servers import mysql_database, mysql_url

_Arg = TypeVar("_Arg")


def run_threads(work: Callable[[_Arg], None], args: Iterable[_Arg]) -> List[BaseException]:
    """Runs ``work(arg)`` for each of `args`, each in a thread of its own,
    every thread started before any is joined: what they raised (the
    caller asserts it is ``[]``)."""
    errors: List[BaseException] = []

    def guarded(arg: _Arg) -> None:
        try:
            work(arg)
        except BaseException as e:  # pragma: no cover - reported by the caller
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(arg,)) for arg in args]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return errors


@contextmanager
def mysql_stores(n: int, **options: Any) -> Iterator[Tuple[str, List[MySQLStore]]]:
    """(a fresh database, `n` stores on it made with `options`, each with
    connections of its own): the stores are closed afterwards, then the
    database dropped."""
    url = mysql_url()
    with mysql_database() as name:
        stores = [MySQLStore(url, schema=name, **options) for _ in range(n)]
        try:
            yield name, stores
        finally:
            for s in stores:
                s.close()


@contextmanager
def mysql_store(**options: Any) -> Iterator[Tuple[str, MySQLStore]]:
    """(a fresh database, a store on it made with `options`), as :func:`mysql_stores`."""
    with mysql_stores(1, **options) as (name, stores):
        yield name, stores[0]


def assert_unavailable(store: Any, attempt: ik.Attempt, now: int) -> ik.StoreError:
    """`store` (sync) cannot be reached: its ``get`` raises
    ``StoreError("unavailable")`` and a guard's claim of `attempt` at `now`
    raises ``store-unavailable``. The get's error, for the caller's further
    checks."""
    with pytest.raises(ik.StoreError) as e:
        store.get("x")
    assert e.value.kind == "unavailable"
    with pytest.raises(ik.IntentkeyError) as ie:
        ik.Guard(store).claim(attempt, now=now)
    assert ie.value.code == "store-unavailable"
    return e.value


def assert_get_fails(store: Any, kind: str, text: str) -> None:
    """``store.get`` (sync) raises ``StoreError(kind)`` whose message holds
    `text`; the store is closed afterwards."""
    try:
        with pytest.raises(ik.StoreError) as e:
            store.get("x")
        assert e.value.kind == kind and text in e.value.message
    finally:
        store.close()


# -- races every shared store must decide ------------------------------------------------------------------

T = 1_700_000_000
ANSWER = ik.Response.json(201, '{"race": true}')


def _record(key: str, token: str) -> ik.StoredRecord:
    return ik.StoredRecord(key, "fp", "tenant-acme", "pix.send", ik.Status.IN_FLIGHT, token, None, T, None, 0, None)


def race_for_keys(stores: Sequence[Any], keys: Sequence[str]) -> Dict[str, int]:
    """One thread per store (sync), all let go at once, each inserting
    every key of `keys` in an order of its own with a token of its own
    (thread `t`: ``f"{t:032x}"``). Checks that every key has exactly one
    owner, that the record stored under each key is its owner's (read
    through the first store), and that several threads won keys (the race
    was real). The owner thread of each key; prints the time it took."""
    won: Dict[int, List[str]] = {t: [] for t in range(len(stores))}
    barrier = threading.Barrier(len(stores))
    started = [0.0]

    def race(t: int) -> None:
        order = list(keys)
        random.Random(t).shuffle(order)
        token = f"{t:032x}"
        if barrier.wait() == 0:
            started[0] = time.monotonic()
        for k in order:
            if stores[t].insert(_record(k, token)):
                won[t].append(k)

    assert run_threads(race, range(len(stores))) == []
    elapsed = time.monotonic() - started[0]
    owners: Dict[str, int] = {}
    for t, ks in won.items():
        for k in ks:
            assert k not in owners, f"{k} owned by threads {owners[k]} and {t}"
            owners[k] = t
    assert sorted(owners) == sorted(keys)  # exactly one owner per key
    for k, t in owners.items():
        stored = stores[0].get(k)
        assert stored is not None and stored.owner_token == f"{t:032x}", (k, t, stored)  # the owner's, untouched
    assert len(set(owners.values())) > 1  # several threads won keys
    print(f"\n{len(stores)} threads x {len(keys)} keys: {len(keys)} owners, "
          f"{len(stores) * len(keys)} inserts in {elapsed:.2f} s")
    return owners


def threads_recover_one_stale_record(stores: Sequence[Any]) -> None:
    """A record whose owner died, recovered by one thread per store (sync
    guards, let go at once) with a look-up that finds nothing: exactly one
    re-executes it, and the record is that recoverer's."""
    n = len(stores)
    a = ik.Attempt(f"stale-{uuid.uuid4().hex}", "fp-1", "tenant-acme", "pix.send")
    first = ik.Guard(stores[0], stale_after_seconds=60).claim(a, now=T)
    assert first.state is ik.ClaimState.OWNED  # ...and its owner died: the record stays in flight
    barrier = threading.Barrier(n)
    results: List[ik.Recovery] = []

    def recover(s: Any) -> None:
        g = ik.Guard(s, stale_after_seconds=60)
        barrier.wait()
        results.append(g.recover(a.key, lambda k: ik.Absent(), read_your_writes=True, now=T + 61))

    assert run_threads(recover, stores) == [] and len(results) == n
    again = [r for r in results if r.state is ik.RecoveryState.APPLIED and r.action is not None
             and r.action.kind == "re-execute"]
    assert len(again) == 1
    assert all(r.state in (ik.RecoveryState.NOT_DUE, ik.RecoveryState.LOST) for r in results if r not in again)
    current = stores[1 % n].get(a.key)
    assert current is not None and current.owner_token == again[0].owner_token


class Offloaded:
    """A sync store behind coroutines run in threads, so that an AsyncGuard
    has many of its operations in flight at once."""

    def __init__(self, store: Any):
        self.store = store

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)

        async def call(*args: Any) -> Any:
            return await asyncio.to_thread(method, *args)

        return call


def concurrent_recoverers_of_one_stale_record(stores: Sequence[Any]) -> None:
    """A record whose owner died, recovered by one AsyncGuard per store (a
    sync store offloaded to threads, or an async store), every recoverer
    having read the stale record and asked the destination (nothing found)
    before any writes: their fenced replaces race in the store. Exactly one
    applies (re-executes), the others lost; the winner finishes and the
    answer is replayed. Prints the time it took."""
    n = len(stores)
    a = ik.Attempt(f"stale-{uuid.uuid4().hex}", "fp-1", "tenant-acme", "pix.send")
    is_async = [asyncio.iscoroutinefunction(getattr(s, "insert", None)) for s in stores]

    async def main() -> Tuple[List[ik.Recovery], float]:
        # A race of 16 recoverers, not a fault: sync stores offloaded to a
        # shared thread pool queue behind each other (dynalite under load can
        # take seconds), so the store deadline is generous here.
        guards = [AsyncGuard(s if asynchronous else Offloaded(s), stale_after_seconds=60,
                             store_deadline_ms=30_000)
                  for s, asynchronous in zip(stores, is_async)]
        assert (await guards[0].claim(a, now=T)).state is ik.ClaimState.OWNED
        asked = asyncio.Barrier(n)

        async def lookup(k: str) -> ik.Lookup:
            await asked.wait()
            return ik.Absent()

        started = time.monotonic()
        results = list(await asyncio.gather(*(
            g.recover(a.key, lookup, read_your_writes=True, now=T + 61) for g in guards)))
        elapsed = time.monotonic() - started
        winner = next(r for r in results if r.state is ik.RecoveryState.APPLIED)
        g = guards[2 % n]
        assert await g.finish(a.key, winner.owner_token, ik.Answered(ANSWER), now=T + 62) is ik.Finished.STORED
        assert (await g.claim(a, now=T + 63)).response == ANSWER
        return results, elapsed

    results, elapsed = asyncio.run(main())
    states = sorted(r.state.value for r in results)
    assert states == ["applied"] + ["lost"] * (n - 1)
    winner = next(r for r in results if r.state is ik.RecoveryState.APPLIED)
    assert winner.action is not None and winner.action.kind == "re-execute"
    print(f"\n{n} concurrent recoverers of one stale record: 1 re-execution, {n - 1} lost, in {elapsed:.3f} s")
