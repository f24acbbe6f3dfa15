"""intentkey's Python binding against a plain-Python floor and AWS Lambda
Powertools' idempotency, in one run with one pair of clocks.

(a) one key: Keyer.derive and Keyer.intent_key against ``hmac.new(secret,
    material, sha256).hexdigest()`` of the same material (computed once with
    Keyer.material): the port is a floor, not a product path (it skips the
    policy, the normalization and the checks);
(b) the guard around one trivial handler, as (guarded call - bare call):
    intentkey's ``guard.run(keyer.intent_attempt(...), effect)`` and
    ``guard.claim`` + ``guard.finish`` against Powertools'
    ``idempotent_function``, over memory (intentkey.MemoryStore; a Powertools
    persistence layer over a dict) and over Redis 127.0.0.1:6379
    (intentkey.stores.redis.RedisStore; RedisCachePersistenceLayer). First
    call: a new payload (a new key) each call; replay: one payload again.

Both sides get the same payload dict and the same handler; both derive their
key from the payload and serialize the handler's answer. The measures are
interleaved: each of REPEATS rounds times every measure once (N calls), so
the two sides of a ratio see the machine as it was in the same round. A
figure is the median over rounds of process CPU time and of wall time per
call; a ratio is the median of the rounds' ratios.

Run: python py/bench/bench_python.py   (REPEATS=7 N=2000 to change the sizes;
INTENTKEY_FASTPATH=0 for plain wasmtime-py)
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import os
import platform
import statistics
import sys
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

os.environ.pop("POWERTOOLS_IDEMPOTENCY_DISABLED", None)
warnings.simplefilter("ignore")

import intentkey as ik  # noqa: E402
from intentkey import _binding  # noqa: E402

from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function  # noqa: E402
from aws_lambda_powertools.utilities.idempotency.exceptions import (  # noqa: E402
    IdempotencyItemAlreadyExistsError,
    IdempotencyItemNotFoundError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer, DataRecord  # noqa: E402

REPEATS = int(os.environ.get("REPEATS", "7"))
N = int(os.environ.get("N", "2000"))
REDIS_URL = os.environ.get("INTENTKEY_BENCH_REDIS", "redis://127.0.0.1:6379/0")
SECRET = bytes(range(32))
TENANT, ACTION, EPOCH = "tenant-1", "pix.send", 1_700_000_000
_seq = itertools.count()


def payload(i: int) -> Dict[str, Any]:
    return {"creditor_key": "+5511999990000", "amount": f"{i}.00", "currency": "BRL", "remittance": "order"}


def handler(payment: Dict[str, Any]) -> Dict[str, Any]:
    return {"status": 201, "amount": payment["amount"]}


def one_round(run: Callable[[int], Any], n: int, setup: Optional[Callable[[], Any]] = None) -> Tuple[float, float]:
    """(cpu µs, wall µs) per call over `n` calls of `run(i)`."""
    if setup is not None:
        setup()
    base = next(_seq) * n * 10
    c0, w0 = time.process_time(), time.perf_counter()
    for i in range(base, base + n):
        run(i)
    c1, w1 = time.process_time(), time.perf_counter()
    return (c1 - c0) / n * 1e6, (w1 - w0) / n * 1e6


def timed(run: Callable[[int], Any], n: int, setup: Optional[Callable[[], Any]] = None) -> Tuple[float, float]:
    """(cpu µs, wall µs) per call, medians over REPEATS rounds."""
    rounds = [one_round(run, n, setup) for _ in range(REPEATS)]
    return statistics.median(r[0] for r in rounds), statistics.median(r[1] for r in rounds)


# -- Powertools ------------------------------------------------------------------------

class MemoryLayer(BasePersistenceLayer):
    """Powertools DataRecords in a dict: the cheapest store Powertools can have."""

    def __init__(self) -> None:
        super().__init__()
        self.records: Dict[str, DataRecord] = {}

    def _get_record(self, idempotency_key: str) -> DataRecord:
        try:
            return self.records[idempotency_key]
        except KeyError:
            raise IdempotencyItemNotFoundError from None

    def _put_record(self, data_record: DataRecord) -> None:
        old = self.records.get(data_record.idempotency_key)
        if old is not None and not old.is_expired:
            raise IdempotencyItemAlreadyExistsError(old_data_record=old)
        self.records[data_record.idempotency_key] = data_record

    def _update_record(self, data_record: DataRecord) -> None:
        self.records[data_record.idempotency_key] = data_record

    def _delete_record(self, data_record: DataRecord) -> None:
        self.records.pop(data_record.idempotency_key, None)


def powertools(layer: Any, prefix: str) -> Callable[..., Any]:
    return idempotent_function(handler, data_keyword_argument="payment", persistence_store=layer,
                               config=IdempotencyConfig(), key_prefix=prefix)


# -- intentkey ---------------------------------------------------------------------------

class IntentkeySide:
    def __init__(self, make_store: Callable[[], Any]):
        self.make_store = make_store
        self.keyer = ik.Keyer(secret=SECRET)
        self.store = make_store()
        self.guard = ik.Guard(self.store)

    def fresh(self) -> None:
        close = getattr(self.store, "close", None)
        if close is not None:
            close()
        self.store = self.make_store()
        self.guard = ik.Guard(self.store)

    def run(self, p: Dict[str, Any]) -> Any:
        attempt = self.keyer.intent_attempt(TENANT, ACTION, p, EPOCH)
        return self.guard.run(attempt, lambda key: ik.Response.json(201, json.dumps(handler(p))))

    def claim_finish(self, p: Dict[str, Any]) -> Any:
        key, claim = self.guard.claim_intent(self.keyer, TENANT, ACTION, p, EPOCH)
        if claim.state is ik.ClaimState.OWNED:
            response = ik.Response.json(201, json.dumps(handler(p)))
            self.guard.finish(key, claim.owner_token, ik.Answered(response))
            return response
        return claim.response


def overheads(name: str, make_ik_store: Callable[[], Any], make_layer: Callable[[], Any], n: int,
              rows: List[Tuple[str, Tuple[float, float]]]) -> Dict[str, Tuple[float, float]]:
    """Overheads over the bare handler, and intentkey / Powertools ratios.
    The measures are interleaved: each of REPEATS rounds times every one of
    them once, so both sides of a ratio see the machine as it was in that
    round; a figure is the median over rounds, a ratio the median of the
    rounds' ratios."""
    side = IntentkeySide(make_ik_store)
    state: Dict[str, Any] = {"layers": 0}
    same = payload(1)

    def fresh_layer() -> None:
        state["layers"] += 1
        state["fn"] = powertools(make_layer(), f"ikbench-{os.getpid()}-{state['layers']}")

    def primed(call: Callable[[Dict[str, Any]], Any]) -> Callable[[], None]:
        return lambda: call(same) and None

    def pt(p: Dict[str, Any]) -> Any:
        return state["fn"](payment=p)

    plan: List[Tuple[str, Callable[[int], Any], Optional[Callable[[], Any]]]] = [("bare", lambda i: handler(payload(i)), None)]
    for how, call in (("run", side.run), ("claim+finish", side.claim_finish)):
        plan.append((f"ik {how} first", lambda i, call=call: call(payload(i)), side.fresh))
        plan.append((f"ik {how} replay", lambda i, call=call: call(same), primed(call)))
    plan.append(("pt first", lambda i: pt(payload(i)), fresh_layer))
    plan.append(("pt replay", lambda i: pt(same), lambda: (fresh_layer(), pt(same)) and None))
    samples: Dict[str, List[Tuple[float, float]]] = {label: [] for label, _, _ in plan}
    for _ in range(REPEATS):
        for label, run, setup in plan:
            samples[label].append(one_round(run, n, setup))

    def median(label: str, k: int) -> float:
        return statistics.median(x[k] for x in samples[label])

    out: Dict[str, Tuple[float, float]] = {}
    rows.append((f"{name}: bare handler", (median("bare", 0), median("bare", 1))))
    for label, _, _ in plan[1:]:
        over = [(x[0] - b[0], x[1] - b[1]) for x, b in zip(samples[label], samples["bare"])]
        out[label] = (statistics.median(o[0] for o in over), statistics.median(o[1] for o in over))
        rows.append((f"{name}: {label} (overhead)", out[label]))
    for phase in ("first", "replay"):
        for how in ("run", "claim+finish"):
            per_round = [[((x[k] - b[k]) / (p[k] - b[k])) for k in (0, 1)]
                         for x, p, b in zip(samples[f"ik {how} {phase}"], samples[f"pt {phase}"], samples["bare"])]
            out[f"ratio {how} {phase}"] = (statistics.median(r[0] for r in per_round),
                                           statistics.median(r[1] for r in per_round))
    return out


