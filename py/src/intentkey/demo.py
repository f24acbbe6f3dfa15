"""``python -m intentkey demo``: the main job as a readable timeline, the
same as ``intentkey demo`` of the Rust tool (host/cli/src/demo.rs), against a
SQLite file (or any store), with a fake destination that counts effects.

Every claim, replay, recovery and decision is the core's (through
:class:`intentkey.Guard`); this module only tells the story and checks the
promises. :func:`timeline` runs on any store with the
:class:`intentkey.Store` methods (a :class:`intentkey.MemoryStore` too).
"""

from __future__ import annotations

import importlib
import json
import os
import tempfile
from typing import Any, Callable, Dict, List, Optional, TextIO, Tuple

from .claims import Guard, RunResult, Store
from .errors import IntentkeyError
from .http import Endpoint
from .keys import Keyer
from .types import (
    Absent, Answered, Attempt, Claim, ClaimState, Found, Lookup, Recovery, RecoveryAction, RecoveryState, Response,
    Status, StoreError, Unknown,
)

__all__ = ["DemoError", "main", "open_sqlite", "timeline"]

T0 = 1_700_000_000
SECRET = bytes([0x5C] * 32)
TENANT = "tenant-1"
ACTION = "pix.send"


class DemoError(Exception):
    """The demo could not run (``code`` ``store-failed``, as the Rust tool
    reports it), or a promise was broken."""

    def __init__(self, message: str, code: str = "store-failed"):
        super().__init__(message)
        self.code = code


class Destination:
    """A fake payment destination: it executes effects (counting them) and
    answers look-ups by key."""

    def __init__(self) -> None:
        self.effects: Dict[str, int] = {}
        self.payments: Dict[str, Response] = {}
        #: Keys whose look-ups time out (the destination cannot tell).
        self.unreachable: List[str] = []

    def pay(self, key: str, amount: str) -> Response:
        self.effects[key] = self.effects.get(key, 0) + 1
        response = Response.json(201, f'{{"payment_id":"pay_{key[:8]}","amount":"{amount}"}}')
        self.payments[key] = response
        return response

    def count(self, key: str) -> int:
        return self.effects.get(key, 0)

    def lookup(self, key: str) -> Lookup:
        if key in self.unreachable:
            return Unknown()
        found = self.payments.get(key)
        return Absent() if found is None else Found(found)


def short(key: str) -> str:
    return f"{key[:12]}…"


def _body(response: Optional[Response]) -> str:
    return "" if response is None else response.body.decode("utf-8", "replace")


def claim_text(claim: Claim) -> str:
    if claim.state is ClaimState.OWNED:
        return "claim → owned"
    if claim.state is ClaimState.IN_FLIGHT:
        return "claim → in-flight: 409 Conflict"
    if claim.state is ClaimState.DONE:
        assert claim.response is not None
        return f"claim → done: replayed {claim.response.status} {_body(claim.response)}"
    return "claim → payload-conflict: 422 Unprocessable Content"


def run_text(result: RunResult) -> str:
    """What the claim of a run decided, in the words of :func:`claim_text`."""
    if result.outcome == "ran":
        return claim_text(Claim(ClaimState.OWNED, ""))
    if result.outcome == "replayed":
        return claim_text(Claim(ClaimState.DONE, "", result.response))
    if result.outcome == "conflict":
        return claim_text(Claim(ClaimState.PAYLOAD_CONFLICT, ""))
    return claim_text(Claim(ClaimState.IN_FLIGHT, ""))


def run_status(result: RunResult) -> int:
    """The HTTP status of a run's answer (as the Rust guard's ``RunAnswer``)."""
    if result.response is not None:
        return result.response.status
    return 422 if result.outcome == "conflict" else 409


