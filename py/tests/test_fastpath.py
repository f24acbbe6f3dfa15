"""The direct call path (intentkey._canon: the component's core module called
through the canonical ABI) against wasmtime-py's component API: the same
scenarios run on a runtime of each kind and must give identical results;
traps, failing imports and odd values behave the same."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
from typing import Any, Callable, Dict, Iterator, List

import pytest
from wasmtime.component import Variant

import intentkey as ik
from intentkey import _binding as b
from intentkey.http import Endpoint, Request

from conftest import VECTORS

T = 1_700_000_000
PINNED = importlib.metadata.version("wasmtime") == b.PINNED_WASMTIME


def _pair(fast: bool) -> Dict[str, b.Runtime]:
    return {"intentkey": b.Runtime("intentkey", fastpath=fast), "pure": b.Runtime("pure", fastpath=fast)}


@pytest.fixture(scope="module")
def runtimes() -> Dict[str, Dict[str, b.Runtime]]:
    return {"fast": _pair(True), "plain": _pair(False)}


@contextlib.contextmanager
def using(rts: Dict[str, b.Runtime]) -> Iterator[None]:
    saved = dict(b._runtimes)
    b._runtimes.clear()
    b._runtimes.update(rts)
    try:
        yield
    finally:
        b._runtimes.clear()
        b._runtimes.update(saved)


def both(runtimes: Dict[str, Dict[str, b.Runtime]], scenario: Callable[[], Any]) -> Any:
    """Runs `scenario` on the compiled and on the plain runtimes; their results must be equal."""
    with using(runtimes["fast"]):
        fast = scenario()
    with using(runtimes["plain"]):
        plain = scenario()
    assert fast == plain
    return fast


def outcome_of(fn: Callable[[], Any]) -> Any:
    """A value, or the error it raised (type, code, field, message) so errors compare too."""
    try:
        return ("ok", fn())
    except ik.IntentkeyError as e:
        return ("error", type(e).__name__, e.code, e.field, str(e))
    except Exception as e:  # noqa: BLE001 - compared, not swallowed
        return ("raised", type(e).__name__)


def test_the_pinned_wasmtime_runs_the_canonical_abi_path(runtimes: Dict[str, Dict[str, b.Runtime]]) -> None:
    assert runtimes["plain"]["intentkey"].fastpath is False
    assert runtimes["fast"]["intentkey"].fastpath is PINNED
    for world in ("intentkey", "pure"):
        # No silent fallback: every type of both components has a codec.
        assert (runtimes["fast"][world]._canon is not None) is PINNED, world
        assert runtimes["plain"][world]._canon is None, world
    forced_off = os.environ.get("INTENTKEY_FASTPATH") == "0"
    assert b.runtime().fastpath is (PINNED and not forced_off)
    assert b.fastpath_supported() is (PINNED and not forced_off)


def test_golden_vectors_sample(runtimes: Dict[str, Dict[str, b.Runtime]]) -> None:
    tests: List[Dict[str, Any]] = []
    for name in ("fields_default_test.json", "policy_custom_test.json"):
        for group in json.loads((VECTORS / name).read_text())["testGroups"]:
            for t in group["tests"][::7]:
                tests.append(dict(t, group_policy=group.get("policy")))
    assert len(tests) > 60

    def run() -> List[Any]:
        out = []
        for t in tests:
            def one() -> Any:
                if "secretHex" not in t:  # PolicyInvalid: the policy is the test's
                    ik.Keyer(secret=b"p" * 32, policy=json.dumps(t["policy"]))
                    return "accepted"
                policy = t["group_policy"]
                k = ik.Keyer(secret=bytes.fromhex(t["secretHex"]), policy=None if policy is None else json.dumps(policy))
                return k.derive(t["tenantId"], t["actionType"], t["payload"], t["intentEpoch"])
            out.append(outcome_of(one))
        return out

    results = both(runtimes, run)
    for t, r in zip(tests, results):
        if t["result"] == "valid":
            assert r == ("ok", t["key"]), t["tcId"]
        else:
            assert r[0] == "error" and r[2] == t["expectedError"], t["tcId"]


def test_guard_flow(runtimes: Dict[str, Dict[str, b.Runtime]]) -> None:
    def run() -> Any:
        store = ik.MemoryStore()
        g = ik.Guard(store)
        k = ik.Keyer(secret=b"k" * 32)
        a = k.intent_attempt("tenant-acme", "pix.send", '{"amount":"10.00","currency":"BRL","creditor_key":"x"}', 0)
        c = g.claim(a, now=T)
        busy = g.claim(a, now=T + 1)
        fin = g.finish(a.key, c.owner_token, ik.Answered(ik.Response.json(201, '{"id":1}')), now=T + 2)
        replay = g.claim(a, now=T + 3)
        conflict = g.claim(ik.Attempt(a.key, "other", a.tenant_id, a.action_type), now=T + 4)
        runs = []
        for i in range(3):
            other = k.intent_attempt("tenant-acme", "pix.send", f'{{"amount":"{i}.00","currency":"BRL","creditor_key":"x"}}', 0)
            runs.append(g.run(other, lambda key: ik.Response.json(201, '{"n":2}'), now=T))
            runs.append(g.run(other, lambda key: ik.Response.json(500, "{}"), now=T + 5))
        released = g.claim(ik.Attempt("rel", "fp", "t", "a"), now=T)
        rel = g.finish("rel", released.owner_token, ik.Answered(ik.Response.json(503, "{}")), now=T)
        refused = g.claim(ik.Attempt("ref", "fp", "t", "a"), now=T)
        ref = g.finish("ref", refused.owner_token, ik.Refused(None), now=T)
        failed = g.claim(ik.Attempt("fail", "fp", "t", "a"), now=T)
        fl = g.finish("fail", failed.owner_token, ik.Failed(), now=T)
        due = g.due(now=T + 10**6)
        return (a, c.state, busy.state, fin, replay.state, replay.response, conflict.state,
                [(r.outcome, r.response, r.finished) for r in runs], rel, ref, fl, due, g.purge(now=T + 10**9),
                sorted(store.records))

    both(runtimes, run)


def test_serve(runtimes: Dict[str, Dict[str, b.Runtime]]) -> None:
    def run() -> Any:
        g = ik.Guard(ik.MemoryStore())
        ep = Endpoint(secret=b"e" * 32, profile="stripe")
        calls: List[str] = []

        def handler(key: str) -> ik.Reply:
            calls.append(key)
            return ik.Reply(201, (("Content-Type", "application/json"),), '{"id":"çé✓"}'.encode())

        req = Request("tenant-1", "POST", "/orders", ["key-1"], "application/json", b'{"amount":1}')
        first = ep.serve(g, req, handler, now=T)
        again = ep.serve(g, req, handler, now=T + 1)
        other = ep.serve(g, Request("tenant-1", "POST", "/orders", ["key-1"], "application/json", b'{"amount":2}'),
                         handler, now=T + 2)
        return [(s.path, s.reply, s.finished, s.ran, s.handler_reply) for s in (first, again, other)], len(calls)

    result = both(runtimes, run)
    assert result[1] == 1


class FailingGet:
    """A record exists (insert refuses), and reading it fails."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def insert(self, record: Any) -> bool:
        return False

    def get(self, key: str) -> Any:
        raise ik.StoreError(self.kind, "the database is away")


