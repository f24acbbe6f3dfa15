#!/usr/bin/env python3
"""Runs every golden vector (tests/vectors/*.json) through the WebAssembly
component via wasmtime-py: the Python twin of the Rust runner
(crates/vectors/src/lib.rs, used by crates/intentkey/tests/vectors.rs), with
the same checks.

A failure names ``file#tcId``. An unknown group type fails the run (no runner
may skip a group), and so does a group type that ran no tests. The files are
linted as the Rust runner does (schema, unique tcIds, every flag defined in
``notes``, ``numberOfTests``); a lint problem counts as a failure.

Last line: ``python-wasmtime: N passed, M failed``. Exit status 0 only when
M == 0 and every group type ran.
"""

from __future__ import annotations

import argparse
import binascii
import json
import os
import sys
import time
from collections import Counter
from typing import Any, Callable, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import intentkey_wasm as ik  # noqa: E402

GROUP_TYPES = ("FieldsDerivation", "RequestLine", "PolicyInvalid", "IntentHmac", "Fingerprint", "UuidV4")


# --- JSON with number literals kept as written ----------------------------
# The vectors are parsed by serde_json with `arbitrary_precision` in the Rust
# runner: a policy reaches the core with its number literals exactly as
# written, and ids compare by their literal text. Mirror that.

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


# --- per-test checks ----------------------------------------------------------

class VectorError(Exception):
    """The vector itself is not of the expected shape (the Rust runner panics)."""


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
    except ik.IntentkeyError as err:
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
        keyer = ik.Keyer(policy_of(group), secret_of(test))
        try:
            epoch = int_of(test, "intentEpoch")
            if not -(1 << 63) <= epoch < (1 << 63):
                raise VectorError("intentEpoch is not an i64")
            intent = (str_of(test, "tenantId"), str_of(test, "actionType"), str_of(test, "payload"), epoch)
            return keyer.material(*intent), keyer.derive(*intent)
        finally:
            keyer.close()

    return check(test, run, lambda t, v: compare("material", t.get("material"), v[0]) or compare("key", t.get("key"), v[1]))


def run_request_line(test: dict) -> Optional[str]:
    answers = ik.answer_lines([str_of(test, "line")])
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
        outcome: Callable[[], Any] = lambda: key
    elif key is None and isinstance(error, dict) and isinstance(error.get("message"), str) and error["message"]:
        code = error.get("code") if isinstance(error.get("code"), str) else ""

        def outcome() -> Any:
            raise ik.IntentkeyError(code, None, error["message"])
    else:
        return f"malformed answer {line}"
    return check(test, outcome, lambda t, k: compare("key", t.get("key"), k))


# Any 32 bytes: PolicyInvalid cases are about the policy alone.
_POLICY_SECRET = bytes(range(32))


def run_policy_invalid(test: dict) -> Optional[str]:
    if "policy" not in test:
        raise VectorError("vector lacks `policy`")
    want_path = str_of(test, "errorPath")
    refusal: dict = {}

    def run() -> None:
        try:
            ik.Keyer(dump_json(test["policy"]), _POLICY_SECRET).close()
        except ik.IntentkeyError as err:
            refusal["err"] = err
            raise

    def valid(_t: dict, _v: Any) -> Optional[str]:
        return None

    failure = check(test, run, valid)
    if failure is None and "err" in refusal and (refusal["err"].field or "") != want_path:
        return f"error path differs: want {want_path!r}, got {refusal['err'].field or ''!r} ({refusal['err']})"
    return failure


def run_intent_hmac(test: dict) -> Optional[str]:
    def run() -> Any:
        keyer = ik.Keyer(None, secret_of(test))
        try:
            length = int_of(test, "keyHexLength")
            if not 0 <= length < (1 << 32):
                raise VectorError("keyHexLength is not a u32")
            return keyer.intent_key(str_of(test, "tenantId"), str_of(test, "intentId"), length)
        finally:
            keyer.close()

    return check(test, run, lambda t, key: compare("key", t.get("key"), key))


def run_fingerprint(group: dict, test: dict) -> Optional[str]:
    state: dict = {}

    def run() -> Any:
        keyer = ik.Keyer(policy_of(group), secret_of(test))
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


