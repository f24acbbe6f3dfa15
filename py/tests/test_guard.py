"""The core's claim flow from Python: a MemoryStore served to the component's
``store`` import, driven through :class:`intentkey.Guard`; and the serve flow
(:meth:`intentkey.http.Endpoint.serve`) over it."""

from __future__ import annotations

from typing import Any, Callable, List


import pytest

import intentkey
from intentkey import _binding as b
from intentkey import (
    Absent, Answered, Attempt, ClaimState, Failed, Finished, Found, Guard, IntentkeyError, MemoryStore, RecoveryState,
    Reply, Response, Status, StoreError, Unknown,
)
from intentkey.http import Endpoint, Raised, Request, ServePath

T0 = 1_700_000_000


def ok(body: str = "{}", status: int = 201, headers: Any = ()) -> Answered:
    return Answered(Response.json(status, body, tuple(headers)))


class TestGuard:
    def setup_method(self) -> None:
        self.store = MemoryStore()
        self.guard = Guard(self.store)

    def claim(self, key: str = "k1", fp: str = "fp", now: int = T0) -> Any:
        return self.guard.claim(Attempt(key, fp, "tenant-1", "pix.send"), now=now)

    def test_a_repeat_replays_the_stored_answer_with_its_headers(self) -> None:
        first = self.claim()
        assert first.state is ClaimState.OWNED
        assert len(first.owner_token) == 32
        located = ok('{"id":"pay_1"}', headers=[("Location", "/payments/1")])
        assert self.guard.finish("k1", first.owner_token, located, now=T0 + 1) is Finished.STORED
        again = self.claim(now=T0 + 2)
        assert again.state is ClaimState.DONE
        assert (again.response.status, again.response.body) == (201, b'{"id":"pay_1"}')
        assert list(again.response.headers) == [("Location", "/payments/1")]

    def test_a_concurrent_repeat_and_another_payload(self) -> None:
        self.claim()
        assert self.claim(now=T0 + 1).state is ClaimState.IN_FLIGHT
        assert self.claim(fp="other", now=T0 + 1).state is ClaimState.PAYLOAD_CONFLICT

    def test_outcome_classes(self) -> None:
        token = self.claim().owner_token
        assert self.guard.finish("k1", token, ok(status=429), now=T0) is Finished.RELEASED
        assert self.store.records == {}
        again = self.claim(now=T0 + 1)
        assert again.state is ClaimState.OWNED, "a released claim lets the retry run"
        assert self.guard.finish("k1", again.owner_token, Failed(), now=T0 + 1) is Finished.LEFT_IN_FLIGHT
        assert self.claim(now=T0 + 2).state is ClaimState.IN_FLIGHT

    def test_only_the_owner_finishes_and_a_late_owner_is_superseded(self) -> None:
        owner = self.claim().owner_token
        assert self.guard.finish("k1", "f" * 32, ok(), now=T0) is Finished.SUPERSEDED
        asks: List[str] = []

        def absent(key: str) -> Absent:
            asks.append(key)
            return Absent()

        recovery = self.guard.recover("k1", absent, read_your_writes=True, now=T0 + 10)
        assert recovery.state is RecoveryState.NOT_DUE, "a fresh claim is left to its owner"
        assert asks == []
        recovery = self.guard.recover("k1", absent, read_your_writes=True, now=T0 + 300)
        assert recovery.state is RecoveryState.APPLIED
        assert recovery.action is not None and recovery.action.kind == "re-execute"
        assert asks == ["k1"]
        again = self.guard.recover("k1", absent, read_your_writes=True, now=T0 + 300)
        assert again.state is RecoveryState.NOT_DUE, "the take-over restarted the claim's clock"
        assert self.guard.finish("k1", recovery.owner_token, ok('{"by":"recoverer"}'), now=T0 + 301) is Finished.STORED
        assert self.guard.finish("k1", owner, ok('{"by":"late owner"}'), now=T0 + 302) is Finished.SUPERSEDED
        assert self.store.records["k1"].response.body == b'{"by":"recoverer"}'

    def test_unknown_never_re_executes(self) -> None:
        self.claim()
        now = T0 + 300
        kinds = []
        for _ in range(5):
            recovery = self.guard.recover("k1", lambda key: Unknown(), read_your_writes=True, now=now)
            if recovery.state is not RecoveryState.APPLIED:
                break
            assert recovery.action is not None
            kinds.append(recovery.action.kind)
            if recovery.action.kind == "check-later":
                assert recovery.action.next_lookup_at is not None
                now = recovery.action.next_lookup_at
        assert kinds == ["check-later", "check-later", "check-later", "reconcile"]
        assert self.store.records["k1"].status is Status.NEEDS_RECONCILIATION

    def test_found_is_recorded_and_purged_after_its_ttl(self) -> None:
        self.claim()
        found = Found(Response.json(201, '{"id":"pay_9"}'))
        recovery = self.guard.recover("k1", lambda key: found, now=T0 + 300)
        assert recovery.action is not None and recovery.action.kind == "record-done"
        ttl = intentkey.default_rules().ttl_seconds
        assert ttl == 86_400
        assert self.guard.purge(now=T0 + 300 + ttl - 1) == 0
        assert self.guard.purge(now=T0 + 300 + ttl) == 1


