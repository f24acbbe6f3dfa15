#!/usr/bin/env python3
"""Runs the Rust benchmark and the Python oracle in one session and prints the ratios.

Usage: python3 bench/compare.py [--rounds N] [--seconds S] [--oracle PATH]

Each round runs `cargo bench -p intentkey --bench derive` and then
bench/oracle_bench.py, alternating, so both see the same machine load. The
figure kept for each measurement is its best (lowest) median across rounds.
Prints a Markdown table for BENCHMARKS.md.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
TARGET = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
RUST = ["intentkey fields key", "bare HMAC-SHA256 of the material", "HMAC-SHA256 of the material, key schedule cached",
        "intentkey material only", "intentkey key from payload JSON text", "intentkey fingerprint"]


def median_ns(case, name):
    path = TARGET / "criterion" / case / name / "new" / "estimates.json"
    return json.loads(path.read_text())["median"]["point_estimate"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--oracle", default=str(ROOT.parent / "shared" / "oracle" / "seed_reference.py"),
                        help="path to seed_reference.py, passed to bench/oracle_bench.py")
    args = parser.parse_args()
    # Checked before the first (minutes long) cargo bench, not after it.
    if not pathlib.Path(args.oracle).is_file():
        sys.exit("compare: the reference oracle %s is not there; the comparison needs it: "
                 "put shared/ beside the clone or pass --oracle PATH" % args.oracle)
    best = {}
    for r in range(args.rounds):
        print("round %d/%d: cargo bench" % (r + 1, args.rounds), file=sys.stderr, flush=True)
        subprocess.run(["cargo", "bench", "-q", "-p", "intentkey", "--bench", "derive", "--",
                        "--warm-up-time", "1", "--measurement-time", str(args.seconds), "--noplot"],
                       cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        print("round %d/%d: oracle" % (r + 1, args.rounds), file=sys.stderr, flush=True)
        oracle = json.loads(subprocess.run([sys.executable, str(ROOT / "bench" / "oracle_bench.py"), "--seconds", str(args.seconds),
                                            "--oracle", args.oracle],
                                           check=True, capture_output=True, text=True).stdout)
        for case, figures in oracle.items():
            for name in RUST:
                key = (case, name)
                best[key] = min(best.get(key, float("inf")), median_ns(case, name))
            for name in ("oracle_derive_us", "oracle_hmac_only_us"):
                key = (case, name)
                best[key] = min(best.get(key, float("inf")), figures[name] * 1000)

    cases = sorted({c for c, _ in best})
    print("| case | intentkey key | bare HMAC (floor) | HMAC, key cached | material only | key from JSON text | fingerprint | oracle key | oracle HMAC only | × faster than oracle | × bare HMAC |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for case in cases:
        ours = best[(case, "intentkey fields key")]
        row = [case] + ["%.0f ns" % best[(case, n)] for n in RUST] + [
            "%.2f µs" % (best[(case, "oracle_derive_us")] / 1000), "%.2f µs" % (best[(case, "oracle_hmac_only_us")] / 1000),
            "%.1f×" % (best[(case, "oracle_derive_us")] / ours), "%.2f×" % (ours / best[(case, "bare HMAC-SHA256 of the material")])]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
