"""The journal: an agent's or a workflow's steps and tool calls, each run once
per run of the intent, over the guard's one claim flow.

Every rule is the core's: the keys (:meth:`intentkey.Keyer.step_attempt` and
:meth:`intentkey.Keyer.tool_call_attempt`: the run and the step's name, or the
run, the tool and its validated arguments; never the model's text or a
tool-call id), what an output may be (the core's ``claims.step-output``: JSON,
bounded), what each claim outcome means (``claims.step-answer``: run it,
replay it, ``step-in-flight``, ``step-input-changed``) and recovery (the core's
run flow of kind ``step`` or ``tool-call``). This module runs the functions and
converts values.

The outcome classes:

* a step's function that returns: its output is recorded and replayed to every
  later attempt of the run;
* a step's function that raises: nothing is recorded, the claim is released (a
  step has no effect outside its output) and the exception is re-raised, so a
  retry asks again;
* a process that dies mid-step leaves the claim in flight; once it is stale
  (the guard's ``stale_after_seconds``) the next attempt takes it over and
  runs the step again: a step's output lives only in the journal;
* a tool call is an effect on the world: the guard's classes apply (an
  exception is ambiguous and stays in flight), and a tool call left in flight
  is settled by the destination's look-up (``lookup``) once stale: found is
  recorded, unknown never re-executes.

>>> import intentkey
>>> from intentkey.journal import Journal
>>> keyer = intentkey.Keyer(secret=bytes(range(32)))
>>> run = intentkey.Run("tenant-acme", "run-42", 1_700_000_000)
>>> journal = Journal(intentkey.Guard(intentkey.MemoryStore()), keyer, run=run)
>>> journal.step("plan", lambda: {"text": "sample 1"})
{'text': 'sample 1'}
>>> journal.step("plan", lambda: {"text": "sample 2"})
{'text': 'sample 1'}
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, List, Optional, Union

from wasmtime.component import Variant

from . import _binding as b
from ._watch import check_wait_max_ms
from .aio import AsyncGuard
from .claims import Guard, RunResult
from .errors import IntentkeyError, IntentkeyTrap
from .keys import Keyer, Run
from .types import Absent, Attempt, Found, Lookup, Recovery, RecoveryState, Refused, Response, Unknown

__all__ = ["AsyncJournal", "Journal", "JournalEvent", "StepInFlight"]

_U32_MAX = (1 << 32) - 1
_OPTIONS = ("run", "max_output_bytes", "observe", "wait_max_ms")


class StepInFlight(IntentkeyError):
    """``step-in-flight``: another attempt of this step or tool call is
    running, or crashed mid-run and could not be settled now. ``recovery``:
    what the recovery tried (``None`` when none was allowed); ``due_at``: when
    a crashed attempt may be taken over, when it is not stale yet."""

    def __init__(self, error: IntentkeyError, recovery: Optional[Recovery]):
        super().__init__(error.code, error.field, error.message)
        self.recovery = recovery
        self.due_at: Optional[int] = (
            recovery.due_at if recovery is not None and recovery.state is RecoveryState.NOT_DUE else None)


@dataclass(frozen=True)
class JournalEvent:
    """What happened to one step or tool call: ``kind`` ``step`` or
    ``tool-call``; ``outcome`` ``ran``, ``replayed``, ``recovered`` (a step
    taken over, a tool call found by its look-up) or ``re-executed`` (a tool
    call run again after a trusted absent)."""

    kind: str
    name: str
    key: str
    outcome: str


class _Unrecordable(Exception):
    """A tool's result the core refused: ambiguous (the effect happened), so
    the record stays in flight; the journal raises the core's error."""

    def __init__(self, error: IntentkeyError):
        super().__init__(error.message)
        self.error = error


ToolLookupAnswer = Any  # {"found": result} | "absent" | "unknown" | Absent() | Unknown()


