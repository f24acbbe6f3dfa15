"""A keyring from Python: each intent keyed with the secret active at its own
epoch (the same key as that secret alone gives), calls that cannot pick a
secret refused, a dropped secret's intents refused."""

from __future__ import annotations

import pytest

from intentkey import Answered, Attempt, ClaimState, Guard, IntentkeyError, Keyer, Keyring, MemoryStore, Response
from intentkey.http import Endpoint, Request

ROTATION = 1_800_000_000
OLD, NEW = bytes([0x11] * 32), bytes([0x22] * 32)
PAYLOAD = '{"creditor_key":"a@b.c","amount":"10.00","currency":"BRL"}'


class TestKeyring:
    def setup_method(self) -> None:
        self.ring = Keyer(keyring=Keyring([("2026-11", 0, OLD), ("2026-12", ROTATION, NEW)]))
        self.old = Keyer(secret=OLD)
        self.new = Keyer(secret=NEW)

    def test_the_secret_of_the_intents_epoch_keys_it(self) -> None:
        for epoch, alone in ((ROTATION - 1, self.old), (ROTATION, self.new)):
            assert self.ring.derive("t1", "pix.send", PAYLOAD, epoch) == alone.derive("t1", "pix.send", PAYLOAD, epoch)
            assert self.ring.intent_key_at("t1", "i-1", epoch, 40) == alone.intent_key("t1", "i-1", 40)
            assert self.ring.fingerprint_at("t1", "pix.send", PAYLOAD, epoch) == alone.fingerprint("t1", "pix.send", PAYLOAD)
        assert self.old.intent_key("t1", "i-1") != self.new.intent_key("t1", "i-1")

    def test_what_cannot_pick_a_secret_is_refused(self) -> None:
        with pytest.raises(IntentkeyError) as caught:
            self.ring.intent_key("t1", "i-1")
        assert caught.value.code == "invalid-keyring"
        dropped = Keyer(keyring=Keyring([("2026-12", ROTATION, NEW)]))
        with pytest.raises(IntentkeyError) as caught:
            dropped.derive("t1", "pix.send", PAYLOAD, ROTATION - 1)
        assert caught.value.code == "secret-retired"
        with pytest.raises(IntentkeyError) as caught:
            Keyer(keyring=Keyring([("a", 0, OLD), ("a", 5, NEW)]))
        assert caught.value.code == "invalid-keyring"
        assert OLD.hex() not in str(caught.value)
        assert OLD.hex() not in repr(self.ring) and NEW.hex() not in repr(self.ring)


class TestEndpointRotation:
    """A request first seen before the activation, retried after it, is
    answered from its record: 409 while it runs, the replay once done."""

    def test_a_retry_across_the_rotation_runs_nothing_again(self) -> None:
        endpoint = Endpoint(keyring=Keyring([("2026-11", 0, OLD), ("2026-12", ROTATION, NEW)], window_seconds=600))
        guard = Guard(MemoryStore())
        request = Request("shop", "POST", "/orders", ['"order-1"'], "application/json", b'{"amount":"10.00"}')
        first = endpoint.admit(request, now=ROTATION - 1).attempt
        assert first is not None
        assert first.prior is None
        claim = guard.claim(first, now=ROTATION - 1)
        assert claim.state is ClaimState.OWNED
        retry = endpoint.admit(request, now=ROTATION + 5).attempt
        assert retry is not None and retry.prior is not None
        assert retry.prior[0] == first.key
        assert retry.key != first.key
        assert guard.claim(retry, now=ROTATION + 5).state is ClaimState.IN_FLIGHT
        guard.finish(first.key, claim.owner_token, Answered(Response.json(201, '{"id":1}')), now=ROTATION + 6)
        assert guard.claim(retry, now=ROTATION + 7).state is ClaimState.DONE
        # Without the prior key the same retry would claim again: what the window is for.
        bare = Attempt(retry.key, retry.fingerprint, retry.tenant_id, retry.action_type)
        assert guard.claim(bare, now=ROTATION + 8).state is ClaimState.OWNED

    def test_one_secret_or_a_keyring_not_both(self) -> None:
        with pytest.raises(TypeError):
            Endpoint(OLD, keyring=Keyring([("a", 0, OLD)]))  # type: ignore[misc]
        with pytest.raises(IntentkeyError) as caught:
            Endpoint(secret=OLD, keyring=Keyring([("a", 0, OLD)]))
        assert caught.value.code == "invalid-argument"
        assert OLD.hex() not in str(caught.value)
