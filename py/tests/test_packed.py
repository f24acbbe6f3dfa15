"""The packed calls (``memory-store.claim-intent-packed``/``finish-packed``)
and the Redis flows run inside the instance (``redis-flows``): the same
scenario through them and through the typed path over the ``store`` import
must give the same answers; a Redis replay is one round trip; a script the
server forgot is loaded again; a failed command raises the store's error
and leaves the store usable; a value that cannot be packed gets the typed
path's error."""

from __future__ import annotations

from typing import Any, Callable, Iterator, List, Tuple

import pytest
import redis

import intentkey as ik
from intentkey import _binding as b
from intentkey import schema
from intentkey import (
    Answered, ClaimState, Failed, Finished, Guard, IntentkeyError, MemoryStore, Refused, Response, Status, StoreError,
)
from intentkey.stores import RedisStore
from support.servers import redis_prefix, redis_url

T0 = 1_700_000_000
KEYER = ik.Keyer(secret=b"p" * 32)
BINARY = Response(201, bytes(range(256)), "application/octet-stream", (("Location", "/orders/1"), ("X-Id", "ção")))
PAYLOAD = {"creditor_key": "+5511999990000", "amount": "10.00", "currency": "BRL", "remittance": "order ç"}


class ThroughImport:
    """A store the guard performs through the ``store`` import (every
    method is the wrapped store's, one by one): the typed path."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Plain(RedisStore):
    """A RedisStore subclass: its own methods go through the ``store`` import."""


def scenario(guard: Guard) -> List[Any]:
    """Every claim outcome and every finish outcome class, with what each returned."""
    seen: List[Any] = []

    def claim(payload: Any, at: int, **kw: Any) -> Tuple[str, ik.Claim]:
        key, c = guard.claim_intent(KEYER, "tenant-a", "pix.send", payload, T0, now=at, **kw)
        seen.append((key, c.state, c.response))
        return key, c

    key, c = claim(PAYLOAD, T0)
    assert c.state is ClaimState.OWNED
    claim(PAYLOAD, T0 + 1)                                   # in flight: 409
    seen.append(guard.finish(key, "f" * 32, Answered(BINARY), now=T0 + 2))  # not the owner: superseded
    seen.append(guard.finish(key, c.owner_token, Answered(BINARY), now=T0 + 2))
    claim(PAYLOAD, T0 + 3)                                   # done: the stored answer, byte for byte
    claim(dict(PAYLOAD, amount="11.00"), T0 + 4, intent_id="i-1")  # owned under an intent id
    claim(dict(PAYLOAD, amount="12.00"), T0 + 5, intent_id="i-1")  # the same intent, another payload: 422
    for i, result in enumerate([Refused(BINARY), Refused(None), Failed(), Answered(Response.json(503, "{}"))]):
        k, own = claim(dict(PAYLOAD, amount=f"2{i}.00"), T0 + 10 + i, key_hex_length=40)
        seen.append(guard.finish(k, own.owner_token, result, now=T0 + 10 + i))
    _, again = claim(dict(PAYLOAD, amount="20.00"), T0 + 20, key_hex_length=40)  # released above: owned again
    assert again.state is ClaimState.OWNED
    _, left = claim(dict(PAYLOAD, amount="22.00"), T0 + 21, key_hex_length=40)  # left in flight: 409
    assert left.state is ClaimState.IN_FLIGHT
    return seen


def test_the_packed_memory_calls_answer_as_the_typed_path() -> None:
    packed = scenario(Guard(MemoryStore()))
    typed = scenario(Guard(ThroughImport(MemoryStore(_runtime=b.Runtime()))))
    assert packed == typed
    assert any(s[1] is ClaimState.DONE and s[2] == BINARY for s in packed if isinstance(s, tuple))
    assert Finished.SUPERSEDED in packed and Finished.RELEASED in packed and Finished.LEFT_IN_FLIGHT in packed


@pytest.fixture()
def prefixes() -> Iterator[Callable[[], str]]:
    made: List[Any] = []

    def fresh() -> str:
        cm = redis_prefix()
        made.append(cm)
        return cm.__enter__()

    try:
        yield fresh
    finally:
        for cm in made:
            cm.__exit__(None, None, None)


def test_the_redis_flows_answer_as_the_typed_path(prefixes: Callable[[], str]) -> None:
    url = redis_url()
    with RedisStore(url, prefix=prefixes()) as driven, Plain(url, prefix=prefixes()) as plain:
        assert driven._flow_driver() is not None and plain._flow_driver() is None
        assert scenario(Guard(driven)) == scenario(Guard(plain))
        # What the driven path wrote is the one layout: the typed reader sees the same records.
        assert {(r.key, r.status, r.response) for r in driven.list(Status.DONE, 100)} == \
            {(r.key, r.status, r.response) for r in plain.list(Status.DONE, 100)}
        assert {r.key for r in driven.list(Status.IN_FLIGHT, 100)} == {r.key for r in plain.list(Status.IN_FLIGHT, 100)}


def test_a_redis_replay_is_one_round_trip_and_a_first_call_two(prefixes: Callable[[], str]) -> None:
    with RedisStore(redis_url(), prefix=prefixes()) as store:
        sent: List[bytes] = []
        send = store._send
        store._send = lambda command: (sent.append(command), send(command))[1]  # type: ignore[method-assign]
        guard = Guard(store)
        key, c = guard.claim_intent(KEYER, "tenant-a", "pix.send", PAYLOAD, T0, now=T0)
        assert guard.finish(key, c.owner_token, Answered(BINARY), now=T0 + 1) is Finished.STORED
        scripts = schema.redis_scripts()  # the SHA-1s Python computes of the core's sources
        assert [c.split(b"\r\n")[2:5:2] for c in sent] == [[b"EVALSHA", scripts["claim"].sha1.encode()],
                                                            [b"EVALSHA", scripts["complete"].sha1.encode()]]
        sent.clear()
        again = guard.claim_intent(KEYER, "tenant-a", "pix.send", PAYLOAD, T0, now=T0 + 2)[1]
        assert again.state is ClaimState.DONE and again.response == BINARY
        assert len(sent) == 1, "the claim script answers the record it lost to: no GET follows"


def test_flows_that_ended_on_a_reply_of_one_are_forgotten(prefixes: Callable[[], str]) -> None:
    with RedisStore(redis_url(), prefix=prefixes()) as store:
        guard = Guard(store)
        key, c = guard.claim_intent(KEYER, "tenant-a", "pix.send", PAYLOAD, T0, now=T0)
        assert c.state is ClaimState.OWNED
        assert len(store._settled) == 1
        settled = store._settled[0]
        guard.finish(key, c.owner_token, Answered(BINARY), now=T0 + 1)  # this start names it
        rt = b.runtime()
        with rt.lock:
            answer = rt.call(b.REDIS, "[method]redis-flows.resume", store._flows(rt), settled, 1)
        with pytest.raises(IntentkeyError) as e:
            b.unwrap_record(answer)
        assert e.value.code == "flow-misuse" and f"no flow {settled}" in e.value.message


def test_a_script_the_server_forgot_is_loaded_again(prefixes: Callable[[], str]) -> None:
    with RedisStore(redis_url(), prefix=prefixes()) as store:
        guard = Guard(store)
        store.client.script_flush()
        key, c = guard.claim_intent(KEYER, "tenant-a", "pix.send", PAYLOAD, T0, now=T0)
        assert c.state is ClaimState.OWNED
        store.client.script_flush()
        assert guard.finish(key, c.owner_token, Answered(BINARY), now=T0 + 1) is Finished.STORED
        assert store.get(key) is not None and store.get(key).response == BINARY  # type: ignore[union-attr]


def test_a_failed_command_is_the_stores_error_and_the_store_goes_on(prefixes: Callable[[], str]) -> None:
    with RedisStore(redis_url(), prefix=prefixes()) as store:
        guard = Guard(store)
        real = store._send

        def down(command: bytes) -> Any:
            raise StoreError("unavailable", "redis: down")

        store._send = down  # type: ignore[method-assign]
        with pytest.raises(StoreError) as e:
            guard.claim_intent(KEYER, "tenant-a", "pix.send", PAYLOAD, T0, now=T0)
        assert e.value.kind == "unavailable"
        store._send = real  # type: ignore[method-assign]
        key, c = guard.claim_intent(KEYER, "tenant-a", "pix.send", PAYLOAD, T0, now=T0)
        assert c.state is ClaimState.OWNED  # the failed claim sent nothing: the key is free
        assert guard.finish(key, c.owner_token, Answered(BINARY), now=T0 + 1) is Finished.STORED
    dead = RedisStore(redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=1), prefix="ik_py_dead")
    with pytest.raises(StoreError) as e:
        Guard(dead).claim_intent(KEYER, "tenant-a", "pix.send", PAYLOAD, T0, now=T0)
    assert e.value.kind == "unavailable"


def test_a_connection_the_store_kept_goes_back_to_the_pool_on_close(prefixes: Callable[[], str]) -> None:
    client = redis.Redis.from_url(redis_url())
    store = RedisStore(client, prefix=prefixes())
    Guard(store).claim_intent(KEYER, "tenant-a", "pix.send", PAYLOAD, T0, now=T0)
    pool = client.connection_pool
    assert len(store._idle) == 1 and len(pool._in_use_connections) == 1
    flows = store._guest[2]
    store.close()
    assert store._idle == [] and len(pool._in_use_connections) == 0
    assert store._guest is None
    assert not b.runtime().fastpath or flows.dropped  # the guest's redis-flows went with it
    client.close()


@pytest.mark.parametrize("where", ["memory", "redis", "typed"])
def test_text_that_is_not_unicode_is_refused_by_name_and_nothing_is_lost(where: str,
                                                                          prefixes: Callable[[], str]) -> None:
    store: Any = {"memory": lambda: MemoryStore(), "redis": lambda: RedisStore(redis_url(), prefix=prefixes()),
                  "typed": lambda: ThroughImport(MemoryStore(_runtime=b.Runtime()))}[where]()
    guard = Guard(store)
    key, c = guard.claim_intent(KEYER, "tenant-a", "pix.send", PAYLOAD, T0, now=T0)
    for field, args in (("tenant_id", ("tenant-\ud800", "pix.send", PAYLOAD)),
                        ("action_type", ("tenant-a", "pix.\udfff", PAYLOAD)),
                        ("payload_json", ("tenant-a", "pix.send", '{"amount": "\ud800"}'))):
        with pytest.raises(IntentkeyError) as e:
            guard.claim_intent(KEYER, *args, T0, now=T0)
        assert e.value.field == field and "lone surrogate" in e.value.message
    with pytest.raises(IntentkeyError) as e:
        guard.finish(key, c.owner_token, Answered(Response(201, b"", "text/\ud800")), now=T0)
    assert e.value.field == "content_type"
    # The instance was not discarded: the claim made before is still there.
    assert guard.finish(key, c.owner_token, Answered(BINARY), now=T0 + 1) is Finished.STORED
    assert guard.claim_intent(KEYER, "tenant-a", "pix.send", PAYLOAD, T0, now=T0 + 2)[1].response == BINARY


def test_a_single_connection_client_is_used_under_its_lock(prefixes: Callable[[], str]) -> None:
    client = redis.Redis.from_url(redis_url(), single_connection_client=True)
    with RedisStore(client, prefix=prefixes()) as store:
        guard = Guard(store)
        client.script_flush()  # the scripts are loaded again on this path too
        key, c = guard.claim_intent(KEYER, "tenant-a", "pix.send", PAYLOAD, T0, now=T0)
        assert guard.finish(key, c.owner_token, Answered(BINARY), now=T0 + 1) is Finished.STORED
        assert guard.claim_intent(KEYER, "tenant-a", "pix.send", PAYLOAD, T0, now=T0 + 2)[1].response == BINARY
        assert store._idle == []  # nothing taken from a pool
    client.close()
