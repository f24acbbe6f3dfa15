"""The Celery app the kill trial's workers run (``celery -A celery_app worker``).

Configured by the environment the trial sets:
  IK_TRIAL_DIR    the directory of the shared databases: store.db (intentkey's
                  records), ledger.db (the destination: one row per effect)
                  and control.db (the kill plan, kill-point signals, finished tasks)
  IK_TRIAL_QUEUE  the trial's own queue
  IK_BROKER       the AMQP URL

Three tasks write the same ledger:
  trial.guarded     intentkey.celery.once keyed by the intent id (the subject);
  trial.naive       unguarded (the negative control under kills);
  trial.by_task_id  once keyed by the Celery task id (the negative control under re-enqueues).
Kill points: ``effect`` (the ledger row is committed, the record still in flight)
and ``acked`` (task_postrun: the record done, the message not yet acknowledged).
At a kill point whose plan says so the worker signals the trial and blocks until
the trial SIGKILLs it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from typing import Any

from celery import Celery
from celery.signals import task_postrun

import intentkey
from intentkey.celery import Intent, IntentTask, OutcomeEvent, found, once
from celery_app_policy import POLICY
from sqlite_store import open_store

DIR = os.environ["IK_TRIAL_DIR"]
QUEUE = os.environ["IK_TRIAL_QUEUE"]
BROKER = os.environ["IK_BROKER"]
STALE_AFTER = int(os.environ.get("IK_TRIAL_STALE_AFTER", "1"))
SECRET = bytes(range(32))

app = Celery("intentkey_trial", broker=BROKER)
app.conf.update(
    task_default_queue=QUEUE,
    task_default_exchange=QUEUE,
    task_default_routing_key=QUEUE,
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    worker_enable_remote_control=False,
    worker_send_task_events=False,
    worker_hijack_root_logger=False,
    broker_heartbeat=0,
    broker_connection_retry_on_startup=True,
    task_ignore_result=True,
    task_serializer="json",
    accept_content=["json"],
)


def connect(name: str) -> sqlite3.Connection:
    db = sqlite3.connect(os.path.join(DIR, name), isolation_level=None, timeout=30)
    db.execute("PRAGMA busy_timeout = 30000")
    return db


_ledger = connect("ledger.db")
_control = connect("control.db")
store = open_store(os.path.join(DIR, "store.db"))
guard = intentkey.Guard(store, stale_after_seconds=STALE_AFTER)
keyer = intentkey.Keyer(secret=SECRET, policy=POLICY)


def ledger_write(mode: str, intent: str, key: str, task_id: str, result: Any) -> None:
    """The effect: one committed row in the destination."""
    _ledger.execute("INSERT INTO ledger (mode, intent, key, task_id, pid, result) VALUES (?, ?, ?, ?, ?, ?)",
                    (mode, intent, key, task_id, os.getpid(), json.dumps(result)))


def kill_point(point: str, intent: str) -> None:
    """Blocks until SIGKILLed when the plan holds a kill of `intent` at `point`."""
    _control.execute("BEGIN IMMEDIATE")
    row = _control.execute("SELECT remaining FROM plan WHERE intent = ? AND point = ?", (intent, point)).fetchone()
    if row is None or row[0] <= 0:
        _control.execute("COMMIT")
        return
    _control.execute("UPDATE plan SET remaining = remaining - 1 WHERE intent = ? AND point = ?", (intent, point))
    _control.execute("INSERT INTO signals (pid, intent, point) VALUES (?, ?, ?)", (os.getpid(), intent, point))
    _control.execute("COMMIT")
    while True:  # the trial kills this process now
        time.sleep(60)


def lookup(key: str, task: Any) -> Any:
    """The destination's answer about a key (read-your-writes: it is one SQLite file)."""
    row = _ledger.execute("SELECT result FROM ledger WHERE key = ? ORDER BY id LIMIT 1", (key,)).fetchone()
    return "absent" if row is None else found(json.loads(row[0]))


def note(event: OutcomeEvent) -> None:
    _control.execute("INSERT INTO outcomes (task_id, intent, outcome) VALUES (?, ?, ?)",
                     (event.task.request.id, event.task.request.kwargs.get("intent_id"), event.outcome))


@app.task(base=IntentTask, bind=True, name="trial.guarded")
@once(guard=guard, keyer=keyer, tenant="trial", action="ledger.write", lookup=lookup, read_your_writes=True,
      on_outcome=note)
def guarded(self: Any, key: str, *, intent_id: str, n: int) -> Any:
    result = {"intent": intent_id, "n": n}
    ledger_write("guarded", intent_id, key, self.request.id, result)
    kill_point("effect", intent_id)
    return result


@app.task(bind=True, acks_late=True, reject_on_worker_lost=True, name="trial.naive")
def naive(self: Any, *, intent_id: str, n: int) -> Any:
    result = {"intent": intent_id, "n": n}
    ledger_write("naive", intent_id, intent_id, self.request.id, result)
    kill_point("effect", intent_id)
    return result


def by_task_id_intent(task: Any, args: Any, kwargs: Any) -> Intent:
    return Intent("trial", "ledger.write.by-task-id", {"n": kwargs["n"]}, intent_id=task.request.id)


@app.task(base=IntentTask, bind=True, name="trial.by_task_id")
@once(guard=guard, keyer=keyer, intent=by_task_id_intent, lookup=lookup, read_your_writes=True)
def by_task_id(self: Any, key: str, *, intent_id: str, n: int) -> Any:
    result = {"intent": intent_id, "n": n}
    ledger_write("by_task_id", intent_id, key, self.request.id, result)
    kill_point("effect", intent_id)
    return result


MODES = {"trial.guarded": "guarded", "trial.naive": "naive", "trial.by_task_id": "by_task_id"}


@task_postrun.connect
def _after(sender: Any = None, task_id: Any = None, task: Any = None, kwargs: Any = None, state: Any = None,
           **_: Any) -> None:
    # Runs after the task returned and before the late acknowledgement.
    if state not in ("SUCCESS", "FAILURE") or task is None or task.name not in MODES:
        return
    intent = (kwargs or {}).get("intent_id", "")
    if state == "SUCCESS":
        kill_point("acked", intent)
    _control.execute("INSERT INTO finished (task_id, intent, mode, outcome) VALUES (?, ?, ?, ?)",
                     (task_id, intent, MODES[task.name], state))
