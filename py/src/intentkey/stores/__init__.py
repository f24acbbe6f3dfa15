"""Stores in SQLite, PostgreSQL, MySQL/MariaDB, Redis and DynamoDB: executors of the core's schema.

Each store runs the statements and scripts of the component's ``schema``
export (:mod:`intentkey.schema`) against the tables, key layout and
DynamoDB table every intentkey runtime shares (docs/store-schema.md,
docs/stores.md), so a record a Python
process writes is replayed by Node and Rust processes, and the other way
round. The stores only bind the core's parameters, run the core's
statements (or send the core's requests) and hand the rows back to the
core to decode.

* :class:`SQLiteStore` (stdlib ``sqlite3``): sync.
* :class:`PostgresStore` (psycopg 3 and ``psycopg_pool``): sync;
  :class:`AsyncPostgresStore`: ``asyncio``.
* :class:`MySQLStore` (PyMySQL, MySQL 8 or MariaDB): sync.
* :class:`RedisStore` (redis-py, one server or a Redis Cluster): sync;
  :class:`AsyncRedisStore` (``redis.asyncio``).
* :class:`DynamoDBStore` (boto3's low-level client, one table): sync.

A sync store goes to :class:`intentkey.Guard`, an async one to
:class:`intentkey.aio.AsyncGuard`. Failures raise
:class:`intentkey.StoreError`: ``unavailable`` when the store could not be
reached or was busy (retryable; nothing was decided), ``failed`` when it
refused the operation or holds data intentkey did not write. The drivers
are optional dependencies (``intentkey[postgres]``, ``intentkey[mysql]``,
``intentkey[redis]``, ``intentkey[dynamodb]``), imported only when their
store is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .dynamodb import DynamoDBStore
    from .mysql import MySQLStore
    from .postgres import AsyncPostgresStore, PostgresStore
    from .redis import AsyncRedisStore, RedisStore
    from .sqlite import SQLiteStore

__all__ = ["AsyncPostgresStore", "AsyncRedisStore", "DynamoDBStore", "MySQLStore", "PostgresStore", "RedisStore",
           "SQLiteStore"]

_WHERE = {
    "SQLiteStore": "sqlite",
    "PostgresStore": "postgres",
    "AsyncPostgresStore": "postgres",
    "MySQLStore": "mysql",
    "RedisStore": "redis",
    "AsyncRedisStore": "redis",
    "DynamoDBStore": "dynamodb",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'intentkey.stores' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{module}", __name__), name)
