"""The HTTP conformance vectors (tests/vectors/http/http_test.json) through
the installed package: each step is the core's serve flow
(:meth:`intentkey.http.Endpoint.serve`) over a fresh
:class:`intentkey.MemoryStore` per case, wrapped to fail the store
operations a step's ``store_fails`` names by raising
:class:`intentkey.StoreError`. The procedure is the one every runner follows
(tests/vectors/README.md, "HTTP vectors"; the Rust twin is
crates/vectors/src/http.rs, the JavaScript one js/test/http-vector-runner.js).

Each step compares the path taken, whether the handler ran, the status, the
exact header list, the exact body bytes, what finishing did, how many times
it was tried again, and the store failures the serve flow reports
(``claim_failure``, ``finish_failures``). The ``fingerprints``,
``storage_keys`` and ``endpoint_answers`` lists are checked through the
endpoint. A canary run on altered copies of a few vectors must fail, so a
runner that compares nothing cannot pass.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

import intentkey
from intentkey import Guard, MemoryStore, Reply, StoreError
from intentkey import _binding as b
from intentkey.http import Endpoint, Raised, Request

from conftest import HTTP_VECTORS

SCHEMA = "intentkey_http_vectors_v1"
KINDS = ("refused", "unguarded", "replay", "in-flight", "payload-conflict", "unavailable", "handler", "released",
         "failed")
FINISHED = ("stored", "released", "left-in-flight", "superseded")
#: The store operations a step's ``store_fails.claim`` counts; every other one counts as ``finish``.
CLAIM_OPS = ("insert", "get")
INJECTED = "injected by the vector"
PROBE_KEY = "fingerprint-probe"
STORAGE_KEY_ROUTE = "/storage-key"
DEFAULTS = {"strict_key_syntax": False, "retry_after_seconds": 1, "replay_headers": ["Location", "Content-Type"],
            "key_required": True, "max_body_bytes": 1048576, "policies": {}}
#: What the repository's file holds (the README's numbers); asserted so that a truncated file fails.
TOTALS = {"numberOfCases": 36, "numberOfSteps": 192, "numberOfFingerprints": 23, "numberOfStorageKeys": 12,
          "numberOfEndpointAnswers": 9}


class Broken(Exception):
    """The vector file is malformed: not a vector failure, broken input."""


def data(obj: Dict[str, Any], text: str, hexname: str, at: str) -> bytes:
    """``text`` (UTF-8) or ``hexname`` (hex): exactly one."""
    has_text, has_hex = text in obj, hexname in obj
    if has_text == has_hex:
        raise Broken(f"{at}: needs exactly one of {text} and {hexname}")
    if has_text:
        return obj[text].encode("utf-8")
    return bytes.fromhex(obj[hexname])


def show(b: bytes) -> str:
    try:
        s = repr(b.decode("utf-8"))
    except UnicodeDecodeError:
        s = "hex " + b.hex()
    return s if len(s) <= 300 else s[:300] + f"… ({len(b)} bytes)"


def pairs(value: Any) -> List[Tuple[str, str]]:
    return [(n, v) for n, v in value]


def reply_diff(want: Dict[str, Any], got: Reply, at: str) -> List[str]:
    out = []
    if want["status"] != got.status:
        out.append(f"status: want {want['status']}, got {got.status}")
    if pairs(want["headers"]) != list(got.headers):
        out.append(f"headers:\n      want {pairs(want['headers'])}\n      got  {list(got.headers)}")
    body = data(want, "body", "body_hex", at)
    if body != got.body:
        out.append(f"body:\n      want {show(body)}\n      got  {show(got.body)}")
    return out


def endpoint_of(secret: bytes, config: Dict[str, Any]) -> Endpoint:
    return Endpoint(secret=secret, profile=config["profile"], strict_key_syntax=config["strict_key_syntax"],
                    retry_after_seconds=config["retry_after_seconds"], replay_headers=config["replay_headers"],
                    key_required=config["key_required"], max_body_bytes=config["max_body_bytes"],
                    policies=config["policies"])


def as_is(response: Dict[str, Any], at: str) -> Reply:
    """The reply an adapter sends for a handler's response: status, its
    Content-Type (when not empty), its headers as they are, its body."""
    headers = [("Content-Type", response["content_type"])] if response["content_type"] else []
    headers += pairs(response["headers"])
    return Reply(response["status"], tuple(headers), data(response, "body", "body_hex", at))


def sent(handler: Any, at: str) -> Optional[Reply]:
    """What goes out when the core leaves the answer to the runner: the
    response as is, or the bare status of a raised error; None for "throws"."""
    if handler == "throws":
        return None
    if "raises" in handler:
        return Reply(handler["raises"], (), b"")
    return as_is(handler, at)


_side: List[b.Runtime] = []


def side_runtime() -> b.Runtime:
    """An instance of its own for the memory store a FailingStore wraps: the
    guard calls the wrapper through the `store` import, which cannot call
    back into the guard's instance."""
    if not _side:
        _side.append(b.Runtime())
    return _side[0]


