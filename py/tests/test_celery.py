"""intentkey.celery: one effect per intent across redeliveries.

The unit tests drive a decorated task function with a stand-in for Celery's
bound task (its request and retry); one test runs a real Celery app eagerly.
The kill trial (py/trials/celery_kill.py) runs against RabbitMQ at
127.0.0.1:5672: it fails when CI=true and the broker is absent, else skips.
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import intentkey
from intentkey.celery import Intent, IntentTask, IntentkeyQueueError, Refuse, found, intent_from_kwargs, once

SECRET = bytes(range(32))
POLICY = {"version": 1, "bucketSeconds": 900, "actionTypes": ["ledger.write"],
          "fields": {"n": {"class": "key", "normalizer": "integer"}}}
# One keyer for the module: a keyer collected while a flow of another guard is
# live makes the binding's next flow.resume trap ("mismatched resource types",
# reported for intentkey._binding); the tests here keep theirs alive.
KEYER = intentkey.Keyer(secret=SECRET, policy=POLICY)
PLAIN_KEYER = intentkey.Keyer(secret=SECRET)


class Retried(Exception):
    def __init__(self, countdown, exc, max_retries):
        super().__init__(str(exc))
        self.countdown, self.exc, self.max_retries = countdown, exc, max_retries


class Request:
    def __init__(self, id, kwargs, retries=0):
        self.id, self.kwargs, self.retries = id, kwargs, retries


class FakeTask:
    """Celery's bound task as once() uses it: request, name, retry."""

    name = "ledger.write"

    def __init__(self, id="t-1", kwargs=None, retries=0):
        self.request = Request(id, kwargs or {}, retries)

    def retry(self, countdown=None, exc=None, max_retries=None):
        raise Retried(countdown, exc, max_retries)


class Clock:
    def __init__(self, t=1_800_000_000):
        self.t = t

    def __call__(self):
        return self.t


def make(lookup=None, read_your_writes=False, stale_after=30, events=None, **options):
    clock = Clock()
    guard = intentkey.Guard(intentkey.MemoryStore(), stale_after_seconds=stale_after, clock=clock)
    keyer = KEYER
    ledger = []

    def effect(self, key, *, intent_id, n):
        ledger.append((intent_id, key))
        if n < 0:
            raise RuntimeError("the destination timed out")
        if n == 0:
            raise Refuse("insufficient funds")
        return {"intent": intent_id, "n": n}

    if events is not None:
        options["on_outcome"] = events.append
    task = once(guard=guard, keyer=keyer, tenant="acme", action="ledger.write", lookup=lookup,
                read_your_writes=read_your_writes, **options)(effect)
    return task, guard, keyer, ledger, clock


def call(task, task_id="t-1", retries=0, **kwargs):
    return task(FakeTask(task_id, kwargs, retries), **kwargs)


def test_runs_once_per_intent_across_redeliveries_and_reenqueues():
    events = []
    task, guard, keyer, ledger, _ = make(events=events)
    assert call(task, "t-1", intent_id="pay-1", n=5) == {"intent": "pay-1", "n": 5}
    # The broker redelivers t-1; the producer re-enqueues the intent as t-2.
    assert call(task, "t-1", intent_id="pay-1", n=5) == {"intent": "pay-1", "n": 5}
    assert call(task, "t-2", intent_id="pay-1", n=5) == {"intent": "pay-1", "n": 5}
    assert ledger == [("pay-1", keyer.intent_key("acme", "pay-1"))]
    assert [e.outcome for e in events] == ["ran", "replayed", "replayed"]
    rec = guard.store.get(keyer.intent_key("acme", "pay-1"))
    assert rec.status is intentkey.Status.DONE


def test_same_intent_other_payload_is_a_permanent_conflict():
    task, _, _, ledger, _ = make()
    call(task, intent_id="pay-1", n=5)
    with pytest.raises(IntentkeyQueueError) as e:
        call(task, "t-2", intent_id="pay-1", n=6)
    assert e.value.code == "payload-conflict"
    assert len(ledger) == 1


