"""The journal: steps recorded once per run and replayed; concurrent attempts
of one step never both run it; failures follow the outcome classes; outputs
are bounded; tool calls are keyed by the run and the validated arguments
(never the model's text or its tool_call_id) and settled by the destination
when left in flight. Sync (Guard over MemoryStore) and async (AsyncGuard)."""

import asyncio
import hashlib
import hmac

import pytest

import intentkey
from intentkey.aio import AsyncGuard, AsyncMemoryStore
from intentkey.journal import AsyncJournal, Journal, JournalEvent, StepInFlight

T0 = 1_700_000_000
SECRET = "4b" * 32
RUN = intentkey.Run("acme", "run-42", T0)
OTHER_RUN = intentkey.Run("acme", "run-43", T0)
TOOL_POLICY = {
    "version": 1,
    "actionTypes": ["pix.send"],
    "fields": {
        "amount": {"class": "key", "normalizer": "decimal", "scale": 2},
        "currency": {"class": "key", "normalizer": "currency"},
        "pix_key": {"class": "key", "normalizer": "pix-key"},
        "remittance": {"class": "ignored"},
    },
}


class Clock:
    def __init__(self, t=T0):
        self.t = t

    def __call__(self):
        return self.t


class Crash(BaseException):
    """The process dies here: nothing after it runs (no release, no completion)."""


@pytest.fixture(scope="module")
def keyer():
    return intentkey.Keyer(secret=SECRET, policy=TOOL_POLICY)


def journal(store, keyer, clock=None, run=RUN, stale=None, events=None, **kw):
    guard = intentkey.Guard(store, clock=clock or Clock(), stale_after_seconds=stale)
    return Journal(guard, keyer, run=run, observe=None if events is None else events.append, **kw)


class Destination:
    """A payment destination that counts effects per key and answers look-ups from them."""

    def __init__(self):
        self.paid = {}

    def pay(self, key, amount="150.00"):
        self.paid[key] = self.paid.get(key, 0) + 1
        return {"payment": f"pay_{key[:8]}", "amount": amount}

    def lookup(self, key):
        return {"found": {"payment": f"pay_{key[:8]}", "recovered": True}} if key in self.paid else "absent"


def call_args(remittance, amount="150.00"):
    return {"amount": amount, "currency": "brl", "pix_key": "Ana@Example.com", "remittance": remittance}


def test_journal_keys_are_the_hmac_of_the_documented_material(keyer):
    def mac(material):
        return hmac.new(bytes.fromhex(SECRET), material.encode(), hashlib.sha256).hexdigest()

    step = keyer.step_attempt(RUN, "plan", {"b": 1, "a": [True, None]})
    assert step.key == mac('["intentkey/step/v1","acme","run-42","plan"]')
    assert step.fingerprint == mac('["intentkey/step-input/v1","acme","run-42","plan",{"a":[true,null],"b":1}]')
    assert step.action_type == "step:plan"
    call = keyer.tool_call_attempt(RUN, "pix.send", {"amount": "150", "currency": "brl", "pix_key": "Ana@Example.com",
                                                      "remittance": "Rent"})
    assert call.key == mac('["intentkey/tool-call/v1","acme","pix.send","run-42",'
                           '{"amount":"150.00","currency":"BRL","pix_key":"ana@example.com"}]')


def test_a_step_runs_once_per_run_and_name_and_every_later_attempt_replays_it(keyer):
    store = intentkey.MemoryStore()
    events = []
    j = journal(store, keyer, events=events)
    calls = []

    def sample():
        calls.append(1)
        return {"text": f"sample {len(calls)}", "at": len(calls)}

    first = j.step("plan", sample, input={"prompt": "pay rent"})
    again = j.step("plan", sample, input={"prompt": "pay rent"})
    assert first == {"text": "sample 1", "at": 1}
    assert again == first
    assert len(calls) == 1
    # Another run, another step name: their own outputs.
    assert journal(store, keyer, run=OTHER_RUN, events=events).step("plan", sample, input={"prompt": "pay rent"}) == {
        "text": "sample 2", "at": 2}
    assert j.step("answer", sample) == {"text": "sample 3", "at": 3}
    assert [e.outcome for e in events] == ["ran", "replayed", "ran", "ran"]
    assert events[0] == JournalEvent("step", "plan", keyer.step_attempt(RUN, "plan", {"prompt": "pay rent"}).key, "ran")
    # A new journal on the same store (a resumed process) replays too.
    assert journal(store, keyer).step("plan", sample, input={"prompt": "pay rent"}) == first
    # The same name asked something else: refused, never the wrong output.
    with pytest.raises(intentkey.IntentkeyError) as e:
        j.step("plan", sample, input={"prompt": "pay twice"})
    assert e.value.code == "step-input-changed"
    assert len(calls) == 3


