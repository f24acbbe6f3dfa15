"""Kill trial: Celery workers SIGKILLed between the effect and the acknowledgement.

    python py/trials/celery_kill.py [--intents 78] [--workers 3] [--timeout 420]

Against RabbitMQ (IK_BROKER, default amqp://guest:guest@127.0.0.1:5672//), on a
queue of its own (deleted at the end): tasks with acks_late and
reject_on_worker_lost run by ``celery worker --pool=solo`` subprocesses
(prefetch 1, no gossip/mingle/heartbeat). Each intent's plan holds kills at
``effect`` (the ledger row committed, the record in flight: the redelivery
waits until the claim is stale and recovers it from the ledger) and/or at
``acked`` (the record done, the message unacknowledged: the redelivery
replays). Every fourth intent is also re-enqueued by the producer (a new
Celery task id). The trial SIGKILLs the worker at each kill point and starts a
new one.

Checks: every intent's effect in the ledger exactly once (0 duplicates, 0
lost), every record done. Negative controls under the same machinery: an
unguarded task killed at ``effect`` and a task keyed by the Celery task id
whose intents are re-enqueued must show duplicates (the trial can see them).

Exit status 0 when every check holds, 1 when one fails, 77 when the broker is
not reachable (CI=true: 1). The last line is ``SUMMARY {json}``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any, Dict, List, Set, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
BROKER = os.environ.get("IK_BROKER", "amqp://guest:guest@127.0.0.1:5672//")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def setup_tables(dir_: str) -> None:
    """The trial's own tables: the ledger (the destination) and the control tables."""
    for name, ddl in (
        ("ledger.db", ["CREATE TABLE ledger (id INTEGER PRIMARY KEY, mode TEXT, intent TEXT, key TEXT,"
                       " task_id TEXT, pid INTEGER, result TEXT)"]),
        ("control.db", ["CREATE TABLE plan (intent TEXT, point TEXT, remaining INTEGER, PRIMARY KEY (intent, point))",
                        "CREATE TABLE signals (id INTEGER PRIMARY KEY, pid INTEGER, intent TEXT, point TEXT,"
                        " handled INTEGER DEFAULT 0)",
                        "CREATE TABLE finished (id INTEGER PRIMARY KEY, task_id TEXT, intent TEXT, mode TEXT,"
                        " outcome TEXT)",
                        "CREATE TABLE outcomes (id INTEGER PRIMARY KEY, task_id TEXT, intent TEXT, outcome TEXT)"]),
    ):
        db = sqlite3.connect(os.path.join(dir_, name), isolation_level=None)
        db.execute("PRAGMA journal_mode = WAL")
        for statement in ddl:
            db.execute(statement)
        db.close()


