"""Executor semantics: failure classes, bounded retries, leases, the account guard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chit import clock
from chit.sidecar.anchors import SidecarStore
from chit.sidecar.executor import Executor
from chit.sidecar.owner import VaultOwnerResolver
from chit.sidecar.queue import claim, unblock
from chit.store import Store, StoreBusy
from tests.sidecar_support import (
    LockedKeyStore,
    executor,
    raw_write,
    store,
    store_fixture_home,
)


@pytest.fixture(params=["sqlite", "postgresql"])
def home(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A home whose sidecar store is its SQLite file, or a PostgreSQL database."""
    yield from store_fixture_home(request, tmp_path)


@pytest.fixture
def sc(home):  # type: ignore[no-untyped-def]
    s = store(home)
    yield s
    s.close()


def _live(home, sc: SidecarStore) -> tuple[str, Executor]:  # type: ignore[no-untyped-def]
    start = sc.open_work("local", "t", "T")
    ex, _ = executor(home, base_backoff_s=1.0)
    ex.run_once()
    return start.item_id, ex


def _due_passes(ex: Executor, rounds: int) -> None:
    for _ in range(rounds):
        ex.run_once()
        clock.advance(120)


def test_transient_every_attempt_is_bounded(home, sc, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    item, ex = _live(home, sc)
    note = sc.enqueue("local", item, "note", {"text": "x"}, max_attempts=3)
    calls: list[str] = []

    def busy(*_a: Any, **_k: Any) -> None:
        calls.append("x")
        raise StoreBusy("the chit store is busy (test)")

    monkeypatch.setattr(ex.library.work, "add_note", busy)
    with clock.frozen(clock.now()):
        ex.run_once()
        first = sc.intent(note.intent_id or "")
        assert first is not None and first.state == "retrying" and first.attempts == 1
        ex.run_once()  # not due yet: backoff
        assert len(calls) == 1
        _due_passes(ex, 5)
    done = sc.intent(note.intent_id or "")
    assert len(calls) == 3 and done is not None and done.attempts == 3
    assert done.state == "failed" and done.failure_class == "transient"
    assert done.error is not None and "gave up after 3 attempts" in done.error


def test_backoff_is_exponential(home, sc, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    item, ex = _live(home, sc)
    note = sc.enqueue("local", item, "note", {"text": "x"})
    monkeypatch.setattr(ex.library.work, "add_note", _raise_busy)
    delays = []
    with clock.frozen(clock.now()):
        for _ in range(3):
            ex.run_once()
            row = sc.intent(note.intent_id or "")
            assert row is not None
            delays.append((clock.parse_iso(row.next_attempt_at) - clock.now()).total_seconds())
            clock.advance(delays[-1] + 0.01)
    assert delays == pytest.approx([1.0, 2.0, 4.0], abs=0.01)


def _raise_busy(*_a: Any, **_k: Any) -> None:
    raise StoreBusy("busy")


def test_permanent_gives_one_attempt(home, sc) -> None:  # type: ignore[no-untyped-def]
    item, ex = _live(home, sc)
    with Store.open(home) as lib:
        lib.work.delete(item)
    note = sc.enqueue("local", item, "note", {"text": "x"})
    ex.run_once()
    ex.run_once()
    row = sc.intent(note.intent_id or "")
    assert row is not None and row.attempts == 1 and row.state == "failed"


def test_applied_start_replay_has_no_second_side_effect(home, sc) -> None:  # type: ignore[no-untyped-def]
    start = sc.open_work("local", "t", "T")
    ex, _ = executor(home)
    ex.run_once()
    # Replay the start (e.g. a lease that expired after the library write).
    raw_write(
        sc,
        "UPDATE intents SET state = 'pending' WHERE item_id = ? AND kind = 'start'",
        [start.item_id],
    )
    ex.run_once()
    row = sc.intents_of(start.item_id)[0]
    assert row.state == "applied" and row.failure_class == "applied"
    with Store.open(home) as lib:
        assert len(lib.work.list()) == 1


def test_recovered_note_is_not_duplicated(home, sc) -> None:  # type: ignore[no-untyped-def]
    item, ex = _live(home, sc)
    note = sc.enqueue("local", item, "note", {"text": "once"})
    with clock.frozen(clock.now()):
        intent = claim(sc, "dead-worker", lease_s=1.0)
        assert intent is not None and intent.id == note.intent_id
        ex.library.work.add_note(item, "once")  # the dead worker's write reached the library
        clock.advance(2)  # its lease expires without a settle
        ex.run_once()
    row = sc.intent(note.intent_id or "")
    assert row is not None and row.state == "applied" and row.failure_class == "applied"
    assert [n.text for n in ex.library.work.notes(item)] == ["once"]


def test_leased_intent_is_not_claimed_twice(home, sc) -> None:  # type: ignore[no-untyped-def]
    sc.open_work("local", "t", "T")
    assert claim(sc, "w1", lease_s=30) is not None
    assert claim(sc, "w2", lease_s=30) is None


def test_order_per_item_is_preserved(home, sc) -> None:  # type: ignore[no-untyped-def]
    start = sc.open_work("local", "t", "T")
    sc.enqueue("local", start.item_id, "note", {"text": "1"})
    first = claim(sc, "w1", lease_s=30)
    assert first is not None and first.kind == "start"
    assert claim(sc, "w2", lease_s=30) is None  # the note waits for the start


def test_other_account_blocks_until_user_acts(home, sc) -> None:  # type: ignore[no-untyped-def]
    item, ex = _live(home, sc)
    with Store.open(home) as lib:
        lib.work.set_owner(item, "acct-someone-else")
    note = sc.enqueue("local", item, "note", {"text": "x"})
    later = sc.enqueue("local", item, "note", {"text": "y"})
    ex.run_once()
    row = sc.intent(note.intent_id or "")
    assert row is not None and row.state == "blocked" and row.failure_class == "blocked"
    assert sc.intent(later.intent_id or "").state == "pending"
    with Store.open(home) as lib:
        lib.work.set_owner(item, None)
    assert unblock(sc, None, note.intent_id or "")
    ex.run_once()
    assert [i.state for i in sc.intents_of(item)] == ["applied", "applied", "applied"]


def test_vault_owner_resolver_login_restoration(home, sc) -> None:  # type: ignore[no-untyped-def]
    keys = LockedKeyStore()
    resolver = VaultOwnerResolver(home, key_store=keys)
    ex = Executor(home, resolver, sidecar_path=sc.path)
    start = sc.open_work("local", "t", "T")
    sc.enqueue("local", start.item_id, "note", {"text": "before login"})
    ex.run_once()
    info = sc.inspect("local", start.item_id)
    assert info["pending"][0]["state"] == "retrying"
    assert "vault is locked" in info["pending"][0]["reason"]
    keys.unlock()
    ex.run_once()  # the first resolution wakes the waiting intents at once
    info = sc.inspect("local", start.item_id)
    assert info["anchor"] == "live" and info["pending"] == []
    with Store.open(home) as lib:
        record = lib.work.get(start.item_id)
        assert record is not None and record.owner is not None and record.owner.startswith("acct-")
        assert [n.text for n in lib.work.notes(start.item_id)] == ["before login"]


def test_sweep_marks_deleted_live_anchor_dead(home, sc) -> None:  # type: ignore[no-untyped-def]
    item, ex = _live(home, sc)
    with Store.open(home) as lib:
        lib.work.delete(item, hard=True)
    assert ex.sweep_deleted() == 1
    assert sc.anchor(item).state == "dead"