def action_text(action: RecoveryAction) -> str:
    if action.kind == "record-done":
        assert action.response is not None
        return f"found: recorded as done ({action.response.status}), not run again"
    if action.kind == "re-execute":
        return "re-execute: taken over with a new owner token, run again with the same key"
    if action.kind == "check-later":
        assert action.next_lookup_at is not None
        return f"check again at t+{action.next_lookup_at - T0}s (look-up {action.lookups})"
    return f"moved to needs_reconciliation after {action.lookups} look-ups"


def recovered_text(recovery: Recovery) -> str:
    if recovery.state is RecoveryState.APPLIED:
        assert recovery.action is not None
        return action_text(recovery.action)
    if recovery.state is RecoveryState.LOST:
        assert recovery.action is not None
        return f"{action_text(recovery.action)} (another recoverer wrote first)"
    if recovery.state is RecoveryState.NOT_DUE:
        assert recovery.due_at is not None
        return f"not due before t+{recovery.due_at - T0}s"
    if recovery.state is RecoveryState.NOT_IN_FLIGHT:
        assert recovery.status is not None
        return f"nothing to do: the record is {recovery.status.value}"
    return "nothing to do: no such record"


def timeline(store: Store, url: str, out: Callable[[str], Any] = print) -> None:
    """Runs the six scenes on `store` (`url` names it in the first line),
    printing each step with `out`; raises :class:`DemoError` if a promise
    was broken."""
    keyer = Keyer(secret=SECRET)
    ietf = Endpoint(secret=SECRET)  # the answers of a run: the ietf profile's, as the Rust guard gives them
    dest = Destination()
    guard = Guard(store)

    def say(now: int, who: str, what: str) -> None:
        out(f"  t+{now - T0:>4}s  {who:<22} {what}")

    def attempt(payload: str, epoch: int) -> Tuple[Attempt, str]:
        key = keyer.derive(TENANT, ACTION, payload, epoch)
        fingerprint = keyer.fingerprint(TENANT, ACTION, payload)
        amount = json.loads(payload).get("amount", "")
        return Attempt(key, fingerprint, TENANT, ACTION), str(amount)

    def check(ok: bool, promise: str) -> None:
        if not ok:
            raise DemoError(f"demo: broken promise: {promise}")

    out(f"intentkey demo: store {url}, destination = a fake payment API that counts effects\n")

    # 1. A redelivered intent executes once.
    out("1. A queue redelivers the same payment intent")
    a, amount = attempt(
        '{"creditor_key":"123.456.789-09","amount":"10.50","currency":"BRL","request_id":"r-1","attempt":1}', T0)
    first = guard.run(a, lambda key: dest.pay(key, amount), now=T0)
    say(T0, "intent A, attempt 1",
        f"key {short(a.key)}  {run_text(first)}  → effect runs, {run_status(first)} stored")
    a2, _ = attempt('{"creditor_key":"12345678909","amount":10.5,"currency":" brl ","request_id":"r-2","attempt":2}',
                    T0 + 40)
    again = guard.run(a2, lambda key: dest.pay(key, amount), now=T0 + 40)
    say(T0 + 40, "intent A, redelivery", f"key {short(a2.key)}  {run_text(again)}")
    check(a.key == a2.key and dest.count(a.key) == 1 and again.outcome == "replayed", "a redelivery executes once")
    say(T0 + 40, "", f"destination effects for A: {dest.count(a.key)}")

    # 2. A concurrent duplicate gets 409.
    out("\n2. Two workers take the same intent at once")
    b, amount_b = attempt('{"creditor_key":"maria@example.com","amount":"99.90","currency":"BRL"}', T0 + 60)
    worker1 = guard.claim(b, now=T0 + 60)
    say(T0 + 60, "intent B, worker 1", f"key {short(b.key)}  {claim_text(worker1)}  (effect still running)")
    worker2 = guard.claim(b, now=T0 + 61)
    say(T0 + 61, "intent B, worker 2", claim_text(worker2))
    response = dest.pay(b.key, amount_b)
    finished = guard.finish(b.key, worker1.owner_token, Answered(response), now=T0 + 62)
    say(T0 + 62, "intent B, worker 1", f"effect done → {response.status} stored")
    check(worker1.state is ClaimState.OWNED and worker2.state is ClaimState.IN_FLIGHT
          and finished.value == "stored" and dest.count(b.key) == 1, "a concurrent duplicate gets 409")

    # 3. A changed payload under the same key gets 422.
    out("\n3. A client reuses intent B's key with a different amount")
    other, _ = attempt('{"creditor_key":"maria@example.com","amount":"999.00","currency":"BRL"}', T0 + 60)
    tampered = Attempt(b.key, other.fingerprint, b.tenant_id, b.action_type)
    conflict = guard.run(tampered, lambda key: dest.pay(key, "999.00"), now=T0 + 90)
    answer = ietf.answer(Claim(ClaimState.PAYLOAD_CONFLICT, ""), now=T0 + 90) if conflict.outcome == "conflict" else None
    body = "" if answer is None else answer.body.decode("utf-8", "replace")
    say(T0 + 90, "intent B, other body", f"{run_text(conflict)}  {body}")
    check(run_status(conflict) == 422 and dest.count(b.key) == 1, "a changed payload gets 422")

    # 4. A crash after the effect, recovered by a look-up.
    out("\n4. A worker crashes after the payment, before recording it")
    c, amount_c = attempt('{"creditor_key":"12.345.678/0001-95","amount":"250.00","currency":"BRL"}', T0 + 120)
    guard.claim(c, now=T0 + 120)
    dest.pay(c.key, amount_c)
    say(T0 + 120, "intent C, worker", f"key {short(c.key)}  claim → owned, effect runs, then the process dies")
    retry = guard.run(c, lambda key: dest.pay(key, amount_c), now=T0 + 150)
    say(T0 + 150, "intent C, redelivery", f"{run_text(retry)} (in_flight is never released by age)")
    for key in guard.due(limit=100, now=T0 + 420):
        recovery = guard.recover(key, dest.lookup, now=T0 + 420)
        if key == c.key:
            say(T0 + 420, "recovery", f"look-up of {short(key)} at the destination → {recovered_text(recovery)}")
    replay = guard.run(c, lambda key: dest.pay(key, amount_c), now=T0 + 480)
    say(T0 + 480, "intent C, redelivery", run_text(replay))
    check(dest.count(c.key) == 1 and replay.outcome == "replayed" and run_status(retry) == 409,
          "a crash after the effect is recovered without running it again")

    # 5. An unknown look-up backs off and ends in reconciliation.
    out("\n5. A worker crashes and the destination cannot say what happened")
    d, amount_d = attempt('{"creditor_key":"joao@example.com","amount":"42.00","currency":"BRL"}', T0 + 600)
    guard.claim(d, now=T0 + 600)
    dest.pay(d.key, amount_d)
    dest.unreachable.append(d.key)
    say(T0 + 600, "intent D, worker", f"key {short(d.key)}  claim → owned, effect runs, the process dies")
    now = T0 + 900
    while True:
        record = store.get(d.key)
        if record is None or record.status is not Status.IN_FLIGHT:
            break
        recovery = guard.recover(d.key, dest.lookup, now=now)
        say(now, "recovery", f"look-up of {short(d.key)} → unknown → {recovered_text(recovery)}")
        action = recovery.action
        if recovery.state is RecoveryState.APPLIED and action is not None and action.kind == "check-later":
            assert action.next_lookup_at is not None
            now = action.next_lookup_at
        else:
            break
    listed = store.list(Status.NEEDS_RECONCILIATION, 10)
    say(now, "operator", f"intentkey inspect --status needs_reconciliation → {len(listed)} record(s)")
    blocked = guard.run(d, lambda key: dest.pay(key, amount_d), now=now + 60)
    say(now + 60, "intent D, redelivery", f"{run_text(blocked)} (never re-executed)")
    check(dest.count(d.key) == 1 and any(r.key == d.key for r in listed) and run_status(blocked) == 409,
          "unknown never re-executes; it ends in reconciliation")

    # 6. "Nothing happened" releases the claim; a superseded owner cannot overwrite.
    out("\n6. The destination rate-limits the first attempt, then a slow owner is superseded")
    e, amount_e = attempt('{"creditor_key":"ana@example.com","amount":"7.00","currency":"BRL"}', T0 + 2000)
    limited = guard.run(e, lambda _key: Response.json(429, '{"error":"rate_limited"}'), now=T0 + 2000)
    limited_finished = "?" if limited.finished is None else limited.finished.value
    say(T0 + 2000, "intent E, attempt 1", f"destination answers 429 → claim {limited_finished} (nothing happened)")
    paid = guard.run(e, lambda key: dest.pay(key, amount_e), now=T0 + 2010)
    say(T0 + 2010, "intent E, retry", f"{run_text(paid)} → effect runs, {run_status(paid)} stored")
    f, amount_f = attempt('{"creditor_key":"rui@example.com","amount":"3.00","currency":"BRL"}', T0 + 2100)
    slow = guard.claim(f, now=T0 + 2100)
    # The destination asked as a read-your-writes one (its `absent` is trusted).
    taken = guard.recover(f.key, dest.lookup, read_your_writes=True, now=T0 + 2400)
    if taken.state is RecoveryState.APPLIED and taken.action is not None and taken.action.kind == "re-execute":
        guard.finish(f.key, taken.owner_token, Answered(dest.pay(f.key, amount_f)), now=T0 + 2400)
    say(T0 + 2400, "recovery",
        f"intent F stale, destination (read-your-writes) says absent → {recovered_text(taken)}, effect runs once")
    late = guard.finish(f.key, slow.owner_token, Answered(Response.json(201, "{}")), now=T0 + 2401)
    say(T0 + 2401, "intent F, slow owner", f"finishes late → {late.value} (nothing overwritten)")
    check(limited_finished == "released" and paid.outcome == "ran" and dest.count(e.key) == 1
          and late.value == "superseded" and dest.count(f.key) == 1,
          "a release lets the retry run; a superseded owner cannot overwrite")

    counts = ", ".join(f"{name} {dest.count(x.key)}" for name, x in zip("ABCDEF", (a, b, c, d, e, f)))
    out(f"\nEffects at the destination: {counts} (each intent exactly once).")
    keyer.close()
    ietf.close()


