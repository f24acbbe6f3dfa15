"""The MySQL / MariaDB store (PyMySQL) against a real server: the core's
statements and their binds, the options, the plain INSERT whose duplicate
key is "not inserted", CLIENT_FOUND_ROWS, races (16 threads × 1,000 keys; 16
recoverers of one stale record), the migration flow under the named lock,
the errors. The conformance scenarios every store runs are in
test_stores.py (parametrized over ``mysql`` too).

Each test that needs the server gets its own database ``ik_py_<random>``,
dropped afterwards (support/servers.py); without a server the test skips
(fails under ``CI=true``)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, List, Optional, Tuple

import pymysql
import pytest
from pymysql.constants import CLIENT

import intentkey as ik
from intentkey import schema
from intentkey.stores import MySQLStore
from intentkey.stores.mysql import _pyformat
from support.servers import mysql_connect, mysql_database, mysql_database_url, mysql_query, mysql_url
from support.stores import (
    assert_get_fails, assert_unavailable, concurrent_recoverers_of_one_stale_record, mysql_store, mysql_stores,
    race_for_keys, run_threads, threads_recover_one_stale_record,
)
from test_stores import T, Awaitable, attempt, claim_and_finish, key, record

# -- the statements (no server) -----------------------------------------------------------------


def test_pyformat_turns_placeholders_into_percent_s_and_escapes_percent() -> None:
    assert _pyformat("SELECT 1") == ("SELECT 1", 0)
    assert _pyformat("WHERE a = ? AND b = ?") == ("WHERE a = %s AND b = %s", 2)
    assert _pyformat("SELECT 100 % 7, ?") == ("SELECT 100 %% 7, %s", 1)
    assert _pyformat("LIKE '50%' OR x = ?") == ("LIKE '50%%' OR x = %s", 1)
    # A ? inside quotes is text: a string, a quoted identifier, a backquoted name.
    assert _pyformat("SELECT '?', \"?\", `a?b`.t WHERE c = ?") == ("SELECT '?', \"?\", `a?b`.t WHERE c = %s", 1)
    # Doubled quotes and backslash escapes stay inside the quoted text.
    assert _pyformat("'it''s ?' ?") == ("'it''s ?' %s", 1)
    assert _pyformat("'a\\'?' ?") == ("'a\\'?' %s", 1)
    assert _pyformat("`we``ird?` ?") == ("`we``ird?` %s", 1)
    # PyMySQL's `text % values` gives back the text with the values where the ? were.
    text, n = _pyformat("SELECT '%d', `x%?` FROM t WHERE a = ? LIMIT ?")
    assert text % tuple(f"<{i}>" for i in range(n)) == "SELECT '%d', `x%?` FROM t WHERE a = <0> LIMIT <1>"


@pytest.mark.parametrize("database", [None, "ik_db", "we?ird%name"])
def test_the_core_statements_hold_question_marks_only_as_placeholders(database: Optional[str]) -> None:
    statements = schema.sql_statements("mysql", database)
    for st in statements.values():
        text, placeholders = _pyformat(st.text)
        assert placeholders == len(st.binds), st.name
        if database is None or "?" not in database:
            assert st.text.count("?") == len(st.binds), st.name  # no ? anywhere but the placeholders
        assert all(0 <= i < len(st.params) for i in st.binds), st.name
        marked = text % tuple(f"@@{i}@@" for i in st.binds)
        assert marked.count("@@") == 2 * len(st.binds)
        if database is None or "?" not in database:
            parts = st.text.split("?")
            assert marked == parts[0] + "".join(f"@@{i}@@{p}" for i, p in zip(st.binds, parts[1:]))


def test_the_mysql_dialect() -> None:
    st = schema.sql_statements("mysql")
    assert "claim" not in st and "complete-fast" not in st
    assert set(st) >= {"insert", "get", "complete", "replace", "release", "list", "purge",
                       "migration-lock", "migration-unlock", "migrated-version", "record-migration"}
    assert st["list"].binds == (0, 0, 1)
    assert st["complete"].binds == (2, 3, 4, 5, 6, 0, 1)
    assert st["insert"].text.lstrip().upper().startswith("INSERT INTO")
    assert "ON DUPLICATE" not in st["insert"].text.upper()
    assert schema.sql_duplicate_key_error("mysql") == 1062
    assert schema.sql_duplicate_key_error("postgres") is None
    assert schema.sql_duplicate_key_error("sqlite") is None
    # One table of server error codes, the core's, for every host.
    assert [schema.sql_error_class("mysql", c) for c in (1062, 1213, 2013, 1927, 1406)] == [
        "duplicate-key", "retryable", "connection-lost", "connection-lost", "failed"]
    assert schema.sql_error_class("postgres", 1213) == "failed"
    for dialect in ("sqlite", "postgres"):
        for s in schema.sql_statements(dialect).values():
            assert s.binds == tuple(range(len(s.params))), (dialect, s.name)


# -- options (no server) ---------------------------------------------------------------------------


def test_options_are_checked_by_name() -> None:
    url = "mysql://root@127.0.0.1:3306/test"
    cases: List[Tuple[Any, str]] = [
        (lambda: MySQLStore(url, colour="red"), "colour"),
        (lambda: MySQLStore(url, pool=1), "pool"),
        (lambda: MySQLStore(), "url"),
        (lambda: MySQLStore(url, connect=lambda: None), "connect"),
        (lambda: MySQLStore(connect=42), "connect"),
        (lambda: MySQLStore(42), "url"),  # type: ignore[arg-type]
        (lambda: MySQLStore("postgres://root@127.0.0.1/test"), "url"),
        (lambda: MySQLStore("mysql://root@127.0.0.1:3306"), "url"),  # no database, no schema
        (lambda: MySQLStore("mysql://root@127.0.0.1:3306/test?ssl=1"), "url"),
        (lambda: MySQLStore(url, schema=""), "schema"),
        (lambda: MySQLStore(url, connect_timeout=0), "connect_timeout"),
        (lambda: MySQLStore(url, timeout=-1), "timeout"),
        (lambda: MySQLStore(url, max_size=0), "max_size"),
    ]
    for make, field in cases:
        with pytest.raises(ik.IntentkeyError) as e:
            make()
        assert (e.value.code, e.value.field) == ("invalid-argument", field)
    # A URL without a database is fine with schema=.
    MySQLStore("mysql://root@127.0.0.1:3306", schema="test").close()


def test_passwords_never_appear_in_errors_or_repr() -> None:
    secret = "hunter2-s3cret"
    for bad in (f"mysql://root:{secret}@127.0.0.1:notaport/test", f"redis://root:{secret}@127.0.0.1/test",
                f"mysql://root:{secret}@127.0.0.1:3306/a/b"):
        with pytest.raises(ik.IntentkeyError) as e:
            MySQLStore(bad)
        assert secret not in str(e.value) and secret not in repr(e.value)
    store = MySQLStore(f"mysql://root:{secret}@127.0.0.1:1/test", connect_timeout=1)
    try:
        assert secret not in repr(store) and "127.0.0.1" in repr(store)
        with pytest.raises(ik.StoreError) as se:
            store.get("k")
        assert se.value.kind == "unavailable"
        assert secret not in se.value.message and secret not in repr(se.value)
    finally:
        store.close()


def test_a_key_of_256_characters_is_refused_naming_key() -> None:
    store = MySQLStore("mysql://root@127.0.0.1:1/test", connect_timeout=1)
    with pytest.raises(ik.IntentkeyError) as e:
        store.insert(record("k" * 256))  # refused before any connection
    assert (e.value.code, e.value.field) == ("invalid-argument", "key")
    assert "255" in e.value.message
    store.close()


@pytest.mark.timeout(60)
def test_an_unreachable_server_is_unavailable() -> None:
    store = MySQLStore("mysql://root@127.0.0.1:1/test", connect_timeout=1)
    try:
        assert assert_unavailable(store, attempt("k"), T).message.startswith("mysql: 2003")
    finally:
        store.close()


# -- against the server ----------------------------------------------------------------------------------


def _count(database: str, sql: str) -> int:
    return int(mysql_query(database, sql)[0][0])


@pytest.mark.timeout(120)
def test_a_store_on_the_urls_database_runs_the_claim_flow() -> None:
    with mysql_database() as name:
        # No schema=: the tables are in the URL's database, named unqualified.
        with MySQLStore(mysql_database_url(name)) as store:
            asyncio.run(claim_and_finish(Awaitable(ik.Guard(store))))
            # Text beyond ASCII and bytes beyond UTF-8 come back as they went in.
            k = "chave-ção-🙂-" + "é" * 200
            stored = ik.StoredRecord(k, "fp-ü", "tenant-ação", "pix.send", ik.Status.IN_FLIGHT, "a" * 32, None, T,
                                     None, 0, None)
            assert store.insert(stored) is True and store.get(k) == stored
            response = ik.Response(200, bytes(range(256)) * 3, "text/plain; charset=utf-8", (("X-Nome", "João"),))
            assert store.complete(ik.Completion(k, "a" * 32, response, T + 9, False)) is True
            got = store.get(k)
            assert got is not None and got.response == response and got.status is ik.Status.DONE
        assert _count(name, "SELECT COUNT(*) FROM intentkey_records") >= 3


@pytest.mark.timeout(120)
def test_a_connection_factory_is_used_and_checked() -> None:
    url = mysql_url()
    with mysql_database() as name:
        opened: List[Any] = []

        def connect() -> Any:
            conn = mysql_connect(name, url, client_flag=CLIENT.FOUND_ROWS, autocommit=False)
            opened.append(conn)
            return conn

        with MySQLStore(connect=connect) as store:
            assert "connect" in repr(store)
            asyncio.run(claim_and_finish(Awaitable(ik.Guard(store))))
        assert opened and all(not c.open for c in opened)  # the store closed what it opened

        without = MySQLStore(connect=lambda: mysql_connect(name, url))
        with pytest.raises(ik.IntentkeyError) as e:
            without.get("x")
        assert e.value.field == "connect" and "FOUND_ROWS" in e.value.message
        without.close()
        raw = MySQLStore(connect=lambda: mysql_connect(name, url, client_flag=CLIENT.FOUND_ROWS, use_unicode=False))
        with pytest.raises(ik.IntentkeyError) as e:
            raw.get("x")
        assert e.value.field == "connect" and "use_unicode" in e.value.message
        raw.close()
        latin = MySQLStore(connect=lambda: mysql_connect(name, url, client_flag=CLIENT.FOUND_ROWS, charset="latin1"))
        with pytest.raises(ik.IntentkeyError) as e:
            latin.get("x")
        assert e.value.field == "connect" and "utf8mb4" in e.value.message
        latin.close()


@pytest.mark.timeout(120)
def test_a_duplicate_key_is_never_raised_and_other_errors_stay_errors() -> None:
    with mysql_store() as (name, store):
        k = key("dup")
        assert store.insert(record(k)) is True
        for token in ("b" * 32, "a" * 32):
            assert store.insert(record(k, token, created=T + 5)) is False  # never an exception
        assert store.get(k) == record(k)
        # The guard reads "not inserted" as the claim lost: in flight, never an error.
        g = ik.Guard(store)
        a = attempt(k, "fp")
        assert g.claim(a, now=T + 1).state is ik.ClaimState.IN_FLIGHT
        # Another integrity error (a trigger signals 1452, a foreign key) stays an error.
        mysql_query(name, "CREATE TRIGGER ik_boom BEFORE INSERT ON intentkey_records FOR EACH ROW "
                          "IF NEW.fingerprint = 'boom' THEN "
                          "SIGNAL SQLSTATE '23000' SET MYSQL_ERRNO = 1452, MESSAGE_TEXT = 'boom'; END IF")
        boom = ik.StoredRecord(key("boom"), "boom", "t", "a", ik.Status.IN_FLIGHT, "a" * 32, None, T, None, 0, None)
        with pytest.raises(ik.StoreError) as e:
            store.insert(boom)
        assert e.value.kind == "failed" and "1452" in e.value.message
        with pytest.raises(ik.IntentkeyError) as ie:
            g.claim(ik.Attempt(boom.key, "boom", "t", "a"), now=T)
        assert ie.value.code == "store-failed"
        # The connection that met the error is fine for the next statement.
        assert store.get(k) == record(k)


@pytest.mark.timeout(120)
def test_a_key_of_255_characters_is_held_and_256_refused_through_the_guard() -> None:
    with mysql_store() as (_, store):
        longest = "é" * 255  # characters, not bytes
        assert store.insert(record(longest)) is True and store.get(longest) == record(longest)
        g = ik.Guard(store)
        with pytest.raises(ik.IntentkeyError) as e:
            g.claim(attempt("k" * 256), now=T)
        assert (e.value.code, e.value.field) == ("invalid-argument", "key")
        assert store.get("k" * 256) is None
        # The guard keeps working after the refusal.
        assert g.claim(attempt(key("after")), now=T).state is ik.ClaimState.OWNED


@pytest.mark.timeout(120)
def test_keys_compare_byte_for_byte() -> None:
    # The key column is binary: case, accents and trailing spaces make other
    # keys (the _bin collations would ignore trailing spaces).
    with mysql_store() as (_, store):
        keys = ["dup", "Dup", "düp", "dup ", "dup  "]
        for k in keys:
            assert store.insert(record(k)) is True, repr(k)
        for k in keys:
            got = store.get(k)
            assert got is not None and got.key == k, repr(k)


@pytest.mark.timeout(120)
def test_updates_count_matched_rows() -> None:
    # CLIENT_FOUND_ROWS: a fenced write whose values equal the stored ones still matched its row.
    with mysql_store() as (_, store):
        k = key("same")
        assert store.insert(record(k)) is True
        assert store.replace(ik.Replacement("a" * 32, 0, record(k))) is True
        assert store.replace(ik.Replacement("b" * 32, 0, record(k))) is False


@pytest.mark.timeout(300)
def test_16_threads_racing_for_1000_keys_have_one_owner_per_key() -> None:
    n_threads, n_keys = 16, 1000
    with mysql_stores(n_threads) as (name, stores):  # a store (connection) per thread
        stores[0].migrate()
        keys = [f"race-{i:04d}" for i in range(n_keys)]
        owners = race_for_keys(stores, keys)
        assert _count(name, "SELECT COUNT(*) FROM intentkey_records") == n_keys
        stored = dict(mysql_query(name, "SELECT CAST(`key` AS CHAR), owner_token FROM intentkey_records"))
        assert stored == {k: f"{t:032x}" for k, t in owners.items()}  # the owner's record, untouched


@pytest.mark.timeout(120)
def test_16_threads_recovering_one_stale_record_re_execute_it_once() -> None:
    with mysql_stores(16) as (_, stores):
        threads_recover_one_stale_record(stores)


@pytest.mark.timeout(120)
def test_16_concurrent_recoverers_of_one_stale_record_re_execute_it_once() -> None:
    # Every recoverer has read the stale record and asked the destination
    # before any writes: their fenced replaces race in the database.
    with mysql_stores(16) as (_, stores):
        concurrent_recoverers_of_one_stale_record(stores)


@pytest.mark.timeout(120)
def test_one_store_shared_by_threads() -> None:
    with mysql_store(max_size=3) as (name, store):
        def work(t: int) -> None:
            for i in range(40):
                k = f"shared-{t}-{i}"
                assert store.insert(record(k)) is True
                assert store.get(k) == record(k)

        assert run_threads(work, range(8)) == []
        assert _count(name, "SELECT COUNT(*) FROM intentkey_records") == 320
        assert len(store._idle) <= 3


# -- migrations -----------------------------------------------------------------------------------------------


def _migrations(name: str) -> List[Tuple[int, int]]:
    rows = mysql_query(name, "SELECT version, applied_at FROM intentkey_schema_migrations ORDER BY version")
    return [(int(v), int(at)) for v, at in rows]


@pytest.mark.timeout(120)
def test_a_second_store_applies_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    url = mysql_url()
    with mysql_database() as name:
        with MySQLStore(url, schema=name) as first:
            first.migrate()
            assert first.insert(record("kept")) is True
        applied = _migrations(name)
        assert [v for v, _ in applied] == [m.version for m in schema.migrations()]

        ran: List[str] = []
        execute = pymysql.cursors.Cursor.execute

        def spy(self: Any, query: str, args: Any = None) -> Any:
            ran.append(query)
            return execute(self, query, args)

        monkeypatch.setattr(pymysql.cursors.Cursor, "execute", spy)
        with MySQLStore(url, schema=name) as second:
            second.migrate()
            assert second.get("kept") == record("kept")
        monkeypatch.undo()
        assert ran and "GET_LOCK" in ran[0] and "RELEASE_LOCK" in ran[-2]  # the last one: the get
        assert not [q for q in ran if "INSERT INTO" in q and "migrations" in q]
        assert not [q for q in ran if "CREATE TABLE" in q and "intentkey_records" in q]
        assert _migrations(name) == applied


@pytest.mark.timeout(120)
def test_stores_migrating_at_once_all_succeed() -> None:
    n = 4
    with mysql_stores(n) as (name, stores):
        barrier = threading.Barrier(n)

        def first_use(s: MySQLStore) -> None:
            barrier.wait()
            s.migrate()
            s.get("x")

        assert run_threads(first_use, stores) == []
        assert [v for v, _ in _migrations(name)] == [m.version for m in schema.migrations()]


@pytest.mark.timeout(120)
def test_a_newer_schema_is_refused_and_a_failed_migration_frees_the_lock() -> None:
    url = mysql_url()
    lock = schema.migration_lock()
    with mysql_database() as name:
        MySQLStore(url, schema=name).migrate()
        mysql_query(name, "INSERT INTO intentkey_schema_migrations VALUES (%s, 0)", (schema.schema_version() + 1,))
        assert_get_fails(MySQLStore(url, schema=name), "failed", "upgrade intentkey")
        # A database that does not exist: the flow fails after taking the lock; the lock is free again.
        assert_get_fails(MySQLStore(url, schema=f"{name}_missing"), "failed", "1049")
        assert _count(name, f"SELECT IS_FREE_LOCK(CONCAT('intentkey-migration-', {lock}))") == 1
