"""What the ASGI and WSGI middleware share: their options (each name checked),
the endpoint and guard they make, the tenant and route of a request, and the
reports of what the client does not see. No HTTP rule is here: the core's
serve flow admits, claims, decides, finishes and answers."""

from __future__ import annotations

import inspect
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, FrozenSet, Mapping, Optional, Sequence, Union

from .aio import AsyncGuard
from .claims import Guard
from .errors import IntentkeyError
from .http import Endpoint, Raised, Served, default_methods
from .keys import Keyring, SecretInput

__all__ = ["Config", "Idempotency", "OPTION_NAMES", "SCOPE_KEY", "configure", "error_status"]

#: Where the owner's handler finds its :class:`Idempotency` (the ASGI scope, the WSGI environ).
SCOPE_KEY = "intentkey.idempotency"

#: The options both middleware take, by name (anything else is ``invalid-argument``).
OPTION_NAMES = (
    "secret", "keyring", "store", "profile", "tenant", "route", "methods", "policies", "release_statuses",
    "ttl_seconds", "fast_completion", "now", "on_error", "key_required", "max_body_bytes", "max_stored_bytes",
    "replay_headers", "strict_key_syntax", "retry_after_seconds", "wait_max_ms", "store_deadline_ms",
    "tracer_provider", "meter_provider",
)

log = logging.getLogger("intentkey")

OnError = Callable[[str, BaseException], Any]


@dataclass(frozen=True)
class Idempotency:
    """What the handler of an owned request finds under ``"intentkey.idempotency"``
    in its ASGI scope or WSGI environ: the storage key (HMAC of the secret, the
    tenant and the client's key; the store's primary key) and the tenant."""

    key: str
    tenant_id: str


def _error(name: str, message: str) -> IntentkeyError:
    return IntentkeyError("invalid-argument", name, message)


@dataclass
class Config:
    """A middleware's checked configuration."""

    endpoint: Endpoint
    guard: Union[Guard, AsyncGuard]
    is_async: bool
    tenant: Union[str, Callable[[Any], Any]]
    route: Optional[Callable[[Any], Any]]
    methods: FrozenSet[str]
    on_error: Optional[OnError]
    clock: Callable[[], float]

    @property
    def max_body_bytes(self) -> int:
        return self.endpoint.options.max_body_bytes

    @property
    def header_name(self) -> str:
        return self.endpoint.header_name

    def guards(self, method: str) -> bool:
        """Whether requests with `method` go through the serve flow at all."""
        return method.upper() in self.methods

    def tenant_value(self, value: Any) -> str:
        if not isinstance(value, str) or value == "":
            what = "an empty string" if value == "" else type(value).__name__
            raise _error("tenant", f"tenant answered {what}: it must give each request a non-empty tenant id")
        return value

    def route_value(self, value: Any) -> str:
        if not isinstance(value, str) or value == "":
            raise _error("route", "route must answer a non-empty string (a template or the path)")
        return value

    def report(self, stage: str, error: BaseException) -> None:
        """Hands an error the client does not see to ``on_error(stage, error)``, or logs it."""
        try:
            if self.on_error is not None:
                self.on_error(stage, error)
            else:
                log.error("intentkey: %s: %r", stage, error)
        except Exception:  # an on_error that raises must not break the request
            log.exception("intentkey: on_error raised")

    def report_served(self, served: Served) -> None:
        """Reports what the serve flow met: the store failures and a handler's exception."""
        if served.claim_failure is not None:
            self.report("claim", served.claim_failure)
        for failure in served.finish_failures:
            self.report("complete", failure)
        if served.handler_error is not None:
            self.report("handler", served.handler_error)


def _is_async_store(store: Any) -> bool:
    insert = getattr(store, "insert", None)
    if insert is None:
        raise _error("store", "store has no insert method: give an intentkey.Store or an intentkey.aio.AsyncStore")
    return inspect.iscoroutinefunction(insert)


