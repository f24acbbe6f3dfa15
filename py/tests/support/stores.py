"""What the store tests share beyond the servers (support/servers.py):
functions run in threads all at once, stores on a fresh MySQL database,
and the checks of a store that cannot be reached."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, List, Tuple, TypeVar

import pytest

import intentkey as ik
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