def test_a_store_get_that_raises_store_error(runtimes: Dict[str, Dict[str, b.Runtime]]) -> None:
    def run() -> Any:
        out = []
        for kind in ("failed", "unavailable"):
            g = ik.Guard(FailingGet(kind))
            out.append(outcome_of(lambda: g.claim(ik.Attempt("k", "fp", "t", "a"), now=T)))
            out.append(outcome_of(lambda: g.run(ik.Attempt("k2", "fp", "t", "a"), lambda key: ik.Response.json(201, "{}"), now=T)))
        return out

    out = both(runtimes, run)
    assert out[0][0] == "error" and out[0][2] == "store-failed"
    assert out[2][0] == "error" and out[2][2] == "store-unavailable"


class RaisingStore:
    def insert(self, record: Any) -> bool:
        raise RuntimeError("not a store error")


def test_an_import_that_raises_discards_the_instance(runtimes: Dict[str, Dict[str, b.Runtime]]) -> None:
    def run() -> Any:
        rt = b.runtime()
        k = ik.Keyer(secret=b"s" * 32)
        before = k.derive("t", "a", "{}", 0)
        generation = rt.generation
        with pytest.raises(ik.IntentkeyTrap) as e:
            ik.Guard(RaisingStore()).claim(ik.Attempt("k", "fp", "t", "a"), now=T)
        assert isinstance(e.value.__cause__, RuntimeError)
        assert rt._store is None  # discarded
        after = k.derive("t", "a", "{}", 0)  # the keyer re-created in a new instance
        assert rt.generation == generation + 1
        return before, after, "s" * 32 not in str(e.value)

    before, after, clean = both(runtimes, run)
    assert before == after and clean


def test_fuel_exhaustion_traps(runtimes: Dict[str, Dict[str, b.Runtime]]) -> None:
    def run() -> Any:
        rt = b.Runtime("pure", fuel_per_call=2_000, fastpath=b.runtime().fastpath)
        with pytest.raises(ik.IntentkeyTrap):
            rt.call(b.SCHEMA, "sql-statements", "postgres", "intentkey")
        assert rt._store is None
        rt.fuel_per_call = b.DEFAULT_FUEL_PER_CALL
        return len(b.unwrap(rt.call(b.SCHEMA, "sql-statements", "postgres", "intentkey"))) > 0

    assert both(runtimes, run)