def test_concurrent_attempts_of_one_step_never_both_run_it(keyer):
    store = intentkey.MemoryStore()
    a, b = journal(store, keyer, stale=60), journal(store, keyer, stale=60)
    calls = []
    seen = {}

    def second():
        calls.append("second")
        return {"by": "second"}

    def slow():
        calls.append("first")
        # While the first attempt runs, a second one asks for the same step.
        with pytest.raises(StepInFlight) as e:
            b.step("plan", second)
        seen["error"] = e.value
        return {"by": "first"}

    assert a.step("plan", slow) == {"by": "first"}
    err = seen["error"]
    assert isinstance(err, intentkey.IntentkeyError) and err.code == "step-in-flight"
    assert err.due_at == T0 + 60
    assert b.step("plan", second) == {"by": "first"}
    assert calls == ["first"]


def test_a_step_that_raises_records_nothing_and_a_retry_asks_again(keyer):
    j = journal(intentkey.MemoryStore(), keyer)
    boom = TimeoutError("model timed out")

    def fail():
        raise boom

    with pytest.raises(TimeoutError) as e:
        j.step("plan", fail)
    assert e.value is boom
    assert j.step("plan", lambda: {"ok": True}) == {"ok": True}


def test_a_step_left_in_flight_by_a_crash_is_taken_over_once_stale_not_before(keyer):
    store = intentkey.MemoryStore()
    clock = Clock()
    crashed = journal(store, keyer, clock=clock, stale=60)

    def dies():
        raise Crash()

    with pytest.raises(Crash):
        crashed.step("plan", dies)
    [record] = store.records.values()
    assert record.status is intentkey.Status.IN_FLIGHT

    events = []
    resumed = journal(store, keyer, clock=clock, stale=60, events=events)
    calls = []

    def fn():
        calls.append(1)
        return {"sample": len(calls)}

    clock.t = T0 + 30
    with pytest.raises(StepInFlight) as e:
        resumed.step("plan", fn)
    assert e.value.code == "step-in-flight" and e.value.due_at == T0 + 60
    assert calls == [], "not stale yet: not run"
    clock.t = T0 + 61
    assert resumed.step("plan", fn) == {"sample": 1}
    assert resumed.step("plan", fn) == {"sample": 1}, "recorded by the takeover"
    assert calls == [1]
    assert [e.outcome for e in events] == ["recovered", "replayed"]


def test_outputs_are_bounded_json_with_errors_naming_the_step_and_the_claim_is_released(keyer):
    j = journal(intentkey.MemoryStore(), keyer, max_output_bytes=1024)

    def code_of(fn, name="draft", journal_=j):
        with pytest.raises(intentkey.IntentkeyError) as e:
            journal_.step(name, fn)
        return e.value

    too_large = code_of(lambda: "x" * 2000)
    assert too_large.code == "step-output-too-large", too_large
    assert "`draft`" in too_large.message and "2002 bytes" in too_large.message
    assert code_of(lambda: object()).code == "invalid-step-output"
    assert code_of(lambda: float("nan")).code == "invalid-step-output"
    assert code_of(lambda: {1j: 2}).code == "invalid-step-output"
    assert j.step("draft", lambda: "short") == "short", "every refusal released the claim"
    assert code_of(lambda: 1, name="").code == "invalid-step-name"
    bad_run = journal(intentkey.MemoryStore(), keyer, run=intentkey.Run("acme", "", T0))
    assert code_of(lambda: 1, name="x", journal_=bad_run).code == "invalid-intent-id"
    with pytest.raises(intentkey.IntentkeyError) as e:
        j.step("draft2", lambda: 1, input={"x": object()})
    assert e.value.code == "invalid-json" and e.value.field == "input"


