"""The command-line tool: ``python -m intentkey derive --jsonl`` (the
JSON-lines contract of the Rust tool and the npm binary, checked against the
golden vectors) and ``python -m intentkey demo`` (the Rust demo's timeline,
its wording read from host/cli/src/demo.rs)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

import intentkey
from intentkey import demo

from conftest import HTTP_VECTORS, REPO, VECTORS

RUST_DEMO = REPO / "host" / "cli" / "src" / "demo.rs"


def cli(*args: str, stdin: bytes = b"", env: Optional[Dict[str, str]] = None, cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "intentkey", *args], input=stdin, capture_output=True, timeout=300,
                          env=env, cwd=cwd)


def error_of(stderr: bytes) -> Dict[str, Any]:
    """The one JSON error object a failed command prints on stderr."""
    lines = stderr.decode("utf-8").strip().splitlines()
    assert len(lines) == 1, f"stderr is not one line: {stderr!r}"
    doc = json.loads(lines[0])
    assert set(doc) == {"error"} and set(doc["error"]) == {"code", "message"}, doc
    assert doc["error"]["code"] in intentkey.ERROR_CODES
    return dict(doc["error"])


def _request_line_vectors() -> List[Dict[str, Any]]:
    doc = json.loads((VECTORS / "request_lines_test.json").read_text(encoding="utf-8"))
    tests = [t for g in doc["testGroups"] if g["type"] == "RequestLine" for t in g["tests"]]
    usable = []
    for t in tests:
        try:
            t["line"].encode("utf-8")
        except UnicodeEncodeError:
            continue  # a lone surrogate cannot be written as UTF-8 bytes
        if "\n" not in t["line"]:
            usable.append(t)
    return usable


REQUEST_LINES = _request_line_vectors()


def check_answer(test: Dict[str, Any], line: str) -> None:
    answer = json.loads(line)
    assert answer.get("id") == test["id"] and len(answer) == 2, f"#{test['tcId']}: {line}"
    if test["result"] == "valid":
        assert answer.get("key") == test["key"], f"#{test['tcId']} ({test['comment']}): {line}"
    else:
        assert "key" not in answer and answer["error"]["code"] == test["expectedError"], f"#{test['tcId']}: {line}"
        assert answer["error"]["message"]


# --- derive --jsonl ---------------------------------------------------------

def test_derive_jsonl_answers_every_request_line_vector_in_order() -> None:
    assert len(REQUEST_LINES) >= 90, f"only {len(REQUEST_LINES)} request-line vectors are usable"
    stdin = "".join(t["line"] + "\n" for t in REQUEST_LINES).encode("utf-8")
    done = cli("derive", "--jsonl", stdin=stdin)
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode("utf-8").split("\n")
    assert out[-1] == "" and len(out) - 1 == len(REQUEST_LINES)
    for test, line in zip(REQUEST_LINES, out):
        check_answer(test, line)
    keys = sum(t["result"] == "valid" for t in REQUEST_LINES)
    assert done.stderr.decode() == f"intentkey: answered {len(REQUEST_LINES)} lines: {keys} keys, {len(REQUEST_LINES) - keys} errors\n"


def test_derive_jsonl_is_the_core_s_answer_lines_across_batches() -> None:
    """More lines than one batch (1024), a line that is not UTF-8 in the middle,
    an empty line, a \\r kept, and a last line without a newline."""
    lines = [t["line"].encode("utf-8") for t in REQUEST_LINES] * 30
    lines.insert(10, b"")
    lines.insert(11, REQUEST_LINES[0]["line"].encode("utf-8") + b"\r")
    lines.insert(1500, b'{"id": 1, "tenant_id": "\xff"}')
    done = cli("derive", "--jsonl", "--quiet", stdin=b"\n".join(lines))
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    answers = done.stdout.decode("utf-8").split("\n")
    assert answers.pop() == ""
    assert len(answers) == len(lines)
    texts = [line.decode("utf-8") for line in lines if line != b'{"id": 1, "tenant_id": "\xff"}']
    want = intentkey.answer_lines(texts)
    want.insert(1500, intentkey.unreadable_line_answer())
    assert answers == want
    assert json.loads(answers[1500]) == {"id": None, "error": {"code": "invalid-json", "message": json.loads(answers[1500])["error"]["message"]}}


def test_derive_jsonl_with_a_policy_file_keys_by_that_policy(tmp_path: Path) -> None:
    doc = json.loads((VECTORS / "policy_custom_test.json").read_text(encoding="utf-8"), parse_int=str, parse_float=str)
    raw = json.loads((VECTORS / "policy_custom_test.json").read_text(encoding="utf-8"))
    group = next(g for g in raw["testGroups"] if g["type"] == "FieldsDerivation" and g.get("policy"))
    tests = [t for t in group["tests"] if t["result"] == "valid"]
    assert tests
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(group["policy"]), encoding="utf-8")
    stdin = "".join(
        '{"id": %d, "secret_hex": "%s", "tenant_id": %s, "action_type": %s, "payload": %s, "intent_epoch": %d}\n'
        % (t["tcId"], t["secretHex"], json.dumps(t["tenantId"]), json.dumps(t["actionType"]), t["payload"], t["intentEpoch"])
        for t in tests).encode("utf-8")
    done = cli("derive", "--jsonl", f"--policy={policy}", stdin=stdin)
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.decode("utf-8").splitlines()]
    assert [a.get("key") for a in answers] == [t["key"] for t in tests]
    # The built-in policy keys the same lines otherwise.
    default = cli("derive", "--jsonl", "-q", stdin=stdin)
    assert default.returncode == 0
    assert [json.loads(line).get("key") for line in default.stdout.decode().splitlines()] != [t["key"] for t in tests]
    del doc


def test_derive_jsonl_reads_input_from_a_file(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(REQUEST_LINES[0]["line"] + "\n", encoding="utf-8")
    done = cli("derive", "--jsonl", "--input", str(source))
    assert done.returncode == 0, done.stderr
    check_answer(REQUEST_LINES[0], done.stdout.decode().strip())
    assert done.stderr.decode().startswith("intentkey: answered 1 lines: ")


def test_an_empty_input_answers_nothing() -> None:
    done = cli("derive", "--jsonl")
    assert (done.returncode, done.stdout) == (0, b"")
    assert done.stderr == b"intentkey: answered 0 lines: 0 keys, 0 errors\n"


def test_an_invalid_policy_is_refused_before_any_line(tmp_path: Path) -> None:
    policy = tmp_path / "bad.json"
    policy.write_text('{"version": 1, "name": "x", "fields": {"amount": {"class": "nonsense"}}}', encoding="utf-8")
    done = cli("derive", "--jsonl", "--policy", str(policy), stdin=(REQUEST_LINES[0]["line"] + "\n").encode())
    assert (done.returncode, done.stdout) == (2, b"")
    err = error_of(done.stderr)
    assert err["code"] == "invalid-policy" and str(policy) in err["message"]


def test_an_unreadable_policy_or_input_is_io_failed(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    for args in (("--policy", str(missing)), ("--input", str(missing))):
        done = cli("derive", "--jsonl", *args, stdin=b"{}\n")
        assert (done.returncode, done.stdout) == (2, b""), args
        err = error_of(done.stderr)
        assert err["code"] == "io-failed" and str(missing) in err["message"]


@pytest.mark.parametrize("args,named", [
    (("derive", "--jsonl", "--engine", "wasm"), ["'--engine'", "'wasm'"]),
    (("derive", "--jsonl", "--bogus"), ["'--bogus'"]),
    (("demo", "--store=redis://x"), ["'--store=redis://x'"]),
    (("demo", "--verbose"), ["'--verbose'"]),
])
def test_unknown_options_are_refused_by_name(args: Any, named: List[str]) -> None:
    done = cli(*args, stdin=b"{}\n")
    assert (done.returncode, done.stdout) == (2, b"")
    err = error_of(done.stderr)
    assert err["code"] == "invalid-argument"
    for name in named:
        assert name in err["message"], err


@pytest.mark.parametrize("args,says", [
    (("derive",), "--jsonl"),
    (("derive", "--jsonl", "--policy"), "--policy needs a value"),
    (("keys",), "unknown command 'keys'"),
])
def test_bad_commands_exit_2(args: Any, says: str) -> None:
    done = cli(*args)
    assert (done.returncode, done.stdout) == (2, b"")
    err = error_of(done.stderr)
    assert err["code"] == "invalid-argument" and says in err["message"]


def test_help_and_no_command() -> None:
    done = cli("--help")
    assert done.returncode == 0 and b"derive --jsonl" in done.stdout and b"demo" in done.stdout
    done = cli()
    assert done.returncode == 2 and b"usage:" in done.stderr


def test_the_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / ("intentkey-py.exe" if os.name == "nt" else "intentkey-py")
    if os.environ.get("INTENTKEY_TEST_SOURCE") == "1" and not script.exists():
        pytest.skip("testing the source tree: no console script")
    done = subprocess.run([str(script), "derive", "--jsonl", "-q"], input=(REQUEST_LINES[0]["line"] + "\n").encode(),
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    check_answer(REQUEST_LINES[0], done.stdout.decode().strip())


# --- demo -------------------------------------------------------------------

def _conflict_body() -> str:
    """The ietf profile's 422 body, as the HTTP vectors hold it."""
    doc = json.loads(HTTP_VECTORS.read_text(encoding="utf-8"))
    for case in doc["cases"]:
        if case["endpoint"]["profile"] != "ietf":
            continue
        for step in case["steps"]:
            if step["expect"]["kind"] == "payload-conflict":
                return str(step["expect"]["body"])
    raise AssertionError("no ietf payload-conflict step in the HTTP vectors")