class _Core:
    """What the sync and async journals share: checks, outputs and answers."""

    def __init__(self, keyer: Keyer, run: Run, max_output_bytes: Optional[int],
                 observe: Optional[Callable[[JournalEvent], None]], wait_max_ms: Optional[int] = None):
        if not isinstance(keyer, Keyer):
            raise IntentkeyError("invalid-argument", "keyer", f"a journal needs an intentkey.Keyer, not {type(keyer).__name__}")
        if not isinstance(run, Run):
            raise IntentkeyError("invalid-argument", "run", f"run is an intentkey.Run, not {type(run).__name__}")
        if max_output_bytes is not None and (isinstance(max_output_bytes, bool) or not isinstance(max_output_bytes, int)
                                             or not 0 <= max_output_bytes <= _U32_MAX):
            raise IntentkeyError("invalid-argument", "max_output_bytes",
                                 f"max_output_bytes must be a whole number of bytes, at most {_U32_MAX}")
        if observe is not None and not callable(observe):
            raise IntentkeyError("invalid-argument", "observe", "observe must be a function (event) -> None")
        #: How long a step or tool call another attempt is running waits for
        #: its output before :class:`StepInFlight` (``None``: the guard's).
        self.wait_max_ms = None if wait_max_ms is None else check_wait_max_ms(wait_max_ms)
        self.keyer = keyer
        self.run = run
        self.max_output_bytes = max_output_bytes
        self._observe = observe

    def _tell(self, kind: str, name: str, key: str, outcome: str) -> None:
        if self._observe is not None:
            self._observe(JournalEvent(kind, name, key, outcome))

    @staticmethod
    def _callable(name: str, fn: Any) -> None:
        if not callable(fn):
            raise IntentkeyError("invalid-argument", name, f"{name} must be a function, not {type(fn).__name__}")

    def _step_attempt(self, name: str, input: Any) -> Attempt:
        b.text("name", name)
        try:
            return self.keyer.step_attempt(self.run, name, input)
        except (TypeError, ValueError) as exc:  # json.dumps of the input
            raise IntentkeyError("invalid-json", "input", f"the input of step `{name}` is not JSON: {exc}") from None

    def _tool_attempt(self, tool: str, arguments: Any) -> Attempt:
        return self.keyer.tool_call_attempt(self.run, b.text("tool", tool), arguments)

    def output_response(self, name: str, value: Any) -> Response:
        """The recorded response of `name`'s output `value`: JSON checked (and bounded) by the core."""
        try:
            text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise IntentkeyError("invalid-step-output", "output",
                                 f"the output of `{name}` cannot be written as JSON ({exc})") from None
        answer = b.runtime("pure").call(b.CLAIMS, "step-output", name, text, self.max_output_bytes)
        return b.response_from_wit(b.unwrap_record(answer))

    def tool_lookup(self, name: str, lookup: Callable[[str], ToolLookupAnswer]) -> Callable[[ToolLookupAnswer], Lookup]:
        """Converts what a tool's look-up answered into the core's look-up answer."""

        def convert(found: ToolLookupAnswer) -> Lookup:
            if isinstance(found, dict) and set(found) == {"found"}:
                return Found(self.output_response(name, found["found"]))
            if found == "absent" or isinstance(found, Absent):
                return Absent()
            if found == "unknown" or isinstance(found, Unknown):
                return Unknown()
            raise IntentkeyError("invalid-argument", "lookup",
                                 'a tool look-up answers {"found": result}, "absent" or "unknown"')

        return convert

    def answer(self, kind: str, name: str, attempt: Attempt, r: RunResult) -> Any:
        """The output when this attempt ran it, the recorded output otherwise,
        or the core's error (step-in-flight, step-input-changed)."""
        if r.outcome == "ran":
            if r.response is None:
                raise IntentkeyTrap(f"the run of `{name}` ended without a response")
            self._tell(kind, name, attempt.key,
                       ("recovered" if kind == "step" else "re-executed") if r.recovered else "ran")
            return json.loads(r.response.body.decode("utf-8"))
        if r.outcome == "replayed":
            assert r.response is not None
            outcome = Variant("done", b.response_to_wit(r.response))
        elif r.outcome == "conflict":
            outcome = Variant("payload-conflict")
        else:
            outcome = Variant("in-flight")
        try:
            recorded = b.unwrap(b.runtime("pure").call(b.CLAIMS, "step-answer", name, outcome))
        except IntentkeyError as e:
            if e.code == "step-in-flight":
                raise StepInFlight(e, r.recovery) from None
            raise
        if recorded is None:
            raise IntentkeyTrap(f"the core answered `{name}` as owned after a run that did not run it")
        self._tell(kind, name, attempt.key, "recovered" if r.recovered else "replayed")
        return json.loads(recorded)


