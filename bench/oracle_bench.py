#!/usr/bin/env python3
"""Times the Python oracle (shared/oracle/seed_reference.py) on bench/inputs.json.

Usage: python3 bench/oracle_bench.py [--oracle PATH] [--seconds N]
Prints one JSON object: microseconds per key for the whole derivation and for
its HMAC alone, so the ratio against `cargo bench` is taken in the same session.
"""
import argparse
import hashlib
import hmac
import importlib.util
import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_ORACLE = ROOT.parent / "shared" / "oracle" / "seed_reference.py"


def load_oracle(path):
    if not pathlib.Path(path).is_file():
        sys.exit("oracle_bench: the reference oracle %s is not there; this benchmark times it, so it "
                 "needs it: put shared/ beside the clone or pass --oracle PATH" % path)
    spec = importlib.util.spec_from_file_location("seed_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def per_call_us(fn, seconds):
    # Calibrate a batch size, then take the best of several timed batches.
    n = 1
    while True:
        start = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - start > 0.05:
            break
        n *= 2
    best = float("inf")
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - start) / n)
    return best * 1e6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--oracle", default=str(DEFAULT_ORACLE))
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    oracle = load_oracle(args.oracle)
    inputs = json.loads((ROOT / "bench" / "inputs.json").read_text())
    results = {}
    for case, data in inputs["cases"].items():
        secret = bytes.fromhex(data["secret_hex"])
        call = (data["tenant_id"], data["action_type"], data["payload"], data["intent_epoch"])
        material = oracle.derive_material(*call)
        results[case] = {
            "oracle_derive_us": round(per_call_us(lambda: oracle.derive_idempotency_key(secret, *call), args.seconds), 3),
            "oracle_hmac_only_us": round(per_call_us(lambda: hmac.new(secret, material, hashlib.sha256).hexdigest(), args.seconds), 3),
            "material_bytes": len(material),
            "key": oracle.derive_idempotency_key(secret, *call),
        }
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