def run_uuid(test: dict) -> Optional[str]:
    text = str_of(test, "randomHex")
    try:
        random = binascii.unhexlify(text)
    except (binascii.Error, ValueError) as exc:
        raise VectorError(f"randomHex is not hex: {exc}") from exc
    return check(test, lambda: ik.uuid_key(random), lambda t, key: compare("key", t.get("key"), key))


RUNNERS = {
    "FieldsDerivation": run_fields,
    "RequestLine": lambda group, test: run_request_line(test),
    "PolicyInvalid": lambda group, test: run_policy_invalid(test),
    "IntentHmac": lambda group, test: run_intent_hmac(test),
    "Fingerprint": run_fingerprint,
    "UuidV4": lambda group, test: run_uuid(test),
}
assert tuple(RUNNERS) == GROUP_TYPES


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--component", default=os.path.join(REPO, "dist", "intentkey.wasm"), help="the intentkey component (.wasm)")
    parser.add_argument("--vectors", default=os.path.join(REPO, "tests", "vectors"), help="directory of *_test.json vector files")
    parser.add_argument("-v", "--verbose", action="store_true", help="print per-file counts")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    try:
        ik.load(args.component)
    except Exception as exc:  # missing file, not a component, wrong imports...
        print(f"cannot load the component {args.component}: {exc}", file=sys.stderr)
        print("python-wasmtime: 0 passed, 1 failed")
        return 2
    loaded = time.perf_counter()

    files = sorted(f for f in os.listdir(args.vectors) if f.endswith(".json"))
    passed = 0
    failures: list = []
    per_type: Counter = Counter()
    if not files:
        failures.append(f"no vector files in {args.vectors}")

    for name in files:
        try:
            with open(os.path.join(args.vectors, name), encoding="utf-8") as fh:
                doc = load_json(fh.read())
        except (OSError, ValueError) as exc:
            failures.append(f"{name}: not readable JSON: {exc}")
            continue
        if not isinstance(doc, dict) or doc.get("schema") != "intentkey_vectors_v1":
            failures.append(f"{name}: schema is not intentkey_vectors_v1")
            continue
        notes = doc.get("notes") if isinstance(doc.get("notes"), dict) else {}
        ids: set = set()
        count = 0
        groups = doc.get("testGroups")
        if not isinstance(groups, list):
            failures.append(f"{name}: testGroups is not a list")
            continue
        for group in groups:
            kind = group.get("type")
            runner = RUNNERS.get(kind)
            for test in group.get("tests") or []:
                count += 1
                tc_id = test.get("tcId")
                label = f"{name}#{tc_id} ({test.get('comment', '')})"
                if tc_id in ids:
                    failures.append(f"{name}#{tc_id}: duplicate tcId")
                ids.add(tc_id)
                undefined = [f for f in test.get("flags") or [] if f not in notes]
                if undefined:
                    failures.append(f"{name}#{tc_id}: flags {undefined} not defined in notes")
                if runner is None:
                    failures.append(f"{label}: unknown group type {kind!r}; every group must run")
                    continue
                per_type[kind] += 1
                try:
                    why = runner(group, test)
                except VectorError as exc:
                    why = f"malformed vector: {exc}"
                except ik.IntentkeyTrap as exc:
                    why = f"trap: {exc}"
                if why is None:
                    passed += 1
                else:
                    failures.append(f"{label}: {why}")
        if doc.get("numberOfTests") != count:
            failures.append(f"{name}: numberOfTests is {doc.get('numberOfTests')}, the file has {count}")
        if args.verbose:
            print(f"{name}: {count} tests")

    elapsed = time.perf_counter() - started
    missing = [kind for kind in GROUP_TYPES if per_type[kind] == 0]
    failures += [f"group type {kind} ran no test" for kind in missing]
    for failure in failures:
        print(f"FAIL {failure}")
    for kind in GROUP_TYPES:
        print(f"  {kind}: {per_type[kind]}")
    print(f"  (component loaded in {loaded - started:.2f} s, all vectors in {elapsed:.2f} s)")
    print(f"python-wasmtime: {passed} passed, {len(failures)} failed")
    return 1 if failures or missing else 0


if __name__ == "__main__":
    sys.exit(main())