def expected_demo(url: str) -> List[str]:
    """The Rust demo's output (host/cli/src/demo.rs), line for line, with the
    keys derived here: secret 0x5c × 32, the built-in policy, tenant-1, pix.send."""
    keyer = intentkey.Keyer(secret=bytes([0x5C] * 32))

    def key(payload: str, epoch: int) -> str:
        return keyer.derive("tenant-1", "pix.send", payload, epoch)

    a = key('{"creditor_key":"123.456.789-09","amount":"10.50","currency":"BRL","request_id":"r-1","attempt":1}', 1_700_000_000)
    b = key('{"creditor_key":"maria@example.com","amount":"99.90","currency":"BRL"}', 1_700_000_060)
    c = key('{"creditor_key":"12.345.678/0001-95","amount":"250.00","currency":"BRL"}', 1_700_000_120)
    d = key('{"creditor_key":"joao@example.com","amount":"42.00","currency":"BRL"}', 1_700_000_600)

    def say(t: int, who: str, what: str) -> str:
        return f"  t+{t:>4}s  {who:<22} {what}"

    s = lambda k: k[:12] + "…"  # noqa: E731
    return [
        f"intentkey demo: store {url}, destination = a fake payment API that counts effects",
        "",
        "1. A queue redelivers the same payment intent",
        say(0, "intent A, attempt 1", f"key {s(a)}  claim → owned  → effect runs, 201 stored"),
        say(40, "intent A, redelivery",
            f'key {s(a)}  claim → done: replayed 201 {{"payment_id":"pay_{a[:8]}","amount":"10.50"}}'),
        say(40, "", "destination effects for A: 1"),
        "",
        "2. Two workers take the same intent at once",
        say(60, "intent B, worker 1", f"key {s(b)}  claim → owned  (effect still running)"),
        say(61, "intent B, worker 2", "claim → in-flight: 409 Conflict"),
        say(62, "intent B, worker 1", "effect done → 201 stored"),
        "",
        "3. A client reuses intent B's key with a different amount",
        say(90, "intent B, other body", f"claim → payload-conflict: 422 Unprocessable Content  {_conflict_body()}"),
        "",
        "4. A worker crashes after the payment, before recording it",
        say(120, "intent C, worker", f"key {s(c)}  claim → owned, effect runs, then the process dies"),
        say(150, "intent C, redelivery", "claim → in-flight: 409 Conflict (in_flight is never released by age)"),
        say(420, "recovery", f"look-up of {s(c)} at the destination → found: recorded as done (201), not run again"),
        say(480, "intent C, redelivery",
            f'claim → done: replayed 201 {{"payment_id":"pay_{c[:8]}","amount":"250.00"}}'),
        "",
        "5. A worker crashes and the destination cannot say what happened",
        say(600, "intent D, worker", f"key {s(d)}  claim → owned, effect runs, the process dies"),
        say(900, "recovery", f"look-up of {s(d)} → unknown → check again at t+960s (look-up 1)"),
        say(960, "recovery", f"look-up of {s(d)} → unknown → check again at t+1080s (look-up 2)"),
        say(1080, "recovery", f"look-up of {s(d)} → unknown → check again at t+1320s (look-up 3)"),
        say(1320, "recovery", f"look-up of {s(d)} → unknown → moved to needs_reconciliation after 4 look-ups"),
        say(1320, "operator", "intentkey inspect --status needs_reconciliation → 1 record(s)"),
        say(1380, "intent D, redelivery", "claim → in-flight: 409 Conflict (never re-executed)"),
        "",
        "6. The destination rate-limits the first attempt, then a slow owner is superseded",
        say(2000, "intent E, attempt 1", "destination answers 429 → claim released (nothing happened)"),
        say(2010, "intent E, retry", "claim → owned → effect runs, 201 stored"),
        say(2400, "recovery", "intent F stale, destination (read-your-writes) says absent → re-execute: taken over "
            "with a new owner token, run again with the same key, effect runs once"),
        say(2401, "intent F, slow owner", "finishes late → superseded (nothing overwritten)"),
        "",
        "Effects at the destination: A 1, B 1, C 1, D 1, E 1, F 1 (each intent exactly once).",
    ]


