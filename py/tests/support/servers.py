"""The servers the store tests run against, and their clean-up.

PostgreSQL at 127.0.0.1:5432, database ``test`` (trust; user ``postgres``
or the current user; ``INTENTKEY_TEST_PG`` overrides the connection
string), Redis at 127.0.0.1:6379 (``INTENTKEY_TEST_REDIS`` overrides the
URL), a Redis Cluster at 127.0.0.1:7000 (any of its nodes;
``INTENTKEY_REDIS_CLUSTER`` overrides the URL,
``redis+cluster://host:port[,host:port…]``; ``bash scripts/redis-cluster.sh
start`` makes one), MariaDB or MySQL at 127.0.0.1:3306, user ``root`` with
no password, database ``test`` (``INTENTKEY_TEST_MYSQL`` overrides the
URL), a DynamoDB endpoint at 127.0.0.1:4567 (dynalite: ``bash
scripts/dynalite.sh start``; ``INTENTKEY_DYNAMODB`` overrides it,
``dynamodb://HOST:PORT``). A server that cannot be reached fails the test
when ``CI=true`` and skips it, saying why, otherwise. Each test gets its own
schema, prefix, database or table, dropped or deleted afterwards.
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
REDIS_CLUSTER_URL = os.environ.get("INTENTKEY_REDIS_CLUSTER", "redis+cluster://127.0.0.1:7000")
DYNAMODB_URL = os.environ.get("INTENTKEY_DYNAMODB", "dynamodb://127.0.0.1:4567").rstrip("/")


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


def cluster_client(**options: Any) -> Any:
    """A redis-py ``RedisCluster`` of the test cluster (its first node in
    ``REDIS_CLUSTER_URL``) made with `options`, for the tests' own looks at it."""
    from redis.cluster import RedisCluster

    parts = urlsplit(REDIS_CLUSTER_URL.replace("+cluster", "", 1).split(",")[0].split("?")[0])
    arguments: Dict[str, Any] = {"socket_connect_timeout": 3, "socket_timeout": 10}
    arguments.update(options)
    return RedisCluster(host=parts.hostname or "127.0.0.1", port=parts.port or 7000,
                        username=unquote(parts.username) if parts.username else None,
                        password=unquote(parts.password) if parts.password else None, **arguments)


_cluster_ok = False


def redis_cluster_url() -> str:
    """The URL of the test Redis Cluster (fails or skips when it cannot be
    reached or does not serve every slot)."""
    global _cluster_ok
    if _cluster_ok:
        return REDIS_CLUSTER_URL
    import redis

    try:
        client = cluster_client()
        try:
            state = client.cluster_info(target_nodes=client.get_random_node())["cluster_state"]
        finally:
            client.close()
        if state != "ok":
            raise redis.RedisError(f"cluster_state is {state}")
    except (redis.RedisError, redis.exceptions.RedisClusterException, OSError) as e:
        unreachable("Redis Cluster", REDIS_CLUSTER_URL, e)
    _cluster_ok = True
    return REDIS_CLUSTER_URL


def redis_cluster_masters(replicas: bool = False) -> List[Any]:
    """A ``redis.Redis`` client of each master of the test cluster (and of
    each replica, with `replicas`), as the cluster says now (the caller
    closes them)."""
    import redis

    cluster = cluster_client()
    try:
        nodes = cluster.get_nodes() if replicas else cluster.get_primaries()
        return [redis.Redis(host=n.host, port=n.port, socket_timeout=10) for n in nodes]
    finally:
        cluster.close()


def redis_cluster_keys(prefix: str) -> Dict[str, List[bytes]]:
    """The keys under the hash tags of `prefix` (``{prefix:…``) on each master (``host:port``), asked of each directly."""
    found: Dict[str, List[bytes]] = {}
    for master in redis_cluster_masters():
        try:
            where = master.connection_pool.connection_kwargs
            found[f"{where['host']}:{where['port']}"] = list(master.keys("{" + prefix + ":*"))
        finally:
            master.close()
    return found


@contextmanager
def redis_cluster_prefix() -> Iterator[str]:
    """A fresh key prefix `ik_py_<random>` on the test cluster; afterwards
    every key under its hash tags is deleted, one key at a time, on each master."""
    redis_cluster_url()
    prefix = f"ik_py_{uuid.uuid4().hex[:12]}"
    try:
        yield prefix
    finally:
        for master in redis_cluster_masters():
            try:
                for k in master.keys("{" + prefix + ":*"):
                    master.delete(k)
            finally:
                master.close()


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


_dynamodb_ok = False


def dynamodb_endpoint(url: str = DYNAMODB_URL) -> str:
    """``http://HOST:PORT`` of a local DynamoDB endpoint URL ``dynamodb://HOST:PORT``."""
    return "http://" + url.split("://", 1)[1].split("/", 1)[0]


def dynamodb_client(url: str = DYNAMODB_URL, **config: Any) -> Any:
    """A boto3 DynamoDB client of the test endpoint (placeholder key, no
    retries), for the tests' own looks at the tables; `config`: more of
    botocore's ``Config``."""
    import boto3
    from botocore.config import Config

    options: Dict[str, Any] = {"connect_timeout": 3, "read_timeout": 30, "retries": {"total_max_attempts": 1}}
    options.update(config)
    return boto3.session.Session().client(
        "dynamodb", endpoint_url=dynamodb_endpoint(url), region_name="us-east-1", aws_access_key_id="local",
        aws_secret_access_key="local", config=Config(**options))


def dynamodb_url() -> str:
    """The URL of the test DynamoDB endpoint, ``dynamodb://HOST:PORT`` (fails
    or skips when it does not answer ``ListTables``)."""
    global _dynamodb_ok
    if _dynamodb_ok:
        return DYNAMODB_URL
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        client = dynamodb_client()
        try:
            client.list_tables(Limit=1)
        finally:
            client.close()
    except (BotoCoreError, ClientError, OSError) as e:
        unreachable("DynamoDB", DYNAMODB_URL, e)
    _dynamodb_ok = True
    return DYNAMODB_URL


def dynamodb_drop_tables(prefix: str) -> None:
    """Deletes every table of the test endpoint named `prefix` or starting with ``prefix-``."""
    client = dynamodb_client()
    try:
        names: List[str] = []
        start: Optional[str] = None
        while True:
            page = client.list_tables(**({"ExclusiveStartTableName": start} if start else {}))
            names += page.get("TableNames", [])
            start = page.get("LastEvaluatedTableName")
            if not start:
                break
        for name in names:
            if name == prefix or name.startswith(prefix + "-"):
                try:
                    client.delete_table(TableName=name)
                except client.exceptions.ResourceNotFoundException:
                    pass
    finally:
        client.close()


@contextmanager
def dynamodb_table() -> Iterator[Tuple[str, str]]:
    """(the test endpoint's URL, a fresh table name ``ik-py-<random>``; the
    store creates the table): afterwards the table, and every table named
    ``ik-py-<random>-…`` (the test's others), is deleted."""
    url = dynamodb_url()
    name = f"ik-py-{uuid.uuid4().hex[:12]}"
    try:
        yield url, name
    finally:
        dynamodb_drop_tables(name)