def test_in_flight_waits_until_stale_then_recovers_from_the_lookup():
    answers = []

    def lookup(key, task):
        answers.append(key)
        return found({"intent": "pay-1", "n": 5, "from": "destination"})

    task, guard, keyer, ledger, clock = make(lookup=lookup, stale_after=30)
    # A worker claimed and ran the effect, then died before finishing: the effect raised here.
    with pytest.raises(RuntimeError):
        call(task, intent_id="pay-1", n=-1)
    assert len(ledger) == 1
    # The redelivery meets the claim in flight, not yet stale: retried at the instant the core named.
    with pytest.raises(Retried) as r:
        call(task, intent_id="pay-1", n=-1, retries=4)
    assert r.value.exc.code == "in-flight"
    assert r.value.exc.retry_at == clock.t + 30
    assert 30 <= r.value.countdown <= 31
    assert r.value.max_retries == 5  # a wait never exhausts max_retries
    assert answers == []
    clock.t += 30
    # Stale: the look-up finds it; recorded as done, returned, the effect not run again.
    assert call(task, intent_id="pay-1", n=-1) == {"intent": "pay-1", "n": 5, "from": "destination"}
    assert len(ledger) == 1 and len(answers) == 1
    assert guard.store.get(keyer.intent_key("acme", "pay-1")).status is intentkey.Status.DONE


def test_unknown_is_never_re_executed_and_ends_in_reconciliation():
    task, guard, keyer, ledger, clock = make(lookup=lambda key, task: "unknown", stale_after=5)
    with pytest.raises(RuntimeError):
        call(task, intent_id="pay-1", n=-1)
    outcomes = []
    for _ in range(50):
        clock.t += 3600
        try:
            call(task, intent_id="pay-1", n=-1)
        except Retried as r:
            outcomes.append(r.exc.code)
            continue
        except IntentkeyQueueError as e:
            outcomes.append(e.code)
            break
    assert len(ledger) == 1  # never run again
    assert outcomes[-1] == "needs-reconciliation" and set(outcomes[:-1]) == {"in-flight"}
    assert guard.store.get(keyer.intent_key("acme", "pay-1")).status is intentkey.Status.NEEDS_RECONCILIATION


def test_lookup_that_raises_counts_as_unknown():
    def lookup(key, task):
        raise ConnectionError("destination down")

    task, _, _, ledger, clock = make(lookup=lookup, stale_after=5)
    with pytest.raises(RuntimeError):
        call(task, intent_id="pay-1", n=-1)
    clock.t += 10
    with pytest.raises(Retried) as r:
        call(task, intent_id="pay-1", n=-1)
    assert r.value.exc.code == "in-flight" and len(ledger) == 1


def test_absent_re_execution_runs_the_effect_once_more():
    events = []
    task, _, _, ledger, clock = make(lookup=lambda key, task: "absent", read_your_writes=True, stale_after=5,
                                     events=events)
    with pytest.raises(RuntimeError):
        call(task, intent_id="pay-1", n=-1)
    clock.t += 10
    with pytest.raises(RuntimeError):  # re-executed (read-your-writes absent), and it failed again
        call(task, intent_id="pay-1", n=-1)
    assert len(ledger) == 2
    assert [e.outcome for e in events] == ["failed", "failed"]


def test_refused_releases_and_retries_by_the_task_policy():
    events = []
    task, guard, keyer, ledger, _ = make(events=events)
    with pytest.raises(Retried) as r:
        call(task, intent_id="pay-1", n=0)
    assert r.value.exc.code == "refused" and r.value.countdown is None
    assert guard.store.get(keyer.intent_key("acme", "pay-1")) is None  # released
    # Nothing happened, so the intent may run again (here with a payload the destination accepts).
    assert call(task, intent_id="pay-1", n=7) == {"intent": "pay-1", "n": 7}
    assert len(ledger) == 2
    assert [e.outcome for e in events] == ["refused", "ran"]


def test_an_intent_that_cannot_be_keyed_fails_for_good():
    task, _, _, ledger, _ = make()
    with pytest.raises(IntentkeyQueueError) as e:
        call(task, n=5)  # no intent_id, no intent_epoch: never the task id
    assert e.value.code == "invalid-intent" and e.value.field == "intent_id"
    with pytest.raises(IntentkeyQueueError) as e:
        call(task, intent_id="pay-1", n=5, extra="x")  # a field the policy does not classify
    assert e.value.code == "invalid-intent"
    assert ledger == []


def test_invalid_lookup_answer_is_permanent():
    task, _, _, ledger, clock = make(lookup=lambda key, task: {"found": 1}, stale_after=5)
    with pytest.raises(RuntimeError):
        call(task, intent_id="pay-1", n=-1)
    clock.t += 10
    with pytest.raises(IntentkeyQueueError) as e:
        call(task, intent_id="pay-1", n=-1)
    assert e.value.code == "invalid-lookup" and len(ledger) == 1


