"""Kill trials for any shared store: a process running one guarded effect
is SIGKILLed at a random point, then the key is redelivered and recovered;
the effect happens exactly once.

Each trial starts support/kill_child.py, which opens the backend's store
and runs one guarded effect (now = 1_700_000_000) for a key of its own:
the effect is written where the backend keeps effects, then the child
sleeps 0-30 ms and answers 201. Odd trials kill the child 0-5 ms after its
effect appears; every fourth trial 0-40 ms after the child says it is ready
(imported and connected: a kill timed from the spawn would land in the
interpreter's start-up every time), and the others 0-12 ms after its record
appears (claimed, the effect not yet taken: the child waits 0-10 ms before
it, as a slow destination would). Once the server has let go of the
child's connections, the trial classifies the kill (in flight with the
effect: killed between effect and completion; done: finished; otherwise
before the effect), redelivers through a new Guard at the same time (in
flight: 409, the effect not run), recovers a record left in flight with a
stale clock and a read-your-writes look-up (found when the effect exists;
absent re-executes, writing a ``recovery`` effect), and checks one effect
and the record done.

The negative control: a naive "look for the marker, do the effect, write
the marker" processor killed the same way and redelivered duplicates its
effect.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Protocol, Tuple

import intentkey as ik

CHILD = Path(__file__).resolve().parent / "kill_child.py"
T = 1_700_000_000
STALE = 1_700_001_000
STALE_AFTER = 300
TENANT, ACTION = "tenant-kill", "pix.send"
ANSWER = ik.Response.json(201, '{"id": "effect"}')
FOUND = ik.Response.json(201, '{"id": "found"}')


class KillBackend(Protocol):
    """Where the trials' store and effects live."""

    name: str
    #: The parent's own store (sync), on the records the children use.
    store: Any

    def child_config(self) -> Dict[str, Any]:
        """What tells support/kill_child.py to open this backend (``backend`` and its settings)."""

    def effects(self, key: str) -> List[str]:
        """The sources of `key`'s effects, in order."""

    def add_effect(self, key: str, source: str) -> None:
        """Writes one effect of `key`."""

    def settle(self, lines: List[str]) -> None:
        """Waits until the server has let go of every connection the killed
        child opened (`lines`: what it printed)."""

    def naive_redeliver(self, key: str) -> None:
        """The naive processor, redelivered in this process."""


@dataclass
class KillSummary:
    seed: int
    trials: int
    counts: Dict[str, int] = field(default_factory=lambda: {"mid-effect": 0, "before": 0, "finished": 0})
    recoveries: Dict[str, int] = field(default_factory=lambda: {"record-done": 0, "re-execute": 0})
    duplicates: int = 0
    naive_trials: int = 0
    naive_duplicated: int = 0
    elapsed: float = 0.0

    def line(self, name: str) -> str:
        applied = self.recoveries["record-done"] + self.recoveries["re-execute"]
        return (f"{name} kill trials (seed {self.seed}): {self.trials} trials, killed mid-effect "
                f"{self.counts['mid-effect']}, before the effect {self.counts['before']}, finished "
                f"{self.counts['finished']}, recoveries applied {applied} (record-done "
                f"{self.recoveries['record-done']}, re-execute {self.recoveries['re-execute']}), duplicate effects "
                f"{self.duplicates}; naive control: duplicates in {self.naive_duplicated}/{self.naive_trials} trials; "
                f"{self.elapsed:.1f} s")


def _spawn(config: Dict[str, Any]) -> "subprocess.Popen[bytes]":
    return subprocess.Popen([sys.executable, str(CHILD), json.dumps(config)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ))


def _wait_for_effect(proc: "subprocess.Popen[bytes]", backend: KillBackend, key: str) -> None:
    """Polls until `key`'s effect is there (or the child has exited)."""
    deadline = time.monotonic() + 60
    while proc.poll() is None and not backend.effects(key):
        assert time.monotonic() < deadline, "the child never ran its effect"
        time.sleep(0.001)


def _wait_for_record(proc: "subprocess.Popen[bytes]", store: Any, key: str) -> None:
    """Polls until `key` is claimed (or the child has exited)."""
    deadline = time.monotonic() + 60
    while proc.poll() is None and store.get(key) is None:
        assert time.monotonic() < deadline, "the child never claimed its key"
        time.sleep(0.0005)


def _wait_until_ready(proc: "subprocess.Popen[bytes]") -> List[str]:
    """Reads the child's lines up to ``ready`` (or its end): the lines read."""
    assert proc.stdout is not None
    lines: List[str] = []
    while True:
        line = proc.stdout.readline().decode()
        if not line:
            return lines
        lines.append(line.rstrip("\n"))
        if line.strip() == "ready":
            return lines


def _kill_and_settle(proc: "subprocess.Popen[bytes]", backend: KillBackend,
                     early: Optional[List[str]] = None) -> Tuple[bool, str]:
    """SIGKILLs the child (when still running) and waits until the server has
    let go of every connection it opened: what it had sent is then applied
    or not, for good. Whether it was killed, and what it printed."""
    killed = proc.poll() is None
    if killed:
        proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    if proc.returncode != -signal.SIGKILL:
        assert proc.returncode == 0, f"the child failed ({proc.returncode}): {err.decode(errors='replace')}"
        killed = False  # it ended by itself before the signal
    lines = (early or []) + out.decode().splitlines()
    backend.settle(lines)
    return killed, "\n".join(lines)


