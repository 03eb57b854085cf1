"""Store migration ``0011_request_key_trigger_fails``: the same rule, no statement journal.

The request-key trigger now raises ``FAIL`` and the receipt insert says ``INSERT OR
FAIL``, so SQLite keeps no statement journal for it. The upgrade must keep every row; the
rule must still refuse every clash; and a refused insert — alone or inside a larger
transaction — must leave nothing behind (every check runs before a page is written).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from chit.store import AlreadyExists, Store
from chit.store.db import connect, immediate
from chit.store.migrations import SCHEMA_VERSION, migrations
from tests.store_support import make_intent, make_obs, make_receipt

BLOB = b"\x01" + bytes(8) + bytes(12) + b"c" * 24
FP = "fp0123456789"

_TABLES = ("receipts", "observations", "intents", "work_records")


def _rows(conn: sqlite3.Connection) -> dict[str, list[tuple[Any, ...]]]:
    return {
        table: [tuple(r) for r in conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2")]
        for table in _TABLES
    }


def _trigger_sql(conn: sqlite3.Connection) -> str:
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE name = 'receipts_request_key_unique'"
    ).fetchone()
    return str(row[0])


def _clashes_refused(store: Store) -> None:
    for clash in (
        make_receipt("rk2", request_key="rk2"),  # a new id = an old receipt's key
        make_receipt("r9", request_key="K1"),  # an old-style key = a new receipt's id
        make_receipt("r8", request_key="rk0"),  # two old-style keys
        make_receipt("K1", request_key="K1"),  # two new receipts (the id's own index)
    ):
        before = _rows(store.db.conn)
        with pytest.raises(AlreadyExists):
            store.receipts.insert(clash, BLOB, FP, [make_obs(clash.receipt_id)])
        assert _rows(store.db.conn) == before


def _schema_10_file(path: Path) -> None:
    """Old-style receipts (own keys) and new ones (id = key), timelines, an update, a
    deleted receipt, linked intents and a work record, at schema 10."""
    db = connect(path)
    with immediate(db):
        migrations.apply(db, stop_before="0011_request_key_trigger_fails")
    assert db.conn.execute("PRAGMA user_version").fetchone()[0] == 10
    assert "RAISE(ABORT" in _trigger_sql(db.conn)
    store = Store(db, path, 10)
    for r in [make_receipt(f"r{i}", request_key=f"rk{i}") for i in range(3)] + [
        make_receipt(f"K{i}", request_key=f"K{i}") for i in range(3)
    ]:
        store.receipts.insert(r, BLOB, FP, [make_obs(r.receipt_id), make_obs(r.receipt_id)])
    r0 = store.receipts.require("r0")
    store.receipts.update(r0.model_copy(update={"version": r0.version + 1, "purpose": "x"}))
    assert store.receipts.delete("K2")
    store.intents.begin(make_intent("rk9"))
    with immediate(db):
        db.conn.execute("UPDATE intents SET receipt_id = 'r1' WHERE request_key = 'rk9'")
    store.work.create("w1", "a work record", purpose="kept")
    db.close()


def test_migration_keeps_every_row_and_the_rule(tmp_path: Path) -> None:
    path = tmp_path / "chit.db"
    _schema_10_file(path)
    plain = sqlite3.connect(path)
    before = _rows(plain)
    plain.close()
    with Store.open_path(path) as migrated:
        conn = migrated.db.conn
        assert migrated.schema_version == SCHEMA_VERSION
        assert _rows(conn) == before
        assert "RAISE(FAIL" in _trigger_sql(conn)
        assert migrated.receipts.by_request_key("rk1") == migrated.receipts.require("r1")
        _clashes_refused(migrated)
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []


def test_a_refused_insert_inside_a_transaction_leaves_nothing(tmp_path: Path) -> None:
    """A clash refused inside a caller's transaction (a savepoint) undoes only itself:
    the receipt written before it in the same transaction commits, every index agrees
    with the table."""
    with Store.open_path(tmp_path / "chit.db") as store:
        first = make_receipt("K1", request_key="K1")
        store.receipts.insert(first, BLOB, FP, [make_obs("K1")])
        with immediate(store.db):
            second = make_receipt("K2", request_key="K2")
            store.receipts.insert(second, BLOB, FP, [make_obs("K2")])
            with pytest.raises(AlreadyExists):
                store.receipts.insert(first, BLOB, FP, [make_obs("K1")])
            with pytest.raises(AlreadyExists):
                store.receipts.record_acceptance(
                    make_intent("K2"), second, make_obs("K2"), BLOB, FP
                )
        assert store.receipts.count() == 2
        assert store.receipts.get("K2") == second
        assert store.observations.count() == 2
        assert store.intents.get("K2") is None
        conn = store.db.conn
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