class FailingStore:
    """A store that fails, before performing anything, the next ``claim``
    claim operations (insert, get) and the next ``finish`` other operations
    (the finishing writes: complete, release) by raising
    :class:`intentkey.StoreError` ``unavailable`` (unreachable) or ``failed``
    (an error the store answered)."""

    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner
        self.claim = 0
        self.finish = 0
        self.unavailable = True
        self.raised: List[Tuple[str, str]] = []

    def arm(self, fails: Optional[Dict[str, Any]]) -> None:
        fails = fails or {"claim": 0, "finish": 0, "unavailable": True}
        self.claim, self.finish, self.unavailable = fails["claim"], fails["finish"], fails["unavailable"]
        self.raised = []

    def _op(self, name: str, *args: Any) -> Any:
        budget = "claim" if name in CLAIM_OPS else "finish"
        if getattr(self, budget) > 0:
            setattr(self, budget, getattr(self, budget) - 1)
            kind = "unavailable" if self.unavailable else "failed"
            self.raised.append((name, kind))
            raise StoreError(kind, INJECTED)
        return getattr(self.inner, name)(*args)

    def insert(self, record: Any) -> Any:
        return self._op("insert", record)

    def get(self, key: str) -> Any:
        return self._op("get", key)

    def complete(self, c: Any) -> Any:
        return self._op("complete", c)

    def replace(self, r: Any) -> Any:
        return self._op("replace", r)

    def release(self, r: Any) -> Any:
        return self._op("release", r)

    def list(self, status: Any, limit: int) -> Any:
        return self._op("list", status, limit)

    def purge(self, now: int) -> Any:
        return self._op("purge", now)


class Trace:
    def __init__(self, kind: str, ran: bool, reply: Reply, finished: Optional[str], finish_retries: int,
                 claim_failure: Optional[StoreError], finish_failures: List[StoreError],
                 raised: List[Tuple[str, str]]) -> None:
        self.kind, self.ran, self.reply, self.finished, self.finish_retries = kind, ran, reply, finished, finish_retries
        self.claim_failure, self.finish_failures, self.raised = claim_failure, finish_failures, raised


def run_step(endpoint: Endpoint, guard: Guard, header_name: str, step: Dict[str, Any], at: str) -> Trace:
    """One step (README, "HTTP vectors"): the serve flow does everything."""
    now = step["now"]
    request = step["request"]
    headers = pairs(request["headers"])
    key_values = [v for n, v in headers if n.lower() == header_name.lower()]
    content_type = next((v for n, v in headers if n.lower() == "content-type"), None)
    body = data(request, "body", "body_hex", at + ".request")
    handler = step["handler"]
    reply_as_sent = sent(handler, at + ".handler")

    def run_handler(_key: str) -> Any:
        if handler == "throws":
            raise RuntimeError("the vector's handler throws")
        if "raises" in handler:
            return Raised(handler["raises"])
        return reply_as_sent

    store = guard.store
    assert isinstance(store, FailingStore)
    store.arm(step.get("store_fails"))
    served = endpoint.serve(guard, Request(request["tenant"], request["method"], request["route"], key_values,
                                           content_type, body),
                            run_handler, now=now, sleep=lambda _seconds: None)
    kind = served.path.value
    if kind not in KINDS:
        raise AssertionError(f"the serve flow took an unknown path {kind!r}")
    ran = served.ran
    if kind in ("handler", "released", "unguarded"):
        if served.reply is not None:
            raise AssertionError(f"the core gave a {served.reply.status} reply on path {kind}, "
                                 "where the handler's or the framework's answer goes out")
        if reply_as_sent is None:
            raise Broken(f"{at}: path {kind} with a handler that throws")
        if kind == "unguarded":
            ran = True  # the flow claimed nothing: the runner runs the handler itself
        reply = reply_as_sent
    elif served.reply is None:
        raise AssertionError(f"the core gave no reply on path {kind}")
    else:
        reply = served.reply
    finished = None if served.finished is None else served.finished.value
    return Trace(kind, ran, reply, finished, served.finish_retries, served.claim_failure,
                 list(served.finish_failures), list(store.raised))


