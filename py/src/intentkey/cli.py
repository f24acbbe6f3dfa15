"""The command-line tool: ``python -m intentkey`` (also ``intentkey-py``).

``derive --jsonl`` is the JSON-lines batch contract of the Rust tool and the
npm package's ``intentkey`` binary: one JSON request per line in, one answer
line per request out, in order, every answer the core's (its
``answer-lines`` export). ``demo`` prints the timeline of ``intentkey demo``
(claims, replays, conflicts, recoveries) on a SQLite file.

A failure to start (an unknown option, an unreadable or invalid policy, an
unreadable input) is one JSON object on stderr,
``{"error": {"code": …, "message": …}}``, with exit status 2, as the Rust tool
prints it; nothing is answered then.
"""

from __future__ import annotations

import json
import sys
from typing import BinaryIO, Dict, Iterator, List, Optional, Sequence, TextIO, Tuple

from .errors import IntentkeyError
from .keys import answer_lines, unreadable_line_answer

__all__ = ["main", "USAGE"]

USAGE = """usage: python -m intentkey derive --jsonl [--input FILE] [--policy FILE] [--quiet]
       python -m intentkey demo [--db PATH]

derive --jsonl  Reads one JSON request per line (id, secret_hex, tenant_id,
                action_type, payload, intent_epoch) from stdin or FILE and writes
                one JSON answer per line, in order: {"id":...,"key":"<hex>"} or
                {"id":...,"error":{"code":"...","message":"..."}}. Lines split on
                "\\n" only. A summary goes to stderr (--quiet turns it off).
                --policy uses your own policy (JSON) instead of the built-in
                payments policy; it is checked before any line is answered.
demo            The main job, as a timeline: a redelivery, a concurrent
                duplicate, a changed payload, crashes recovered by a look-up, an
                unknown look-up ending in reconciliation, a release and a
                superseded owner, on a fresh SQLite file (or --db PATH).

Exit status: 0 when every line was answered (or the demo kept every promise);
2 on a bad argument or a failure, with {"error":{"code":...,"message":...}} on stderr."""

#: Lines per component call: large enough to spread the boundary cost.
BATCH_LINES = 1024


