"""A keyring from Python: each intent keyed with the secret active at its own
epoch (the same key as that secret alone gives), calls that cannot pick a
secret refused, a dropped secret's intents refused. Run: python3 py/test_keyring.py"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import intentkey_wasm as ik  # noqa: E402

ROTATION = 1_800_000_000
OLD, NEW = bytes([0x11] * 32), bytes([0x22] * 32)
PAYLOAD = '{"creditor_key":"a@b.c","amount":"10.00","currency":"BRL"}'


class KeyringTest(unittest.TestCase):
    def setUp(self):
        self.ring = ik.Keyer.with_keyring(None, [("2026-11", 0, OLD), ("2026-12", ROTATION, NEW)])
        self.old = ik.Keyer(None, OLD)
        self.new = ik.Keyer(None, NEW)

    def test_the_secret_of_the_intents_epoch_keys_it(self):
        for epoch, alone in ((ROTATION - 1, self.old), (ROTATION, self.new)):
            self.assertEqual(
                self.ring.derive("t1", "pix.send", PAYLOAD, epoch),
                alone.derive("t1", "pix.send", PAYLOAD, epoch),
            )
            self.assertEqual(self.ring.intent_key_at("t1", "i-1", epoch, 40), alone.intent_key("t1", "i-1", 40))
            self.assertEqual(
                self.ring.fingerprint_at("t1", "pix.send", PAYLOAD, epoch),
                alone.fingerprint("t1", "pix.send", PAYLOAD),
            )
        self.assertNotEqual(self.old.intent_key("t1", "i-1"), self.new.intent_key("t1", "i-1"))

    def test_what_cannot_pick_a_secret_is_refused(self):
        with self.assertRaises(ik.IntentkeyError) as caught:
            self.ring.intent_key("t1", "i-1")
        self.assertEqual(caught.exception.code, "invalid-keyring")
        dropped = ik.Keyer.with_keyring(None, [("2026-12", ROTATION, NEW)])
        with self.assertRaises(ik.IntentkeyError) as caught:
            dropped.derive("t1", "pix.send", PAYLOAD, ROTATION - 1)
        self.assertEqual(caught.exception.code, "secret-retired")
        with self.assertRaises(ik.IntentkeyError) as caught:
            ik.Keyer.with_keyring(None, [("a", 0, OLD), ("a", 5, NEW)])
        self.assertEqual(caught.exception.code, "invalid-keyring")
        self.assertNotIn(OLD.hex(), str(caught.exception))


class EndpointRotationTest(unittest.TestCase):
    """A request first seen before the activation, retried after it, is
    answered from its record: 409 while it runs, the replay once done."""

    def test_a_retry_across_the_rotation_runs_nothing_again(self):
        endpoint = ik.Endpoint(keyring=[("2026-11", 0, OLD), ("2026-12", ROTATION, NEW)], window_seconds=600)
        guard = ik.Guard(ik.MemoryStore())
        request = ("shop", "POST", "/orders", ['"order-1"'], "application/json", b'{"amount":"10.00"}')
        first = endpoint.admit(*request, ROTATION - 1).attempt
        self.assertIsNone(first.prior)
        outcome, token = guard.claim_attempt(first, ROTATION - 1)
        self.assertEqual(outcome.tag, "owned")
        retry = endpoint.admit(*request, ROTATION + 5).attempt
        self.assertEqual(retry.prior[0], first.key)
        self.assertNotEqual(retry.key, first.key)
        self.assertEqual(guard.claim_attempt(retry, ROTATION + 5)[0].tag, "in-flight")
        guard.finish(first.key, token, ik.Variant("answered", ik.response(201, '{"id":1}')), ROTATION + 6)
        self.assertEqual(guard.claim_attempt(retry, ROTATION + 7)[0].tag, "done")
        # Without the prior key the same retry would claim again: what the window is for.
        bare = ik.Attempt(retry.key, retry.fingerprint, retry.tenant_id, retry.action_type)
        self.assertEqual(guard.claim_attempt(bare, ROTATION + 8)[0].tag, "owned")
        with self.assertRaises(TypeError):
            ik.Endpoint(OLD, keyring=[("a", 0, OLD)])


if __name__ == "__main__":
    unittest.main()
