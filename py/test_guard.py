"""The core's claim flow from Python: a MemoryStore served to the component's
``store`` import, driven by its ``guard`` export; and the serve flow
(``Endpoint.serve``) over it. Run: python3 py/test_guard.py"""

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


class Flaky(ik.MemoryStore):
    """A memory store whose `fail` operations answer a store error."""

    def __init__(self, fail=(), kind="unavailable"):
        super().__init__()
        self.fail, self.kind = set(fail), kind

    def insert(self, record):
        return ik.store_error(self.kind, "down") if "insert" in self.fail else super().insert(record)

    def complete(self, c):
        return ik.store_error(self.kind, "down") if "complete" in self.fail else super().complete(c)


class ServeTest(unittest.TestCase):
    """Endpoint.serve: the core's serve flow, the handler and the pauses run from Python."""

    def serve(self, guard, handler, now=T0, key="k-1", sleep=lambda _s: None):
        endpoint = ik.Endpoint(b"s" * 32, profile="stripe")
        return endpoint.serve(guard, "tenant-1", "POST", "/orders", [key], "application/json", b'{"a":1}', now,
                              handler, sleep=sleep)

    def test_the_handler_runs_once_and_its_answer_is_replayed(self):
        guard = ik.Guard(ik.MemoryStore())
        calls = []

        def handler(key):
            calls.append(key)
            return ik.Reply(201, [("Content-Type", "application/json"), ("Location", "/orders/1")], b'{"id":1}')

        first = self.serve(guard, handler)
        self.assertEqual((first.path, first.reply, first.finished, first.ran), ("handler", None, "stored", True))
        self.assertEqual(first.handler_reply.status, 201)
        again = self.serve(guard, handler, now=T0 + 1)
        self.assertEqual((again.path, again.ran, again.reply.status, again.reply.body), ("replay", False, 201, b'{"id":1}'))
        self.assertEqual(again.reply.header("Location"), "/orders/1")
        self.assertEqual(len(calls), 1)

    def test_a_handler_exception_leaves_the_record_in_flight(self):
        guard = ik.Guard(ik.MemoryStore())
        boom = RuntimeError("boom")

        def handler(_key):
            raise boom

        served = self.serve(guard, handler)
        self.assertEqual((served.path, served.reply.status, served.finished), ("failed", 500, "left-in-flight"))
        self.assertIs(served.handler_error, boom)
        self.assertNotIn(b"boom", served.reply.body)
        self.assertEqual(self.serve(guard, handler, now=T0 + 1).reply.status, 409)

    def test_a_raised_client_error_releases_the_claim(self):
        guard = ik.Guard(ik.MemoryStore())
        served = self.serve(guard, lambda _key: ik.Raised(400))
        self.assertEqual((served.path, served.reply, served.finished), ("released", None, "released"))
        self.assertEqual(guard.store.records, {})

    def test_a_claim_the_store_fails_runs_nothing_and_is_reported(self):
        ran = []
        served = self.serve(ik.Guard(Flaky({"insert"}, "failed")), lambda key: ran.append(key))
        self.assertEqual((served.path, served.reply.status, served.ran), ("unavailable", 500, False))
        self.assertEqual(served.claim_failure, ("failed", "down"))
        self.assertEqual(ran, [])

    def test_a_completion_the_store_cannot_take_is_tried_again_after_the_core_s_pauses(self):
        store = Flaky({"complete"})
        slept = []
        served = self.serve(ik.Guard(store), lambda _key: ik.Reply(201, [], b"{}"), sleep=slept.append)
        self.assertEqual((served.path, served.finished), ("handler", None))
        self.assertGreater(served.finish_retries, 0)
        self.assertEqual(len(slept), served.finish_retries)
        self.assertTrue(all(s > 0 for s in slept))
        self.assertEqual(served.finish_failures, [("unavailable", "down")] * (served.finish_retries + 1))
        self.assertEqual([r.status for r in store.records.values()], ["in-flight"])

    def test_a_handler_must_answer_a_reply_or_raised(self):
        with self.assertRaises(TypeError):
            self.serve(ik.Guard(ik.MemoryStore()), lambda _key: "ok")


if __name__ == "__main__":
    unittest.main(verbosity=2)
