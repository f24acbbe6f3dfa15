#!/usr/bin/env python3
"""Differential test: random intents through the oracle and `intentkey derive --jsonl`.

Every intent the oracle accepts must get the oracle's key from intentkey, unless
intentkey refuses it with one of the documented refusal codes (or canonicalizes
a negative-zero amount). Every intent the oracle refuses, intentkey refuses too.

Usage: python3 tests/differential.py --bin target/debug/intentkey [--cases N] [--seed S] [--oracle PATH]
Prints a summary; exits 1 on any disagreement, naming the case.

The oracle is not part of this repository. Without --oracle, when
../shared/oracle/seed_reference.py is not beside the clone, it prints one
SKIPPED line and exits 0 (before looking at --bin); a given --oracle PATH
that does not exist is an error.
"""
import argparse
import importlib.util
import json
import pathlib
import random
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_ORACLE = ROOT.parent / "shared" / "oracle" / "seed_reference.py"
# Codes with which intentkey refuses input the oracle accepts (DESIGN.md's list).
REFUSALS_OF_ACCEPTED = {
    "invalid-decimal", "invalid-pix-key", "invalid-currency", "secret-too-short",
    "invalid-tenant-id", "invalid-action-type", "invalid-epoch", "invalid-payload",
}
PIECES = ["a", "Z", "ß", "ẞ", "ﬁ", "Σ", "ς", "İ", "ı", "Ꭰ", "ꭰ", "é", "e\u0301", "Å", "\u212b", "\u0323\u0302",
          "\u1100\u1161", " ", "\u3000", "\u00a0", "\u2028", "\u001c", "\u0085", "\u200b", "\t", "\n", "\"", "\\",
          "\u0000", "\u007f", "😀", "𝔘", "\U00010400", "Ω", "Ǆ", "ǅ", "µ", "ſ", "K", "1", "٣", "-", ".", "/", "@"]


def text(rng, n=8):
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, n)))


def amount(rng):
    kind = rng.randrange(6)
    if kind == 0:
        return rng.randint(-10**12, 10**12)
    if kind == 1:
        return round(rng.uniform(-1e6, 1e6), rng.randint(0, 4))
    if kind == 2:
        return "%d.%03d" % (rng.randint(0, 99999), rng.randint(0, 999))
    if kind == 3:
        return rng.choice(["1.005", "2.675", " 10 ", "-0.001", "1e2", ".5", "5.", "+3", "1_0", "NaN", "١٠", "abc", ""])
    if kind == 4:
        return rng.randint(0, 10**rng.randint(1, 28))
    return rng.choice([1.005, 2.675, 0.125, -0.0, 1e16, 5e-324, 123456789.125])


def case(rng, i):
    payload = {}
    if rng.random() < 0.9:
        payload["creditor_key"] = rng.choice(["123.456.789-09", "12.345.678/0001-95", "A@B.com", "+55 11 9999", "..", ""]) if rng.random() < 0.5 else "k" + text(rng)
    if rng.random() < 0.9:
        payload["amount"] = amount(rng)
    if rng.random() < 0.9:
        payload["currency"] = rng.choice(["brl", " BRL ", "Usd", "EURO", "R$", "ßxy"]) if rng.random() < 0.1 else "".join(rng.choice("abcXYZ") for _ in range(3))
    if rng.random() < 0.9:
        payload["remittance"] = text(rng, 12)
    for name in ["request_id", "attempt", "trace_id", "created_at", "user_agent"]:
        if rng.random() < 0.3:
            payload[name] = rng.choice([text(rng), 3, 1.5, None, [1, {"x": 2}]])
    return {
        "id": i,
        "secret_hex": rng.choice(["00" * 32, "ab" * 40, "5c" * 32, "0f" * 16]),
        "tenant_id": rng.choice(["t1", "tenant-ção", "t" + text(rng, 3), text(rng, 1)]),
        "action_type": rng.choice(["pix.send", "refund", "a" + text(rng, 3), text(rng, 1)]),
        "payload": payload,
        "intent_epoch": rng.randint(-10**10, 10**10),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--oracle", help="path to seed_reference.py (default: %s)" % DEFAULT_ORACLE)
    parser.add_argument("--cases", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=20261130)
    args = parser.parse_args()
    if args.oracle is None:
        if not DEFAULT_ORACLE.is_file():
            print("SKIPPED: differential against the oracle "
                  "(the reference oracle ../shared/oracle/seed_reference.py is not beside this clone)")
            sys.exit(0)
        args.oracle = str(DEFAULT_ORACLE)
    elif not pathlib.Path(args.oracle).is_file():
        sys.exit("differential: oracle not found: %s" % args.oracle)
    spec = importlib.util.spec_from_file_location("seed_reference", args.oracle)
    oracle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(oracle)

    rng = random.Random(args.seed)
    cases = [case(rng, i) for i in range(args.cases)]
    lines = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases)
    run = subprocess.run([args.bin, "derive", "--jsonl", "--quiet"], input=lines.encode(), capture_output=True, check=True)
    answers = [json.loads(l) for l in run.stdout.decode().split("\n") if l]
    if len(answers) != len(cases):
        sys.exit("differential: %d answers for %d lines" % (len(answers), len(cases)))

    same = refused = both_refused = canonicalized = 0
    failures = []
    for c, ours in zip(cases, answers):
        theirs = oracle.run_case(json.loads(json.dumps(c)))
        if ours["id"] != c["id"]:
            failures.append("#%d: id echo %r" % (c["id"], ours["id"]))
        elif "error" in theirs:
            if "error" in ours:
                both_refused += 1
            else:
                failures.append("#%d: oracle refused (%s) but intentkey answered: %s" % (c["id"], theirs["error"], json.dumps(c, ensure_ascii=False)))
        elif "key" in ours:
            if ours["key"] == theirs["key"]:
                same += 1
            elif '"-0.00"' in theirs["material"] or '"-0.0"' in theirs["material"]:
                canonicalized += 1
            else:
                failures.append("#%d: key differs; oracle material %s; input %s" % (c["id"], theirs["material"], json.dumps(c, ensure_ascii=False)))
        elif ours["error"]["code"] in REFUSALS_OF_ACCEPTED:
            refused += 1
        else:
            failures.append("#%d: intentkey refused (%s) what the oracle accepts: %s" % (c["id"], ours["error"]["code"], json.dumps(c, ensure_ascii=False)))
    print("differential: %d cases: %d same key, %d refused by both, %d documented refusals, %d negative zeros canonicalized, %d failures"
          % (len(cases), same, both_refused, refused, canonicalized, len(failures)))
    for f in failures[:20]:
        print("  " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
