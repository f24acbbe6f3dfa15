"""Every golden vector (tests/vectors/*.json) through the installed package:
the Python twin of the Rust runner (crates/vectors/src/lib.rs, used by
crates/intentkey/tests/vectors.rs), with the same checks.

One test per vector, named ``file#tcId``. The files are linted as the Rust
runner lints them (schema, unique tcIds, every flag defined in ``notes``,
``numberOfTests``); an unknown group type fails, and so does a group type
that ran no test. The totals are asserted, so a file that went missing or a
group that was skipped fails the run.
"""

from __future__ import annotations

import binascii
import json
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

import intentkey
from intentkey import IntentkeyError, IntentkeyTrap, Keyer

from conftest import VECTORS

GROUP_TYPES = ("FieldsDerivation", "RequestLine", "PolicyInvalid", "IntentHmac", "Fingerprint", "UuidV4")
#: The vectors the repository holds; a change to the files changes this on purpose.
TOTAL_VECTORS = 892


# --- JSON with number literals kept as written ----------------------------
# The Rust runner parses the vectors with serde_json's `arbitrary_precision`:
# a policy reaches the core with its number literals exactly as written, and
# ids compare by their literal text. Mirror that.

class RawInt(int):
    raw: str

    def __new__(cls, text: str) -> "RawInt":
        obj = super().__new__(cls, text)
        obj.raw = text
        return obj


class RawFloat(float):
    raw: str

    def __new__(cls, text: str) -> "RawFloat":
        obj = super().__new__(cls, text)
        obj.raw = text
        return obj


def _bad_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def load_json(text: str) -> Any:
    return json.loads(text, parse_int=RawInt, parse_float=RawFloat, parse_constant=_bad_constant)


def dump_json(value: Any, sort_keys: bool = False) -> str:
    """JSON text of `value`, numbers as their original literals."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (RawInt, RawFloat)):
        return value.raw
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value)  # ASCII escapes: lone surrogates survive
    if isinstance(value, list):
        return "[" + ",".join(dump_json(v, sort_keys) for v in value) + "]"
    if isinstance(value, dict):
        items = sorted(value.items()) if sort_keys else value.items()
        return "{" + ",".join(json.dumps(k) + ":" + dump_json(v, sort_keys) for k, v in items) + "}"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def same_json(a: Any, b: Any) -> bool:
    """serde_json `Value` equality (arbitrary_precision: numbers by literal)."""
    return dump_json(a, sort_keys=True) == dump_json(b, sort_keys=True)


# --- the files --------------------------------------------------------------

def _files() -> List[Path]:
    return sorted(VECTORS.glob("*.json"))


def _load(path: Path) -> Any:
    return load_json(path.read_text(encoding="utf-8"))


DOCS: Dict[str, Any] = {path.name: _load(path) for path in _files()}


def _vectors() -> List[Tuple[str, Dict[str, Any], Dict[str, Any]]]:
    out = []
    for name, doc in DOCS.items():
        if not isinstance(doc, dict):
            continue
        for group in doc.get("testGroups") or []:
            for test in group.get("tests") or []:
                out.append((name, group, test))
    return out


VECTORS_LIST = _vectors()


# --- per-test checks ----------------------------------------------------------

class VectorError(Exception):
    """The vector itself is not of the expected shape (the Rust runner panics)."""


class LineError(Exception):
    """An error answer line of the JSON-lines contract: its code as written."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.field: Optional[str] = None


def str_of(test: dict, name: str) -> str:
    value = test.get(name)
    if not isinstance(value, str):
        raise VectorError(f"vector member `{name}` is not a string")
    return value


def int_of(test: dict, name: str) -> int:
    value = test.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise VectorError(f"vector member `{name}` is not an integer")
    return int(value)


def secret_of(test: dict) -> bytes:
    text = str_of(test, "secretHex")
    try:
        return binascii.unhexlify(text)
    except (binascii.Error, ValueError) as exc:
        raise VectorError(f"secretHex is not hex: {exc}") from exc


def expected_error(test: dict) -> Optional[str]:
    result = str_of(test, "result")
    if result == "valid":
        return None
    if result == "invalid":
        return str_of(test, "expectedError")
    raise VectorError(f"unknown result {result!r}")