def _rust_templates() -> List[str]:
    """The text the Rust demo prints: its println!/format! templates and the
    `who` column of each tl.say, from the Rust source."""
    source = RUST_DEMO.read_text(encoding="utf-8")
    literal = r'"((?:[^"\\]|\\.)*)"'
    found = re.findall(r"(?:println!|format!)\(\s*" + literal, source)
    found += re.findall(r"tl\.say\(\s*[^,]+,\s*" + literal, source)
    found += re.findall(literal + r"\s*\.into\(\)", source)
    # Paths of the SQLite file, the promise of a failed check, and the
    # recovery outcomes this timeline never meets.
    never = ("sqlite:", "{suffix}", "intentkey-demo-", "broken promise", "another recoverer", "not due before",
             "nothing to do")
    return [t for t in found if " " in t and not any(n in t for n in never)]


def _pattern(template: str) -> str:
    text = template.replace("\\n", "\n").replace('\\"', '"')
    out = []
    for piece in re.split(r"(\{\{|\}\}|\{[^{}]*\})", text):
        if piece == "{{":
            out.append(re.escape("{"))
        elif piece == "}}":
            out.append(re.escape("}"))
        elif piece.startswith("{") and piece.endswith("}"):
            out.append(r"[^\n]*?")
        else:
            out.append(re.escape(piece))
    return "".join(out)