def open_sqlite(path: str) -> Store:
    """The SQLite store on `path` (``intentkey.stores.sqlite``), or a
    :class:`DemoError` saying what is missing."""
    try:
        sqlite = importlib.import_module("intentkey.stores.sqlite")
    except ImportError as exc:
        raise DemoError(f"the SQLite store (intentkey.stores.sqlite) is not available in this installation: {exc}") from exc
    store: Store = sqlite.SQLiteStore(path)
    return store


def _remove(path: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        try:
            os.remove(path + suffix)
        except FileNotFoundError:
            pass


def main(db: Optional[str] = None, out: Optional[TextIO] = None) -> None:
    """The demo on the SQLite file `db`, or on a fresh temporary one that is
    removed afterwards."""
    stream = out
    write: Callable[[str], Any] = print if stream is None else (lambda line: stream.write(line + "\n"))
    temporary = db is None
    path = db if db is not None else os.path.join(tempfile.gettempdir(), f"intentkey-demo-{os.getpid()}.sqlite")
    if temporary:
        _remove(path)
    try:
        store = open_sqlite(path)
        try:
            timeline(store, f"sqlite:{path}", write)
        except (StoreError, IntentkeyError) as exc:
            raise DemoError(str(exc)) from exc
        finally:
            close = getattr(store, "close", None)
            if callable(close):
                close()
    finally:
        if temporary:
            _remove(path)
