"""One PostgreSQL schema, one MySQL/MariaDB database, one Redis prefix, one
Redis Cluster prefix (``redis+cluster://``) and one DynamoDB table shared by
Python, Node and Rust.

Every participant (Python's Guard over the sync store, Python's AsyncGuard
over the asyncio store, the npm package's guard through
tests/cross/node_store.mjs, the Rust CLI ``intentkey claim`` / ``complete``)
replays what each other one claimed and finished, refuses another payload
under its key, and sees a key another one holds in flight as in flight
(409). Python has no asyncio MySQL or DynamoDB store: only its Guard takes
part there.
Node needs ``js/node_modules`` and the transpiled ``js/vendor``; Rust
needs the ``intentkey`` binary (``INTENTKEY_BIN``, default
``target/debug/intentkey``). A missing one fails under ``CI=true`` and skips
otherwise, as a missing server does.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

import intentkey as ik
from intentkey.aio import AsyncGuard
from intentkey.stores import AsyncPostgresStore, AsyncRedisStore, DynamoDBStore, MySQLStore, PostgresStore, RedisStore
from support.servers import (
    dynamodb_table, mysql_database, mysql_database_url, pg_conninfo, pg_schema, pg_url, redis_cluster_prefix,
    redis_cluster_url, redis_prefix, redis_url, unreachable,
)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
NODE_SCRIPT = HERE / "cross" / "node_store.mjs"
TENANT, ACTION = "tenant-acme", "pix.send"


def missing(what: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what}, and CI=true: the shared-store tests cannot run")
    pytest.skip(f"{what}; skipped (outside CI; with CI=true this fails)")


def node_ready(backend: str = "postgres") -> str:
    node = shutil.which("node")
    if node is None:
        missing("node is not on PATH")
    needs = ["js/node_modules/pg", "js/node_modules/ioredis", "js/vendor/intentkey.js"]
    if backend == "mysql":
        needs += ["js/node_modules/mysql2", "js/src/stores/mysql.js"]
    if backend == "dynamodb":
        needs += ["js/node_modules/@aws-sdk/client-dynamodb", "js/src/stores/dynamodb.js"]
    for need in needs:
        if not (REPO / need).exists():
            missing(f"{REPO / need} is missing (npm ci and npm run build in js/)")
    assert node is not None
    return node


def rust_ready() -> str:
    binary = os.environ.get("INTENTKEY_BIN", str(REPO / "target" / "debug" / "intentkey"))
    if not os.access(binary, os.X_OK):
        missing(f"the intentkey binary {binary} is missing (cargo build -p intentkey-cli, or set INTENTKEY_BIN)")
    return binary


# -- participants: run (claim; the owner answers 201 with `body`) and hold (claim, never finish) -------------


class Python:
    name = "python"

    def __init__(self, store: Any):
        self.guard = ik.Guard(store)

    def run(self, key: str, fp: str, body: str) -> Tuple[str, Optional[str]]:
        r = self.guard.run(ik.Attempt(key, fp, TENANT, ACTION), lambda k: ik.Response.json(201, body))
        outcome = {"ran": "owned", "replayed": "done", "conflict": "payload-conflict"}.get(r.outcome, r.outcome)
        return outcome, None if r.response is None or outcome == "in-flight" else r.response.body.decode()

    def hold(self, key: str, fp: str) -> None:
        assert self.guard.claim(ik.Attempt(key, fp, TENANT, ACTION)).state is ik.ClaimState.OWNED


class PythonAsync:
    name = "python-async"

    def __init__(self, make: Any):
        self.make = make

    def _with(self, work: Any) -> Any:
        async def main() -> Any:
            store = self.make()
            try:
                return await work(AsyncGuard(store))
            finally:
                await store.close()

        return asyncio.run(main())

    def run(self, key: str, fp: str, body: str) -> Tuple[str, Optional[str]]:
        async def work(g: AsyncGuard) -> Tuple[str, Optional[str]]:
            a = ik.Attempt(key, fp, TENANT, ACTION)
            r = await g.run(a, lambda k: ik.Response.json(201, body))
            outcome = {"ran": "owned", "replayed": "done", "conflict": "payload-conflict"}.get(r.outcome, r.outcome)
            return outcome, None if r.response is None or outcome == "in-flight" else r.response.body.decode()

        result: Tuple[str, Optional[str]] = self._with(work)
        return result

    def hold(self, key: str, fp: str) -> None:
        async def work(g: AsyncGuard) -> None:
            assert (await g.claim(ik.Attempt(key, fp, TENANT, ACTION))).state is ik.ClaimState.OWNED

        self._with(work)


def _json(cmd: List[str]) -> Dict[str, Any]:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{cmd[:3]} exited {done.returncode}: {done.stderr.strip()}"
    out: Dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


class Node:
    name = "node"

    def __init__(self, node: str, spec: str):
        self.node, self.spec = node, spec

    def _op(self, op: str, key: str, fp: str, body: str = "{}") -> Dict[str, Any]:
        return _json([self.node, str(NODE_SCRIPT), self.spec, op, key, fp, body])

    def run(self, key: str, fp: str, body: str) -> Tuple[str, Optional[str]]:
        r = self._op("run", key, fp, body)
        if r["outcome"] in ("in-flight", "payload-conflict"):
            assert r["status"] in (409, 422), r
            return r["outcome"], None
        return r["outcome"], r["body"]

    def hold(self, key: str, fp: str) -> None:
        r = self._op("fail", key, fp)
        assert r == {"outcome": "owned", "threw": "the destination timed out"}, r


class Rust:
    name = "rust"

    def __init__(self, binary: str, url: str):
        self.binary, self.url = binary, url

    def _claim(self, key: str, fp: str) -> Dict[str, Any]:
        return _json([self.binary, "claim", "--store", self.url, "--tenant", TENANT, "--action", ACTION,
                      "--key", key, "--fingerprint", fp])

    def run(self, key: str, fp: str, body: str) -> Tuple[str, Optional[str]]:
        r = self._claim(key, fp)
        if r["outcome"] == "owned":
            done = _json([self.binary, "complete", "--store", self.url, "--key", key,
                          "--owner-token", r["owner_token"], "--status", "201", "--body", body])
            assert done["finished"] == "stored", done
            return "owned", body
        if r["outcome"] == "done":
            assert r["response"]["status"] == 201 and r["response"]["content_type"] == "application/json"
            return "done", r["response"]["body"]
        return r["outcome"], None

    def hold(self, key: str, fp: str) -> None:
        assert self._claim(key, fp)["outcome"] == "owned"

    def inspect(self, key: str) -> Dict[str, Any]:
        return _json([self.binary, "inspect", "--store", self.url, "--key", key])


# -- the scenario -----------------------------------------------------------------------------------------


def shared(participants: List[Any]) -> None:
    names = [p.name for p in participants]
    for writer in participants:
        key = f"shared-{writer.name}-{uuid.uuid4().hex}"
        body = json.dumps({"by": writer.name})
        assert writer.run(key, "fp-1", body) == ("owned", body)
        for reader in participants:
            if reader is writer:
                continue
            got = reader.run(key, "fp-1", json.dumps({"by": reader.name}))
            assert got == ("done", body), f"{reader.name} reading what {writer.name} wrote: {got} ({names})"
            conflict = reader.run(key, "fp-2", "{}")
            assert conflict == ("payload-conflict", None), f"{reader.name} on {writer.name}'s key: {conflict}"
    for holder in participants:
        key = f"held-{holder.name}-{uuid.uuid4().hex}"
        holder.hold(key, "fp-1")
        for reader in participants:
            got = reader.run(key, "fp-1", json.dumps({"by": reader.name}))
            assert got == ("in-flight", None), f"{reader.name} on a key {holder.name} holds: {got}"


PEERS = [("node",), ("rust",), ("node", "rust")]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("peers", PEERS, ids=["+".join(p) for p in PEERS])
@pytest.mark.parametrize("backend", ["postgres", "mysql", "redis", "redis-cluster", "dynamodb"])
def test_records_are_shared_across_languages(backend: str, peers: Tuple[str, ...]) -> None:
    node = node_ready(backend) if "node" in peers else None
    binary = rust_ready() if "rust" in peers else None
    with ExitStack() as stack:
        if backend == "postgres":
            conninfo = pg_conninfo()
            name = stack.enter_context(pg_schema())
            parts = dict(p.split("=", 1) for p in conninfo.split())
            pg_config = {"host": parts.get("host", "127.0.0.1"), "port": int(parts.get("port", "5432")),
                         "user": parts["user"], "database": parts.get("dbname", "test")}
            sync_store = PostgresStore(conninfo, schema=name)
            stack.callback(sync_store.close)
            make_async: Any = lambda: AsyncPostgresStore(conninfo, schema=name)
            node_spec = f"pg:{json.dumps(pg_config)}:{name}"
            rust_url = pg_url(conninfo, name)
        elif backend == "mysql":
            database = stack.enter_context(mysql_database())
            url = mysql_database_url(database)
            sync_store = MySQLStore(url)
            stack.callback(sync_store.close)
            make_async = None
            node_spec = f"mysql:{url}"
            rust_url = url
        elif backend == "dynamodb":
            endpoint, table = stack.enter_context(dynamodb_table())
            url = f"{endpoint}/{table}"
            sync_store = DynamoDBStore(url)
            stack.callback(sync_store.close)
            make_async = None
            node_spec = f"dynamodb:{url}"
            rust_url = url
        else:
            url = redis_url() if backend == "redis" else redis_cluster_url()
            prefix = stack.enter_context(redis_prefix() if backend == "redis" else redis_cluster_prefix())
            sync_store = RedisStore(url, prefix=prefix)
            stack.callback(sync_store.close)
            make_async = lambda: AsyncRedisStore(url, prefix=prefix)
            node_spec = f"redis:{url}:{prefix}"
            rust_url = f"{url}?prefix={prefix}"
        participants: List[Any] = [Python(sync_store)]
        if make_async is not None:
            participants.append(PythonAsync(make_async))
        if node is not None:
            participants.append(Node(node, node_spec))
        if binary is not None:
            participants.append(Rust(binary, rust_url))
        shared(participants)

        # The Rust CLI reads the record a Python guard wrote, column for column.
        if binary is not None:
            key = f"inspect-{uuid.uuid4().hex}"
            g = ik.Guard(sync_store)
            owned = g.claim(ik.Attempt(key, "fp-1", TENANT, ACTION))
            response = ik.Response(201, b'{"id":9}', "application/json", (("Location", "/orders/9"),))
            assert g.finish(key, owned.owner_token, ik.Answered(response)) is ik.Finished.STORED
            stored = sync_store.get(key)
            seen = Rust(binary, rust_url).inspect(key)["record"]
            assert seen["status"] == "done" and seen["owner_token"] == owned.owner_token
            assert seen["fingerprint"] == "fp-1" and seen["tenant_id"] == TENANT and seen["action_type"] == ACTION
            assert seen["response"]["body"] == '{"id":9}'
            assert [tuple(h) for h in seen["response"]["headers"]] == [("Location", "/orders/9")]
            assert seen["created_at"] == stored.created_at and seen["expires_at"] == stored.expires_at
