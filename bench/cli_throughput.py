#!/usr/bin/env python3
"""Lines per second through `intentkey derive --jsonl` (native engine), on one
thread and on every core, runs interleaved; each run's output is checked: one
key per line, in input order, the same bytes whatever the thread count.

    python3 bench/cli_throughput.py [--bin PATH] [--lines N] [--rounds R]

PATH defaults to $CARGO_TARGET_DIR or target, then release/intentkey (build it
with `cargo build --release -p intentkey-cli`). Figures: BENCHMARKS.md.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resources import small  # noqa: E402  (the same small lines as bench/resources.py)


def run(binary, path, threads, lines):
    out = subprocess.run(
        ["/usr/bin/time", "-f", "%e %M %U %S", binary, "derive", "--jsonl", "--quiet",
         "--threads", str(threads), "--input", path],
        capture_output=True,
        timeout=1800,
    )
    if out.returncode != 0:
        raise SystemExit(f"intentkey exited {out.returncode}: {out.stderr.decode()[-500:]}")
    seconds, rss_kb, user, system = out.stderr.decode().strip().splitlines()[-1].split()
    answers = out.stdout.splitlines()
    if len(answers) != lines:
        raise SystemExit(f"{len(answers)} answers for {lines} lines")
    for i in (0, lines // 2, lines - 1):
        answer = json.loads(answers[i])
        if answer.get("id") != f"r-{i}" or len(answer.get("key", "")) != 64:
            raise SystemExit(f"answer {i} is {answers[i]!r}")
    keys = sum(1 for a in answers if a.endswith(b'"}') and b'"key":"' in a)
    if keys != lines:
        raise SystemExit(f"{lines - keys} answers are not keys")
    cpu_us = (float(user) + float(system)) * 1e6 / lines
    return float(seconds), int(rss_kb) / 1024, cpu_us, hashlib.sha256(out.stdout).hexdigest()


def main():
    p = argparse.ArgumentParser()
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    p.add_argument("--bin", default=os.path.join(target, "release", "intentkey"))
    p.add_argument("--lines", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    cores = os.cpu_count() or 1
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for i in range(a.lines):
            f.write(small(i) + "\n")
        path = f.name
    try:
        best = {}
        digests = set()
        for r in range(a.rounds):
            for threads in sorted({1, cores}):
                secs, rss, cpu_us, digest = run(a.bin, path, threads, a.lines)
                digests.add(digest)
                rate = a.lines / secs if secs else float("inf")
                print(f"round {r + 1}: {threads} thread(s): {secs:.2f} s, {rate:,.0f} lines/s, {cpu_us:.2f} CPU µs per line, peak RSS {rss:.1f} MiB", flush=True)
                if rate > best.get(threads, (0, 0, 0))[0]:
                    best[threads] = (rate, rss, cpu_us)
        if len(digests) != 1:
            raise SystemExit("the output differs between runs or thread counts")
        print()
        print("| threads | best lines/s | CPU µs per line (that run) | peak RSS (MiB) |")
        print("|---|---|---|---|")
        for threads, (rate, rss, cpu_us) in sorted(best.items()):
            print(f"| {threads} | {rate:,.0f} | {cpu_us:.2f} | {rss:.1f} |")
        print(f"\nevery run: {a.lines:,} keys in input order, one output (sha256 {digests.pop()[:16]}…)")
    finally:
        os.unlink(path)


if __name__ == "__main__":
    main()