def step_problems(step: Dict[str, Any], trace: Trace, at: str) -> List[str]:
    expect = step["expect"]
    out = []
    if trace.kind != expect["kind"]:
        out.append(f"path: want {expect['kind']}, got {trace.kind}")
    if trace.ran != expect["ran"]:
        out.append(f"handler ran: want {expect['ran']}, got {trace.ran}")
    out += reply_diff(expect, trace.reply, at)
    if trace.finished != expect["finished"]:
        out.append(f"finish: want {expect['finished']}, got {trace.finished}")
    if trace.finish_retries != expect["finish_retries"]:
        out.append(f"finish retries: want {expect['finish_retries']}, got {trace.finish_retries}")
    # What the serve flow reports of the injected failures: one claim failure
    # when a claim operation failed, one finish failure per failed finishing write.
    fails = step.get("store_fails") or {"claim": 0, "finish": 0, "unavailable": True}
    kind = "unavailable" if fails["unavailable"] else "failed"
    claim_raised = [k for op, k in trace.raised if op in CLAIM_OPS]
    finish_raised = [k for op, k in trace.raised if op not in CLAIM_OPS]
    if claim_raised:
        if trace.claim_failure is None:
            out.append(f"claim failure: the store raised {len(claim_raised)} time(s), the serve flow reported none")
        elif (trace.claim_failure.kind, trace.claim_failure.message) != (kind, INJECTED):
            out.append(f"claim failure: want {kind} {INJECTED!r}, got {trace.claim_failure}")
    elif trace.claim_failure is not None:
        out.append(f"claim failure: none injected, got {trace.claim_failure}")
    if fails["claim"] > 0 and not claim_raised:
        out.append(f"claim failures: {fails['claim']} armed, none reached the store")
    got_finish = [(f.kind, f.message) for f in trace.finish_failures]
    if got_finish != [(kind, INJECTED)] * len(finish_raised):
        out.append(f"finish failures: the store raised {len(finish_raised)}, the serve flow reported {got_finish}")
    if expect["ran"] and len(finish_raised) != fails["finish"]:
        out.append(f"finish failures: {fails['finish']} armed, {len(finish_raised)} reached the store")
    return out


class Report:
    def __init__(self) -> None:
        self.counts = {name: [0, 0] for name in ("cases", "steps", "fingerprints", "storage keys", "endpoint answers")}
        self.handler_runs = 0
        self.failures: List[str] = []

    def tally(self, name: str, passed: bool) -> None:
        self.counts[name][0] += 1
        self.counts[name][1] += passed

    def summary(self) -> str:
        parts = [f"{p}/{n} {name}" for name, (n, p) in self.counts.items()]
        parts[1] += f" ({self.handler_runs} handler runs)"
        return f"python-wasmtime: http vectors: {', '.join(parts)} passed"


def guarded(admission: Any) -> Any:
    if admission.kind != "guarded":
        detail = f" with {admission.reply.status} {show(admission.reply.body)}" if admission.reply else ""
        raise AssertionError(f"admitted {admission.kind}{detail}, want guarded")
    return admission.attempt


def run_case(secret: bytes, case: Dict[str, Any], report: Report) -> None:
    name = case["name"]
    before = len(report.failures)
    endpoint = endpoint_of(secret, case["endpoint"])
    guard = Guard(FailingStore(MemoryStore(_runtime=side_runtime())), release_statuses=case["release_statuses"])
    header_name = endpoint.header_name
    if header_name != case["header_name"]:
        report.failures.append(f"{name}: header-name: want {case['header_name']!r}, got {header_name!r}")
    for i, step in enumerate(case["steps"]):
        at = f"{name}#{i + 1}"
        try:
            trace = run_step(endpoint, guard, case["header_name"], step, at)
            problems = step_problems(step, trace, at)
            report.handler_runs += trace.ran
        except Broken:
            raise
        except Exception as exc:  # a runtime error or a broken contract
            problems = [f"{type(exc).__name__}: {exc}"]
        report.tally("steps", not problems)
        if problems:
            report.failures.append(f"{at}: " + "\n    ".join(problems))
    endpoint.close()
    report.tally("cases", len(report.failures) == before)