class Trial:
    def __init__(self, dir_: str, queue: str, workers: int, stale_after: int):
        self.dir, self.queue, self.n_workers = dir_, queue, workers
        self.env = dict(os.environ, IK_TRIAL_DIR=dir_, IK_TRIAL_QUEUE=queue, IK_BROKER=BROKER,
                        IK_TRIAL_STALE_AFTER=str(stale_after),
                        PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.workers: Dict[int, subprocess.Popen[bytes]] = {}
        self.started = 0
        self.kills = 0
        self.kills_at: Dict[str, int] = {"effect": 0, "acked": 0}
        self.unexpected_exits = 0
        self.control = sqlite3.connect(os.path.join(dir_, "control.db"), isolation_level=None, timeout=30)
        self.ledger = sqlite3.connect(os.path.join(dir_, "ledger.db"), isolation_level=None, timeout=30)
        from celery import Celery

        self.app = Celery("intentkey_trial_producer", broker=BROKER)
        self.app.conf.update(task_default_queue=queue, task_default_exchange=queue, task_default_routing_key=queue,
                             broker_heartbeat=0, task_serializer="json")

    # -- workers ----------------------------------------------------------------------------
    def spawn(self) -> None:
        self.started += 1
        name = f"w{self.started}@{self.queue}"
        out = open(os.path.join(self.dir, f"worker-{self.started}.log"), "wb")
        cmd = [sys.executable, "-m", "celery", "-A", "celery_app", "worker", "--pool=solo", "--concurrency=1",
               "--prefetch-multiplier=1", "--without-gossip", "--without-mingle", "--without-heartbeat",
               "-Q", self.queue, "-n", name, "--loglevel=WARNING"]
        p = subprocess.Popen(cmd, cwd=HERE, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        self.workers[p.pid] = p

    def fill(self) -> None:
        while len(self.workers) < self.n_workers:
            self.spawn()

    def step(self) -> None:
        """Kills every worker that reached a kill point, reaps the dead, tops the pool up."""
        rows = self.control.execute("SELECT id, pid, point FROM signals WHERE handled = 0").fetchall()
        for sid, pid, point in rows:
            p = self.workers.pop(pid, None)
            if p is not None:
                p.send_signal(signal.SIGKILL)
                p.wait()
                self.kills += 1
                self.kills_at[point] += 1
            self.control.execute("UPDATE signals SET handled = 1 WHERE id = ?", (sid,))
        for pid, p in list(self.workers.items()):
            if p.poll() is not None:
                self.unexpected_exits += 1
                log(f"worker {pid} exited by itself with {p.returncode} (see {self.dir}/worker-*.log)")
                del self.workers[pid]
        self.fill()

    def stop(self) -> None:
        for p in self.workers.values():
            p.send_signal(signal.SIGKILL)
            p.wait()
        self.workers.clear()

    # -- producing and waiting ----------------------------------------------------------------------
    def plan(self, intent: str, effect: int, acked: int) -> None:
        self.control.executemany("INSERT INTO plan (intent, point, remaining) VALUES (?, ?, ?)",
                                 [(intent, "effect", effect), (intent, "acked", acked)])

    def publish(self, task: str, intent: str, n: int) -> str:
        return str(self.app.send_task(task, kwargs={"intent_id": intent, "n": n}).id)

    def run_until_finished(self, task_ids: Set[str], deadline: float, label: str) -> bool:
        last = 0.0
        while True:
            self.step()
            done = {r[0] for r in self.control.execute("SELECT DISTINCT task_id FROM finished")}
            left = len(task_ids - done)
            now = time.time()
            if now - last > 5 or left == 0:
                log(f"{label}: {len(task_ids) - left}/{len(task_ids)} tasks finished, {self.kills} workers SIGKILLed, "
                    f"{self.started} started")
                last = now
            if left == 0:
                return True
            if now > deadline:
                log(f"{label}: timed out with {left} tasks unfinished")
                return False
            time.sleep(0.05)

    def ledger_counts(self, mode: str) -> Dict[str, int]:
        return {intent: count for intent, count in self.ledger.execute(
            "SELECT intent, COUNT(*) FROM ledger WHERE mode = ? GROUP BY intent", (mode,))}

    def delete_queue(self) -> None:
        with self.app.connection_for_write() as conn:
            channel = conn.default_channel
            channel.queue_delete(self.queue)
            channel.exchange_delete(self.queue)


def broker_reachable() -> Tuple[bool, str]:
    from kombu import Connection

    try:
        with Connection(BROKER, connect_timeout=3) as conn:
            conn.ensure_connection(max_retries=1)
        return True, ""
    except Exception as exc:  # noqa: BLE001 - any failure means not reachable
        return False, f"RabbitMQ not reachable at {BROKER}: {exc}"


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--intents", type=int, default=78)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--stale-after", type=int, default=1)
    ap.add_argument("--naive", type=int, default=8)
    ap.add_argument("--by-task-id", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=420)
    ap.add_argument("--keep", action="store_true", help="keep the trial directory")
    args = ap.parse_args(argv)

    ok, reason = broker_reachable()
    if not ok:
        print(f"SKIP {reason}", flush=True)
        return 1 if os.environ.get("CI") == "true" else 77

    # A SIGTERM (a test runner's timeout) still kills the workers and deletes the queue.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    t0 = time.time()
    dir_ = tempfile.mkdtemp(prefix="ik-celery-kill-")
    queue = f"intentkey-trial-{uuid.uuid4().hex[:12]}"
    setup_tables(dir_)
    trial = Trial(dir_, queue, args.workers, args.stale_after)
    summary: Dict[str, Any] = {"queue": queue}
    failures: List[str] = []
    try:
        # -- the subject: keyed by the intent -------------------------------------------------------
        run = uuid.uuid4().hex[:8]
        intents = [f"pay-{run}-{i}" for i in range(args.intents)]
        for i, intent in enumerate(intents):
            trial.plan(intent, effect=1 if i % 3 in (0, 2) else 0, acked=1 if i % 3 in (1, 2) else 0)
        task_ids: Set[str] = set()
        for i, intent in enumerate(intents):
            task_ids.add(trial.publish("trial.guarded", intent, i))
        for i, intent in enumerate(intents):
            if i % 4 == 3:  # the producer re-enqueues: a new Celery task id, the same intent
                task_ids.add(trial.publish("trial.guarded", intent, i))
        log(f"published {len(task_ids)} guarded tasks ({len(intents)} intents) on {queue}; trial dir {dir_}")
        trial.fill()
        finished = trial.run_until_finished(task_ids, t0 + args.timeout, "guarded")
        kills_guarded = trial.kills

        counts = trial.ledger_counts("guarded")
        duplicates = sum(c - 1 for c in counts.values() if c > 1)
        lost = sum(1 for i in intents if counts.get(i, 0) == 0)
        store = _store(dir_)
        import intentkey

        from celery_app_policy import POLICY

        keyer = intentkey.Keyer(secret=bytes(range(32)), policy=POLICY)
        statuses: Dict[str, int] = {}
        for intent in intents:
            rec = store.get(keyer.intent_key("trial", intent))
            status = "missing" if rec is None else rec.status.value
            statuses[status] = statuses.get(status, 0) + 1
        failed = trial.control.execute("SELECT COUNT(*) FROM finished WHERE outcome != 'SUCCESS'").fetchone()[0]
        outcomes = dict(trial.control.execute("SELECT outcome, COUNT(*) FROM outcomes GROUP BY outcome").fetchall())
        summary.update(intents=len(intents), tasks=len(task_ids), finished=finished, kills_subject=kills_guarded,
                       kills_at=dict(trial.kills_at), duplicates=duplicates, lost=lost, records=statuses,
                       outcomes=outcomes, failed_tasks=failed)
        if failed:
            failures.append(f"{failed} tasks failed (see the worker logs in {dir_})")
        if not finished:
            failures.append("guarded tasks unfinished")
        if duplicates:
            failures.append(f"{duplicates} duplicate effects")
        if lost:
            failures.append(f"{lost} lost intents")
        if statuses.get("done", 0) != len(intents):
            failures.append(f"records not all done: {statuses}")

        # -- negative controls -------------------------------------------------------------------------
        control_ids: Set[str] = set()
        naive = [f"naive-{run}-{i}" for i in range(args.naive)]
        for intent in naive:
            trial.plan(intent, effect=1, acked=0)
        for i, intent in enumerate(naive):
            control_ids.add(trial.publish("trial.naive", intent, i))
        by_id = [f"byid-{run}-{i}" for i in range(args.by_task_id)]
        for i, intent in enumerate(by_id):
            trial.plan(intent, effect=0, acked=0)
            control_ids.add(trial.publish("trial.by_task_id", intent, i))
            control_ids.add(trial.publish("trial.by_task_id", intent, i))  # re-enqueued
        control_finished = trial.run_until_finished(control_ids, time.time() + 120, "controls")
        naive_counts = trial.ledger_counts("naive")
        byid_counts = trial.ledger_counts("by_task_id")
        naive_dups = sum(c - 1 for c in naive_counts.values() if c > 1)
        byid_dups = sum(c - 1 for c in byid_counts.values() if c > 1)
        summary.update(kills=trial.kills, naive_duplicates=naive_dups, by_task_id_duplicates=byid_dups,
                       controls_finished=control_finished, workers_started=trial.started,
                       unexpected_exits=trial.unexpected_exits)
        control_failed = trial.control.execute(
            "SELECT COUNT(*) FROM finished WHERE outcome != 'SUCCESS' AND mode != 'guarded'").fetchone()[0]
        summary["control_failed_tasks"] = control_failed
        if control_failed:
            failures.append(f"{control_failed} control tasks failed (see the worker logs in {dir_})")
        if naive_dups == 0:
            failures.append("the unguarded control showed no duplicates: the trial cannot see them")
        if byid_dups == 0:
            failures.append("the task-id control showed no duplicates under re-enqueues")
        if trial.kills < 100:
            failures.append(f"only {trial.kills} workers SIGKILLed (at least 100 wanted)")
    finally:
        trial.stop()
        try:
            trial.delete_queue()
        except Exception as exc:  # noqa: BLE001
            log(f"could not delete queue {queue}: {exc}")
        if not args.keep and not failures:
            shutil.rmtree(dir_, ignore_errors=True)
    summary["seconds"] = round(time.time() - t0, 1)
    summary["failures"] = failures
    print("SUMMARY " + json.dumps(summary, sort_keys=True), flush=True)
    return 1 if failures else 0


def _store(dir_: str) -> Any:
    from sqlite_store import open_store

    return open_store(os.path.join(dir_, "store.db"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