class Flaky:
    """A store whose `fail` operations raise a store error; the others go to
    a memory store in an instance of its own (the guard calls this one
    through the `store` import)."""

    def __init__(self, fail: Any = (), kind: str = "unavailable") -> None:
        self.inner = MemoryStore(_runtime=b.Runtime())
        self.fail, self.kind = set(fail), kind

    def __getattr__(self, name: str) -> Any:
        if name in self.fail:
            def down(*_args: Any) -> Any:
                raise StoreError(self.kind, "down")
            return down
        return getattr(self.inner, name)

    @property
    def records(self) -> Any:
        return self.inner.records


class TestServe:
    """Endpoint.serve: the core's serve flow, the handler and the pauses run from Python."""

    def serve(self, guard: Guard, handler: Callable[[str], Any], now: int = T0, key: str = "k-1",
              sleep: Callable[[float], Any] = lambda _s: None) -> Any:
        endpoint = Endpoint(secret=b"s" * 32, profile="stripe")
        request = Request("tenant-1", "POST", "/orders", [key], "application/json", b'{"a":1}')
        return endpoint.serve(guard, request, handler, now=now, sleep=sleep)

    def test_the_handler_runs_once_and_its_answer_is_replayed(self) -> None:
        guard = Guard(MemoryStore())
        calls = []

        def handler(key: str) -> Reply:
            calls.append(key)
            return Reply(201, (("Content-Type", "application/json"), ("Location", "/orders/1")), b'{"id":1}')

        first = self.serve(guard, handler)
        assert (first.path, first.reply, first.finished, first.ran) == (ServePath.HANDLER, None, Finished.STORED, True)
        assert first.handler_reply.status == 201
        again = self.serve(guard, handler, now=T0 + 1)
        assert (again.path, again.ran, again.reply.status, again.reply.body) == (ServePath.REPLAY, False, 201, b'{"id":1}')
        assert again.reply.header("Location") == "/orders/1"
        assert len(calls) == 1

    def test_a_handler_exception_leaves_the_record_in_flight(self) -> None:
        guard = Guard(MemoryStore())
        boom = RuntimeError("boom")

        def handler(_key: str) -> Reply:
            raise boom

        served = self.serve(guard, handler)
        assert (served.path, served.reply.status, served.finished) == (ServePath.FAILED, 500, Finished.LEFT_IN_FLIGHT)
        assert served.handler_error is boom
        assert b"boom" not in served.reply.body
        assert self.serve(guard, handler, now=T0 + 1).reply.status == 409

    def test_a_raised_client_error_releases_the_claim(self) -> None:
        guard = Guard(MemoryStore())
        served = self.serve(guard, lambda _key: Raised(400))
        assert (served.path, served.reply, served.finished) == (ServePath.RELEASED, None, Finished.RELEASED)
        assert guard.store.records == {}  # type: ignore[attr-defined]

    def test_a_claim_the_store_fails_runs_nothing_and_is_reported(self) -> None:
        ran: List[str] = []
        served = self.serve(Guard(Flaky({"insert"}, "failed")), lambda key: ran.append(key))  # type: ignore[func-returns-value]
        assert (served.path, served.reply.status, served.ran) == (ServePath.UNAVAILABLE, 500, False)
        assert (served.claim_failure.kind, served.claim_failure.message) == ("failed", "down")
        assert ran == []

    def test_a_completion_the_store_cannot_take_is_tried_again_after_the_core_s_pauses(self) -> None:
        store = Flaky({"complete"})
        slept: List[float] = []
        served = self.serve(Guard(store), lambda _key: Reply(201, (), b"{}"), sleep=slept.append)
        assert (served.path, served.finished) == (ServePath.HANDLER, None)
        assert served.finish_retries > 0
        assert len(slept) == served.finish_retries
        assert all(s > 0 for s in slept)
        assert [(f.kind, f.message) for f in served.finish_failures] == [("unavailable", "down")] * (served.finish_retries + 1)
        assert [r.status for r in store.records.values()] == [Status.IN_FLIGHT]

    def test_a_handler_must_answer_a_reply_or_raised(self) -> None:
        guard = Guard(MemoryStore())
        served = self.serve(guard, lambda _key: "ok")
        assert isinstance(served.handler_error, IntentkeyError)
        assert (served.handler_error.code, served.handler_error.field) == ("invalid-argument", "handler")
        # Refused as a failure: nothing is stored as an answer, the record stays in flight.
        assert (served.path, served.reply.status, served.finished) == (ServePath.FAILED, 500, Finished.LEFT_IN_FLIGHT)
        assert [r.status for r in guard.store.records.values()] == [Status.IN_FLIGHT]  # type: ignore[attr-defined]


