"""Kill trials for the MySQL / MariaDB store (support/kill_trials.py): a
process running one guarded effect is SIGKILLed at a random point, then the
key is redelivered and recovered; the effect happens exactly once.

``IK_MYSQL_KILL_TRIALS`` trials (default 40; ``IK_MYSQL_KILL_SEED`` fixes
the timings). The child (support/kill_child.py, backend ``mysql``) opens
``MySQLStore(url, schema=db)``; an effect is a row ``(key, source)`` of
``ik_effects`` written through a connection of its own (autocommit). After
a kill the trial waits until the server has closed the child's connections
(each one the child named by its id, gone from
``information_schema.PROCESSLIST``).

The negative control: a naive "SELECT the marker, INSERT the effect, INSERT
the marker" processor killed the same way and redelivered duplicates its
effect. Without a server the test skips (fails under ``CI=true``)."""

from __future__ import annotations

import os
import random
import time
from typing import Any, Dict, List

import pytest

from intentkey.stores import MySQLStore
from support.kill_child import naive_process
from support.kill_trials import run_kill_trials
from support.servers import mysql_connect, mysql_database, mysql_url

TRIALS = int(os.environ.get("IK_MYSQL_KILL_TRIALS", "40"))
NAIVE_TRIALS = 6


class MySQLKill:
    """The trials' store and effects in one MySQL database."""

    name = "mysql"

    def __init__(self, url: str, db: str, store: MySQLStore, conn: Any):
        self.url, self.db, self.store, self.conn = url, db, store, conn

    def child_config(self) -> Dict[str, Any]:
        return {"backend": "mysql", "url": self.url, "db": self.db}

    def effects(self, key: str) -> List[str]:
        with self.conn.cursor() as cur:
            cur.execute("SELECT source FROM ik_effects WHERE k = %s ORDER BY id", (key,))
            return [str(source) for (source,) in cur.fetchall()]

    def add_effect(self, key: str, source: str) -> None:
        with self.conn.cursor() as cur:
            cur.execute("INSERT INTO ik_effects (k, source) VALUES (%s, %s)", (key, source))

    def settle(self, lines: List[str]) -> None:
        ids = [int(line.split()[1]) for line in lines if line.startswith("conn ")]
        deadline = time.monotonic() + 60
        while ids:
            with self.conn.cursor() as cur:
                cur.execute(f"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID IN ({','.join(map(str, ids))})")
                row = cur.fetchone()
            if int(row[0]) == 0:
                break
            assert time.monotonic() < deadline, f"the server kept the killed child's connections {ids}"
            time.sleep(0.002)

    def naive_redeliver(self, key: str) -> None:
        naive_process(self.conn, key, "redelivery", 0)


@pytest.mark.timeout(900)
def test_a_killed_owner_is_redelivered_and_recovered_with_one_effect() -> None:
    seed = int(os.environ.get("IK_MYSQL_KILL_SEED", str(random.randrange(2**32))))
    url = mysql_url()
    with mysql_database() as db, MySQLStore(url, schema=db) as store:
        store.migrate()  # the children find the tables made
        conn = mysql_connect(db)
        try:
            with conn.cursor() as cur:
                cur.execute("CREATE TABLE ik_effects (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
                            "k VARCHAR(255) NOT NULL, source VARCHAR(16) NOT NULL, KEY (k))")
                cur.execute("CREATE TABLE ik_naive_done (k VARCHAR(255) PRIMARY KEY)")
            summary = run_kill_trials(MySQLKill(url, db, store, conn), TRIALS, seed, NAIVE_TRIALS)
        finally:
            conn.close()
    print("\n" + summary.line("mysql"))
    assert summary.duplicates == 0
    assert summary.counts["mid-effect"] >= TRIALS / 6, summary.counts
    assert summary.naive_duplicated >= 1, \
        "the naive control never duplicated its effect: the kills did not land between effect and marker"
