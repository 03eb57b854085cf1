"""A check that saw nothing new writes only what moved, and stores what a full update would.

``chit.reconcile.fold`` writes such a check with ``receipt_rows.FRESHEN`` (the two
bookkeeping columns, the version, the document) inside the caller's transaction; these
tests pin that the row, the document, the version, the change number and the timeline
come out as ``ReceiptRepository.update`` would leave them, and that a stale copy is still
refused and folded again.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from pydantic import ValidationError

from chit import clock
from chit.home import Home
from chit.receipts import LifecycleState, StatusObserved
from chit.receipts.transitions import _revalidated
from chit.reconcile.fold import PendingWrite
from chit.reconcile.transactions import commit_batch
from chit.reconcile.writer import ReceiptWriter
from chit.store import StaleWrite, Store, immediate
from chit.store.receipt_rows import dump_doc, row_params
from tests.cli_support import seed_receipt
from tests.store_support import make_receipt

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def frozen() -> Iterator[None]:
    clock.freeze(T0)
    try:
        yield
    finally:
        clock.unfreeze()


def _poll(message: str = "step 1 of 100") -> StatusObserved:
    return StatusObserved(status=LifecycleState.WORKING, message=message, poll_interval_ms=1000)


def _row(store: Store, rid: str) -> sqlite3.Row:
    cursor = store.db.conn.cursor()
    cursor.row_factory = sqlite3.Row
    row = cursor.execute("SELECT * FROM receipts WHERE receipt_id = ?", [rid]).fetchone()
    cursor.close()
    assert row is not None
    return row


def test_an_unchanged_poll_stores_what_a_full_update_would(tmp_path: Path, frozen: None) -> None:
    home = Home(tmp_path / "home")
    rid = seed_receipt(home, handle="handle-abcdef-123456", now=clock.now()).receipt_id
    with Store.open(home) as store:
        writer = ReceiptWriter(store)
        clock.advance(1)
        first = writer.apply(rid, [_poll()])  # news: the full update
        seq = _row(store, rid)["change_seq"]
        statements: list[str] = []
        store.db.conn.set_trace_callback(statements.append)
        clock.advance(1)
        second = writer.apply(rid, [_poll()])
        store.db.conn.set_trace_callback(None)

        assert second.version == first.version + 1  # readers still see it move
        assert second.status_at == T0 + timedelta(seconds=2)
        assert second.next_check_at is not None and second.next_check_at > first.next_check_at
        assert second.stale_after is not None and second.stale_after > first.stale_after
        stored = store.receipts.require(rid)
        assert stored == second
        row = _row(store, rid)
        # Every column (the document byte for byte) as the full update writes it.
        for column, value in row_params(stored).items():
            assert row[column] == value, column
        assert row["doc"] == dump_doc(second)
        assert row["change_seq"] > seq  # the change feed sees it
        assert row["handle_blob"] is not None  # the sealed handle stays
        # One narrow UPDATE and the timeline's repeat, no savepoint of its own.
        updates = [s for s in statements if s.startswith("UPDATE receipts")]
        assert len(updates) == 1 and "doc = " in updates[0] and "tool = " not in updates[0]
        assert not any("sqlite_utils" in s for s in statements)
        timeline = store.observations.timeline(rid)
        assert [o.repeats for o in timeline][-1] == 2
        assert timeline[-1].last_at == T0 + timedelta(seconds=2)


def test_an_unchanged_poll_on_a_stale_copy_is_refused_and_folded_again(
    tmp_path: Path, frozen: None
) -> None:
    home = Home(tmp_path / "home")
    rid = seed_receipt(home, handle="handle-abcdef-123456", now=clock.now()).receipt_id
    with Store.open(home) as store:
        writer = ReceiptWriter(store)
        clock.advance(1)
        first = writer.apply(rid, [_poll()])
        # Another connection (another process, an answer) writes meanwhile.
        with Store.open(home) as other:
            other.receipts.update(
                first.model_copy(update={"purpose": "renamed", "version": first.version + 1})
            )
        clock.advance(1)
        stale = PendingWrite(rid, (_poll(),), first, False)
        with pytest.raises(StaleWrite), immediate(store.db):
            writer._folder.write(stale, store)
        assert store.receipts.require(rid).purpose == "renamed"  # nothing overwritten

        batch = [PendingWrite(rid, (_poll(),), first, False)]
        commit_batch(batch, store, writer._folder.write)
        result = batch[0].result
        assert batch[0].error is None and result is not None
        assert result.purpose == "renamed" and result.version == first.version + 2
        assert result.status_at == T0 + timedelta(seconds=2)
        assert store.receipts.require(rid) == result


def test_a_changed_time_is_still_validated() -> None:
    receipt = make_receipt("r1", status_at=T0, next_check_at=T0)
    naive = datetime(2026, 1, 1, 0, 0, 1)
    with pytest.raises(ValidationError):
        _revalidated(receipt.model_copy(update={"status_at": naive}), ("status_at",), 2)
    plus_two = datetime(2026, 1, 1, 2, tzinfo=timezone(timedelta(hours=2)))
    kept = _revalidated(
        receipt.model_copy(update={"next_check_at": plus_two}), ("next_check_at",), 2
    )
    assert kept.next_check_at is plus_two and kept.version == 2
    assert dump_doc(kept) == kept.model_dump_json(exclude_defaults=True)