def test_a_sync_guard_refuses_an_asynchronous_store() -> None:
    from intentkey.aio import AsyncMemoryStore

    with pytest.raises(intentkey.IntentkeyError) as e:
        intentkey.Guard(AsyncMemoryStore())  # type: ignore[arg-type]
    assert (e.value.code, e.value.field) == ("invalid-argument", "store")

    with pytest.raises(intentkey.IntentkeyError) as e:
        class Sub(intentkey.MemoryStore):  # its records are in the component: wrap one instead
            pass
    assert (e.value.code, e.value.field) == ("invalid-argument", "store")

    class Sneaky:
        def __init__(self) -> None:
            self.inner = intentkey.MemoryStore(_runtime=b.Runtime())
            self.insert, self.get = self.inner.insert, self.inner.get

        @property
        def records(self) -> Any:
            return self.inner.records

        async def complete(self, completion: Any) -> bool:
            return True  # a coroutine is truthy: it must never count as written

    guard = intentkey.Guard(Sneaky())  # type: ignore[arg-type]
    attempt = intentkey.Attempt("k-sneaky", "fp", "t", "a")
    claim = guard.claim(attempt, now=1_700_000_000)
    with pytest.raises(intentkey.IntentkeyError):
        guard.finish("k-sneaky", claim.owner_token, intentkey.Answered(intentkey.Response.json(201, "{}")),
                     now=1_700_000_001)
    assert guard.store.records["k-sneaky"].status is intentkey.Status.IN_FLIGHT


def test_integers_are_never_wrapped() -> None:
    with pytest.raises(intentkey.IntentkeyError) as e:
        intentkey.Guard(intentkey.MemoryStore(), release_statuses=[70000])
    assert e.value.field == "release_statuses"
    with pytest.raises(intentkey.IntentkeyError) as e:
        intentkey.http.Endpoint(secret=b"s" * 32, retry_after_seconds=2**32 + 5)
    assert e.value.field == "retry_after_seconds"
    with pytest.raises(intentkey.IntentkeyError) as e:
        intentkey.Guard(intentkey.MemoryStore()).due(limit=2**32 + 1, now=1)
    assert e.value.field == "limit"
    guard = intentkey.Guard(intentkey.MemoryStore())
    claim = guard.claim(intentkey.Attempt("k-int", "fp", "t", "a"), now=1)
    with pytest.raises(intentkey.IntentkeyError) as e:
        guard.finish("k-int", claim.owner_token, intentkey.Answered(intentkey.Response(70_000, b"")), now=2)
    assert e.value.field == "status"


def test_a_closed_keyer_is_closed() -> None:
    keyer = intentkey.Keyer(secret=b"c" * 32)
    key = keyer.intent_key("t", "i")
    keyer.close()
    with pytest.raises(intentkey.IntentkeyError) as e:
        keyer.intent_key("t", "i")
    assert e.value.code == "invalid-argument" and "closed" in e.value.message
    assert intentkey.Keyer(secret=b"c" * 32).intent_key("t", "i") == key


def test_a_request_of_the_wrong_shape_is_refused_by_name() -> None:
    endpoint = intentkey.http.Endpoint(secret=b"s" * 32)
    guard = intentkey.Guard(intentkey.MemoryStore())
    for request, field in (
        (intentkey.http.Request("t", "POST", "/x", "abc", None, b""), "key_values"),  # type: ignore[arg-type]
        (intentkey.http.Request("t", "POST", "/x", ["k"], None, 5), "body"),  # type: ignore[arg-type]
        (intentkey.http.Request("t", "POST", "/x", ["k"], 7, b""), "content_type"),  # type: ignore[arg-type]
    ):
        with pytest.raises(intentkey.IntentkeyError) as e:
            endpoint.serve(guard, request, lambda key: intentkey.Reply(200))
        assert (e.value.code, e.value.field) == ("invalid-argument", field)
    assert guard.store.records == {}