def test_the_demo_timeline_is_the_rust_demo_s_line_for_line() -> None:
    lines: List[str] = []
    demo.timeline(intentkey.MemoryStore(), "memory:", lines.append)
    got = "\n".join(lines).split("\n")
    assert got == expected_demo("memory:")


def test_the_demo_uses_the_rust_demo_s_wording() -> None:
    """Every template of host/cli/src/demo.rs appears in the output (so a
    change of the Rust wording fails here until the Python demo follows)."""
    assert RUST_DEMO.is_file(), f"no Rust demo at {RUST_DEMO}"
    templates = _rust_templates()
    assert len(templates) >= 40, f"only {len(templates)} templates read from {RUST_DEMO}"
    lines: List[str] = []
    demo.timeline(intentkey.MemoryStore(), "sqlite:/tmp/x.sqlite", lines.append)
    text = "\n".join(lines)
    missing = [t for t in templates if not re.search(_pattern(t), text)]
    assert not missing, f"Rust demo text not printed by the Python demo: {missing}"


def _sqlite_available() -> bool:
    try:
        import intentkey.stores.sqlite  # noqa: F401
    except ImportError:
        return False
    return True


def test_python_m_intentkey_demo_on_a_sqlite_file(tmp_path: Path) -> None:
    db = tmp_path / "demo.sqlite"
    done = cli("demo", "--db", str(db))
    assert _sqlite_available(), "intentkey.stores.sqlite is part of the package"
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode("utf-8").split("\n")[:-1] == expected_demo(f"sqlite:{db}")
    assert db.exists(), "--db keeps the file"
    again = cli("demo", "--db", str(db))
    assert again.returncode == 2 and error_of(again.stderr)["code"] == "store-failed", \
        "a second run on the same file finds the records of the first and must not claim its promises kept"


def test_python_m_intentkey_demo_on_a_fresh_temporary_file(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = cli("demo", env=env)
    assert _sqlite_available(), "intentkey.stores.sqlite is part of the package"
    assert done.returncode == 0, done.stderr
    first = done.stdout.decode("utf-8").split("\n")[0]
    assert re.fullmatch(r"intentkey demo: store sqlite:.*intentkey-demo-\d+\.sqlite, destination = .*", first), first
    assert list(tmp_path.iterdir()) == [], "the temporary SQLite file is removed"


def test_a_broken_promise_fails_the_demo() -> None:
    """The demo checks what it tells: on a store that already holds the
    first run's records, the redelivery story is not true, and it says so."""
    store = intentkey.MemoryStore()
    demo.timeline(store, "memory:", lambda _line: None)
    with pytest.raises(demo.DemoError, match="broken promise: a redelivery executes once") as caught:
        demo.timeline(store, "memory:", lambda _line: None)
    assert caught.value.code == "store-failed"


def test_demo_main_on_a_temporary_file_through_the_store_opener(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``demo.main`` with the SQLite opener replaced by a memory store: the
    path it names, the file it removes, the lines it prints."""
    import io
    import tempfile

    opened: List[str] = []

    def fake_open(path: str) -> Any:
        opened.append(path)
        Path(path).write_bytes(b"")  # as a SQLite store creates its file
        return intentkey.MemoryStore()

    monkeypatch.setattr(demo, "open_sqlite", fake_open)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    out = io.StringIO()
    demo.main(None, out=out)
    assert len(opened) == 1 and Path(opened[0]).parent == tmp_path
    assert re.fullmatch(r"intentkey-demo-\d+\.sqlite", Path(opened[0]).name)
    assert out.getvalue().split("\n")[:-1] == expected_demo(f"sqlite:{opened[0]}")
    assert list(tmp_path.iterdir()) == [], "the temporary file is removed"
    kept = tmp_path / "kept.sqlite"
    demo.main(str(kept), out=io.StringIO())
    assert opened[-1] == str(kept) and kept.exists(), "--db keeps its file"