def main() -> int:
    rows: List[Tuple[str, Tuple[float, float]]] = []
    keyer = ik.Keyer(secret=SECRET)
    p = payload(7)
    material = keyer.material(TENANT, ACTION, p, EPOCH).encode()
    assert hmac.new(SECRET, material, hashlib.sha256).hexdigest() == keyer.derive(TENANT, ACTION, p, EPOCH), \
        "the port is not the same HMAC"
    rows.append(("one key: Keyer.derive", timed(lambda i: keyer.derive(TENANT, ACTION, p, EPOCH), N * 2)))
    rows.append(("one key: Keyer.intent_key", timed(lambda i: keyer.intent_key(TENANT, "intent-42"), N * 2)))
    rows.append(("one key: hmac port of the same material (floor)",
                 timed(lambda i: hmac.new(SECRET, material, hashlib.sha256).hexdigest(), N * 20)))

    mem = overheads("memory", ik.MemoryStore, MemoryLayer, N, rows)
    ratios = [("memory", mem)]
    redis_note = ""
    try:
        import redis
        from aws_lambda_powertools.utilities.idempotency.persistence.redis import RedisCachePersistenceLayer
        from intentkey.stores.redis import RedisStore

        client = redis.Redis.from_url(REDIS_URL)
        client.ping()
    except Exception as exc:  # noqa: BLE001
        if os.environ.get("CI") == "true":
            raise
        redis_note = f"Redis skipped: not reachable at {REDIS_URL} ({exc})"
    else:
        prefix = f"ikbench-{os.getpid()}"
        stores: List[Any] = []

        def redis_store() -> Any:
            stores.append(RedisStore(client, prefix=f"{prefix}-ik{len(stores)}"))
            return stores[-1]

        try:
            red = overheads("redis", redis_store, lambda: RedisCachePersistenceLayer(client=client), max(N // 4, 200), rows)
            ratios.append(("redis", red))
        finally:
            keys = list(client.scan_iter(match=f"{prefix}*"))
            if keys:
                client.delete(*keys)
            client.close()

    rt = _binding.runtime()
    print(f"# intentkey {ik.__version__}, python {platform.python_version()}, canonical-ABI path "
          f"{'on' if rt.fastpath else 'off'}, REPEATS={REPEATS} N={N}, {os.cpu_count()} cpus, "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"| {'measure':<58} | {'CPU µs':>9} | {'wall µs':>9} |")
    print(f"|{'-' * 60}|{'-' * 11}|{'-' * 11}|")
    for label, (cpu, wall) in rows:
        print(f"| {label:<58} | {cpu:9.2f} | {wall:9.2f} |")
    print()
    print(f"| {'intentkey / Powertools (overhead)':<58} | {'CPU':>9} | {'wall':>9} |")
    print(f"|{'-' * 60}|{'-' * 11}|{'-' * 11}|")
    for name, o in ratios:
        for phase in ("first", "replay"):
            for how in ("run", "claim+finish"):
                cpu_ratio, wall_ratio = o[f"ratio {how} {phase}"]
                print(f"| {f'{name}, {phase} call, guard.{how}':<58} | {cpu_ratio:8.2f}x | {wall_ratio:8.2f}x |")
    if redis_note:
        print(redis_note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
