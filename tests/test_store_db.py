"""Opening the store: pragmas, file modes, migrations, typed errors, threads."""

from __future__ import annotations

import sqlite3
import stat
import threading
from pathlib import Path

import pytest

from chit.errors import ExitCode
from chit.home import Home, UnsafeHome
from chit.store import (
    SCHEMA_VERSION,
    Store,
    StoreBusy,
    StoreCorrupt,
    StoreError,
    StoreTooNew,
    ThreadLocalStore,
    immediate,
)
from chit.store.db import BUSY_TIMEOUT_S, JOURNAL_SIZE_LIMIT, write
from chit.store.migrations import MIGRATION_SET
from tests.store_support import make_intent


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home(tmp_path / "home")


def test_pragmas(home: Home) -> None:
    with Store.open(home) as store:
        pragma = {
            name: store.db.conn.execute(f"PRAGMA {name}").fetchone()[0]
            for name in (
                "journal_mode",
                "foreign_keys",
                "synchronous",
                "busy_timeout",
                "journal_size_limit",
            )
        }
    assert pragma == {
        "journal_mode": "wal",
        "foreign_keys": 1,
        "synchronous": 2,  # FULL
        "busy_timeout": int(BUSY_TIMEOUT_S * 1000),
        "journal_size_limit": JOURNAL_SIZE_LIMIT,
    }
    assert BUSY_TIMEOUT_S >= 10


def test_file_modes_private(home: Home) -> None:
    with Store.open(home) as store:
        store.meta.set("k", "v")  # a write creates -wal and -shm
        assert _mode(home.root) == 0o700
        for suffix in ("", "-wal", "-shm"):
            path = Path(str(home.db_path) + suffix)
            assert path.exists(), suffix
            assert _mode(path) == 0o600, suffix


def test_loose_file_mode_in_a_private_home_is_tightened(home: Home) -> None:
    home.root.mkdir(mode=0o700)
    home.db_path.touch()
    home.db_path.chmod(0o644)
    Store.open(home).close()
    assert _mode(home.root) == 0o700
    assert _mode(home.db_path) == 0o600


def test_open_home_is_refused_and_left_alone(home: Home) -> None:
    # Someone else's (or a shared) directory is never chmodded: chit refuses it.
    home.root.mkdir(mode=0o755)
    home.root.chmod(0o755)
    with pytest.raises(UnsafeHome, match="mode 0755"):
        Store.open(home)
    assert _mode(home.root) == 0o755
    assert not home.db_path.exists()


def test_migrations_idempotent(home: Home) -> None:
    for _ in range(3):
        with Store.open(home) as store:
            assert store.schema_version == SCHEMA_VERSION
            rows = store.db.conn.execute(
                "SELECT name FROM _sqlite_migrations WHERE migration_set = ?", [MIGRATION_SET]
            ).fetchall()
            assert len(rows) == SCHEMA_VERSION
            assert store.db.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
            tables = set(store.db.table_names())
    assert {"meta", "receipts", "observations", "intents", "work_records", "work_notes"} <= tables


def test_refuses_newer_user_version(home: Home) -> None:
    Store.open(home).close()
    conn = sqlite3.connect(home.db_path)
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreTooNew) as info:
        Store.open(home)
    assert info.value.exit_code is ExitCode.STORE
    assert "newer" in info.value.message


def test_refuses_unknown_migration(home: Home) -> None:
    Store.open(home).close()
    conn = sqlite3.connect(home.db_path)
    conn.execute(
        "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES (?, ?, ?)",
        [MIGRATION_SET, "9999_from_the_future", "2030-01-01"],
    )
    conn.commit()
    conn.close()
    with pytest.raises(StoreTooNew, match="9999_from_the_future"):
        Store.open(home)


def test_not_a_database_is_corrupt(home: Home) -> None:
    home.ensure()
    home.db_path.write_bytes(b"this is not sqlite" * 500)
    home.db_path.chmod(0o600)
    with pytest.raises(StoreCorrupt) as info:
        Store.open(home)
    assert info.value.exit_code is ExitCode.STORE


def test_busy_is_typed_and_transient(home: Home) -> None:
    Store.open(home).close()
    blocker = sqlite3.connect(home.db_path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with Store.open(home, timeout=0.2) as store:
            with pytest.raises(StoreBusy) as info:
                store.intents.begin(make_intent("rk-busy"))
            assert info.value.transient
            assert store.intents.get("rk-busy") is None  # reads still work (WAL)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()


def test_write_outside_transaction_is_refused(home: Home) -> None:
    with Store.open(home) as store:
        with pytest.raises(StoreError, match="outside BEGIN IMMEDIATE"):
            write(store.db, "INSERT INTO meta (key, value) VALUES ('a', 'b')")
        with immediate(store.db):
            write(store.db, "INSERT INTO meta (key, value) VALUES ('a', 'b')")
        assert store.meta.get("a") == "b"


def test_immediate_rolls_back_and_nests(home: Home) -> None:
    with Store.open(home) as store:
        with pytest.raises(RuntimeError), immediate(store.db):
            store.meta.set("x", "1")  # nested: a savepoint of the outer transaction
            raise RuntimeError("boom")
        assert store.meta.get("x") is None
        assert not store.db.conn.in_transaction


def test_every_write_uses_begin_immediate(home: Home) -> None:
    """Reliability note §4.9: no deferred writer anywhere (traced statements)."""
    with Store.open(home) as store:
        seen: list[str] = []
        store.db.conn.set_trace_callback(seen.append)
        store.meta.set("a", "1")
        store.work.create("w1", "title")
        store.work.add_note("w1", "n")
        store.intents.begin(make_intent("rk-1"))
        store.intents.mark("rk-1", make_intent("rk-1").state)
        store.db.conn.set_trace_callback(None)
    begins = [s for s in seen if s.upper().startswith("BEGIN")]
    assert begins and all(s.upper() == "BEGIN IMMEDIATE" for s in begins)


def test_thread_local_store(home: Home) -> None:
    shared = ThreadLocalStore(home)
    main = shared.get()
    assert shared.get() is main
    seen: list[Store] = []

    def work() -> None:
        store = shared.get()
        store.meta.set("thread", "yes")
        seen.append(store)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen and seen[0] is not main
    assert main.meta.get("thread") == "yes"
    shared.close_all()


def test_store_is_thread_bound(home: Home) -> None:
    store = Store.open(home)
    errors: list[BaseException] = []

    def use() -> None:
        try:
            store.meta.get("x")
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=use)
    thread.start()
    thread.join()
    store.close()
    assert errors and isinstance(errors[0], sqlite3.ProgrammingError)


def test_quick_check_and_checkpoint(home: Home) -> None:
    with Store.open(home) as store:
        for i in range(50):
            store.meta.set(f"k{i}", "v" * 100)
        store.checkpoint()
        assert store.quick_check() == ["ok"]
        assert Path(str(home.db_path) + "-wal").stat().st_size == 0