def _side_store() -> Any:
    """A store the guard performs through the `store` import: a MemoryStore
    in an instance of its own behind the Store protocol."""
    return Flaky()


@pytest.mark.parametrize("make_store", [MemoryStore, _side_store], ids=["in-guest", "through-import"])
def test_claim_intent_is_intent_attempt_then_claim(make_store: Callable[[], Any]) -> None:
    keyer = intentkey.Keyer(secret=b"c" * 32)
    guard = Guard(make_store())
    payload = {"amount": "10.00", "currency": "BRL", "creditor_key": "+5511999990000"}
    expected = keyer.intent_attempt("tenant-acme", "pix.send", payload, T0, intent_id="intent-1")
    key, claim = guard.claim_intent(keyer, "tenant-acme", "pix.send", payload, T0, intent_id="intent-1", now=T0)
    assert key == expected.key and claim.state is ClaimState.OWNED and claim.owner_token
    assert guard.claim_intent(keyer, "tenant-acme", "pix.send", payload, T0, intent_id="intent-1",
                              now=T0 + 1)[1].state is ClaimState.IN_FLIGHT
    assert guard.finish(key, claim.owner_token, Answered(Response.json(201, '{"id":7}')), now=T0 + 2) is Finished.STORED
    again = guard.claim_intent(keyer, "tenant-acme", "pix.send", payload, T0, intent_id="intent-1", now=T0 + 3)
    assert again[0] == key and again[1].state is ClaimState.DONE
    assert again[1].response == Response.json(201, '{"id":7}')
    other = dict(payload, amount="11.00")  # the same recorded intent with another payload: 422
    conflict = guard.claim_intent(keyer, "tenant-acme", "pix.send", other, T0, intent_id="intent-1", now=T0 + 4)
    assert conflict[0] == key and conflict[1].state is ClaimState.PAYLOAD_CONFLICT
    with pytest.raises(intentkey.IntentkeyError) as e:
        guard.claim_intent(keyer, "", "pix.send", payload, T0, now=T0)
    assert e.value.field == "tenant_id"


def test_a_memory_store_whose_instance_was_discarded_says_so() -> None:
    store = MemoryStore()
    guard = Guard(store)
    guard.claim(intentkey.Attempt("k-lost", "fp", "t", "a"), now=T0)
    b.runtime()._discard()  # what a trap in any call does
    with pytest.raises(intentkey.IntentkeyTrap, match="records were in an instance discarded"):
        guard.claim(intentkey.Attempt("k-lost", "fp", "t", "a"), now=T0 + 1)
    with pytest.raises(intentkey.IntentkeyTrap):
        store.records
    assert Guard(MemoryStore()).claim(intentkey.Attempt("k-lost", "fp", "t", "a"), now=T0).state is ClaimState.OWNED


def test_a_delivery_found_in_flight_does_what_the_core_says() -> None:
    from intentkey.claims import Delivery, in_flight_delivery
    from intentkey.types import Recovery, RecoveryAction

    running = "in flight (another delivery may still be running it)"
    unknown = "in flight and the destination could not tell whether it ran"
    moving = "changing hands (recovered or released meanwhile)"
    cases = [
        (None, Delivery(T0 + 1, moving)),
        (Recovery(RecoveryState.NOT_DUE, "", due_at=T0 + 300), Delivery(T0 + 300, running)),
        (Recovery(RecoveryState.NOT_DUE, "", due_at=T0 - 9), Delivery(T0, running)),
        (Recovery(RecoveryState.APPLIED, "t", action=RecoveryAction("check-later", lookups=2, next_lookup_at=T0 + 60)),
         Delivery(T0 + 60, unknown)),
        (Recovery(RecoveryState.APPLIED, "t", action=RecoveryAction("reconcile", lookups=9)), Delivery(None)),
        (Recovery(RecoveryState.NOT_IN_FLIGHT, "", status=Status.NEEDS_RECONCILIATION), Delivery(None)),
        (Recovery(RecoveryState.NOT_IN_FLIGHT, "", status=Status.DONE), Delivery(T0 + 1, moving)),
        (Recovery(RecoveryState.LOST, "", action=RecoveryAction("record-done", response=Response.json(201, "{}"))),
         Delivery(T0 + 1, moving)),
        (Recovery(RecoveryState.MISSING, ""), Delivery(T0 + 1, moving)),
    ]
    for recovery, expected in cases:
        assert in_flight_delivery(recovery, T0) == expected, recovery
