"""The servers the store tests run against, and their clean-up.

PostgreSQL at 127.0.0.1:5432, database ``test`` (trust; user ``postgres``
or the current user; ``INTENTKEY_TEST_PG`` overrides the connection
string), Redis at 127.0.0.1:6379 (``INTENTKEY_TEST_REDIS`` overrides the
URL), MariaDB or MySQL at 127.0.0.1:3306, user ``root`` with no password,
database ``test`` (``INTENTKEY_TEST_MYSQL`` overrides the URL). A server
that cannot be reached fails the test when ``CI=true`` and skips it, saying
why, otherwise. Each test gets its own schema, prefix or database, dropped
or deleted afterwards.
"""

from __future__ import annotations

import getpass
import os
import uuid
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Tuple
from urllib.parse import unquote, urlsplit

import pytest

PG_HOSTPART = "host=127.0.0.1 port=5432 dbname=test connect_timeout=3"
REDIS_URL = os.environ.get("INTENTKEY_TEST_REDIS", "redis://127.0.0.1:6379/0")
MYSQL_URL = os.environ.get("INTENTKEY_TEST_MYSQL", "mysql://root@127.0.0.1:3306/test")


def unreachable(what: str, where: str, why: object) -> None:
    message = f"{what} not reachable at {where} ({why})"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} and CI=true: the {what} tests cannot run")
    pytest.skip(f"{message}; {what} tests skipped (outside CI; with CI=true they fail)")


_pg: Optional[str] = None


def pg_conninfo() -> str:
    """A working connection string for the test database (fails or skips otherwise)."""
    global _pg
    if _pg is not None:
        return _pg
    import psycopg

    candidates = [os.environ["INTENTKEY_TEST_PG"]] if "INTENTKEY_TEST_PG" in os.environ else [
        f"{PG_HOSTPART} user=postgres", f"{PG_HOSTPART} user={getpass.getuser()}"]
    last: object = None
    for conninfo in candidates:
        try:
            with psycopg.connect(conninfo, autocommit=True) as conn:
                conn.execute("SELECT 1")
            _pg = conninfo
            return conninfo
        except psycopg.Error as e:
            last = e
    unreachable("PostgreSQL", candidates[-1], last)
    raise AssertionError("unreachable")


def pg_url(conninfo: str, schema: str) -> str:
    """The URL of `conninfo` with `schema` as the search_path (the Rust host's and the CLI's form)."""
    parts = dict(p.split("=", 1) for p in conninfo.split())
    return (f"postgres://{parts['user']}@{parts.get('host', '127.0.0.1')}:{parts.get('port', '5432')}/"
            f"{parts.get('dbname', 'test')}?options=-csearch_path%3D{schema}")


@contextmanager
def pg_schema() -> Iterator[str]:
    """A fresh schema `ik_py_<random>`, dropped with everything in it afterwards."""
    import psycopg

    conninfo = pg_conninfo()
    name = f"ik_py_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    try:
        yield name
    finally:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


_redis_ok = False


def redis_url() -> str:
    global _redis_ok
    if _redis_ok:
        return REDIS_URL
    import redis

    try:
        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3, socket_timeout=3)
        try:
            client.ping()
        finally:
            client.close()
    except (redis.RedisError, OSError) as e:
        unreachable("Redis", REDIS_URL, e)
    _redis_ok = True
    return REDIS_URL


@contextmanager
def redis_prefix() -> Iterator[str]:
    """A fresh key prefix `ik_py_<random>`; every key under it is deleted afterwards."""
    import redis

    url = redis_url()
    prefix = f"ik_py_{uuid.uuid4().hex[:12]}"
    try:
        yield prefix
    finally:
        client = redis.Redis.from_url(url)
        try:
            keys = list(client.scan_iter(match=f"{prefix}:*", count=500))
            if keys:
                client.delete(*keys)
        finally:
            client.close()


_mysql_ok = False


def mysql_connect(database: Optional[str] = None, url: str = MYSQL_URL, **options: Any) -> Any:
    """A PyMySQL connection (autocommit) to the server of `url`, in `database`
    (default: the URL's)."""
    import pymysql

    parts = urlsplit(url)
    arguments: Dict[str, Any] = {"autocommit": True, "connect_timeout": 3}
    arguments.update(options)
    return pymysql.connect(host=parts.hostname or "localhost", port=parts.port or 3306,
                           user=unquote(parts.username or "") or None, password=unquote(parts.password or ""),
                           database=database or unquote(parts.path.lstrip("/")) or None, **arguments)


def mysql_query(database: Optional[str], sql: str, args: Any = None) -> List[Tuple[Any, ...]]:
    """Runs `sql` (with `args` for its ``%s``; none: `sql` is sent as it
    is) on a connection of its own to the test server (``MYSQL_URL``), in
    `database` (``None``: the URL's), closed afterwards: the rows it
    returned."""
    conn = mysql_connect(database)
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())
    finally:
        conn.close()


def mysql_url() -> str:
    """The URL of the test MariaDB/MySQL database (fails or skips when it cannot be reached)."""
    global _mysql_ok
    if _mysql_ok:
        return MYSQL_URL
    import pymysql

    try:
        mysql_query(None, "SELECT 1")
    except (pymysql.err.MySQLError, OSError) as e:
        parts = urlsplit(MYSQL_URL)
        shown = parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")) if parts.password else parts
        unreachable("MariaDB", shown.geturl(), e)
    _mysql_ok = True
    return MYSQL_URL


def mysql_database_url(name: str) -> str:
    """The test server's URL with `name` as its database."""
    parts = urlsplit(mysql_url())
    return parts._replace(path=f"/{name}").geturl()


@contextmanager
def mysql_database() -> Iterator[str]:
    """A fresh database `ik_py_<random>`, dropped with everything in it afterwards."""
    mysql_url()
    name = f"ik_py_{uuid.uuid4().hex[:12]}"
    mysql_query(None, f"CREATE DATABASE `{name}`")
    try:
        yield name
    finally:
        mysql_query(None, f"DROP DATABASE IF EXISTS `{name}`")