def check(test: dict, run: Callable[[], Any], valid: Callable[[dict, Any], Optional[str]]) -> Optional[str]:
    want_error = expected_error(test)
    try:
        value = run()
    except (IntentkeyError, LineError) as err:
        if isinstance(err, IntentkeyTrap):
            raise
        if want_error is None:
            return f"expected valid, got error {err}"
        if err.code != want_error:
            return f"expected error {want_error}, got {err}"
        return None
    if want_error is not None:
        return f"expected error {want_error}, got a result"
    return valid(test, value)


def compare(what: str, want: Any, got: str) -> Optional[str]:
    if not isinstance(want, str):
        raise VectorError(f"vector lacks `{what}`")
    if want != got:
        return f"{what} differs:\n    want {want!r}\n    got  {got!r}"
    return None


def policy_of(group: dict) -> Optional[str]:
    policy = group.get("policy")
    return None if policy is None else dump_json(policy)


def run_fields(group: dict, test: dict) -> Optional[str]:
    def run() -> Any:
        with Keyer(secret=secret_of(test), policy=policy_of(group)) as keyer:
            epoch = int_of(test, "intentEpoch")
            if not -(1 << 63) <= epoch < (1 << 63):
                raise VectorError("intentEpoch is not an i64")
            intent = (str_of(test, "tenantId"), str_of(test, "actionType"), str_of(test, "payload"), epoch)
            return keyer.material(*intent), keyer.derive(*intent)

    return check(test, run, lambda t, v: compare("material", t.get("material"), v[0]) or compare("key", t.get("key"), v[1]))


def run_request_line(group: dict, test: dict) -> Optional[str]:
    answers = intentkey.answer_lines([str_of(test, "line")])
    if len(answers) != 1:
        return f"expected one answer line, got {len(answers)}"
    line = answers[0]
    try:
        answer = load_json(line)
    except ValueError as exc:
        raise VectorError(f"answer is not JSON ({exc}): {line}") from exc
    members = len(answer) if isinstance(answer, dict) else 0
    if not isinstance(answer, dict) or not same_json(answer.get("id"), test.get("id")) or members != 2:
        return f"answer {line} does not echo id {dump_json(test.get('id'))} alone"
    key, error = answer.get("key"), answer.get("error")
    if isinstance(key, str) and error is None:
        def outcome() -> Any:
            return key
    elif key is None and isinstance(error, dict) and isinstance(error.get("message"), str) and error["message"]:
        code = error.get("code") if isinstance(error.get("code"), str) else ""

        def outcome() -> Any:
            raise LineError(code, error["message"])
    else:
        return f"malformed answer {line}"
    return check(test, outcome, lambda t, k: compare("key", t.get("key"), k))


# Any 32 bytes: PolicyInvalid cases are about the policy alone.
_POLICY_SECRET = bytes(range(32))


def run_policy_invalid(group: dict, test: dict) -> Optional[str]:
    if "policy" not in test:
        raise VectorError("vector lacks `policy`")
    want_path = str_of(test, "errorPath")
    refusal: dict = {}

    def run() -> None:
        try:
            Keyer(secret=_POLICY_SECRET, policy=dump_json(test["policy"])).close()
        except IntentkeyError as err:
            refusal["err"] = err
            raise

    failure = check(test, run, lambda _t, _v: None)
    if failure is None and "err" in refusal and (refusal["err"].field or "") != want_path:
        return f"error path differs: want {want_path!r}, got {refusal['err'].field or ''!r} ({refusal['err']})"
    return failure


def run_intent_hmac(group: dict, test: dict) -> Optional[str]:
    def run() -> Any:
        with Keyer(secret=secret_of(test)) as keyer:
            length = int_of(test, "keyHexLength")
            if not 0 <= length < (1 << 32):
                raise VectorError("keyHexLength is not a u32")
            return keyer.intent_key(str_of(test, "tenantId"), str_of(test, "intentId"), length)

    return check(test, run, lambda t, key: compare("key", t.get("key"), key))


