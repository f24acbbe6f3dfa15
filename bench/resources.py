#!/usr/bin/env python3
"""Big and hostile inputs through `intentkey derive --jsonl`, on the native
core and on the component in wasmtime (`--engine wasm`): the answer, its size,
the time and the peak RSS (GNU time) of each.

    python3 bench/resources.py [--bin PATH] [--lines N]

PATH defaults to $CARGO_TARGET_DIR or target, then debug/intentkey (build it
with `cargo build -p intentkey-cli`). Figures: BENCHMARKS.md.
"""
import argparse
import json
import os
import subprocess
import tempfile

SECRET = "5c" * 32


def line(payload_json, i=0):
    return (
        '{"id":"r-%d","secret_hex":"%s","tenant_id":"t","action_type":"pix.send",'
        '"payload":%s,"intent_epoch":1700000000}' % (i, SECRET, payload_json)
    )


def small(i):
    return line(
        '{"creditor_key":"123.456.789-09","amount":%d.5,"currency":"brl","remittance":"Fatura %d"}' % (i, i),
        i,
    )


def cases(lines):
    yield "10 MB remittance (text normalizer)", [line('{"creditor_key":"a@b.c","amount":"1","currency":"BRL","remittance":"%s"}' % ("x" * (10 << 20)))]
    yield "100,000 unclassified fields", [line("{%s}" % ",".join('"f%06d":1' % i for i in range(100_000)))]
    yield "10,000-deep nesting", [line('{"remittance":%s1%s}' % ("[" * 10_000, "]" * 10_000))]
    yield "a 1 MB field name", [line('{"%s":1}' % ("n" * (1 << 20)))]
    yield "%d small lines" % (lines // 100), [small(i) for i in range(lines // 100)]
    yield "%d small lines" % lines, (small(i) for i in range(lines))


def run(binary, engine, rows):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        size = 0
        for r in rows:
            f.write(r + "\n")
            size += len(r) + 1
        path = f.name
    try:
        out = subprocess.run(
            ["/usr/bin/time", "-f", "%e %M", binary, "derive", "--jsonl", "--quiet", "--engine", engine, "--input", path],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        seconds, rss_kb = out.stderr.strip().splitlines()[-1].split()
        answers = out.stdout.splitlines()
        first = json.loads(answers[0]) if answers else {}
        outcome = first.get("error", {}).get("code") or ("key" if "key" in first else "?")
        longest = max((len(a) for a in answers), default=0)
        return size, len(answers), outcome, longest, float(seconds), int(rss_kb) / 1024
    finally:
        os.unlink(path)


def main():
    p = argparse.ArgumentParser()
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    p.add_argument("--bin", default=os.path.join(target, "debug", "intentkey"))
    p.add_argument("--lines", type=int, default=1_000_000)
    a = p.parse_args()
    print("| input | engine | input bytes | answers | first answer | longest answer (bytes) | seconds | peak RSS (MiB) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, rows in cases(a.lines):
        rows = list(rows)
        for engine in ("native", "wasm"):
            size, n, outcome, longest, secs, rss = run(a.bin, engine, rows)
            print(f"| {name} | {engine} | {size:,} | {n:,} | {outcome} | {longest:,} | {secs:.2f} | {rss:.1f} |", flush=True)


if __name__ == "__main__":
    main()
