"""The packed calls of the guest memory store: ``claim-intent-packed`` and
``finish-packed`` (wit/intentkey.wit, interface ``memory``).

Each string or list handed to the guest is one ``cabi_realloc`` call into
it, and from Python each call into the guest costs about as much as a small
claim's work inside it. The packed methods take the same arguments as
``claim-intent`` and ``finish`` in one byte list (a JSON header, then the
payload's text or the body's bytes) and answer in two, so a claim is three
calls into the guest instead of seven and a finish three instead of nine.
The guest takes the request apart into the typed values and runs the same
method; nothing is decided here. Every string is checked before (``_binding.text``:
a lone surrogate is not UTF-8), so every request encodes.
"""

from __future__ import annotations

import json
import os
from typing import Any, List, Optional, Sequence, Tuple

from . import _binding as b
from .errors import IntentkeyError
from .types import Answered, Claim, ClaimState, EffectResult, Failed, Refused, Response

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
#: The packed answers' JSON reader.
loads = json.loads
_urandom = os.urandom
_STATES = {s.value: s for s in ClaimState}

CLAIM = "[method]memory-store.claim-intent-packed"
FINISH = "[method]memory-store.finish-packed"


def claim_request(tenant_id: str, action_type: str, payload_json: str, intent_epoch: int,
                  intent_id: Optional[str], key_hex_length: Optional[int], now: int) -> Tuple[bytes, int]:
    """``(request, header-len)`` of a packed claim (arguments already checked)."""
    head = _dumps([tenant_id, action_type, intent_epoch, intent_id, key_hex_length, now]).encode("utf-8")
    return _urandom(b.SEED_BYTES) + head + payload_json.encode("utf-8"), len(head)


def claimed(answer: Any) -> Tuple[str, Claim]:
    """``(key, claim)`` of a packed claim's answer."""
    return claim_of(loads(answer.header), answer.body)


def claim_of(header: List[Any], body: bytes) -> Tuple[str, Claim]:
    """``(key, claim)`` of a claim's packed header ``[key, outcome,
    owner-token, …]`` and body."""
    state = _STATES[header[1]]
    if state is ClaimState.DONE:
        response = Response(header[3], bytes(body), header[4], tuple((n, v) for n, v in header[5]))
        return header[0], Claim(state, header[2], response)
    return header[0], Claim(state, header[2])


def _response_parts(r: Any) -> Tuple[int, str, List[Tuple[str, str]], bytes]:
    """A response's fields, checked as the typed path checks them."""
    if not isinstance(r, Response):
        raise IntentkeyError("invalid-argument", "response", f"a response is an intentkey.Response, not {type(r).__name__}")
    return (b.uint("status", r.status, 16), b.text("content_type", r.content_type),
            b.headers_in("headers", r.headers), b.body_bytes("body", r.body))


def finish_request(key: str, owner_token: str, result: EffectResult, now: int, ttl_seconds: int,
                   release_statuses: Sequence[int], fast_completion: bool) -> Tuple[bytes, int]:
    """``(request, header-len)`` of a packed finish (`key`, `owner_token`
    and `now` already checked; the result is checked here)."""
    if isinstance(result, Answered):
        effect, (status, content_type, headers, body) = "answered", _response_parts(result.response)
    elif isinstance(result, Refused):
        if result.response is None:
            effect, status, content_type, headers, body = "refused-empty", 0, "", [], b""
        else:
            effect, (status, content_type, headers, body) = "refused", _response_parts(result.response)
    elif isinstance(result, Failed):
        effect, status, content_type, headers, body = "failed", 0, "", [], b""
    else:
        raise IntentkeyError("invalid-argument", "result",
                               f"an effect result is Answered, Refused or Failed, not {type(result).__name__}")
    head = _dumps([key, owner_token, effect, status, content_type, headers, now, ttl_seconds,
                   list(release_statuses), fast_completion]).encode("utf-8")
    return head + body, len(head)
