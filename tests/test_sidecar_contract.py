"""Seed 000's contract: openWork, queued follow-ups, idempotency, the condition table.

| Condition               | State    | Next action        | test                                |
|-------------------------|----------|--------------------|-------------------------------------|
| Account not restored    | Retrying | Preserve and retry | test_account_not_restored_retrying  |
| Anchor materializing    | Queued   | Preserve order     | test_note_before_materialization... |
| Invalid schema          | Failed   | Readable error     | test_invalid_schema_...             |
| Target deleted          | Dead     | Require a new start| test_target_deleted_dead_then_new_id|
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chit.sidecar.anchors import IdempotencyConflict, SidecarStore, UnknownItem
from chit.sidecar.contract import (
    CONTRACT,
    ContractError,
    canonical,
    hashed,
    request_hash,
    validate,
)
from chit.store import Store
from tests.sidecar_support import executor, raw_write, store, store_fixture_home


@pytest.fixture(params=["sqlite", "postgresql"])
def home(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A home whose sidecar store is its SQLite file, or a PostgreSQL database."""
    yield from store_fixture_home(request, tmp_path)


@pytest.fixture
def sc(home):  # type: ignore[no-untyped-def]
    s = store(home)
    yield s
    s.close()


def test_open_work_issues_id_before_executor_in_one_transaction(sc: SidecarStore) -> None:
    out = sc.open_work("local", "task-1", "Write the report")
    assert out.state == "queued" and out.anchor == "provisional" and not out.materialized
    assert out.item_id.startswith("wi_") and len(out.item_id) >= 3 + 32  # ≥ 192 bits
    intents = sc.intents_of(out.item_id)
    assert [(i.kind, i.seq, i.state) for i in intents] == [("start", 1, "pending")]


def test_same_idempotency_key_returns_same_intent_and_id(sc: SidecarStore) -> None:
    a = sc.open_work("local", "t", "T", idempotency_key="k1")
    b = sc.open_work("local", "t", "T", idempotency_key="k1")
    assert a.item_id == b.item_id and a.intent_id == b.intent_id and b.replayed
    assert len(sc.intents_of(a.item_id)) == 1


def test_same_key_different_input_is_explicit_error(sc: SidecarStore) -> None:
    sc.open_work("local", "t", "T", idempotency_key="k1")
    with pytest.raises(IdempotencyConflict, match="different arguments"):
        sc.open_work("local", "t", "Other title", idempotency_key="k1")
    assert len(sc.anchors()) == 1


def test_idempotency_is_per_principal(sc: SidecarStore) -> None:
    a = sc.open_work("token:a", "t", "T", idempotency_key="k")
    b = sc.open_work("token:b", "t", "T", idempotency_key="k")
    assert a.item_id != b.item_id


def test_task_key_returns_provisional_or_live_anchor(home, sc: SidecarStore) -> None:  # type: ignore[no-untyped-def]
    first = sc.open_work("local", "t", "T")
    again = sc.open_work("local", "t", "T2")
    assert again.item_id == first.item_id and again.state == "queued"
    ex, _ = executor(home)
    ex.run_once()
    live = sc.open_work("local", "t", "T3")
    assert live.item_id == first.item_id and live.anchor == "live" and live.materialized


def test_note_before_materialization_is_queued_then_on_the_record(home, sc) -> None:  # type: ignore[no-untyped-def]
    start = sc.open_work("local", "t", "T")
    notes = [sc.enqueue("local", start.item_id, "note", {"text": f"n{i}"}) for i in range(5)]
    status = sc.enqueue("local", start.item_id, "status", {"status": "in_progress"})
    assert all(n.state == "queued" and n.failure_class is None for n in notes)
    assert status.state == "queued"
    ex, _ = executor(home)
    assert ex.run_once() == 7
    with Store.open(home) as lib:
        assert [n.text for n in lib.work.notes(start.item_id)] == [f"n{i}" for i in range(5)]
        record = lib.work.get(start.item_id)
        assert record is not None and record.status == "in_progress"
    info = sc.inspect("local", start.item_id)
    assert info["anchor"] == "live" and info["materialized"] and info["pending"] == []


def test_account_not_restored_retrying_then_live_on_same_id(home, sc) -> None:  # type: ignore[no-untyped-def]
    start = sc.open_work("local", "t", "T")
    sc.enqueue("local", start.item_id, "note", {"text": "sent while locked"})
    ex, resolver = executor(home, owner=None)
    for _ in range(3):
        ex.run_once()
    info = sc.inspect("local", start.item_id)
    head = info["pending"][0]
    assert head["state"] == "retrying" and head["failure_class"] == "transient"
    assert head["reason"].startswith("account not restored") and head["attempts"] == 0
    assert info["anchor"] == "provisional"  # preserved, never failed
    resolver.owner = "acct-1"
    ex.run_once()
    info = sc.inspect("local", start.item_id)
    assert info["anchor"] == "live" and info["pending"] == []
    with Store.open(home) as lib:
        assert [n.text for n in lib.work.notes(start.item_id)] == ["sent while locked"]
        assert lib.work.get(start.item_id).owner == "acct-1"  # type: ignore[union-attr]