def run_kill_trials(backend: KillBackend, trials: int, seed: int, naive_trials: int) -> KillSummary:
    """`trials` kill trials and `naive_trials` of the naive control over
    `backend` (random timings from `seed`), each checked as it ends (see the
    module's docstring); the summary, for the caller's final checks."""
    started = time.monotonic()
    rng = random.Random(seed)
    summary = KillSummary(seed, trials, naive_trials=naive_trials)
    store = backend.store
    for trial in range(trials):
        key = f"kill-{trial:03d}-{uuid.uuid4().hex[:8]}"
        attempt = ik.Attempt(key, f"fp-{key}", TENANT, ACTION)
        where = f"{backend.name} trial {trial} (seed {seed}, key {key})"
        proc = _spawn(dict(backend.child_config(), mode="guarded", key=key, fingerprint=attempt.fingerprint,
                           tenant=TENANT, action=ACTION, sleep_ms=rng.uniform(0, 30), pre_ms=rng.uniform(0, 10)))
        early: List[str] = []
        if trial % 2 == 1:
            _wait_for_effect(proc, backend, key)
            time.sleep(rng.uniform(0, 0.005))
        elif trial % 4 == 0:
            early = _wait_until_ready(proc)
            time.sleep(rng.uniform(0, 0.04))
        else:
            # Claimed, its effect not yet taken (the child waits 0-10 ms
            # before it): recovery has to re-execute it.
            _wait_for_record(proc, store, key)
            time.sleep(rng.uniform(0, 0.012))
        killed, said = _kill_and_settle(proc, backend, early)

        # What the kill left.
        record, rows = store.get(key), backend.effects(key)
        in_flight = record is not None and record.status is ik.Status.IN_FLIGHT
        if in_flight and rows == ["owner"]:
            summary.counts["mid-effect"] += 1
        elif record is not None and record.status is ik.Status.DONE:
            assert rows == ["owner"], where
            assert record.response is not None and record.response.status == 201, where
            summary.counts["finished"] += 1
        else:
            assert rows == [] and (record is None or in_flight), (where, record, rows)
            summary.counts["before"] += 1
        assert killed or ("outcome ran" in said and record is not None and record.status is ik.Status.DONE), \
            (where, said)

        # The redelivery, at the same time, through a new guard.
        redone: List[str] = []

        def redelivered(k: str) -> ik.Response:
            redone.append(k)
            backend.add_effect(k, "redelivery")
            return ANSWER

        again = ik.Guard(store).run(attempt, redelivered, now=T)
        if in_flight:
            assert (again.outcome, again.response, redone) == ("in-flight", None, []), where
            assert ik.Guard(store).claim(attempt, now=T).state is ik.ClaimState.IN_FLIGHT, where
        elif record is not None:
            assert again.outcome == "replayed" and again.response == ANSWER and redone == [], where
        else:
            assert again.outcome == "ran" and redone == [key], where  # never claimed: the redelivery owns it

        # Recovery of what is still in flight, once stale, asking the destination.
        if in_flight:
            asked: List[str] = []

            def lookup(k: str) -> ik.Lookup:
                asked.append(k)
                return ik.Found(FOUND) if backend.effects(k) else ik.Absent()

            guard = ik.Guard(store, stale_after_seconds=STALE_AFTER)
            too_early = guard.recover(key, lookup, read_your_writes=True, now=T + 1)
            assert too_early.state is ik.RecoveryState.NOT_DUE and asked == [], where
            recovery = guard.recover(key, lookup, read_your_writes=True, now=STALE)
            assert recovery.state is ik.RecoveryState.APPLIED and recovery.action is not None, (where, recovery)
            assert asked == [key], where
            if rows:
                assert recovery.action.kind == "record-done", (where, recovery)
            else:
                assert recovery.action.kind == "re-execute", (where, recovery)
                backend.add_effect(key, "recovery")
                finished = guard.finish(key, recovery.owner_token, ik.Answered(ANSWER), now=STALE)
                assert finished is ik.Finished.STORED, where
            summary.recoveries[recovery.action.kind] += 1

        # Exactly one effect, the record done, a later delivery replayed.
        final_rows, final = backend.effects(key), store.get(key)
        summary.duplicates += max(0, len(final_rows) - 1)
        assert len(final_rows) == 1, (where, final_rows)
        assert final is not None and final.status is ik.Status.DONE, (where, final)
        late = ik.Guard(store).run(attempt, redelivered, now=STALE)
        assert late.outcome == "replayed" and redone in ([], [key]), where

    for trial in range(naive_trials):
        key = f"naive-{trial}-{uuid.uuid4().hex[:8]}"
        proc = _spawn(dict(backend.child_config(), mode="naive", key=key, sleep_ms=rng.uniform(0, 30)))
        _wait_for_effect(proc, backend, key)
        time.sleep(rng.uniform(0, 0.005))
        _kill_and_settle(proc, backend)
        backend.naive_redeliver(key)
        summary.naive_duplicated += len(backend.effects(key)) > 1
    summary.elapsed = time.monotonic() - started
    return summary
