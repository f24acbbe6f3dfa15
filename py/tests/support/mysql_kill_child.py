"""One process of test_mysql_kill.py, there to be SIGKILLed:
``python mysql_kill_child.py '<json config>'`` (run with the test's
``sys.executable`` and environment, so it imports the same ``intentkey``).

``mode: "guarded"``: opens ``MySQLStore(url, schema=db)`` and runs one
guarded effect for ``key`` at ``now`` = 1_700_000_000: the effect inserts
``(key, 'owner')`` into ``ik_effects`` through a connection of its own
(autocommit) after ``pre_ms``, sleeps ``sleep_ms``, then answers 201; it
prints ``ready`` once the store is open, before the claim. ``mode: "naive"``: the
unguarded control, :func:`naive_process`.

The process prints ``conn <id>`` (the server's connection id) for every
connection it opens, before using it: after the kill the test waits until
the server has closed them, so that a statement the process had sent is
committed (or not) before anything is read.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Dict, Optional
from urllib.parse import unquote, urlsplit

import pymysql
import pymysql.connections

import intentkey
from intentkey.stores import MySQLStore

T = 1_700_000_000
ANSWER = '{"id": "effect"}'


def connect(url: str, database: str) -> Any:
    """A PyMySQL autocommit connection to `url`'s server, in `database`."""
    parts = urlsplit(url)
    return pymysql.connect(host=parts.hostname or "localhost", port=parts.port or 3306,
                           user=unquote(parts.username or "") or None, password=unquote(parts.password or ""),
                           database=database, autocommit=True, connect_timeout=10)


def naive_process(conn: Any, key: str, source: str, sleep_ms: float) -> bool:
    """The naive processor: SELECT the marker, then (none) the effect, then
    the marker. True when it ran the effect."""
    with conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM ik_naive_done WHERE k = %s", (key,))
        row = cur.fetchone()
        if row is not None and int(row[0]) > 0:
            return False
        cur.execute("INSERT INTO ik_effects (k, source) VALUES (%s, %s)", (key, source))
        time.sleep(sleep_ms / 1000)
        cur.execute("INSERT INTO ik_naive_done (k) VALUES (%s)", (key,))
    return True


def _say(line: str) -> None:
    os.write(1, (line + "\n").encode())


def _report_connections() -> None:
    """Every connection this process opens says its server id first."""
    opened = pymysql.connections.Connection.connect

    def connect_and_report(self: Any, sock: Optional[Any] = None) -> None:
        opened(self, sock)
        _say(f"conn {self.thread_id()}")

    setattr(pymysql.connections.Connection, "connect", connect_and_report)


def main() -> None:
    config: Dict[str, Any] = json.loads(sys.argv[1])
    _report_connections()
    effects = connect(config["url"], config["db"])
    if config["mode"] == "naive":
        ran = naive_process(effects, config["key"], "owner", float(config["sleep_ms"]))
        _say(f"naive {'ran' if ran else 'skipped'}")
        return
    key: str = config["key"]

    def effect(k: str) -> intentkey.Response:
        # The destination's call, before it took effect: a kill here leaves
        # the record in flight with no effect (recovery re-executes it).
        time.sleep(float(config.get("pre_ms", 0)) / 1000)
        with effects.cursor() as cur:
            cur.execute("INSERT INTO ik_effects (k, source) VALUES (%s, 'owner')", (k,))
        time.sleep(float(config["sleep_ms"]) / 1000)
        return intentkey.Response.json(201, ANSWER)

    with MySQLStore(config["url"], schema=config["db"]) as store:
        guard = intentkey.Guard(store)
        _say("ready")  # imported and connected: the parent times even kills from here
        attempt = intentkey.Attempt(key, config["fingerprint"], config["tenant"], config["action"])
        result = guard.run(attempt, effect, now=T)
        _say(f"outcome {result.outcome}")


if __name__ == "__main__":
    main()
