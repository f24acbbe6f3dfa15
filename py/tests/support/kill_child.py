"""One process of the kill trials (support/kill_trials.py), there to be
SIGKILLed: ``python kill_child.py '<json config>'`` (run with the test's
``sys.executable`` and environment, so it imports the same ``intentkey``).

``backend`` says where the store and the effects live:

* ``"mysql"``: ``MySQLStore(url, schema=db)``; an effect is a row
  ``(key, source)`` of ``ik_effects``, written through a connection of its
  own (autocommit). The process prints ``conn <id>`` (the server's
  connection id) for every connection it opens, before using it.
* ``"redis-cluster"``: ``RedisStore`` over a ``RedisCluster`` client of
  the test cluster whose every connection is named ``client_name`` (the
  process prints ``client <name>`` first, and the test finds them in each
  node's ``CLIENT LIST``), ``prefix`` and ``wait`` as configured; an effect
  is an ``RPUSH`` of its source onto :func:`effects_key`.
* ``"dynamodb"``: ``DynamoDBStore(url)`` (the URL names the test's proxy
  in front of the endpoint, support/settling_proxy.py); an effect is its
  source appended to the list ``sources`` of the item ``{"k": key}`` in
  the table ``effects`` (:func:`dynamodb_add_effect`), through a boto3
  client of that proxy too.

``mode: "guarded"``: opens the store and runs one guarded effect for
``key`` at ``now`` = 1_700_000_000: the effect is written after ``pre_ms``,
then the process sleeps ``sleep_ms`` and answers 201; it prints ``ready``
once the store is open, before the claim, and ``outcome <outcome>`` at
the end. ``mode: "naive"``: the unguarded control (:func:`naive_process`
of the backend): look for the marker, then (none) the effect, then the
marker.

After the kill the test waits until the server has let go of every
connection the process opened, so that a command it had sent is applied
(or not) before anything is read.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple
from urllib.parse import unquote, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: `support` imports as in the tests

import intentkey  # noqa: E402

T = 1_700_000_000
ANSWER = '{"id": "effect"}'


def _say(line: str) -> None:
    os.write(1, (line + "\n").encode())


# -- MySQL ---------------------------------------------------------------------------------------


def mysql_connect(url: str, database: str) -> Any:
    """A PyMySQL autocommit connection to `url`'s server, in `database`."""
    import pymysql

    parts = urlsplit(url)
    return pymysql.connect(host=parts.hostname or "localhost", port=parts.port or 3306,
                           user=unquote(parts.username or "") or None, password=unquote(parts.password or ""),
                           database=database, autocommit=True, connect_timeout=10)


def naive_process(conn: Any, key: str, source: str, sleep_ms: float) -> bool:
    """The naive processor over MySQL: SELECT the marker, then (none) the
    effect, then the marker. True when it ran the effect."""
    with conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM ik_naive_done WHERE k = %s", (key,))
        row = cur.fetchone()
        if row is not None and int(row[0]) > 0:
            return False
        cur.execute("INSERT INTO ik_effects (k, source) VALUES (%s, %s)", (key, source))
        time.sleep(sleep_ms / 1000)
        cur.execute("INSERT INTO ik_naive_done (k) VALUES (%s)", (key,))
    return True


def _open_mysql(config: Dict[str, Any]) -> Tuple[Callable[[], Any], Callable[[str], None], Callable[[str, float], bool]]:
    import pymysql.connections

    from intentkey.stores import MySQLStore

    opened = pymysql.connections.Connection.connect

    def connect_and_report(self: Any, sock: Optional[Any] = None) -> None:
        opened(self, sock)
        _say(f"conn {self.thread_id()}")

    setattr(pymysql.connections.Connection, "connect", connect_and_report)
    effects = mysql_connect(config["url"], config["db"])

    def effect(key: str) -> None:
        with effects.cursor() as cur:
            cur.execute("INSERT INTO ik_effects (k, source) VALUES (%s, 'owner')", (key,))

    return (lambda: MySQLStore(config["url"], schema=config["db"]), effect,
            lambda key, sleep_ms: naive_process(effects, key, "owner", sleep_ms))


# -- Redis Cluster -------------------------------------------------------------------------------


def effects_key(prefix: str, key: str) -> str:
    """The list of the effects of `key` (their sources, in order), under the test's prefix."""
    return "{" + prefix + ":fx}:" + key


def naive_marker(prefix: str, key: str) -> str:
    return "{" + prefix + ":fx}:done:" + key