def _absent(_key: str) -> Lookup:
    # A step's destination is the journal: the core answers its look-up.
    return Absent()


class Journal(_Core):
    """A journal of the steps and tool calls of one `run`, over a synchronous
    :class:`intentkey.Guard` (its store, clock and ``stale_after_seconds``:
    how long a step may run before a crashed attempt is taken over).

    ``max_output_bytes``: the largest output recorded, in bytes of JSON
    (default 1 MiB; larger raises ``step-output-too-large``). ``observe``:
    told a :class:`JournalEvent` for every step and tool call.
    ``wait_max_ms`` (0 to 60000; default: the guard's): how long a step or
    tool call that another attempt of the run is running waits for its
    output (replayed when it comes) before :class:`StepInFlight`."""

    def __init__(self, guard: Guard, keyer: Keyer, *, run: Run, max_output_bytes: Optional[int] = None,
                 observe: Optional[Callable[[JournalEvent], None]] = None, wait_max_ms: Optional[int] = None,
                 **unknown: Any):
        b.no_unknown("intentkey.journal.Journal", unknown, _OPTIONS)
        if isinstance(guard, AsyncGuard):
            raise IntentkeyError("invalid-argument", "guard", "an AsyncGuard takes intentkey.journal.AsyncJournal")
        if not isinstance(guard, Guard):
            raise IntentkeyError("invalid-argument", "guard", f"a journal runs over an intentkey.Guard, not {type(guard).__name__}")
        super().__init__(keyer, run, max_output_bytes, observe, wait_max_ms)
        self.guard = guard

    def step(self, name: str, fn: Callable[[], Any], input: Any = None) -> Any:
        """Runs ``fn()`` once per run and step name and records its output
        (JSON); every later attempt gets the recorded output. ``input`` (any
        JSON value) is checked: the same name asked with another input raises
        ``step-input-changed``; another attempt running it raises
        :class:`StepInFlight`. An exception from ``fn`` records nothing and is
        re-raised."""
        self._callable("fn", fn)
        attempt = self._step_attempt(name, input)
        failure: List[BaseException] = []

        def effect(_key: str) -> Union[Response, Refused]:
            try:
                value = fn()
            except Exception as exc:
                failure.append(exc)
                return Refused(None)  # nothing happened: released
            try:
                return self.output_response(name, value)
            except IntentkeyError as exc:
                failure.append(exc)
                return Refused(None)

        r = self.guard.run(attempt, effect, lookup=_absent, read_your_writes=True, kind="step",
                            wait_max_ms=self.wait_max_ms)
        if failure:
            raise failure[0]
        return self.answer("step", name, attempt, r)

    def tool_call(self, tool: str, arguments: Any, fn: Callable[[str], Any], *,
                  lookup: Optional[Callable[[str], ToolLookupAnswer]] = None, read_your_writes: bool = False) -> Any:
        """Runs a validated tool call at most once per run: ``fn(key)`` gets the
        key (send it to the destination as its idempotency key) and returns the
        tool's result (JSON), recorded and replayed. The key covers the run, the
        tool (an action type of the keyer's policy) and the arguments' key
        fields: never the model's text or its tool_call_id. A call left in
        flight is settled once stale by ``lookup(key)``, answering
        ``{"found": result}``, ``"absent"`` (re-runs only with
        ``read_your_writes``) or ``"unknown"`` (never re-runs)."""
        self._callable("fn", fn)
        if lookup is not None:
            self._callable("lookup", lookup)
        attempt = self._tool_attempt(tool, arguments)

        def effect(key: str) -> Response:
            value = fn(key)
            try:
                return self.output_response(tool, value)
            except IntentkeyError as exc:
                raise _Unrecordable(exc) from None  # after the effect: stays in flight

        ask: Optional[Callable[[str], Lookup]] = None
        if lookup is not None:
            convert, given = self.tool_lookup(tool, lookup), lookup

            def asked(key: str) -> Lookup:
                return convert(given(key))

            ask = asked

        try:
            r = self.guard.run(attempt, effect, lookup=ask, read_your_writes=read_your_writes, kind="tool-call",
                                wait_max_ms=self.wait_max_ms)
        except _Unrecordable as exc:
            raise exc.error from None
        return self.answer("tool-call", tool, attempt, r)


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class AsyncJournal(_Core):
    """:class:`Journal` over an :class:`intentkey.aio.AsyncGuard`: ``step``
    and ``tool_call`` are coroutines; ``fn`` and ``lookup`` may be coroutine
    functions."""

    def __init__(self, guard: AsyncGuard, keyer: Keyer, *, run: Run, max_output_bytes: Optional[int] = None,
                 observe: Optional[Callable[[JournalEvent], None]] = None, wait_max_ms: Optional[int] = None,
                 **unknown: Any):
        b.no_unknown("intentkey.journal.AsyncJournal", unknown, _OPTIONS)
        if not isinstance(guard, AsyncGuard):
            raise IntentkeyError("invalid-argument", "guard",
                                 f"an AsyncJournal runs over an intentkey.aio.AsyncGuard, not {type(guard).__name__}")
        super().__init__(keyer, run, max_output_bytes, observe, wait_max_ms)
        self.guard = guard

    async def step(self, name: str, fn: Callable[[], Union[Any, Awaitable[Any]]], input: Any = None) -> Any:
        """As :meth:`Journal.step`."""
        self._callable("fn", fn)
        attempt = self._step_attempt(name, input)
        failure: List[BaseException] = []

        async def effect(_key: str) -> Union[Response, Refused]:
            try:
                value = await _maybe_await(fn())
            except Exception as exc:
                failure.append(exc)
                return Refused(None)
            try:
                return self.output_response(name, value)
            except IntentkeyError as exc:
                failure.append(exc)
                return Refused(None)

        r = await self.guard.run(attempt, effect, lookup=_absent, read_your_writes=True, kind="step",
                            wait_max_ms=self.wait_max_ms)
        if failure:
            raise failure[0]
        return self.answer("step", name, attempt, r)

    async def tool_call(self, tool: str, arguments: Any, fn: Callable[[str], Union[Any, Awaitable[Any]]], *,
                        lookup: Optional[Callable[[str], Union[ToolLookupAnswer, Awaitable[ToolLookupAnswer]]]] = None,
                        read_your_writes: bool = False) -> Any:
        """As :meth:`Journal.tool_call`."""
        self._callable("fn", fn)
        if lookup is not None:
            self._callable("lookup", lookup)
        attempt = self._tool_attempt(tool, arguments)

        async def effect(key: str) -> Response:
            value = await _maybe_await(fn(key))
            try:
                return self.output_response(tool, value)
            except IntentkeyError as exc:
                raise _Unrecordable(exc) from None

        ask: Optional[Callable[[str], Awaitable[Lookup]]] = None
        if lookup is not None:
            convert, given = self.tool_lookup(tool, lookup), lookup

            async def asked(key: str) -> Lookup:
                return convert(await _maybe_await(given(key)))

            ask = asked

        try:
            r = await self.guard.run(attempt, effect, lookup=ask, read_your_writes=read_your_writes, kind="tool-call",
                                wait_max_ms=self.wait_max_ms)
        except _Unrecordable as exc:
            raise exc.error from None
        return self.answer("tool-call", tool, attempt, r)
