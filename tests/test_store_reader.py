"""The read commands' reader (``chit.store.reader``): a current store, Store's answers.

``chit receipts``, ``show`` and ``export`` read through ``StoreReader`` (a plain sqlite3
connection, no sqlite-utils); whatever is not a current store is left to
``Store.open_readonly``. What the commands print is checked in the CLI's tests; what
they import in tests/test_cold_start.py.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from chit.home import Home
from chit.receipts import LifecycleState
from chit.store import (
    AmbiguousPrefix,
    RecordNotFound,
    Store,
    StoreCorrupt,
    StoreReader,
    schema_check,
)
from chit.store.migrations import KNOWN, MIGRATION_SET, SCHEMA_VERSION
from tests.store_support import T0, make_obs, make_receipt

MIGRATIONS = tuple(KNOWN)


def test_the_check_reads_the_migrations_own_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """The names come from chit.store.migrations' source — the one list — and, without a
    source to read, from the module itself: the same either way."""
    schema_check.expected.cache_clear()
    assert schema_check.expected() == (MIGRATION_SET, MIGRATIONS)
    assert schema_check.schema_version() == SCHEMA_VERSION
    monkeypatch.setattr(schema_check, "_source", lambda: None)
    schema_check.expected.cache_clear()
    try:
        assert schema_check.expected() == (MIGRATION_SET, MIGRATIONS)
    finally:
        schema_check.expected.cache_clear()


@pytest.fixture
def home(tmp_path: Path) -> Home:
    home = Home(tmp_path / "home")
    with Store.open(home) as store:
        for n, state in enumerate(LifecycleState):
            rid = f"01READER{n:02d}"
            receipt = make_receipt(rid, state=state, status_at=T0 + timedelta(minutes=n))
            store.receipts.insert(receipt, b"\x01" + bytes(40), "fp0123456789", [make_obs(rid)])
            store.observations.append(make_obs(rid, message=f"step {n}", status=state))
        store.receipts.insert(make_receipt("01READES99"), None, None)
    return home


def test_a_current_store_reads_as_the_store_does(home: Home) -> None:
    reader = StoreReader.open(home.db_path)
    assert reader is not None
    with reader, Store.open_readonly(home) as store:
        assert reader.schema_version == store.schema_version
        filters: list[dict[str, Any]] = [
            {},
            {"limit": 2},
            {"state": LifecycleState.WORKING},
            {"state": [LifecycleState.WORKING, LifecycleState.COMPLETED]},
            {"server": "demo", "work_ref": "none"},
        ]
        for kwargs in filters:
            assert reader.receipts.list(**kwargs) == store.receipts.list(**kwargs)
        cursor = reader.receipts.list(limit=2).next_cursor
        assert cursor is not None
        assert reader.receipts.list(limit=2, after=cursor) == store.receipts.list(
            limit=2, after=cursor
        )
        for prefix in ("01READER03", "01READER0", "01READES", " 01READER01 "):
            try:
                expected = store.receipts.get_by_prefix(prefix)
            except AmbiguousPrefix:
                with pytest.raises(AmbiguousPrefix):
                    reader.receipts.get_by_prefix(prefix)
                continue
            assert reader.receipts.get_by_prefix(prefix) == expected
        for missing in ("01NOPE", "", "01READER0\U0010ffff"):
            with pytest.raises(RecordNotFound):
                reader.receipts.get_by_prefix(missing)
        assert reader.observations.timeline("01READER02") == store.observations.timeline(
            "01READER02"
        )
        assert reader.rewriter.pending() is store.rewriter.pending() is False


def _edit(home: Home, *statements: str) -> None:
    conn = sqlite3.connect(home.db_path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    "change",
    [
        f"PRAGMA user_version={len(MIGRATIONS) + 1}",  # newer
        f"PRAGMA user_version={len(MIGRATIONS) - 1}",  # older
        "INSERT INTO _sqlite_migrations (migration_set, name, applied_at)"
        f" VALUES ('{MIGRATION_SET}', '9999_from_the_future', '2030-01-01')",
        f"DELETE FROM _sqlite_migrations WHERE name = '{MIGRATIONS[-1]}'",
        "DROP TABLE _sqlite_migrations",
    ],
    ids=["newer", "older", "unknown-migration", "missing-migration", "no-migrations-table"],
)
def test_any_other_store_is_left_to_the_full_check(home: Home, change: str) -> None:
    _edit(home, change)
    assert StoreReader.open(home.db_path) is None


def test_a_file_that_is_no_database_fails_as_the_store_does(tmp_path: Path) -> None:
    path = tmp_path / "chit.db"
    path.write_bytes(b"this is not sqlite" * 500)
    with pytest.raises(StoreCorrupt):
        StoreReader.open(path)