def run(doc: Dict[str, Any]) -> Report:
    secret = bytes.fromhex(doc["secret_hex"])
    report = Report()
    for case in doc["cases"]:
        run_case(secret, case, report)

    for i, f in enumerate(doc["fingerprints"]):
        at = f"fingerprints[{i}] ({f['comment']})"
        try:
            endpoint = endpoint_of(secret, {**DEFAULTS, "profile": "stripe", "policies": f["policies"]})
            a = guarded(endpoint.admit(Request(f["tenant"], f["method"], f["route"], [PROBE_KEY], f["content_type"],
                                               data(f, "body", "body_hex", at)), now=0))
            endpoint.close()
            problems = []
            if a.fingerprint != f["fingerprint"]:
                problems.append(f"fingerprint: want {f['fingerprint']}, got {a.fingerprint}")
            if (a.tenant_id, a.action_type) != (f["tenant"], f["action_type"]):
                problems.append(f"attempt: want {f['tenant']} / {f['action_type']}, got {a.tenant_id} / {a.action_type}")
        except Exception as exc:
            problems = [f"{type(exc).__name__}: {exc}"]
        report.tally("fingerprints", not problems)
        if problems:
            report.failures.append(f"{at}: " + "; ".join(problems))

    for i, s in enumerate(doc["storage_keys"]):
        at = f"storage_keys[{i}] ({s['comment']})"
        try:
            endpoint = endpoint_of(secret, {**DEFAULTS, "profile": s["profile"]})
            a = guarded(endpoint.admit(Request(s["tenant"], "POST", STORAGE_KEY_ROUTE, [s["header_value"]], None, b""),
                                       now=0))
            endpoint.close()
            problems = [] if a.key == s["storage_key"] else [f"storage key: want {s['storage_key']}, got {a.key}"]
        except Exception as exc:
            problems = [f"{type(exc).__name__}: {exc}"]
        report.tally("storage keys", not problems)
        if problems:
            report.failures.append(f"{at}: " + "; ".join(problems))

    calls: Dict[str, Callable[[Endpoint, int], Reply]] = {
        "too-large": lambda e, now: e.too_large(now=now),
        "unavailable": lambda e, now: e.unavailable(now=now),
        "failed": lambda e, now: e.failed(now=now),
    }
    for i, a in enumerate(doc["endpoint_answers"]):
        at = f"endpoint_answers[{i}] ({a['comment']})"
        try:
            endpoint = endpoint_of(secret, a["endpoint"])
            problems = reply_diff(a["expect"], calls[a["call"]](endpoint, a["now"]), at)
            endpoint.close()
        except Exception as exc:
            problems = [f"{type(exc).__name__}: {exc}"]
        report.tally("endpoint answers", not problems)
        if problems:
            report.failures.append(f"{at}: " + "\n    ".join(problems))
    return report


