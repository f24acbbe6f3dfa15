"""Celery tasks that run their effect once per intent, whatever the broker redelivers.

A Celery task with ``acks_late=True`` is delivered at least once: a worker
killed between the effect and the acknowledgement gets its message
redelivered, and a producer that re-enqueues the same intent sends a message
with a new task id. :func:`once` keys each delivery by its *intent* (a recorded
intent id in the task's keyword arguments, or the payload under the keyer's
policy), never by the Celery task id, and runs the effect through the core's
run flow (:meth:`intentkey.Guard.run` over a store every worker shares, or
:meth:`intentkey.aio.AsyncGuard.run`; either serves the recovery's look-up):

* the intent is new: the effect runs, its JSON result is stored, the task
  returns it;
* the intent is done (a redelivery, a re-enqueue): the stored result is
  returned, the effect is not run;
* the intent is in flight (another delivery runs it, or a worker died in it):
  the task is retried later (``self.retry(countdown=…)``) at the instant the
  core named; once stale, the core recovers it with your ``lookup``: the
  destination has it (found) -> recorded as done and returned; the destination
  cannot tell (unknown) -> never run again, asked later, and after the core's
  look-ups ``needs_reconciliation`` (a permanent failure).

Nothing here decides a claim, a replay or a recovery: each is the core's. This
module converts the task call into a claim attempt, the effect's JSON result
into the stored response and back, and the guard's outcome into Celery's verbs
(return, ``retry``, raise).

>>> import intentkey
>>> from intentkey.celery import Intent, intent_from_kwargs
>>> intent_from_kwargs({"intent_id": "pay-1", "amount": "10.00"}, tenant="acme", action="pix.send")
Intent(tenant_id='acme', action_type='pix.send', payload={'amount': '10.00'}, intent_id='pay-1', intent_epoch=None, key_hex_length=None)
"""

from __future__ import annotations

import asyncio
import threading
import functools
import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

from . import _binding as b
from ._watch import check_wait_max_ms
from .aio import AsyncGuard
from .claims import Guard, RunResult, in_flight_delivery
from .errors import IntentkeyError
from .keys import Keyer
from .types import Absent, Attempt, Found, Lookup, Recovery, Refused, Response, Unknown

__all__ = [
    "Intent", "IntentTask", "IntentkeyQueueError", "OutcomeEvent", "Refuse", "found", "intent_from_kwargs", "once",
]

#: How long after the instant the core named a delayed delivery comes back (the core's times are whole seconds).
MARGIN_SECONDS = 0.25

#: The keyword arguments the default intent reads, which are not part of the payload.
INTENT_KWARGS = ("intent_id", "intent_epoch", "tenant_id")

_OPTIONS = ("guard", "keyer", "intent", "tenant", "action", "lookup", "read_your_writes", "on_outcome", "margin_seconds",
            "wait_max_ms")


@dataclass(frozen=True)
class Intent:
    """The intent one task call carries, the same across redeliveries and re-enqueues.

    * ``intent_id`` given (``intent-hmac``): the key is the keyer's
      ``intent_key(tenant_id, intent_id)`` (under the secret active at
      ``intent_epoch`` when given); ``payload`` is fingerprinted, so a task that
      reuses the intent id with other fields fails with ``payload-conflict``.
    * no ``intent_id`` (``fields``): the key is derived from ``payload`` under
      the keyer's policy at ``intent_epoch`` (required), so a re-enqueue with
      reformatted fields gets the same key.

    Never the Celery task id: a producer that re-enqueues gets a new one.
    """

    tenant_id: str
    action_type: str
    payload: Any
    intent_id: Optional[str] = None
    intent_epoch: Optional[int] = None
    key_hex_length: Optional[int] = None


