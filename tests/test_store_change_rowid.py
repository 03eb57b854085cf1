"""Store migration ``0010_change_is_rowid``: the change number is the receipts' rowid.

The rebuild must keep every row and every link of an older file (the drop of the old
table must not cascade to timelines nor clear intents' links), keep each receipt's change
number (a feed client's cursor stays valid), and afterwards an update — which takes a new
number and so moves its row — must leave the receipt's timeline and links where they are.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils

from chit.home import Home
from chit.store import AlreadyExists, Store
from chit.store.db import connect, immediate
from chit.store.migrations import SCHEMA_VERSION, migrations
from chit.store.receipt_repo import ReceiptRepository
from tests.store_support import make_intent, make_obs, make_receipt

BLOB = b"\x01" + bytes(8) + bytes(12) + b"c" * 24
FP = "fp0123456789"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(Home(tmp_path / "home")) as opened:
        yield opened


def _rows(conn: sqlite3.Connection, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in conn.execute(sql)]


_RECEIPTS = (
    "SELECT receipt_id, server, tool, purpose, work_ref, state, active, retrieval,"
    " acceptance, cancel_posture, accepted_at, status_at, next_check_at, expires_at,"
    " request_key, handle_blob, handle_fp, version, doc, change_seq FROM receipts"
    " ORDER BY receipt_id"
)
_OBSERVATIONS = "SELECT * FROM observations ORDER BY receipt_id, seq"
_INTENTS = "SELECT * FROM intents ORDER BY request_key"


def _old_file(path: Path) -> sqlite_utils.Database:
    """A schema-9 file: old-style receipts (own request keys) and new ones (id = key),
    timelines, updated receipts (change numbers out of insert order), a deleted one (a
    gap), intents linked to receipts, a work record."""
    db = connect(path)
    with immediate(db):
        migrations.apply(db, stop_before="0010_change_is_rowid")
    repo = ReceiptRepository(db)
    old_style = [make_receipt(f"r{i}", request_key=f"rk{i}") for i in range(4)]
    new_style = [make_receipt(f"K{i}", request_key=f"K{i}") for i in range(4)]
    for r in old_style + new_style:
        repo.insert(r, BLOB, FP, [make_obs(r.receipt_id), make_obs(r.receipt_id)])
    for r in (old_style[0], new_style[1]):
        repo.update(r.model_copy(update={"version": r.version + 1, "purpose": "changed"}))
    assert repo.delete("K3")
    store = Store(db, path, 9)
    store.intents.begin(make_intent("rk9"))
    store.intents.begin(make_intent("K2"))
    with immediate(db):
        db.conn.execute("UPDATE intents SET receipt_id = 'r1' WHERE request_key = 'rk9'")
        db.conn.execute("UPDATE intents SET receipt_id = 'K2' WHERE request_key = 'K2'")
    store.work.create("w1", "a work record", purpose="kept")
    assert db.conn.execute("PRAGMA user_version").fetchone()[0] == 9
    return db


def test_migration_keeps_every_row_link_and_change_number(tmp_path: Path) -> None:
    path = tmp_path / "chit.db"
    db = _old_file(path)
    conn = db.conn
    before = {q: _rows(conn, q) for q in (_RECEIPTS, _OBSERVATIONS, _INTENTS)}
    work_before = _rows(conn, "SELECT * FROM work_records")
    feed_before = ReceiptRepository(db).changed_since(0, 100)
    cursor_before = ReceiptRepository(db).change_cursor()
    assert [rid for rid, _ in feed_before][-2:] == ["r0", "K1"]  # updated last
    db.close()

    with Store.open_path(path) as migrated:
        assert migrated.schema_version == SCHEMA_VERSION
        conn = migrated.db.conn
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert "receipts_by_change" not in indexes
        assert {"receipts_ended", "receipts_live", "receipts_by_request_key"} <= indexes
        # Every row as it was: receipts (change numbers included), timelines, links.
        assert {q: _rows(conn, q) for q in before} == before
        assert _rows(conn, "SELECT * FROM work_records") == work_before
        assert migrated.receipts.changed_since(0, 100) == feed_before
        assert migrated.receipts.change_cursor() == cursor_before
        assert _rows(conn, "SELECT rowid, change_seq FROM receipts WHERE rowid <> change_seq") == []
        # Old keys are still found and still unique (the trigger came back).
        assert migrated.receipts.by_request_key("rk2") is not None
        for clash in (make_receipt("rk2", request_key="rk2"), make_receipt("x", request_key="K0")):
            with pytest.raises(AlreadyExists):
                migrated.receipts.insert(clash, BLOB, FP, [make_obs(clash.receipt_id)])
        assert migrated.quick_check() == ["ok"]


def test_an_update_moves_the_row_and_keeps_its_timeline_and_links(tmp_path: Path) -> None:
    path = tmp_path / "chit.db"
    _old_file(path).close()
    with Store.open_path(path) as migrated:
        conn = migrated.db.conn
        observations = _rows(conn, _OBSERVATIONS)
        r1 = migrated.receipts.require("r1")
        cursor = migrated.receipts.change_cursor()
        stored = migrated.receipts.update(
            r1.model_copy(update={"version": r1.version + 1, "purpose": "moved"}),
            [make_obs("r1", message="news")],
        )
        assert migrated.receipts.change_cursor() == cursor + 1
        assert migrated.receipts.changed_since(cursor, 10) == [("r1", cursor + 1)]
        assert migrated.receipts.get("r1") == stored
        # The move is an update, not a delete: nothing cascaded, no link was cleared.
        assert migrated.observations.count("r1") == 3
        after = _rows(conn, _OBSERVATIONS)
        assert set(observations) <= set(after) and len(after) == len(observations) + 1
        linked = migrated.intents.get("rk9")
        assert linked is not None and linked.receipt_id == "r1"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        # Deleting still cascades to the timeline.
        assert migrated.receipts.delete("r1")
        assert migrated.observations.count("r1") == 0
        assert migrated.quick_check() == ["ok"]


def test_a_receipt_write_touches_no_change_index(store: Store) -> None:
    """The change number is the rowid: the table has no index of its own for it, and the
    feed's range and the next number are rowid look-ups."""
    r = make_receipt("K7", request_key="K7")
    store.receipts.insert(r, BLOB, FP, [make_obs("K7")])
    store.receipts.update(r.model_copy(update={"version": r.version + 1}))
    conn = store.db.conn
    columns = {
        str(row[2])
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
        for row in conn.execute(f"PRAGMA index_info('{name}')")
        if name.startswith(("receipts", "sqlite_autoindex_receipts"))
    }
    assert "change_seq" not in columns
    for sql in (
        "SELECT max(change_seq) FROM receipts",
        "SELECT receipt_id, change_seq FROM receipts WHERE change_seq > 0"
        " AND change_seq <= 9 ORDER BY change_seq LIMIT 5",
    ):
        plan = " ".join(str(row[3]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
        assert plan.startswith("SEARCH receipts") and "USING INDEX" not in plan, plan
    assert store.receipts.changed_since(0, 10) == [("K7", 2)]