def lint(doc: Any) -> None:
    """The schema, the counts, the members every runner relies on."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise Broken(f"schema is not {SCHEMA}")
    cases = doc["cases"]
    counts = {
        "numberOfCases": len(cases),
        "numberOfSteps": sum(len(c["steps"]) for c in cases),
        "numberOfFingerprints": len(doc["fingerprints"]),
        "numberOfStorageKeys": len(doc["storage_keys"]),
        "numberOfEndpointAnswers": len(doc["endpoint_answers"]),
    }
    for name, found in counts.items():
        if doc.get(name) != found:
            raise Broken(f"{name} says {doc.get(name)}, the file holds {found}")
    names = [c["name"] for c in cases]
    if len(set(names)) != len(names):
        raise Broken("two cases share a name")
    for c in cases:
        for i, s in enumerate(c["steps"]):
            e = s["expect"]
            if e["kind"] not in KINDS:
                raise Broken(f"{c['name']}#{i + 1}: unknown kind {e['kind']!r}")
            at = f"{c['name']}#{i + 1}"
            if (e["kind"] == "refused") != ("refusal" in e):
                raise Broken(f"{at}: refusal is given exactly when the kind is refused")
            if e["finished"] is not None and e["finished"] not in FINISHED:
                raise Broken(f"{at}: unknown finished {e['finished']!r}")
            if not isinstance(e["finish_retries"], int) or e["finish_retries"] < 0:
                raise Broken(f"{at}: finish_retries is not a count")
            h = s["handler"]
            if not (h == "throws" or (isinstance(h, dict) and (set(h) == {"raises"} or "status" in h))):
                raise Broken(f"{at}: handler is neither a response, {{\"raises\": status}} nor \"throws\"")
            fails = s.get("store_fails")
            if fails is not None and not (isinstance(fails.get("claim"), int) and isinstance(fails.get("finish"), int)
                                          and isinstance(fails.get("unavailable"), bool)):
                raise Broken(f"{at}: store_fails is not {{claim, finish, unavailable}}")


def canary(doc: Dict[str, Any]) -> List[str]:
    """Alters five vectors (a body, whether the handler ran, what finishing
    did, how often it was tried again, a fingerprint); the runner must report
    each. Returns problems."""
    altered = copy.deepcopy(doc)
    cases = altered["cases"]
    retried = next((c for c in cases if any(s["expect"]["finish_retries"] > 0 for s in c["steps"])), None)
    finished = next((c for c in cases[2:] if c is not retried
                     and any(s["expect"]["finished"] is not None for s in c["steps"])), None)
    if retried is None or finished is None:
        return ["the vectors hold no case whose finishing is tried again, or none that finishes"]
    altered["cases"] = [cases[0], cases[1], retried, finished]
    body = cases[0]["steps"][1]["expect"]
    body["body"] = body["body"] + " "
    cases[1]["steps"][0]["expect"]["ran"] = False
    step = next(s for s in retried["steps"] if s["expect"]["finish_retries"] > 0)
    step["expect"]["finish_retries"] -= 1
    step = next(s for s in finished["steps"] if s["expect"]["finished"] is not None)
    step["expect"]["finished"] = None
    altered["fingerprints"] = altered["fingerprints"][:1]
    altered["fingerprints"][0]["fingerprint"] = "0" * 64
    altered["storage_keys"] = altered["storage_keys"][:1]
    altered["endpoint_answers"] = altered["endpoint_answers"][:1]
    report = run(altered)
    problems = []
    if len(report.failures) != 5:
        problems.append(f"the canary run on 5 altered vectors reported {len(report.failures)} failures: {report.failures}")
    if report.counts["cases"][1] != 0 or report.counts["fingerprints"][1] != 0:
        problems.append("the canary run passed an altered case or fingerprint")
    return problems


DOC: Dict[str, Any] = json.loads(HTTP_VECTORS.read_text(encoding="utf-8"))


def test_the_file_lints_and_holds_every_vector() -> None:
    lint(DOC)
    for name, want in TOTALS.items():
        assert DOC[name] == want, f"{name}: the file says {DOC[name]}, the repository holds {want}"


@pytest.mark.parametrize("case", DOC["cases"], ids=[c["name"] for c in DOC["cases"]])
def test_case(case: Dict[str, Any]) -> None:
    report = Report()
    run_case(bytes.fromhex(DOC["secret_hex"]), case, report)
    assert not report.failures, "\n".join(report.failures)
    assert report.counts["steps"] == [len(case["steps"]), len(case["steps"])]


def test_every_list_passes_with_the_expected_totals(capsys: pytest.CaptureFixture[str]) -> None:
    report = run(DOC)
    with capsys.disabled():
        print("\n" + report.summary())
    assert not report.failures, "\n".join(report.failures)
    assert report.counts == {
        "cases": [36, 36], "steps": [192, 192], "fingerprints": [23, 23], "storage keys": [12, 12],
        "endpoint answers": [9, 9]}
    expected_runs = sum(s["expect"]["ran"] for c in DOC["cases"] for s in c["steps"])
    assert report.handler_runs == expected_runs, f"the handler ran {report.handler_runs} times, the vectors say {expected_runs}"


def test_store_failures_are_injected_by_some_steps() -> None:
    """The failure-injecting store is exercised: claims and finishing writes, both kinds."""
    fails = [s["store_fails"] for c in DOC["cases"] for s in c["steps"] if s.get("store_fails")]
    assert any(f["claim"] > 0 for f in fails) and any(f["finish"] > 0 for f in fails)
    assert {f["unavailable"] for f in fails} == {True, False}


def test_canary_altered_vectors_are_reported() -> None:
    assert canary(DOC) == []