def run_fingerprint(group: dict, test: dict) -> Optional[str]:
    state: dict = {}

    def run() -> Any:
        keyer = Keyer(secret=secret_of(test), policy=policy_of(group))
        state["keyer"] = keyer
        args = (str_of(test, "tenantId"), str_of(test, "actionType"), str_of(test, "payload"))
        state["args"] = args
        return keyer.fingerprint_material(*args), keyer.fingerprint(*args)

    def valid(t: dict, value: Any) -> Optional[str]:
        material, fp = value
        return (
            compare("material", t.get("material"), material)
            or compare("fingerprint", t.get("fingerprint"), fp)
            or (None if state["keyer"].fingerprint_matches(*state["args"], fp) else "fingerprint does not match itself")
        )

    try:
        return check(test, run, valid)
    finally:
        if "keyer" in state:
            state["keyer"].close()


def run_uuid(group: dict, test: dict) -> Optional[str]:
    text = str_of(test, "randomHex")
    try:
        random = binascii.unhexlify(text)
    except (binascii.Error, ValueError) as exc:
        raise VectorError(f"randomHex is not hex: {exc}") from exc
    return check(test, lambda: intentkey.uuid_key(random), lambda t, key: compare("key", t.get("key"), key))


RUNNERS: Dict[str, Callable[[dict, dict], Optional[str]]] = {
    "FieldsDerivation": run_fields,
    "RequestLine": run_request_line,
    "PolicyInvalid": run_policy_invalid,
    "IntentHmac": run_intent_hmac,
    "Fingerprint": run_fingerprint,
    "UuidV4": run_uuid,
}


# --- the tests ----------------------------------------------------------------

def test_the_runner_knows_every_group_type() -> None:
    assert tuple(RUNNERS) == GROUP_TYPES


@pytest.mark.parametrize("name", sorted(DOCS) or ["<none>"])
def test_file_lints(name: str) -> None:
    """Schema, unique tcIds, flags defined in notes, numberOfTests, known group types."""
    assert DOCS, f"no vector files in {VECTORS}"
    doc = DOCS[name]
    assert isinstance(doc, dict) and doc.get("schema") == "intentkey_vectors_v1", f"{name}: schema is not intentkey_vectors_v1"
    groups = doc.get("testGroups")
    assert isinstance(groups, list), f"{name}: testGroups is not a list"
    notes = doc.get("notes") if isinstance(doc.get("notes"), dict) else {}
    problems = []
    ids: set = set()
    count = 0
    for group in groups:
        if group.get("type") not in RUNNERS:
            problems.append(f"unknown group type {group.get('type')!r}; every group must run")
        for test in group.get("tests") or []:
            count += 1
            tc_id = test.get("tcId")
            if tc_id in ids:
                problems.append(f"#{tc_id}: duplicate tcId")
            ids.add(tc_id)
            undefined = [f for f in test.get("flags") or [] if f not in notes]
            if undefined:
                problems.append(f"#{tc_id}: flags {undefined} not defined in notes")
    if doc.get("numberOfTests") != count:
        problems.append(f"numberOfTests is {doc.get('numberOfTests')}, the file has {count}")
    assert not problems, f"{name}: " + "\n".join(problems)


def test_every_vector_and_group_type_is_collected() -> None:
    per_type = Counter(group.get("type") for _name, group, _test in VECTORS_LIST)
    assert len(VECTORS_LIST) == TOTAL_VECTORS, f"{len(VECTORS_LIST)} vectors collected, the repository holds {TOTAL_VECTORS}"
    assert sum(doc.get("numberOfTests", 0) for doc in DOCS.values()) == TOTAL_VECTORS
    missing = [kind for kind in GROUP_TYPES if per_type[kind] == 0]
    assert not missing, f"group types that ran no test: {missing}"
    assert set(per_type) == set(GROUP_TYPES), f"unknown group types: {set(per_type) - set(GROUP_TYPES)}"


@pytest.mark.parametrize(
    "name,group,test", VECTORS_LIST,
    ids=[f"{name}#{test.get('tcId')}" for name, _g, test in VECTORS_LIST])
def test_vector(name: str, group: dict, test: dict) -> None:
    runner = RUNNERS.get(group.get("type"))
    assert runner is not None, f"unknown group type {group.get('type')!r}; every group must run"
    try:
        why = runner(group, test)
    except VectorError as exc:
        why = f"malformed vector: {exc}"
    except IntentkeyTrap as exc:
        why = f"trap: {exc}"
    assert why is None, f"{name}#{test.get('tcId')} ({test.get('comment', '')}): {why}"