def test_invalid_schema_failed_with_readable_reason() -> None:
    with pytest.raises(ContractError) as exc:
        validate("work_status", {"item_id": "x", "status": "finished"})
    assert CONTRACT in exc.value.reason and "finished" in exc.value.reason
    assert "in_progress" in exc.value.reason
    with pytest.raises(ContractError, match="missing required argument 'title'"):
        validate("work_start", {"task_key": "t"})
    with pytest.raises(ContractError, match="unknown argument"):
        validate("work_note", {"item_id": "x", "text": "t", "colour": "red"})


def test_invalid_stored_payload_fails_permanently(home, sc) -> None:  # type: ignore[no-untyped-def]
    start = sc.open_work("local", "t", "T")
    ex, _ = executor(home)
    ex.run_once()
    # An intent written by a helper on another contract version.
    bad = sc.enqueue("local", start.item_id, "status", {"status": "in_progress"})
    raw_write(
        sc, "UPDATE intents SET payload = ? WHERE id = ?", ['{"status": "archived"}', bad.intent_id]
    )
    ex.run_once()
    failed = sc.intent(bad.intent_id)
    assert failed is not None and failed.state == "failed" and failed.failure_class == "permanent"
    assert failed.error is not None and CONTRACT in failed.error and failed.attempts == 1


def test_target_deleted_dead_then_new_id(home, sc) -> None:  # type: ignore[no-untyped-def]
    start = sc.open_work("local", "t", "T")
    ex, _ = executor(home)
    ex.run_once()
    note = sc.enqueue("local", start.item_id, "note", {"text": "before delete"})
    with Store.open(home) as lib:
        lib.work.delete(start.item_id)
    ex.run_once()
    gone = sc.intent(note.intent_id or "")
    assert gone is not None and gone.state == "failed" and gone.failure_class == "permanent"
    assert gone.error == "target deleted: start a new record"
    assert sc.anchor(start.item_id).state == "dead"
    later = sc.enqueue("local", start.item_id, "note", {"text": "after"})
    assert later.state == "dead" and later.reason == "target deleted: start a new record"
    fresh = sc.open_work("local", "t", "T again")
    assert fresh.item_id != start.item_id and fresh.state == "queued"


def test_deleted_item_detected_at_start_with_presence(home, sc) -> None:  # type: ignore[no-untyped-def]
    start = sc.open_work("local", "t", "T")
    ex, _ = executor(home)
    ex.run_once()
    with Store.open(home) as lib:
        lib.work.delete(start.item_id)
        fresh = sc.open_work("local", "t", "T", presence=lambda i: lib.work.presence(i).value)
    assert fresh.item_id != start.item_id
    assert sc.anchor(start.item_id).state == "dead"


def test_repair_provisional_whose_item_exists(home, sc) -> None:  # type: ignore[no-untyped-def]
    start = sc.open_work("local", "t", "T")
    with Store.open(home) as lib:  # an older executor created it but never moved the anchor
        lib.work.create(start.item_id, "T", task_key="t")
    ex, _ = executor(home)
    ex.run_once()
    intent = sc.intents_of(start.item_id)[0]
    assert intent.state == "applied" and intent.failure_class == "applied"
    assert sc.anchor(start.item_id).state == "live"
    with Store.open(home) as lib:
        assert len(lib.work.find_by_task_key("t")) == 1


def test_repair_orphaned_provisional_without_start_intent(home, sc) -> None:  # type: ignore[no-untyped-def]
    start = sc.open_work("local", "t", "T")
    with Store.open(home) as lib:
        lib.work.create(start.item_id, "T", task_key="t")
    raw_write(sc, "UPDATE intents SET state = 'applied' WHERE item_id = ?", [start.item_id])
    ex, _ = executor(home)
    ex.run_once()
    assert sc.anchor(start.item_id).state == "live"
    assert sc.open_work("local", "t", "T").item_id == start.item_id  # task key unlocked


def test_unknown_and_foreign_item_are_identical(sc: SidecarStore) -> None:
    a = sc.open_work("token:a", "t", "T")
    with pytest.raises(UnknownItem):
        sc.enqueue("token:b", a.item_id, "note", {"text": "x"})
    with pytest.raises(UnknownItem):
        sc.inspect("token:b", a.item_id)


_JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=8)


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from(["start", "note", "status", "complete", "ask"]),
    payload=st.dictionaries(
        st.text(max_size=6),
        _JSON_SCALARS | st.lists(_JSON_SCALARS, max_size=3),
        max_size=4,
    ),
)
def test_hash_encoded_once_binds_the_same_key(kind: str, payload: dict[str, object]) -> None:
    # openWork encodes its payload once for both the hash and the stored text; the hash
    # must stay the one every stored idempotency key is bound to.
    digest, text = hashed(kind, payload)
    whole = canonical([kind, payload]).encode("utf-8")
    assert digest == hashlib.sha256(whole).hexdigest() == request_hash(kind, payload)
    assert json.loads(text) == payload