class IntentkeyQueueError(Exception):
    """A delivery that cannot finish now, or ever; ``code`` says which:

    * ``payload-conflict``: the intent's key was claimed with another payload.
      Permanent: nothing ran and nothing will.
    * ``needs-reconciliation``: the destination could not tell, look-up after
      look-up, whether the effect happened; the record is
      ``needs_reconciliation`` for a person to settle. Permanent.
    * ``invalid-intent``: the task call cannot be keyed (``.field`` names what).
      Permanent.
    * ``invalid-lookup``: the look-up answered something that is not a look-up
      answer. Permanent.
    * ``in-flight``: another delivery runs the intent, or recovery has not
      decided yet; ``retry_at`` (whole seconds) is when to come back. The task
      is retried with it; you see it only when the retry itself fails.
    * ``refused``: the effect raised :class:`Refuse` (nothing happened) and
      the claim was released; the task is retried by its own retry policy.
    """

    def __init__(self, code: str, message: str, *, key: Optional[str] = None, task_id: Optional[str] = None,
                 retry_at: Optional[int] = None, field: Optional[str] = None):
        super().__init__(message)
        self.code = code
        self.key = key
        self.task_id = task_id
        self.retry_at = retry_at
        self.field = field

    def __reduce__(self) -> Any:
        # Celery pickles or serializes exceptions into results: keep them rebuildable.
        return (_rebuild_error, (self.code, str(self), self.key, self.task_id, self.retry_at, self.field))


def _rebuild_error(code: str, message: str, key: Optional[str], task_id: Optional[str], retry_at: Optional[int],
                   field: Optional[str]) -> IntentkeyQueueError:
    return IntentkeyQueueError(code, message, key=key, task_id=task_id, retry_at=retry_at, field=field)


class Refuse(Exception):
    """Raised by an effect that declares nothing happened (the destination
    refused before acting): the claim is released and the task retried by its
    own retry policy (``max_retries``, ``default_retry_delay``)."""


@dataclass(frozen=True)
class OutcomeEvent:
    """What happened to one delivery, for logs and metrics. ``outcome``:
    ``ran`` | ``replayed`` | ``recovered`` (a stale claim completed from the
    destination's answer) | ``re-executed`` (a stale claim the destination never
    saw, read-your-writes) | ``waiting`` | ``refused`` | ``failed`` (the effect
    raised: left in flight) | ``payload-conflict`` | ``needs-reconciliation`` |
    ``invalid-intent`` | ``invalid-lookup``."""

    task: Any
    key: Optional[str]
    outcome: str
    value: Any = None
    reason: Optional[str] = None
    retry_at: Optional[int] = None
    error: Optional[BaseException] = None


def found(value: Any) -> Found:
    """A look-up answer: the destination has the effect, and ``value`` (JSON)
    is its result, which the task returns and the record stores."""
    return Found(_response(value, "lookup's found() value"))


def _response(value: Any, what: str) -> Response:
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise IntentkeyError("invalid-json", None, f"{what} must be JSON ({exc})") from exc
    return Response.json(200, text)