def configure(adapter: str, *, secret: Optional[SecretInput], keyring: Optional[Keyring], store: Any, profile: str,
              tenant: Any, route: Any, methods: Optional[Sequence[str]], policies: Optional[Mapping[str, Any]],
              release_statuses: Optional[Sequence[int]], ttl_seconds: Optional[int], fast_completion: bool,
              now: Optional[Callable[[], float]], on_error: Optional[OnError], unknown: Mapping[str, Any],
              endpoint_options: Dict[str, Any], allow_async: bool, store_deadline_ms: Optional[int] = None,
              tracer_provider: Any = None, meter_provider: Any = None) -> Config:
    """Checks the options and makes the endpoint and the guard."""
    for name in unknown:
        raise _error(name, f"{adapter}: unknown option {name!r}; the options are {', '.join(OPTION_NAMES)}")
    if secret is None and keyring is None:
        raise IntentkeyError("invalid-secret", "secret",
                             f"{adapter}: the secret option is missing: give at least 32 random bytes (the same "
                             "secret on every server of the API, kept out of the code), or a keyring to rotate secrets")
    if store is None:
        raise _error("store", f"{adapter}: store is missing: give a record store (intentkey.MemoryStore() for tests)")
    is_async = _is_async_store(store)
    if is_async and not allow_async:
        raise _error("store", f"{adapter} serves requests synchronously: give a synchronous intentkey.Store")
    if not isinstance(tenant, str) and not callable(tenant):
        raise _error("tenant", "tenant must be a string or a function of the request")
    if isinstance(tenant, str) and tenant == "":
        raise _error("tenant", "tenant must not be empty")
    if route is not None and not callable(route):
        raise _error("route", "route must be a function of the request")
    if on_error is not None and not callable(on_error):
        raise _error("on_error", "on_error must be a function (stage, error)")
    if now is not None and not callable(now):
        raise _error("now", "now must be a function answering whole seconds")
    if methods is None:
        chosen = frozenset(default_methods())
    else:
        if isinstance(methods, str):
            raise _error("methods", "methods is a list of method names, not one string")
        if not all(isinstance(m, str) and m for m in methods):
            raise _error("methods", "methods must be non-empty strings")
        chosen = frozenset(m.upper() for m in methods)
    if not isinstance(fast_completion, bool):
        raise _error("fast_completion", f"fast_completion must be bool, not {type(fast_completion).__name__}")
    if release_statuses is not None:
        if isinstance(release_statuses, (str, bytes)) or not all(
                isinstance(s, int) and not isinstance(s, bool) and 100 <= s <= 599 for s in release_statuses):
            raise _error("release_statuses", "release_statuses is a list of HTTP statuses (100 to 599)")
    endpoint = Endpoint(secret=secret, keyring=keyring, profile=profile, policies=policies, **endpoint_options)
    clock: Callable[[], float] = time.time if now is None else now
    guard: Union[Guard, AsyncGuard]
    if is_async:
        guard = AsyncGuard(store, ttl_seconds=ttl_seconds, release_statuses=release_statuses,
                           fast_completion=fast_completion, clock=clock, store_deadline_ms=store_deadline_ms,
                           tracer_provider=tracer_provider, meter_provider=meter_provider)
    else:
        if store_deadline_ms is not None:
            raise _error("store_deadline_ms",
                         f"{adapter}: store_deadline_ms bounds the calls of an asynchronous store; a synchronous "
                         "store's calls cannot be cut short here: give the store its own timeouts (see the README, "
                         "\"Faults\")")
        guard = Guard(store, ttl_seconds=ttl_seconds, release_statuses=release_statuses,
                      fast_completion=fast_completion, clock=clock, tracer_provider=tracer_provider,
                      meter_provider=meter_provider)
    return Config(endpoint, guard, is_async, tenant, route, chosen, on_error, clock)


def error_status(error: BaseException) -> Optional[int]:
    """The HTTP status an exception carries (``status_code``, else ``status``:
    Starlette's HTTP exceptions; ``code`` only on werkzeug's, since a client
    library's error such as ``urllib.error.HTTPError`` also has a ``code``:
    the status of a call the handler made, not of this request), or ``None``."""
    names = ("status_code", "status", "code") if type(error).__module__.startswith("werkzeug") else (
        "status_code", "status")
    for name in names:
        value = getattr(error, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    return None


def raised_or_none(error: BaseException) -> Optional[Raised]:
    status = error_status(error)
    return None if status is None else Raised(status)
