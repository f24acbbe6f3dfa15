"""Telemetry in the core's vocabulary, through ``opentelemetry-api``
(optional: ``pip install intentkey[otel]``).

The core names every decision once (WIT ``flows``: ``served-decisions``,
``ran-decisions``, ``recovered-decision``, ``release-decision``,
``key-digest``, ``telemetry-names``); this module only hands them to the
OpenTelemetry API. Python has no vocabulary of its own:

* one span per guarded request (the ASGI and WSGI middleware,
  :meth:`intentkey.http.Endpoint.serve`, :meth:`intentkey.aio.AsyncGuard.serve`)
  and per run (:meth:`intentkey.Guard.run`, a journal's step or tool call, a
  Celery delivery, a recovery), named by the core (``intentkey.request``),
  with the primary decision (``intentkey.decision``), the HTTP profile or the
  run's kind (``intentkey.profile``), the store's kind (``intentkey.store``:
  ``memory``, ``sqlite``, ``postgres``, ``mysql``, ``redis``, ``dynamodb``,
  ``custom`` for any other store), a digest of the storage key
  (``intentkey.key_digest``, 12 hex: never the client's key, the secret or
  the body), the milliseconds waited for the first attempt
  (``intentkey.wait_ms``) and spent in store calls (``intentkey.store_ms``);
* the counter ``intentkey.decisions`` (each decision of a request or run, by
  ``intentkey.decision`` and ``intentkey.store``), the histograms
  ``intentkey.store.duration`` (each store call) and
  ``intentkey.wait.duration`` (each wait), in milliseconds;
* :func:`observe_records`: the observable gauge ``intentkey.records`` of the
  records in flight and awaiting reconciliation (``intentkey.status``:
  ``in_flight``, ``needs_reconciliation``) from the store's cheap count.

The spans and instruments are made on the global providers (register an SDK
first), or on the ``tracer_provider`` / ``meter_provider`` a guard or a
middleware is given. Without ``opentelemetry-api``, or with no SDK
registered, a request computes nothing for telemetry.

>>> from intentkey import telemetry
>>> telemetry.names().decisions, telemetry.names().span
('intentkey.decisions', 'intentkey.request')
>>> len(telemetry.key_digest("5f0c…a storage key"))
12
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Dict, Iterable, List, Optional, Sequence, Tuple

from wasmtime.component import Variant

from . import _binding as b
from .errors import IntentkeyError
from .types import Status

try:  # the optional dependency (intentkey[otel])
    from opentelemetry import metrics as _metrics
    from opentelemetry import trace as _trace
    from opentelemetry.metrics import CallbackOptions, Observation
    from opentelemetry.trace import Status as _SpanStatus
    from opentelemetry.trace import StatusCode as _StatusCode

    AVAILABLE = True
except ImportError:  # pragma: no cover - exercised in a virtualenv without the extra
    AVAILABLE = False

__all__ = ["AVAILABLE", "Decisions", "Names", "SCOPE", "key_digest", "names", "observe_records",
           "ran_decisions", "recovered_decision", "release_decision", "served_decisions", "store_kind"]

log = logging.getLogger("intentkey")

#: The instrumentation scope every span and instrument is made under.
SCOPE = "intentkey"

#: The store kinds telemetry names (the core's ``intentkey.store`` values); any other store is ``custom``.
KINDS = ("memory", "sqlite", "postgres", "mysql", "redis", "dynamodb")

#: The statuses the records gauge reports: (the store's status, the stored spelling the gauge says).
GAUGED = ((Status.IN_FLIGHT, "in_flight"), (Status.NEEDS_RECONCILIATION, "needs_reconciliation"))


@dataclass(frozen=True)
class Names:
    """The span, attribute and metric names every host reports under (the core's ``telemetry-names``)."""

    span: str
    decision: str
    profile: str
    store: str
    key_digest: str
    wait_ms: str
    store_ms: str
    decisions: str
    store_duration: str
    wait_duration: str
    records: str
    status: str


@dataclass(frozen=True)
class Decisions:
    """The decisions of one request or run: what its span's ``intentkey.decision``
    says (`primary`), and what the decision counter counts, in order (`all`)."""

    primary: str
    all: Tuple[str, ...]


def _pure(name: str, *args: Any) -> Any:
    return b.runtime("pure").call(b.FLOWS, name, *args)


_names: Optional[Names] = None


def names() -> Names:
    """The core's names (asked once)."""
    global _names
    if _names is None:
        raw = _pure("telemetry-names")
        _names = Names(**{field: str(b.get(raw, field)) for field in Names.__dataclass_fields__})
    return _names


def key_digest(key: str) -> str:
    """A short digest of a storage key for spans and logs (12 hex; the core's
    ``key-digest``): never the client's key, which a storage key is already an HMAC of."""
    return str(_pure("key-digest", b.text("key", key)))


def _decisions(raw: Any) -> Decisions:
    return Decisions(str(raw.primary), tuple(str(d) for d in raw.all))


def _u32(value: Any) -> int:
    return min(max(int(value), 0), (1 << 32) - 1)


def served_decisions(path: str, finished: Optional[str], waited_ms: int) -> Decisions:
    """The decisions of a served request: its serve path (``intentkey.http.ServePath``
    value), what finishing did (``intentkey.Finished`` value, or ``None``), how long it waited."""
    return _decisions(_pure("served-decisions", str(path), None if finished is None else str(finished),
                            _u32(waited_ms)))


def ran_decisions(outcome: Any, waited_ms: int) -> Decisions:
    """The decisions of a run: its WIT ``run-outcome`` (as a run flow answers it), how long it waited."""
    return _decisions(_pure("ran-decisions", outcome, _u32(waited_ms)))


def recovered_decision(recovered: Any) -> Optional[str]:
    """What a recovery decided (its WIT ``recovered``), when it asked the destination and wrote."""
    found = _pure("recovered-decision", recovered)
    return None if found is None else str(found)


def release_decision(finished: str) -> str:
    """What releasing a claim whose handler never ran did (``released`` or ``superseded``)."""
    return str(_pure("release-decision", str(finished)))


def store_kind(store: Any) -> str:
    """The kind telemetry names `store` by: the package's stores by their
    ``kind`` (a subclass keeps its base's), any other ``custom``."""
    for cls in type(store).__mro__:
        if cls.__module__.startswith("intentkey.") and "kind" in cls.__dict__:
            kind = cls.__dict__["kind"]
            return kind if kind in KINDS else "custom"
    return "custom"


def key_of(op: str, arg: Any) -> Optional[str]:
    """The storage key a store operation (its WIT argument) is about."""
    try:
        if op == "get":
            return str(arg)
        if op in ("insert", "complete", "release"):
            return str(arg.key)
        if op == "replace":
            return str(arg.record.key)
    except AttributeError:
        return None
    return None


def _recovered_of(outcome: Any) -> Any:
    """The WIT ``recovered`` a run outcome carries or stands for: a run that
    took a stale record over and ran the effect again (an applied
    re-execute), one that recorded the destination's answer and replayed it
    (an applied record-done), or the recovery an in-flight or
    recovery-only run made."""
    tag, payload = outcome.tag, outcome.payload
    if tag == "ran":
        return Variant("applied", Variant("re-execute")) if payload.recovered else None
    if tag == "replayed":
        return Variant("applied", Variant("record-done", payload.response)) if payload.recovered else None
    if tag in ("in-flight", "recovery"):
        return payload
    return None


def _check_provider(name: str, value: Any, method: str) -> Any:
    if value is not None and not callable(getattr(value, method, None)):
        raise IntentkeyError("invalid-argument", name,
                             f"{name} must be an OpenTelemetry {'TracerProvider' if method == 'get_tracer' else 'MeterProvider'} "
                             f"(with {method}), not {type(value).__name__}")
    return value


def _noop_provider(provider: Any) -> bool:
    return type(provider).__name__ in ("_ProxyMeterProvider", "NoOpMeterProvider")


class _Instruments:
    def __init__(self, meter: Any, n: Names):
        self.decisions = meter.create_counter(n.decisions, unit="{decision}", description="intentkey decisions, by kind")
        self.store_duration = meter.create_histogram(n.store_duration, unit="ms", description="intentkey store calls")
        self.wait_duration = meter.create_histogram(n.wait_duration, unit="ms",
                                                    description="waits for the first attempt's answer")


_made: Dict[int, Tuple[Any, _Instruments]] = {}
_made_lock = threading.Lock()


def _instruments_of(meter: Any) -> _Instruments:
    made = _made.get(id(meter))
    if made is None or made[0] is not meter:
        with _made_lock:
            made = _made.get(id(meter))
            if made is None or made[0] is not meter:
                made = (meter, _Instruments(meter, names()))
                _made[id(meter)] = made
    return made[1]


class Telemetry:
    """The telemetry of one guard over `store`: spans on `tracer_provider`
    (default: the global one), metrics on `meter_provider` (default: the global one)."""

    def __init__(self, store: Any, tracer_provider: Any = None, meter_provider: Any = None):
        self.tracer_provider = _check_provider("tracer_provider", tracer_provider, "get_tracer")
        self.meter_provider = _check_provider("meter_provider", meter_provider, "get_meter")
        self.kind = store_kind(store)
        self._tracer: Any = None
        self._last_provider: Any = None
        self._last_instruments: Optional[_Instruments] = None

    def tracer(self) -> Any:
        if self._tracer is None:
            provider = self.tracer_provider
            # The global tracer is a proxy: it records once an SDK is registered, whenever that is.
            self._tracer = _trace.get_tracer(SCOPE) if provider is None else provider.get_tracer(SCOPE)
        return self._tracer

    def instruments(self) -> Optional[_Instruments]:
        """The instruments to record on; ``None`` while no meter records."""
        provider = self.meter_provider if self.meter_provider is not None else _metrics.get_meter_provider()
        if provider is not self._last_provider:
            self._last_instruments = None if _noop_provider(provider) else _instruments_of(provider.get_meter(SCOPE))
            self._last_provider = provider
        return self._last_instruments

    def begin(self, profile: str) -> Optional["Probe"]:
        """The probe of one request or run of `profile` (an HTTP profile, or
        the run's kind), or ``None`` when nothing would record it."""
        if not AVAILABLE:
            return None
        instruments = self.instruments()
        n = names()
        span = self.tracer().start_span(n.span, attributes={n.profile: profile, n.store: self.kind})
        if instruments is None and not span.is_recording():
            span.end()
            return None
        return Probe(self, span, instruments)

    def count(self, decision: str) -> None:
        """One decision outside a request (the background release of a claim)."""
        if not AVAILABLE:
            return
        made = self.instruments()
        if made is not None:
            n = names()
            made.decisions.add(1, {n.decision: decision, n.store: self.kind})

    def released(self, finished: Any) -> None:
        """A background release ended with `finished`: its decision is counted."""
        if AVAILABLE and self.instruments() is not None:
            self.count(release_decision(str(getattr(finished, "value", finished))))


class Probe:
    """What one request or run reports: its span (started when it was made)
    and what it measured. The host calls :meth:`store_call` for each store
    call and :meth:`saw_key`, then one of :meth:`served`, :meth:`ran` or
    :meth:`failed`."""

    def __init__(self, tel: Telemetry, span: Any, instruments: Optional[_Instruments]):
        self.tel = tel
        self.span = span
        self.instruments = instruments
        self.key: Optional[str] = None
        self._key_firm = False
        self.store_ms = 0.0
        self.waited_ms = 0
        self.ended = False

    def current(self) -> ContextManager[Any]:
        """The span as the current one, for the length of a block (the handler's, the effect's)."""
        # The handler's own exceptions are not recorded on the span: their
        # messages are the application's, and may hold what a span never does.
        return _trace.use_span(self.span, end_on_exit=False, record_exception=False, set_status_on_exception=False)

    def store_call(self, op: str, arg: Any, ms: float) -> None:
        """One store call of `ms` milliseconds (`op` and its WIT argument give the key)."""
        self.store_ms += ms
        if self.instruments is not None:
            self.instruments.store_duration.record(ms, {names().store: self.tel.kind})
        if not self._key_firm:
            key = key_of(op, arg)
            if key is not None:
                self.saw_key(key, firm=op == "insert")

    def saw_key(self, key: str, firm: bool = True) -> None:
        """The storage key of the request or run: an insert's (`firm`) wins over any other call's."""
        if self._key_firm:
            return
        if firm:
            self.key, self._key_firm = key, True
        elif self.key is None:
            self.key = key

    def served(self, path: str, finished: Optional[str], waited_ms: int) -> None:
        """How a served request ended."""
        if not self.ended:
            self.end(served_decisions(path, finished, waited_ms), waited_ms)

    def ran(self, outcome: Any, waited_ms: int, recovery: bool = False) -> None:
        """How a run ended (its WIT run-outcome): the core's decisions of the
        run, and of the recovery it made, if any. `recovery`: the run is a
        recovery (``guard.recover``), whose span carries the recovery's decision."""
        if self.ended:
            return
        decisions = ran_decisions(outcome, waited_ms)
        recovered = _recovered_of(outcome)
        decided = None if recovered is None else recovered_decision(recovered)
        if decided is not None:
            if recovery:
                decisions = Decisions(decided, (decided,))
            elif decided not in decisions.all:
                decisions = Decisions(decisions.primary, decisions.all + (decided,))
        self.end(decisions, waited_ms)

    def end(self, decisions: Decisions, waited_ms: int) -> None:
        self.ended = True
        n = names()
        span = self.span
        if span.is_recording():
            attributes: Dict[str, Any] = {n.decision: decisions.primary, n.wait_ms: int(waited_ms),
                                          n.store_ms: float(self.store_ms)}
            if self.key is not None:
                attributes[n.key_digest] = key_digest(self.key)
            span.set_attributes(attributes)
        span.end()
        made = self.instruments
        if made is not None:
            for d in decisions.all:
                made.decisions.add(1, {n.decision: d, n.store: self.tel.kind})
            if waited_ms > 0:
                made.wait_duration.record(float(waited_ms), {n.store: self.tel.kind})

    def failed(self, error: BaseException) -> None:
        """The request or run ended without a decision of the core (a store
        failure, a bug): the span says so, by error code only."""
        if self.ended:
            return
        self.ended = True
        code = error.code if isinstance(error, IntentkeyError) else "error"
        self.span.set_status(_SpanStatus(_StatusCode.ERROR, code))
        self.span.end()


def current(probe: Optional[Probe]) -> ContextManager[Any]:
    """`probe`'s span as the current one, or nothing."""
    return contextlib.nullcontext() if probe is None else probe.current()


def observe_records(store: Any, *, meter_provider: Any = None, timeout: float = 2.0) -> Callable[[], None]:
    """Registers the observable gauge ``intentkey.records`` (the core's name)
    of `store`: how many records are in flight and awaiting reconciliation
    (attribute ``intentkey.status``: ``in_flight``, ``needs_reconciliation``;
    and ``intentkey.store``), read with the store's cheap count
    (``count(status)``: the memory, SQLite, PostgreSQL, MySQL and Redis
    stores; DynamoDB has none) each time a metric reader collects, never
    otherwise. On the global meter provider's ``intentkey`` meter, or
    `meter_provider`'s. An asynchronous store is counted on its event loop:
    call this from that loop (an ASGI app's startup); a reader collecting
    from another thread waits up to `timeout` seconds for the count, and one
    collecting on the loop itself gets the last count read. Answers a
    function that stops the gauge's observations."""
    if not AVAILABLE:
        raise IntentkeyError("invalid-argument", "store",
                             "observe_records needs opentelemetry-api: pip install intentkey[otel]")
    count = getattr(store, "count", None)
    if not callable(count):
        raise IntentkeyError("invalid-argument", "store",
                             f"{type(store).__name__} has no count(status), so no records gauge (the memory, SQLite, "
                             "PostgreSQL, MySQL and Redis stores have one; DynamoDB has no cheap count)")
    _check_provider("meter_provider", meter_provider, "get_meter")
    is_async = inspect.iscoroutinefunction(count)
    loop: Optional[asyncio.AbstractEventLoop] = None
    if is_async:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise IntentkeyError("invalid-argument", "store",
                                 "observe_records of an asynchronous store runs on its event loop: call it from "
                                 "that loop (an ASGI app's startup)") from None
    n = names()
    kind = store_kind(store)
    live = [True]
    last: Dict[Status, int] = {}
    refreshing: List[Any] = []

    async def refresh() -> None:
        for status, _ in GAUGED:
            try:
                last[status] = int((await count(status)).count)
            except Exception:
                pass
        refreshing.clear()

    def counted(status: Status) -> Optional[int]:
        if not is_async:
            return int(count(status).count)
        assert loop is not None
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:  # the loop cannot wait for itself: the last count, and a new one read for the next collection
            if not refreshing:
                refreshing.append(loop.create_task(refresh()))
            return last.get(status)
        value = int(asyncio.run_coroutine_threadsafe(count(status), loop).result(timeout).count)
        last[status] = value
        return value

    def observe(_options: "CallbackOptions") -> Iterable["Observation"]:
        found: List[Observation] = []
        if not live[0]:
            return found
        for status, stored in GAUGED:
            try:
                value = counted(status)
            except Exception:  # a store that cannot be reached now: no point this time
                continue
            if value is not None:
                found.append(Observation(value, {n.status: stored, n.store: kind}))
        return found

    provider = meter_provider if meter_provider is not None else _metrics.get_meter_provider()
    provider.get_meter(SCOPE).create_observable_gauge(
        n.records, callbacks=[observe], unit="{record}",
        description="intentkey records by status (in flight, needing reconciliation)")

    def stop() -> None:
        live[0] = False

    return stop


def store_calls_timer(probe: Optional[Probe]) -> Optional[Callable[[str, Sequence[Any], float], None]]:
    """The observer of store calls made through the component's ``store``
    import (op name, WIT arguments, milliseconds), for `probe`."""
    if probe is None:
        return None

    def observe(op: str, args: Sequence[Any], ms: float) -> None:
        probe.store_call(op, args[0] if args else None, ms)

    return observe