def _value(response: Optional[Response], key: str) -> Any:
    if response is None:
        return None
    try:
        return json.loads(response.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise IntentkeyError(
            "store-failed", None,
            f"the record under key {key} does not hold a task result (JSON): was the key used by something "
            "other than a Celery task? Give the task its own action type or tenant") from exc


def intent_from_kwargs(kwargs: Mapping[str, Any], *, tenant: Optional[str] = None,
                       action: Optional[str] = None) -> Intent:
    """The default intent of a task call: the tenant (``tenant``, else the
    ``tenant_id`` keyword), the action (``action``), ``intent_id`` (intent-hmac)
    or ``intent_epoch`` (fields) from the keywords, and the other keywords as
    the payload."""
    tenant_id = tenant if tenant is not None else kwargs.get("tenant_id")
    if not isinstance(tenant_id, str):
        raise IntentkeyError("invalid-tenant-id", "tenant_id",
                             "the intent needs a tenant: once(tenant='…') or a tenant_id= keyword argument")
    if not isinstance(action, str):
        raise IntentkeyError("invalid-action-type", "action", "the intent needs an action type: once(action='…')")
    intent_id = kwargs.get("intent_id")
    epoch = kwargs.get("intent_epoch")
    if intent_id is None and epoch is None:
        raise IntentkeyError(
            "invalid-intent-id", "intent_id",
            "the task call carries no intent: pass intent_id= (a recorded intent id) or intent_epoch= "
            "(fields mode, when the intent was recorded), never the Celery task id")
    if intent_id is not None and not isinstance(intent_id, str):
        raise IntentkeyError("invalid-intent-id", "intent_id", f"intent_id must be a string, not {type(intent_id).__name__}")
    if epoch is not None and (isinstance(epoch, bool) or not isinstance(epoch, int)):
        raise IntentkeyError("invalid-epoch", "intent_epoch", f"intent_epoch must be whole seconds, not {type(epoch).__name__}")
    payload = {k: v for k, v in kwargs.items() if k not in INTENT_KWARGS}
    return Intent(tenant_id, action, payload, intent_id, epoch)


def _attempt(intent: Intent, keyer: Keyer) -> Attempt:
    """The guard's claim attempt of an intent (the core keys and fingerprints it)."""
    if not isinstance(intent, Intent):
        raise IntentkeyError("invalid-argument", "intent",
                             f"intent(task, args, kwargs) must return an intentkey.celery.Intent, not {type(intent).__name__}")
    if intent.intent_id is not None and intent.intent_epoch is None:
        # No epoch: the keyer's one secret (a keyring asks for the epoch, by name).
        key = keyer.intent_key(intent.tenant_id, intent.intent_id, intent.key_hex_length)
        fingerprint = keyer.fingerprint(intent.tenant_id, intent.action_type, intent.payload)
        return Attempt(key, fingerprint, intent.tenant_id, intent.action_type)
    if intent.intent_epoch is None:
        raise IntentkeyError("invalid-epoch", "intent_epoch",
                             "a fields-mode intent needs intent_epoch (when it was recorded); or give intent_id")
    return keyer.intent_attempt(intent.tenant_id, intent.action_type, intent.payload, intent.intent_epoch,
                                intent.intent_id, intent.key_hex_length)


IntentFn = Callable[[Any, Tuple[Any, ...], Dict[str, Any]], Intent]
LookupAnswer = Union[Found, Absent, Unknown, str]
LookupFn = Callable[[str, Any], LookupAnswer]


def once(*, guard: Union[Guard, AsyncGuard], keyer: Keyer, intent: Optional[IntentFn] = None, tenant: Optional[str] = None,
         action: Optional[str] = None, lookup: Optional[LookupFn] = None, read_your_writes: bool = False,
         on_outcome: Optional[Callable[[OutcomeEvent], None]] = None,
         margin_seconds: float = MARGIN_SECONDS, wait_max_ms: Optional[int] = None,
         **unknown: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorates a bound Celery task function so that its effect runs once per intent::

        @app.task(base=IntentTask, bind=True)
        @once(guard=guard, keyer=keyer, tenant="acme", action="pix.send", lookup=ask_bank)
        def send(self, key, *, intent_id, amount):
            return bank.transfer(idempotency_key=key, amount=amount)

    The function is called as ``fn(self, key, *args, **kwargs)``: ``key`` is
    the intent's idempotency key, to hand to the destination. It returns the
    effect's JSON result (stored; a redelivery gets it back); raising
    :class:`Refuse` releases the claim; any other exception leaves the intent
    in flight for recovery and propagates as it is (your retry policy applies).

    * ``guard``: an :class:`intentkey.Guard` over a store every worker shares
      (SQLite file, PostgreSQL, Redis); its ``stale_after_seconds`` is how long
      a claim may run before a redelivery may ask the destination.
    * ``keyer``: makes the keys and fingerprints.
    * ``intent``: ``(task, args, kwargs) -> Intent``; default
      :func:`intent_from_kwargs` with ``tenant`` and ``action`` (``action``
      defaults to the task's name).
    * ``lookup``: ``(key, task) -> found(value) | "absent" | "unknown"`` (or
      :class:`intentkey.Found`/``Absent``/``Unknown``): asks the destination
      about a stale claim; a raise counts as unknown. Without it every stale
      claim is unknown (never run again; after the core's look-ups,
      ``needs-reconciliation``).
    * ``read_your_writes``: the destination reads its own writes; only then
      does ``absent`` run the effect again (once).
    * ``on_outcome``: called with an :class:`OutcomeEvent` per delivery.
    * ``wait_max_ms``: how long a delivery that finds its intent in flight
      (another worker runs it, not yet stale) waits in the worker for that
      run's answer before it is retried later (0 to 60000; default: the
      guard's ``wait_max_ms``, itself 0).
    """
    b.no_unknown("intentkey.celery.once", unknown, _OPTIONS)
    if not isinstance(guard, (Guard, AsyncGuard)):
        raise IntentkeyError("invalid-argument", "guard",
                             "guard must be an intentkey.Guard or intentkey.aio.AsyncGuard over a store every worker shares")
    if not isinstance(keyer, Keyer):
        raise IntentkeyError("invalid-argument", "keyer", "keyer must be an intentkey.Keyer")
    if intent is not None and not callable(intent):
        raise IntentkeyError("invalid-argument", "intent", "intent must be a function (task, args, kwargs) -> Intent")
    if intent is not None and tenant is not None:
        raise IntentkeyError("invalid-argument", "tenant", "give tenant= to the default intent, or intent=, not both")
    if lookup is not None and not callable(lookup):
        raise IntentkeyError("invalid-argument", "lookup", "lookup must be a function (key, task) -> found(value) | 'absent' | 'unknown'")
    if not isinstance(read_your_writes, bool):
        raise IntentkeyError("invalid-argument", "read_your_writes", "read_your_writes must be a bool")
    if read_your_writes and lookup is None:
        raise IntentkeyError("invalid-argument", "read_your_writes",
                             "read_your_writes needs the lookup that reads the destination")
    if on_outcome is not None and not callable(on_outcome):
        raise IntentkeyError("invalid-argument", "on_outcome", "on_outcome must be a function (OutcomeEvent) -> None")
    if isinstance(margin_seconds, bool) or not isinstance(margin_seconds, (int, float)) or margin_seconds < 0:
        raise IntentkeyError("invalid-argument", "margin_seconds", "margin_seconds must be a non-negative number")

    runner = _Runner(guard, None if wait_max_ms is None else check_wait_max_ms(wait_max_ms))

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(fn):
            raise IntentkeyError("invalid-argument", "fn", "once() decorates a task function")

        @functools.wraps(fn)
        def run(task: Any, *args: Any, **kwargs: Any) -> Any:
            if not (hasattr(task, "request") and hasattr(task, "retry")):
                raise IntentkeyError("invalid-argument", "bind",
                                     "an intentkey.celery.once task must be bound: @app.task(bind=True, ...)")
            return _Delivery(task, args, kwargs, fn, runner, keyer, intent, tenant, action, lookup,
                             read_your_writes, on_outcome, float(margin_seconds)).run()

        return run

    return decorate


class _Runner:
    """The core's run flow over the guard's store: a synchronous guard drives
    it in this thread (its store serves the component's import); an
    asynchronous guard's runs in an event loop of its own (a Celery task is
    synchronous)."""

    def __init__(self, guard: Union[Guard, AsyncGuard], wait_max_ms: Optional[int] = None):
        self.guard = guard
        self.wait_max_ms = wait_max_ms
        self._loops = threading.local()  # an asynchronous guard's event loop, one per worker thread

    def now(self) -> int:
        return self.guard.now()

    def run(self, attempt: Attempt, effect: Callable[[str], Any], lookup: Callable[[str], Lookup],
            read_your_writes: bool) -> RunResult:
        if isinstance(self.guard, Guard):
            return self.guard.run(attempt, effect, lookup=lookup, read_your_writes=read_your_writes,
                                  wait_max_ms=self.wait_max_ms)
        # One loop per thread for the worker's life: an asynchronous store's
        # connections belong to the loop that opened them.
        loop = getattr(self._loops, "loop", None)
        if loop is None:
            loop = self._loops.loop = asyncio.new_event_loop()
        result: RunResult = loop.run_until_complete(
            self.guard.run(attempt, effect, lookup=lookup, read_your_writes=read_your_writes,
                           wait_max_ms=self.wait_max_ms))
        return result


class _Delivery:
    """One delivery of one task call, through the core's run flow."""

    def __init__(self, task: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any], fn: Callable[..., Any], guard: "_Runner",
                 keyer: Keyer, intent: Optional[IntentFn], tenant: Optional[str], action: Optional[str],
                 lookup: Optional[LookupFn], read_your_writes: bool, on_outcome: Optional[Callable[[OutcomeEvent], None]],
                 margin: float):
        self.task, self.args, self.kwargs, self.fn = task, args, kwargs, fn
        self.guard, self.keyer, self.intent, self.tenant, self.action = guard, keyer, intent, tenant, action
        self.lookup, self.read_your_writes, self.on_outcome, self.margin = lookup, read_your_writes, on_outcome, margin
        self.misuse: Optional[IntentkeyQueueError] = None
        self.refusal: Optional[Refuse] = None
        self.value: Any = None
        self.key: Optional[str] = None
        self.task_id: Optional[str] = getattr(getattr(task, "request", None), "id", None)

    # -- reporting and Celery's verbs -------------------------------------------------
    def report(self, outcome: str, **fields: Any) -> None:
        if self.on_outcome is not None:
            self.on_outcome(OutcomeEvent(self.task, self.key, outcome, **fields))

    def label(self) -> str:
        name = getattr(self.task, "name", None) or "task"
        return f"{name}[{self.task_id}]" if self.task_id else str(name)

    def permanent(self, code: str, message: str, field: Optional[str] = None) -> IntentkeyQueueError:
        error = IntentkeyQueueError(code, f"intentkey: {self.label()}: {code}: {message}", key=self.key,
                                    task_id=self.task_id, field=field)
        self.report(code, error=error)
        return error

    def wait(self, reason: str, until: int) -> Any:
        now = self.guard.now()
        retry_at = max(int(until), now)
        error = IntentkeyQueueError(
            "in-flight", f"intentkey: {self.label()}: in-flight: its intent (key {self.key}) is {reason}; retry at {retry_at}",
            key=self.key, task_id=self.task_id, retry_at=retry_at)
        self.report("waiting", reason=reason, retry_at=retry_at)
        # A wait is not a failure: it never exhausts the task's max_retries.
        retries = int(getattr(self.task.request, "retries", 0) or 0)
        raise self.task.retry(countdown=retry_at - now + self.margin, exc=error, max_retries=retries + 1)

    # -- the effect and the look-up as the guard calls them ------------------------------
    def effect(self, key: str) -> Any:
        try:
            value = self.fn(self.task, key, *self.args, **self.kwargs)
        except Refuse as exc:
            self.refusal = exc
            return Refused()
        self.value = value
        try:
            return _response(value, "the task's result")
        except IntentkeyError as exc:
            # The effect ran: its outcome is now the destination's to tell (left in flight).
            raise TypeError(str(exc)) from exc

    def ask(self, key: str) -> Lookup:
        if self.lookup is None:
            return Unknown()
        answer = self.lookup(key, self.task)  # a raise: the guard counts it as unknown
        if isinstance(answer, (Found, Absent, Unknown)):
            return answer
        if answer == "absent":
            return Absent()
        if answer == "unknown":
            return Unknown()
        self.misuse = IntentkeyQueueError(
            "invalid-lookup",
            f"intentkey: {self.label()}: invalid-lookup: lookup(key, task) must answer found(value), 'absent' or "
            f"'unknown'; it answered {type(answer).__name__}", key=key, task_id=self.task_id, field="lookup")
        return Unknown()

    # -- the delivery -------------------------------------------------------------------------
    def run(self) -> Any:
        try:
            if self.intent is not None:
                intent = self.intent(self.task, self.args, dict(self.kwargs))
            else:
                if self.args:
                    raise IntentkeyError("invalid-argument", "args",
                                         "the default intent reads keyword arguments: call the task with keywords, "
                                         "or give once(intent=…)")
                intent = intent_from_kwargs(self.kwargs, tenant=self.tenant,
                                            action=self.action if self.action is not None else getattr(self.task, "name", None))
            attempt = _attempt(intent, self.keyer)
        except IntentkeyError as exc:
            # A call whose intent cannot be keyed never can be: fail it for good.
            raise self.permanent("invalid-intent", str(exc), exc.field) from exc
        self.key = attempt.key
        try:
            # The look-up is always given: a stale claim is recovered (unknown without the user's look-up).
            r = self.guard.run(attempt, self.effect, self.ask, self.read_your_writes)
        except IntentkeyError as exc:
            if exc.code == "store-unavailable":
                # Nothing was decided: the task is retried by its own policy.
                raise self.task.retry(exc=exc)
            raise
        except Exception as exc:
            self.report("failed", error=exc)  # the effect raised: left in flight for recovery
            raise
        if self.misuse is not None:
            self.report("invalid-lookup", error=self.misuse)
            raise self.misuse
        return self.settle(r)

    def settle(self, r: RunResult) -> Any:
        key = self.key
        assert key is not None
        if r.outcome == "ran":
            if r.finished is not None and r.finished.value == "released":
                error = IntentkeyQueueError(
                    "refused", f"intentkey: {self.label()}: refused: the effect refused ({self.refusal}); nothing "
                    "happened, the claim was released; the task is retried", key=key, task_id=self.task_id)
                self.report("refused", error=error)
                raise self.task.retry(exc=error)
            outcome = "re-executed" if r.recovered else "ran"
            self.report(outcome, value=self.value)
            return self.value
        if r.outcome == "replayed":
            value = _value(r.response, key)
            self.report("recovered" if r.recovered else "replayed", value=value)
            return value
        if r.outcome == "conflict":
            raise self.permanent(
                "payload-conflict",
                f"its intent's key {key} was claimed with another payload (the fingerprint differs), so it is not run. "
                "Two task calls with one intent id must carry the same payload: fix the producer, or record a new intent")
        return self.in_flight(r.recovery)

    def in_flight(self, rec: Optional[Recovery]) -> Any:
        """The delivery met its intent in flight: the core says when to retry,
        or that the record needs reconciliation (a permanent failure)."""
        delivery = in_flight_delivery(rec, self.guard.now())
        if delivery.retry_at is None:
            raise self.permanent("needs-reconciliation", self.needs_reconciliation())
        return self.wait(delivery.reason, delivery.retry_at)

    def needs_reconciliation(self) -> str:
        return (f"the destination could not tell whether the effect of key {self.key} happened, look-up after look-up; "
                "the record is needs_reconciliation: settle it by hand, then re-enqueue")


def _task_base() -> Any:
    try:
        from celery import Task  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - celery is optional
        return object
    return Task


class IntentTask(_task_base()):  # type: ignore[misc]
    """A Celery task base with the settings :func:`once` relies on: the message
    is acknowledged after the task (``acks_late``), a worker lost mid-task
    requeues it (``reject_on_worker_lost``), and an :class:`IntentkeyQueueError`
    (permanent) is never auto-retried."""

    acks_late = True
    reject_on_worker_lost = True
    dont_autoretry_for: Sequence[type] = (IntentkeyQueueError,)
