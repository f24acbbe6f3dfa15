"""The core's claim flow from Python: a MemoryStore served to the component's
``store`` import, driven by its ``guard`` export. Run: python3 py/test_guard.py"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import intentkey_wasm as ik  # noqa: E402
from wasmtime.component import Variant  # noqa: E402

T0 = 1_700_000_000


def ok(body="{}", status=201, **kw):
    return Variant("answered", ik.response(status, body, **kw))


class GuardTest(unittest.TestCase):
    def setUp(self):
        self.store = ik.MemoryStore()
        self.guard = ik.Guard(self.store)

    def claim(self, key="k1", fp="fp", now=T0):
        return self.guard.claim(key, fp, "tenant-1", "pix.send", now)

    def test_a_repeat_replays_the_stored_answer_with_its_headers(self):
        outcome, token = self.claim()
        self.assertEqual(outcome.tag, "owned")
        self.assertEqual(len(token), 32)
        located = ok('{"id":"pay_1"}', headers=[("Location", "/payments/1")])
        self.assertEqual(self.guard.finish("k1", token, located, T0 + 1), "stored")
        again, _ = self.claim(now=T0 + 2)
        self.assertEqual(again.tag, "done")
        self.assertEqual((again.payload.status, bytes(again.payload.body)), (201, b'{"id":"pay_1"}'))
        self.assertEqual(list(again.payload.headers), [("Location", "/payments/1")])

    def test_a_concurrent_repeat_and_another_payload(self):
        self.claim()
        self.assertEqual(self.claim(now=T0 + 1)[0].tag, "in-flight")
        self.assertEqual(self.claim(fp="other", now=T0 + 1)[0].tag, "payload-conflict")

    def test_outcome_classes(self):
        _, token = self.claim()
        self.assertEqual(self.guard.finish("k1", token, ok(status=429), T0), "released")
        self.assertEqual(self.store.records, {})
        outcome, token = self.claim(now=T0 + 1)
        self.assertEqual(outcome.tag, "owned", "a released claim lets the retry run")
        self.assertEqual(self.guard.finish("k1", token, Variant("failed"), T0 + 1), "left-in-flight")
        self.assertEqual(self.claim(now=T0 + 2)[0].tag, "in-flight")

    def test_only_the_owner_finishes_and_a_late_owner_is_superseded(self):
        _, owner = self.claim()
        self.assertEqual(self.guard.finish("k1", "f" * 32, ok(), T0), "superseded")
        asks = []

        def absent(key):
            asks.append(key)
            return "absent"

        outcome, _ = self.guard.recover("k1", T0 + 10, absent, read_your_writes=True)
        self.assertEqual(outcome.tag, "not-due", "a fresh claim is left to its owner")
        self.assertEqual(asks, [])
        outcome, new_owner = self.guard.recover("k1", T0 + 300, absent, read_your_writes=True)
        self.assertEqual((outcome.tag, outcome.payload.tag), ("applied", "re-execute"))
        self.assertEqual(asks, ["k1"])
        again, _ = self.guard.recover("k1", T0 + 300, absent, read_your_writes=True)
        self.assertEqual(again.tag, "not-due", "the take-over restarted the claim's clock")
        self.assertEqual(self.guard.finish("k1", new_owner, ok('{"by":"recoverer"}'), T0 + 301), "stored")
        self.assertEqual(self.guard.finish("k1", owner, ok('{"by":"late owner"}'), T0 + 302), "superseded")
        self.assertEqual(bytes(self.store.records["k1"].response.body), b'{"by":"recoverer"}')

    def test_unknown_never_re_executes(self):
        self.claim()
        now = T0 + 300
        tags = []
        for _ in range(5):
            outcome, _ = self.guard.recover("k1", now, lambda key: "unknown", read_your_writes=True)
            if outcome.tag != "applied":
                break
            tags.append(outcome.payload.tag)
            if outcome.payload.tag == "check-later":
                now = outcome.payload.payload.__dict__["next-lookup-at"]
        self.assertEqual(tags, ["check-later", "check-later", "check-later", "reconcile"])
        self.assertEqual(self.store.records["k1"].status, "needs-reconciliation")

    def test_found_is_recorded_and_purged_after_its_ttl(self):
        self.claim()
        found = ("found", ik.response(201, '{"id":"pay_9"}'))
        outcome, _ = self.guard.recover("k1", T0 + 300, lambda key: found)
        self.assertEqual(outcome.payload.tag, "record-done")
        self.assertEqual(self.guard.purge(T0 + 300 + ik.DEFAULT_TTL_SECONDS - 1), 0)
        self.assertEqual(self.guard.purge(T0 + 300 + ik.DEFAULT_TTL_SECONDS), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
