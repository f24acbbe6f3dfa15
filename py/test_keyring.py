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


if __name__ == "__main__":
    unittest.main()