def test_journal_options_are_checked(keyer):
    guard = intentkey.Guard(intentkey.MemoryStore())
    for kwargs, field in [
        ({"max_output_bytes": -1}, "max_output_bytes"),
        ({"max_output_bytes": True}, "max_output_bytes"),
        ({"observe": 3}, "observe"),
    ]:
        with pytest.raises(intentkey.IntentkeyError) as e:
            Journal(guard, keyer, run=RUN, **kwargs)
        assert (e.value.code, e.value.field) == ("invalid-argument", field)
    with pytest.raises(intentkey.IntentkeyError) as e:
        Journal(AsyncGuard(AsyncMemoryStore()), keyer, run=RUN)
    assert e.value.field == "guard" and "AsyncJournal" in e.value.message
    with pytest.raises(intentkey.IntentkeyError) as e:
        Journal(guard, keyer, run=("acme", "r", T0))
    assert e.value.field == "run"
    with pytest.raises(intentkey.IntentkeyError) as e:
        Journal(guard, keyer, run=RUN, max_output=3)
    assert (e.value.code, e.value.field) == ("invalid-argument", "max_output")
    with pytest.raises(intentkey.IntentkeyError) as e:
        Journal(guard, keyer, run=RUN).step("x", "not a function")
    assert e.value.field == "fn"
    with pytest.raises(intentkey.IntentkeyError) as e:
        guard.run(intentkey.Attempt("k", "f", "t", "a"), lambda k: intentkey.Response.json(200, "{}"), kind="job")
    assert (e.value.code, e.value.field) == ("invalid-argument", "kind")


def test_tool_calls_are_keyed_by_the_arguments_never_the_text_or_the_tool_call_id(keyer):
    store = intentkey.MemoryStore()
    dest = Destination()
    events = []
    j = journal(store, keyer, events=events)
    # Two samples of the model proposing the same payment: other tool_call_id,
    # other text, other spelling of the amount. The id never reaches the journal.
    samples = [
        {"id": "call_a1", "arguments": call_args("Rent for March")},
        {"id": "call_b2", "arguments": call_args("march rent :)", "150")},
    ]
    results = [j.tool_call("pix.send", s["arguments"], lambda key, s=s: dest.pay(key, s["arguments"]["amount"]))
               for s in samples]
    assert results[1] == results[0] == {"payment": results[0]["payment"], "amount": "150.00"}
    assert list(dest.paid.values()) == [1]
    assert [e.outcome for e in events] == ["ran", "replayed"]
    assert events[0].kind == "tool-call" and events[0].name == "pix.send"
    # The key the effect got is the tool-call attempt's key.
    [key] = dest.paid
    assert key == keyer.tool_call_attempt(RUN, "pix.send", call_args("anything")).key

    journal(store, keyer, run=OTHER_RUN).tool_call("pix.send", call_args("Rent for March"), dest.pay)
    assert len(dest.paid) == 2, "two runs never collide"
    j.tool_call("pix.send", call_args("Rent for March", "151"), dest.pay)
    assert len(dest.paid) == 3, "another amount is another action"

    with pytest.raises(intentkey.IntentkeyError) as e:
        j.tool_call("pix.send", {**call_args("x"), "tool_call_id": "call_1"}, dest.pay)
    assert e.value.code == "unclassified-fields" and "tool_call_id" in str(e.value)
    with pytest.raises(intentkey.IntentkeyError) as e:
        j.tool_call("wire.send", call_args("x"), dest.pay)
    assert e.value.code == "unknown-action-type"
    assert len(dest.paid) == 3


def test_a_tool_call_left_in_flight_is_settled_by_the_destination(keyer):
    store = intentkey.MemoryStore()
    clock = Clock()
    dest = Destination()
    args = {"amount": "10", "currency": "BRL", "pix_key": "a@b.c", "remittance": "r"}

    # Crash after the effect, before the completion: the effect happened, the record is in flight.
    def pay_and_die(key):
        dest.pay(key)
        raise Crash()

    with pytest.raises(Crash):
        journal(store, keyer, clock=clock).tool_call("pix.send", args, pay_and_die)
    assert list(dest.paid.values()) == [1]

    events = []
    resumed = journal(store, keyer, clock=clock, stale=60, events=events)
    with pytest.raises(StepInFlight) as e:
        resumed.tool_call("pix.send", args, dest.pay)
    assert e.value.recovery is None, "no look-up given: wait"
    clock.t = T0 + 61
    with pytest.raises(StepInFlight) as e:
        resumed.tool_call("pix.send", args, dest.pay, lookup=lambda key: "unknown")
    assert e.value.recovery is not None and e.value.recovery.action.kind == "check-later"
    assert list(dest.paid.values()) == [1], "unknown never re-executes"

    def broken(key):
        raise ConnectionError("the bank is down")

    clock.t = T0 + 61 + 60
    with pytest.raises(StepInFlight):
        resumed.tool_call("pix.send", args, dest.pay, lookup=broken)
    assert list(dest.paid.values()) == [1], "a look-up that raises could not tell: never re-executes"

    clock.t = T0 + 61 + 60 + 120
    found = resumed.tool_call("pix.send", args, dest.pay, lookup=dest.lookup, read_your_writes=True)
    assert found["recovered"] is True, "the destination's answer is recorded"
    assert resumed.tool_call("pix.send", args, dest.pay) == found, "and replayed"
    assert list(dest.paid.values()) == [1]
    assert [e.outcome for e in events] == ["recovered", "replayed"]


