"""Intents, observations, work records and meta repositories."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from chit import clock
from chit.errors import Conflict
from chit.home import Home
from chit.receipts import IntentState, LifecycleState, ObservationKind, ObservationSource
from chit.store import AlreadyExists, Presence, RecordNotFound, Store
from chit.store.meta_repo import VAULT_KEY_ID
from tests.store_support import make_intent, make_obs, make_receipt

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with clock.frozen(NOW), Store.open(Home(tmp_path / "home")) as opened:
        yield opened


def test_intent_begin_mark_list(store: Store) -> None:
    intent = make_intent("rk-1")
    assert store.intents.begin(intent) == intent
    assert store.intents.get("rk-1") == intent
    with pytest.raises(AlreadyExists, match="already in use"):
        store.intents.begin(intent)
    with pytest.raises(AlreadyExists, match="different arguments"):
        store.intents.begin(make_intent("rk-1", digest="sha256:other"))
    rejected = store.intents.mark("rk-1", IntentState.REJECTED, error="bad args")
    assert (rejected.state, rejected.error, rejected.updated_at) == (
        IntentState.REJECTED,
        "bad args",
        NOW,
    )
    again = store.intents.mark("rk-1", IntentState.SENDING, bump_attempts=True)
    assert again.attempts == 2 and again.error is None
    with pytest.raises(RecordNotFound):
        store.intents.mark("ghost", IntentState.UNKNOWN)
    store.intents.begin(make_intent("rk-2"))
    assert [i.request_key for i in store.intents.list()] == ["rk-1", "rk-2"]
    assert [i.request_key for i in store.intents.list(IntentState.SENDING)] == ["rk-1", "rk-2"]
    assert store.intents.counts_by_state()[IntentState.SENDING] == 2


def test_accepted_intent_is_final(store: Store) -> None:
    intent = store.intents.begin(make_intent("rk-r-1"))
    receipt = make_receipt("r-1")
    store.receipts.record_acceptance(intent, receipt, make_obs("r-1"), b"x", "fp0123456789")
    with pytest.raises(Conflict):
        store.intents.mark("rk-r-1", IntentState.UNKNOWN)
    assert store.intents.mark("rk-r-1", IntentState.ACCEPTED).receipt_id == "r-1"


def test_sending_to_unknown_restart_rule(store: Store) -> None:
    for key in ("rk-a", "rk-b", "rk-c"):
        store.intents.begin(make_intent(key))
    store.intents.mark("rk-c", IntentState.REJECTED, error="no")
    changed = store.intents.sending_to_unknown()
    assert sorted(i.request_key for i in changed) == ["rk-a", "rk-b"]
    assert all(i.state is IntentState.UNKNOWN and i.error for i in changed)
    assert store.intents.list(IntentState.SENDING) == []
    assert store.intents.sending_to_unknown() == []
    c = store.intents.get("rk-c")
    assert c is not None and c.state is IntentState.REJECTED


def test_observations_append_timeline(store: Store) -> None:
    store.receipts.insert(make_receipt("r-1"), b"x", "fp0123456789")
    seqs = store.observations.append(
        make_obs("r-1", message="one"),
        make_obs("r-1", status=LifecycleState.INPUT_REQUIRED, message="two"),
    )
    assert seqs == [1, 2]
    assert store.observations.append(make_obs("r-1", message="three")) == [3]
    timeline = store.observations.timeline("r-1")
    assert [o.message for o in timeline] == ["one", "two", "three"]
    assert timeline[1].status is LifecycleState.INPUT_REQUIRED
    assert timeline[0].kind is ObservationKind.STATUS
    assert timeline[0].source is ObservationSource.POLL
    assert store.observations.count("r-1") == 3
    with pytest.raises(RecordNotFound):
        store.observations.append(make_obs("ghost"))
    with pytest.raises(Exception, match="append-only"):
        store.db.conn.execute("UPDATE observations SET message = 'edited'")
    assert store.observations.timeline("ghost") == []


def test_work_records_lifecycle(store: Store) -> None:
    record = store.work.create("w-1", "Write docs", purpose="why", task_key="tk", owner="me")
    assert (record.status, record.created_at, record.owner) == ("open", NOW, "me")
    with pytest.raises(AlreadyExists):
        store.work.create("w-1", "again")
    assert store.work.exists("w-1") and store.work.presence("w-1") is Presence.LIVE
    assert store.work.get("w-1") == record
    assert [n.seq for n in (store.work.add_note("w-1", "a"), store.work.add_note("w-1", "b"))] == [
        1,
        2,
    ]
    assert [n.text for n in store.work.notes("w-1")] == ["a", "b"]
    assert store.work.set_status("w-1", "blocked").status == "blocked"
    assert store.work.set_status("w-1", "in_progress").status == "in_progress"
    with pytest.raises(ValueError):
        store.work.set_status("w-1", " ")
    done = store.work.complete("w-1", "shipped")
    assert (done.status, done.completion_summary) == ("completed", "shipped")
    assert done.completed_at == NOW
    assert store.work.set_owner("w-1", "you").owner == "you"
    assert [r.id for r in store.work.find_by_task_key("tk")] == ["w-1"]
    assert [r.id for r in store.work.list(status="completed")] == ["w-1"]
    assert store.work.list(owner="nobody") == []


def test_work_record_delete_soft_and_hard(store: Store) -> None:
    assert store.work.presence("never") is Presence.ABSENT
    store.work.create("w-soft", "s")
    store.work.add_note("w-soft", "n")
    assert store.work.delete("w-soft")
    assert not store.work.delete("w-soft")
    assert store.work.presence("w-soft") is Presence.DELETED
    assert not store.work.exists("w-soft")
    assert store.work.get("w-soft") is None
    deleted = store.work.get("w-soft", include_deleted=True)
    assert deleted is not None and deleted.is_deleted
    for write in (
        lambda: store.work.add_note("w-soft", "late"),
        lambda: store.work.set_status("w-soft", "x"),
        lambda: store.work.complete("w-soft"),
    ):
        with pytest.raises(RecordNotFound):
            write()
    with pytest.raises(AlreadyExists):  # ids are never reused
        store.work.create("w-soft", "again")
    assert store.work.list() == []
    assert [r.id for r in store.work.list(include_deleted=True)] == ["w-soft"]
    store.work.create("w-hard", "h")
    store.work.add_note("w-hard", "n")
    assert store.work.delete("w-hard", hard=True)
    assert store.work.presence("w-hard") is Presence.ABSENT
    assert store.work.notes("w-hard") == []


def test_meta(store: Store) -> None:
    assert store.meta.get(VAULT_KEY_ID) is None
    assert store.meta.get("x", "dflt") == "dflt"
    assert store.meta.set_if_absent(VAULT_KEY_ID, "aa") == "aa"
    assert store.meta.set_if_absent(VAULT_KEY_ID, "bb") == "aa"
    store.meta.set("k", "1")
    store.meta.set("k", "2")
    assert store.meta.all() == {VAULT_KEY_ID: "aa", "k": "2"}
    assert store.meta.delete("k") and not store.meta.delete("k")