def naive_process_redis(client: Any, prefix: str, key: str, source: str, sleep_ms: float) -> bool:
    """The naive processor over Redis: GET the marker, then (none) the
    effect, then SET the marker. True when it ran the effect."""
    if client.get(naive_marker(prefix, key)) is not None:
        return False
    client.rpush(effects_key(prefix, key), source)
    time.sleep(sleep_ms / 1000)
    client.set(naive_marker(prefix, key), "1")
    return True


def _open_redis_cluster(config: Dict[str, Any]) -> Tuple[Callable[[], Any], Callable[[str], None],
                                                          Callable[[str, float], bool]]:
    from support.servers import cluster_client

    from intentkey.stores import RedisStore

    _say(f"client {config['client_name']}")  # every connection of the client is named so
    client = cluster_client(client_name=config["client_name"])
    prefix = config["prefix"]

    def effect(key: str) -> None:
        client.rpush(effects_key(prefix, key), "owner")

    return (lambda: RedisStore(client, prefix=prefix, wait=config.get("wait")), effect,
            lambda key, sleep_ms: naive_process_redis(client, prefix, key, "owner", sleep_ms))


# -- DynamoDB -------------------------------------------------------------------------------------


def dynamodb_effects_table(client: Any, table: str) -> None:
    """Creates the effects table `table` (key ``k``, on-demand), waiting until it is ACTIVE."""
    client.create_table(TableName=table, AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                        KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}], BillingMode="PAY_PER_REQUEST")
    while client.describe_table(TableName=table)["Table"]["TableStatus"] != "ACTIVE":
        time.sleep(0.05)


def dynamodb_add_effect(client: Any, table: str, key: str, source: str) -> None:
    """Appends `source` to the effects of `key` (one atomic UpdateItem)."""
    client.update_item(TableName=table, Key={"k": {"S": key}},
                       UpdateExpression="SET #s = list_append(if_not_exists(#s, :none), :one)",
                       ExpressionAttributeNames={"#s": "sources"},
                       ExpressionAttributeValues={":none": {"L": []}, ":one": {"L": [{"S": source}]}})


def dynamodb_effects(client: Any, table: str, key: str) -> List[str]:
    """The sources of `key`'s effects, in order (a strongly consistent read)."""
    item = client.get_item(TableName=table, Key={"k": {"S": key}}, ConsistentRead=True).get("Item")
    return [] if item is None else [v["S"] for v in item["sources"]["L"]]


def naive_process_dynamodb(client: Any, table: str, key: str, source: str, sleep_ms: float) -> bool:
    """The naive processor over DynamoDB: GetItem the marker, then (none)
    the effect, then PutItem the marker. True when it ran the effect."""
    marker = {"k": {"S": "done#" + key}}
    if "Item" in client.get_item(TableName=table, Key=marker, ConsistentRead=True):
        return False
    dynamodb_add_effect(client, table, key, source)
    time.sleep(sleep_ms / 1000)
    client.put_item(TableName=table, Item=marker)
    return True


def _open_dynamodb(config: Dict[str, Any]) -> Tuple[Callable[[], Any], Callable[[str], None],
                                                    Callable[[str, float], bool]]:
    from support.servers import dynamodb_client

    from intentkey.stores import DynamoDBStore

    client = dynamodb_client(config["url"])
    table = config["effects"]
    return (lambda: DynamoDBStore(config["url"]), lambda key: dynamodb_add_effect(client, table, key, "owner"),
            lambda key, sleep_ms: naive_process_dynamodb(client, table, key, "owner", sleep_ms))


BACKENDS = {"mysql": _open_mysql, "redis-cluster": _open_redis_cluster, "dynamodb": _open_dynamodb}


def main() -> None:
    config: Dict[str, Any] = json.loads(sys.argv[1])
    open_store, write_effect, naive = BACKENDS[config["backend"]](config)
    if config["mode"] == "naive":
        ran = naive(config["key"], float(config["sleep_ms"]))
        _say(f"naive {'ran' if ran else 'skipped'}")
        return

    def effect(k: str) -> intentkey.Response:
        # The destination's call, before it took effect: a kill here leaves
        # the record in flight with no effect (recovery re-executes it).
        time.sleep(float(config.get("pre_ms", 0)) / 1000)
        write_effect(k)
        time.sleep(float(config["sleep_ms"]) / 1000)
        return intentkey.Response.json(201, ANSWER)

    with open_store() as store:
        guard = intentkey.Guard(store)
        store.get(config["key"])  # connected (a cluster client reads its slots) before ready
        _say("ready")  # imported and connected: the parent times even kills from here
        attempt = intentkey.Attempt(config["key"], config["fingerprint"], config["tenant"], config["action"])
        result = guard.run(attempt, effect, now=T)
        _say(f"outcome {result.outcome}")


if __name__ == "__main__":
    main()