def test_fields_mode_keys_the_payload_under_the_policy():
    guard = intentkey.Guard(intentkey.MemoryStore())
    keyer = KEYER
    keys = []
    task = once(guard=guard, keyer=keyer, tenant="acme", action="ledger.write")(
        lambda self, key, *, intent_epoch, n: keys.append(key) or len(keys))
    assert call(task, "t-1", intent_epoch=1_800_000_000, n=5) == 1
    assert call(task, "t-2", intent_epoch=1_800_000_000, n="5") == 1  # the same intent, reformatted: replayed
    assert call(task, "t-3", intent_epoch=1_800_000_000, n=6) == 2  # another intent
    assert keys[0] == keyer.intent_attempt("acme", "ledger.write", {"n": 5}, 1_800_000_000).key


def test_options_are_checked():
    guard = intentkey.Guard(intentkey.MemoryStore())
    keyer = PLAIN_KEYER
    with pytest.raises(intentkey.IntentkeyError) as e:
        once(guard=object(), keyer=keyer)
    assert e.value.field == "guard"
    with pytest.raises(intentkey.IntentkeyError) as e:
        once(guard=guard, keyer=keyer, read_your_writes=True)
    assert e.value.field == "read_your_writes"
    with pytest.raises(intentkey.IntentkeyError) as e:
        once(guard=guard, keyer=keyer, lookup=3)
    assert e.value.field == "lookup"
    with pytest.raises(intentkey.IntentkeyError) as e:
        once(guard=guard, keyer=keyer, bogus=1)
    assert (e.value.code, e.value.field) == ("invalid-argument", "bogus")
    f = once(guard=guard, keyer=keyer, tenant="acme", action="ledger.write")(lambda self, key, **kw: 1)
    with pytest.raises(intentkey.IntentkeyError) as e:
        f(object(), intent_id="x")  # not bound
    assert e.value.field == "bind"


def test_intent_from_kwargs():
    i = intent_from_kwargs({"intent_id": "pay-1", "tenant_id": "acme", "n": 1}, action="ledger.write")
    assert i == Intent("acme", "ledger.write", {"n": 1}, "pay-1", None)
    with pytest.raises(intentkey.IntentkeyError) as e:
        intent_from_kwargs({"intent_id": 5}, tenant="acme", action="a")
    assert e.value.field == "intent_id"


def test_real_celery_app_eagerly():
    import celery  # a dev requirement: missing is a failure, never a skip
    app = celery.Celery("intentkey_test_eager")
    app.conf.task_always_eager = True
    guard = intentkey.Guard(intentkey.MemoryStore())
    keyer = KEYER
    ledger = []

    @app.task(base=IntentTask, bind=True, name="ledger.write")
    @once(guard=guard, keyer=keyer, tenant="acme")
    def write(self, key, *, intent_id, n):
        ledger.append(key)
        return {"n": n}

    assert write.acks_late and write.reject_on_worker_lost
    assert write.apply(kwargs={"intent_id": "pay-1", "n": 3}).get() == {"n": 3}
    assert write.apply(kwargs={"intent_id": "pay-1", "n": 3}).get() == {"n": 3}
    assert ledger == [keyer.intent_key("acme", "pay-1")]


# -- the kill trial ---------------------------------------------------------------------------------

def _rabbit_reachable():
    try:
        with socket.create_connection(("127.0.0.1", 5672), timeout=2):
            return True
    except OSError:
        return False


@pytest.mark.timeout(600)
def test_kill_trial_against_rabbitmq():
    if not _rabbit_reachable():
        reason = "RabbitMQ not reachable at 127.0.0.1:5672 (amqp://guest:guest@127.0.0.1:5672//)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    trial = Path(__file__).resolve().parent.parent / "trials" / "celery_kill.py"
    proc = subprocess.run([sys.executable, str(trial)], capture_output=True, text=True, timeout=580)
    print(proc.stdout[-4000:])
    print(proc.stderr[-2000:], file=sys.stderr)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("SUMMARY ")]
    assert lines, f"the trial printed no summary (exit {proc.returncode})"
    summary = json.loads(lines[-1][len("SUMMARY "):])
    assert summary["kills"] >= 100
    assert summary["duplicates"] == 0
    assert summary["lost"] == 0
    assert summary["records"] == {"done": summary["intents"]}
    assert summary["failed_tasks"] == 0
    assert summary["naive_duplicates"] > 0, "the unguarded control must show duplicates"
    assert summary["by_task_id_duplicates"] > 0, "the task-id control must show duplicates"
    assert summary["failures"] == [] and proc.returncode == 0
