"""Where a memory guard call's time goes: the wasmtime-py call floor and the binding around it.

Run: python py/bench/floor.py (CPU µs per call, median of 7 repeats). Uses
wasmtime-py internals through intentkey._fastcall: the pinned wasmtime only.
"""
import ctypes, json, statistics, time
import intentkey as ik
from intentkey import _binding as b, _fastcall as fc

N, R = 5000, 7
def t(f, n=N):
    rs = []
    for _ in range(R):
        c = time.process_time()
        for _ in range(n): f()
        rs.append((time.process_time() - c) / n * 1e6)
    return statistics.median(rs)

rt = b.runtime("pure")
rt.call(b.CLAIMS, "default-stale-after-seconds")
func = rt._func(b.CLAIMS, "default-stale-after-seconds"); store = rt._store
raw, ctx, res, arr = func._raw, store._context(), fc.VAL(), (fc.VAL * 1)()
print(f"trivial export, raw wasmtime_component_func_call (ctypes): {t(lambda: fc._func_call(raw, ctx, arr, 0, ctypes.byref(res), 1)):6.2f} us")
print(f"trivial export, compiled converters:                      {t(lambda: func(store)):6.2f} us")
print(f"trivial export, Runtime.call (lock, fuel, converters):    {t(lambda: rt.call(b.CLAIMS, 'default-stale-after-seconds')):6.2f} us")

acc = [0.0, 0]
orig = fc._func_call
def wrapped(*a):
    c = time.process_time(); r = orig(*a); acc[0] += time.process_time() - c; acc[1] += 1; return r
fc._func_call = wrapped
k = ik.Keyer(secret=b"s" * 32)
g = ik.Guard(ik.MemoryStore())
p = {"creditor_key": "+5511999990000", "amount": "1.00", "currency": "BRL", "remittance": "order"}
key, c = g.claim_intent(k, "tenant-1", "pix.send", p, 1_700_000_000)
g.finish(key, c.owner_token, ik.Answered(ik.Response.json(201, '{"status":201}')))
for name, f in (("claim_intent replay", lambda: g.claim_intent(k, "tenant-1", "pix.send", p, 1_700_000_000)),):
    acc[:] = [0.0, 0]; total = t(f)
    print(f"{name}: {total:6.2f} us per call, of which inside wasmtime_component_func_call {acc[0] / acc[1] * 1e6:6.2f} us ({acc[1] // (N * R)} call)")
seq = iter(range(10**9))
def first():
    q = dict(p, amount=f"{next(seq)}.00")
    key, c = g.claim_intent(k, "tenant-1", "pix.send", q, 1_700_000_000)
    g.finish(key, c.owner_token, ik.Answered(ik.Response.json(201, '{"status":201}')))
acc[:] = [0.0, 0]; total = t(first, 2000)
print(f"claim_intent + finish, first: {total:6.2f} us per call, of which inside wasmtime_component_func_call {acc[0] / (2000 * R) * 1e6:6.2f} us ({acc[1] / (2000 * R):.0f} calls)")