class CliError(Exception):
    """A command's failure: a code of the core's vocabulary and a message."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def _fail(err: CliError, stderr: TextIO) -> int:
    stderr.write(json.dumps({"error": {"code": err.code, "message": f"intentkey: {err.message}"}}, separators=(",", ":"), ensure_ascii=False) + "\n")
    return 2


def _parse(args: Sequence[str], flags: Tuple[str, ...], valued: Tuple[str, ...]) -> Dict[str, Optional[str]]:
    """Options of one command: ``flags`` take no value, ``valued`` take one
    (``--name VALUE`` or ``--name=VALUE``). Anything else is an error naming it."""
    out: Dict[str, Optional[str]] = {}
    unknown: List[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if name in valued:
            if not eq:
                if i + 1 >= len(args):
                    raise CliError("invalid-argument", f"{name} needs a value")
                i += 1
                value = args[i]
            out[name] = value
        elif arg in flags:
            out[arg] = None
        else:
            unknown.append(arg)
        i += 1
    if unknown:
        names = ", ".join(repr(a) for a in unknown)
        raise CliError("invalid-argument", f"unknown option{'s' if len(unknown) > 1 else ''} {names} (see --help)")
    return out


def _lines(stream: BinaryIO) -> Iterator[bytes]:
    """The lines of `stream`, split on ``\\n`` only, without it; a last line
    without ``\\n`` counts, an empty input has none."""
    partial = b""
    while True:
        chunk = stream.read(1 << 16)
        if not chunk:
            break
        parts = (partial + chunk).split(b"\n")
        partial = parts.pop()
        yield from parts
    if partial:
        yield partial


def _answer(batch: List[bytes], policy: Optional[str]) -> List[str]:
    """Answers one batch in order; a line that is not UTF-8 never reaches
    the core's parser: it gets the core's unreadable-line answer."""
    texts: List[Optional[str]] = []
    for raw in batch:
        try:
            texts.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            texts.append(None)
    answered = iter(answer_lines([t for t in texts if t is not None], policy=policy))
    unreadable: Optional[str] = None
    out: List[str] = []
    for text in texts:
        if text is None:
            unreadable = unreadable if unreadable is not None else unreadable_line_answer()
            out.append(unreadable)
        else:
            answer = next(answered, None)
            if answer is None:
                raise CliError("component-failed", "the component answered fewer lines than it was given")
            out.append(answer)
    return out


def derive(args: Sequence[str], stdin: BinaryIO, stdout: BinaryIO, stderr: TextIO) -> int:
    opts = _parse(args, ("--jsonl", "--quiet", "-q", "--help", "-h"), ("--input", "--policy"))
    if "--help" in opts or "-h" in opts:
        stdout.write((USAGE + "\n").encode("utf-8"))
        return 0
    if "--jsonl" not in opts:
        raise CliError("invalid-argument", "derive needs --jsonl (single derivations: use the library API, intentkey.Keyer)")
    policy: Optional[str] = None
    policy_path = opts.get("--policy")
    if policy_path is not None:
        try:
            with open(policy_path, "rb") as fh:
                policy = fh.read().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CliError("io-failed", f"cannot read policy {policy_path}: {exc}") from exc
        try:
            answer_lines([], policy=policy)  # the core validates it before any line is answered
        except IntentkeyError as exc:
            raise CliError(exc.code, f"policy {policy_path}: {exc.message}"
                           + (f" (at {exc.field})" if exc.field else "")) from exc
    input_path = opts.get("--input")
    source: BinaryIO = stdin
    if input_path is not None:
        try:
            source = open(input_path, "rb")
        except OSError as exc:
            raise CliError("io-failed", f"cannot open {input_path}: {exc}") from exc
    lines = keys = 0
    try:
        batch: List[bytes] = []

        def flush() -> None:
            nonlocal lines, keys
            if not batch:
                return
            answers = _answer(batch, policy)
            for answer in answers:
                # Key answers end `"<hex>"}`; error answers end `}}`.
                keys += answer.endswith('"}')
            lines += len(answers)
            try:
                stdout.write(("\n".join(answers) + "\n").encode("utf-8"))
            except OSError as exc:
                raise CliError("io-failed", f"writing output: {exc}") from exc
            batch.clear()

        try:
            for line in _lines(source):
                batch.append(line)
                if len(batch) >= BATCH_LINES:
                    flush()
        except OSError as exc:
            raise CliError("io-failed", f"reading input: {exc}") from exc
        flush()
        try:
            stdout.flush()
        except OSError as exc:
            raise CliError("io-failed", f"writing output: {exc}") from exc
    finally:
        if source is not stdin:
            source.close()
    if "--quiet" not in opts and "-q" not in opts:
        stderr.write(f"intentkey: answered {lines} lines: {keys} keys, {lines - keys} errors\n")
    return 0


def demo(args: Sequence[str], stdout: TextIO) -> int:
    opts = _parse(args, ("--help", "-h"), ("--db",))
    if "--help" in opts or "-h" in opts:
        stdout.write(USAGE + "\n")
        return 0
    from . import demo as demo_mod

    try:
        demo_mod.main(opts.get("--db"), out=stdout)
    except demo_mod.DemoError as exc:
        raise CliError(exc.code, str(exc)) from exc
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs one command; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    stderr = sys.stderr
    try:
        if not args or args[0] in ("--help", "-h", "help"):
            (sys.stdout if args else stderr).write(USAGE + "\n")
            return 0 if args else 2
        command, rest = args[0], args[1:]
        if command == "derive":
            return derive(rest, sys.stdin.buffer, sys.stdout.buffer, stderr)
        if command == "demo":
            return demo(rest, sys.stdout)
        raise CliError("invalid-argument", f"unknown command {command!r}; the commands are derive and demo (see --help)")
    except CliError as err:
        return _fail(err, stderr)
    except BrokenPipeError:
        return _fail(CliError("io-failed", "writing output: the reader closed the pipe"), stderr)