def test_a_tool_call_absent_at_a_read_your_writes_destination_is_re_executed_once(keyer):
    store = intentkey.MemoryStore()
    clock = Clock()
    dest = Destination()
    args = call_args("r")

    def dies_before_paying(key):
        raise Crash()

    with pytest.raises(Crash):
        journal(store, keyer, clock=clock).tool_call("pix.send", args, dies_before_paying)
    clock.t = T0 + 61
    events = []
    resumed = journal(store, keyer, clock=clock, stale=60, events=events)
    result = resumed.tool_call("pix.send", args, dest.pay, lookup=dest.lookup, read_your_writes=True)
    assert result["payment"].startswith("pay_")
    assert list(dest.paid.values()) == [1]
    assert [e.outcome for e in events] == ["re-executed"]


def test_a_tool_call_whose_result_cannot_be_recorded_stays_in_flight(keyer):
    dest = Destination()
    j = journal(intentkey.MemoryStore(), keyer, max_output_bytes=64)
    args = {"amount": "1", "currency": "BRL", "pix_key": "a@b.c"}

    def pay(key):
        dest.pay(key)
        return {"receipt": "r" * 100}

    with pytest.raises(intentkey.IntentkeyError) as e:
        j.tool_call("pix.send", args, pay)
    assert e.value.code == "step-output-too-large"
    with pytest.raises(StepInFlight):
        j.tool_call("pix.send", args, pay)
    assert list(dest.paid.values()) == [1]


def test_a_tool_call_that_raises_is_ambiguous_and_stays_in_flight(keyer):
    j = journal(intentkey.MemoryStore(), keyer)
    args = {"amount": "1", "currency": "BRL", "pix_key": "a@b.c"}

    def timeout(key):
        raise TimeoutError("no answer from the bank")

    with pytest.raises(TimeoutError):
        j.tool_call("pix.send", args, timeout)
    with pytest.raises(StepInFlight):
        j.tool_call("pix.send", args, lambda key: {"paid": True})


def test_the_async_journal(keyer):
    async def main():
        store = AsyncMemoryStore()
        clock = Clock()
        events = []
        a = AsyncJournal(AsyncGuard(store, clock=clock, stale_after_seconds=60), keyer, run=RUN, observe=events.append)
        b = AsyncJournal(AsyncGuard(store, clock=clock, stale_after_seconds=60), keyer, run=RUN)
        gate = asyncio.Event()
        calls = []

        async def slow():
            calls.append("first")
            await gate.wait()
            return {"by": "first"}

        first = asyncio.ensure_future(a.step("plan", slow, input={"p": 1}))
        await asyncio.sleep(0.02)
        with pytest.raises(StepInFlight) as e:
            await b.step("plan", lambda: {"by": "second"}, input={"p": 1})
        assert e.value.due_at == T0 + 60
        gate.set()
        assert await first == {"by": "first"}
        assert await b.step("plan", lambda: {"by": "second"}, input={"p": 1}) == {"by": "first"}
        with pytest.raises(intentkey.IntentkeyError) as e:
            await b.step("plan", lambda: 1, input={"p": 2})
        assert e.value.code == "step-input-changed"
        assert calls == ["first"]

        dest = Destination()

        async def pay(key):
            return dest.pay(key)

        r1 = await a.tool_call("pix.send", call_args("Rent"), pay)
        r2 = await b.tool_call("pix.send", call_args("rent!!", "150.0"), pay)
        assert r1 == r2 and list(dest.paid.values()) == [1]

        # A crash after the payment, settled by an asynchronous look-up.
        args = call_args("x", "99")

        async def pay_and_die(key):
            dest.pay(key)
            raise Crash()

        with pytest.raises(Crash):
            await a.tool_call("pix.send", args, pay_and_die)
        clock.t = T0 + 61

        async def lookup(key):
            return dest.lookup(key)

        found = await b.tool_call("pix.send", args, pay, lookup=lookup, read_your_writes=True)
        assert found["recovered"] is True
        assert sorted(dest.paid.values()) == [1, 1]
        with pytest.raises(intentkey.IntentkeyError) as e:
            AsyncJournal(intentkey.Guard(intentkey.MemoryStore()), keyer, run=RUN)
        assert e.value.field == "guard"
        assert [e.outcome for e in events] == ["ran", "ran"]

    asyncio.run(main())