def test_unicode_strings(runtimes: Dict[str, Dict[str, b.Runtime]]) -> None:
    texts = ["", "ascii", "ção", "日本語", "😀 emoji", "e\u0301", "\u0000nul", "\uffff", "a" * 10_000]

    def run() -> Any:
        k = ik.Keyer(secret=b"u" * 32, policy={"version": 1, "fields": {"note": "key"}} if False else None)
        out = []
        for s in texts:
            out.append(outcome_of(lambda: k.derive(s, s or "x", json.dumps({"remittance": s, "amount": "1.00", "currency": "BRL", "creditor_key": s}), 0)))
            out.append(outcome_of(lambda: k.fingerprint(s, s, s)))
        out.append(outcome_of(lambda: k.derive("\ud800", "a", "{}", 0)))  # a lone surrogate is not UTF-8
        return out

    out = both(runtimes, run)
    assert out[-1][0] in ("error", "raised")


@pytest.mark.parametrize("size", [0, 1, 1 << 20])
def test_byte_bodies(runtimes: Dict[str, Dict[str, b.Runtime]], size: int) -> None:
    body = os.urandom(size)

    def run() -> Any:
        g = ik.Guard(ik.MemoryStore())
        a = ik.Attempt(f"k{size}", "fp", "t", "a")
        resp = ik.Response(200, body, "application/octet-stream", (("X-N", str(size)),))
        first = g.run(a, lambda key: resp, now=T)
        replay = g.run(a, lambda key: resp, now=T + 1)
        return first.response, replay.response

    first, replay = both(runtimes, run)
    assert first.body == body and replay.body == body


@pytest.mark.parametrize("size", [0, 1 << 20])
def test_byte_arguments_and_request_bodies(runtimes: Dict[str, Dict[str, b.Runtime]], size: int) -> None:
    data = os.urandom(size)

    def run() -> Any:
        rt = b.runtime()
        uuid = [outcome_of(lambda: b.unwrap(rt.call(b.KEYS, "uuid-key", bytes(range(16))))),
                outcome_of(lambda: b.unwrap(rt.call(b.KEYS, "uuid-key", data[:15])))]
        ep = Endpoint(secret=b"e" * 32, profile="ietf")
        got: List[int] = []
        served = ep.serve(ik.Guard(ik.MemoryStore()), Request("t", "POST", "/x", ["k"], "application/octet-stream", data),
                          lambda key: (got.append(size), ik.Reply(200, (), data))[1], now=T)
        return uuid, served.path, served.handler_reply, served.reply

    both(runtimes, run)


def test_nested_options_and_variants(runtimes: Dict[str, Dict[str, b.Runtime]]) -> None:
    def run() -> Any:
        pure = b.runtime("pure")
        out: List[Any] = []
        # result<option<string>, error> with a variant argument carrying an optional payload
        for outcome in (Variant("owned"), Variant("in-flight"), Variant("payload-conflict"),
                        Variant("done", b.response_to_wit(ik.Response.json(200, '{"output":{"a":1}}')))):
            out.append(outcome_of(lambda: b.unwrap(pure.call(b.CLAIMS, "step-answer", "step-1", outcome))))
        # result<option<record>, store-error> through the store import: none, some, and an error
        store = ik.MemoryStore()
        g = ik.Guard(store)
        out.append(g.claim(ik.Attempt("n", "fp", "t", "a"), now=T).state)  # get -> none
        out.append(g.claim(ik.Attempt("n", "fp", "t", "a"), now=T).state)  # get -> some(in flight)
        # a recovery: the gateway import answers a variant (found / absent / unknown)
        for answer in (ik.Found(ik.Response.json(201, "{}")), ik.Absent(), ik.Unknown()):
            key = f"r-{type(answer).__name__}"
            g.claim(ik.Attempt(key, "fp", "t", "a"), now=T)
            rec = g.recover(key, lambda k, a=answer: a, read_your_writes=True, now=T + 10**5)
            out.append((rec.state, rec.action, rec.status, rec.due_at))
        # run outcomes: in-flight with option<recovery>, recovery payloads
        out.append(g.run(ik.Attempt("n", "fp", "t", "a"), lambda k: ik.Response.json(201, "{}"), now=T + 1))
        out.append(g.run(ik.Attempt("n", "fp", "t", "a"), lambda k: ik.Response.json(201, "{}"),
                         lookup=lambda k: ik.Unknown(), now=T + 10**6))
        out.append(g.run(ik.Attempt("z", "fp", "t", "a"), lambda k: ik.Refused(ik.Response.json(409, "{}")), now=T))
        return out

    both(runtimes, run)
