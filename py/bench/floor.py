"""Where a memory guard call's time goes: inside the guest's core functions
(``wasmtime_func_call_unchecked``, the floor any binding pays) and the Python
around them (lowering, lifting, the guard's checks and conversions).

Run: python py/bench/floor.py (CPU µs per call, median of 7 repeats). Needs
the canonical-ABI path (intentkey._canon: the pinned wasmtime).
"""
import statistics
import time

import intentkey as ik
from intentkey import _binding as b, _canon

N, R = 5000, 7


def t(f, n=N):
    rs = []
    for _ in range(R):
        c = time.process_time()
        for _ in range(n):
            f()
        rs.append((time.process_time() - c) / n * 1e6)
    return statistics.median(rs)


rt = b.runtime("pure")
if rt._canon is None:
    raise SystemExit("floor.py: the canonical-ABI path is off (INTENTKEY_FASTPATH=0 or another wasmtime)")
rt.call(b.CLAIMS, "default-stale-after-seconds")
func = rt._func(b.CLAIMS, "default-stale-after-seconds")
store = rt._store
core = func.core
print(f"trivial export, the core function alone (_Core.call):       {t(lambda: core.call(func.cx, [])):6.2f} us")
print(f"trivial export, with lifting and post-return (BoundFunc):    {t(lambda: func(store)):6.2f} us")
print(f"trivial export, Runtime.call (lock, fuel, the above):        {t(lambda: rt.call(b.CLAIMS, 'default-stale-after-seconds')):6.2f} us")

acc = [0.0, 0]
inner = _canon._call_unchecked


def timed_call(*a):
    c = time.process_time()
    r = inner(*a)
    acc[0] += time.process_time() - c
    acc[1] += 1
    return r


_canon._call_unchecked = timed_call
k = ik.Keyer(secret=b"s" * 32)
g = ik.Guard(ik.MemoryStore())
p = {"creditor_key": "+5511999990000", "amount": "1.00", "currency": "BRL", "remittance": "order"}
key, c = g.claim_intent(k, "tenant-1", "pix.send", p, 1_700_000_000)
g.finish(key, c.owner_token, ik.Answered(ik.Response.json(201, '{"status":201}')))


def replay():
    g.claim_intent(k, "tenant-1", "pix.send", p, 1_700_000_000)


acc[:] = [0.0, 0]
total = t(replay)
print(f"claim_intent replay: {total:6.2f} us per call, of which in core calls {acc[0] / (N * R) * 1e6:6.2f} us "
      f"({acc[1] / (N * R):.0f} core calls: realloc, the export, post-return)")
seq = iter(range(10**9))


def first():
    q = dict(p, amount=f"{next(seq)}.00")
    key, c = g.claim_intent(k, "tenant-1", "pix.send", q, 1_700_000_000)
    g.finish(key, c.owner_token, ik.Answered(ik.Response.json(201, '{"status":201}')))


acc[:] = [0.0, 0]
total = t(first, 2000)
print(f"claim_intent + finish, first: {total:6.2f} us per call, of which in core calls "
      f"{acc[0] / (2000 * R) * 1e6:6.2f} us ({acc[1] / (2000 * R):.0f} core calls)")
