"""Fault injection (reliability note §4.7): fail statement k, for every k, of each
multi-statement operation, and assert all-or-nothing."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chit import clock
from chit.home import Home
from chit.receipts import IntentState, LifecycleState
from chit.store import Store, StoreIOError
from tests.store_support import T0, FaultyConnection, make_intent, make_obs, make_receipt

Setup = Callable[[Store], None]
Operation = Callable[[Store], Any]


def _dump(conn: sqlite3.Connection) -> dict[str, list[tuple[Any, ...]]]:
    tables = ("receipts", "observations", "intents", "work_records", "work_notes", "meta")
    return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in tables}


def _accepting(store: Store) -> None:
    store.intents.begin(make_intent("rk-r-1"))


def _accept(store: Store) -> Any:
    return store.receipts.record_acceptance(
        make_intent("rk-r-1"), make_receipt("r-1"), make_obs("r-1"), b"\x01blob", "fp0123456789"
    )


def _existing(store: Store) -> None:
    store.receipts.insert(make_receipt("r-1"), b"\x01blob", "fp0123456789", [make_obs("r-1")])


def _update(store: Store) -> Any:
    done = make_receipt("r-1", state=LifecycleState.COMPLETED)
    observations = [make_obs("r-1", message="a"), make_obs("r-1", message="b")]
    return store.receipts.update(done, observations, 1, wipe_handle=True)


def _nothing(store: Store) -> None:
    return None


def _insert(store: Store) -> Any:
    return store.receipts.insert(
        make_receipt("r-1"), b"\x01blob", "fp0123456789", [make_obs("r-1"), make_obs("r-1")]
    )


def _record(store: Store) -> None:
    store.work.create("w-1", "t")


def _note(store: Store) -> Any:
    return store.work.add_note("w-1", "note")


def _sending(store: Store) -> None:
    store.intents.begin(make_intent("rk-a"))
    store.intents.begin(make_intent("rk-b"))


def _restart(store: Store) -> Any:
    return store.intents.sending_to_unknown()


CASES: dict[str, tuple[Setup, Operation]] = {
    "record_acceptance": (_accepting, _accept),
    "receipt_update": (_existing, _update),
    "receipt_insert": (_nothing, _insert),
    "work_add_note": (_record, _note),
    "intents_sending_to_unknown": (_sending, _restart),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fail_every_statement_all_or_nothing(tmp_path: Path, name: str) -> None:
    setup, operation = CASES[name]
    clock.freeze(T0)  # timestamps must not differ between the dry run and the k runs
    try:
        _fail_every_statement(tmp_path, setup, operation)
    finally:
        clock.unfreeze()


def _fail_every_statement(tmp_path: Path, setup: Setup, operation: Operation) -> None:
    def fresh(tag: str) -> Store:
        store = Store.open(Home(tmp_path / tag))
        setup(store)
        return store

    # Dry run: count the statements and record the successful end state.
    with fresh("dry") as store:
        real = store.db.conn
        counter = FaultyConnection(real)
        store.db.conn = counter  # type: ignore[assignment]
        operation(store)
        store.db.conn = real
        after_success = _dump(real)
    total = counter.count
    assert counter.statements[0] == "BEGIN" and counter.statements[-1] == "COMMIT"
    assert total >= 4, counter.statements

    for k in range(1, total + 1):
        with fresh(f"k{k}") as store:
            real = store.db.conn
            before = _dump(real)
            store.db.conn = FaultyConnection(real, fail_at=k)  # type: ignore[assignment]
            with pytest.raises(StoreIOError):
                operation(store)
            store.db.conn = real
            assert not real.in_transaction, f"statement {k} left a transaction open"
            assert _dump(real) == before, f"failing statement {k} left a partial write"
            # the store is still usable afterwards and the operation now succeeds
            operation(store)
            assert _dump(real) == after_success
            assert store.quick_check() == ["ok"]


def test_accepted_intent_state_after_failed_acceptance(tmp_path: Path) -> None:
    """The intent stays ``sending`` when its acceptance could not be committed."""
    with Store.open(Home(tmp_path / "h")) as store:
        _accepting(store)
        real = store.db.conn
        store.db.conn = FaultyConnection(real, fail_at=4)  # type: ignore[assignment]
        with pytest.raises(StoreIOError):
            _accept(store)
        store.db.conn = real
        intent = store.intents.get("rk-r-1")
        assert intent is not None and intent.state is IntentState.SENDING
        assert store.receipts.get("r-1") is None
