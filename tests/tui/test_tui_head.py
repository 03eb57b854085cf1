"""The first page before the index, and the per-state lists a ``state:`` filter walks.

A large store paints the top of the attention order read from SQLite
(:func:`chit.tui.head.read_head`) and reads the whole index in a worker after that
paint. Here the worker is held on an event (never a sleep): the first page shows while
it waits, a filter typed meanwhile waits too (the status line says so) and then gives
what the whole index gives, and changes that arrive meanwhile are not lost. The head's
SQL and the index's order are held to the same result on random stores, and the
per-state lists to a from-scratch filter through random changes (Hypothesis).
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chit.home import Home
from chit.receipts import (
    Acceptance,
    AcceptanceState,
    InputRequest,
    LifecycleState,
    Receipt,
    RetrievalCondition,
)
from chit.runtime.events import ReceiptChanged
from chit.store import Store
from chit.tui import head as head_module
from chit.tui import loader
from chit.tui.head import read_head
from chit.tui.index import Entry, ReceiptIndex
from chit.tui.view import PAGE_SIZE, Query, parse_filter
from chit.tui.widgets.receipt_table import ReceiptTable
from tests.tui.conftest import FakeSupervisor, make_app
from tests.tui.helpers import screen_text, settle, until
from tests.tui.seed import NOW, _receipt, seed_many

READ_INDEX = loader.read_index
"""The real index read (the gate replaces the module's)."""

STATES = [s.value for s in LifecycleState]
WORK = [None, None, "W-a", "W-b", "W-c"]


# ---------------------------------------------------------------- the held worker
class Gate:
    """Holds the index read (``loader.read_index`` in the app's worker) until opened."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.open = threading.Event()


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gate]:
    held = Gate()
    real = loader.read_index

    def read_index(store: Store) -> Any:
        held.reached.set()
        assert held.open.wait(60), "the test never opened the gate"
        return real(store)

    monkeypatch.setattr(head_module, "HEAD_FROM", 0)  # every store starts with its head
    monkeypatch.setattr(loader, "read_index", read_index)
    try:
        yield held
    finally:
        held.open.set()  # never leave a worker thread waiting


def _read_store(home: Home) -> ReceiptIndex:
    """The whole index as a fresh read makes it (what the app's filter must match)."""
    with Store.open(home) as store:
        index, _ = READ_INDEX(store)
    return index


def _ids(rows: Any) -> list[str]:
    return [r.receipt_id for r in rows]


def _push(fake: FakeSupervisor, receipt: Receipt, **update: object) -> Receipt:
    after = receipt.model_copy(update={**update, "version": receipt.version + 1})
    for subscriber in fake.subscribers:
        subscriber(ReceiptChanged(after, receipt, tuple(update)))
    return after


@pytest.mark.anyio
async def test_the_first_page_shows_before_the_index_is_read(tmp_path: Path, gate: Gate) -> None:
    app = make_app(tmp_path / "home", supervisor=FakeSupervisor())
    seed_many(app.backend.home, 80)  # more than a page
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, gate.reached.is_set, "the index read started after the first page")
        shown = _ids(app.snapshot.rows)
        assert not app.model.complete and not app.settled
        assert len(shown) == PAGE_SIZE and app.snapshot.more and not app.snapshot.indexing
        table = app.screen.query_one(ReceiptTable)
        assert app.focused is table and table.row_count >= PAGE_SIZE
        start = table.cursor_row
        await pilot.press("j")  # keys work meanwhile
        await until(pilot, lambda: table.cursor_row == start + 1, "the cursor moved")
        gate.open.set()
        await settle(pilot)
        assert app.model.complete
        assert _ids(app.snapshot.rows) == shown  # the index orders the page the same
        assert shown == _ids(_read_store(app.backend.home).window(Query(), PAGE_SIZE)[0])


@pytest.mark.anyio
@pytest.mark.parametrize("text", ["state:working batch", "state:failed", "job 12"])
async def test_a_filter_typed_before_the_index_waits_and_gives_the_same_hits(
    tmp_path: Path, gate: Gate, text: str
) -> None:
    app = make_app(tmp_path / "home", supervisor=FakeSupervisor())
    seed_many(app.backend.home, 80)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, gate.reached.is_set, "the index read started after the first page")
        await pilot.press("slash")
        field = app.screen.query_one("#filter")
        await until(pilot, lambda: app.focused is field, "the filter box has the keys")
        await pilot.press(*text)
        await until(pilot, lambda: app.snapshot.query == parse_filter(text), "the filter applied")
        assert app.snapshot.indexing and app.snapshot.rows == ()
        assert "indexing" in screen_text(app)  # the status line says why nothing shows
        gate.open.set()
        await settle(pilot)
        early = _ids(app.snapshot.rows)
        assert not app.snapshot.indexing and "indexing" not in screen_text(app)
        expected = _read_store(app.backend.home).window(parse_filter(text), PAGE_SIZE)[0]
        assert early == _ids(expected) and early  # every case has hits
        app.set_filter("")
        await settle(pilot)
        app.set_filter(text)
        await settle(pilot)
        assert _ids(app.snapshot.rows) == early


@pytest.mark.anyio
async def test_changes_before_the_index_show_on_the_page_and_reach_the_index(
    tmp_path: Path, gate: Gate
) -> None:
    fake = FakeSupervisor()
    app = make_app(tmp_path / "home", supervisor=fake)
    ids = seed_many(app.backend.home, 80)
    with Store.open(app.backend.home) as store:
        off_page = store.receipts.require(ids[-1])
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, gate.reached.is_set, "the index read started after the first page")
        shown = _ids(app.snapshot.rows)
        assert ids[0] in shown and ids[-1] not in shown
        ask = InputRequest(key="k", message="ok?", received_at=NOW)
        on_page = _push(
            fake,
            app.model.receipts[ids[0]],
            state=LifecycleState.INPUT_REQUIRED,
            input_requests=(ask,),
        )
        moved = _push(fake, off_page, state=LifecycleState.FAILED)

        def row_state() -> LifecycleState | None:
            row = next((r for r in app.snapshot.rows if r.receipt_id == ids[0]), None)
            return row.state if row is not None else None

        await until(pilot, lambda: row_state() is LifecycleState.INPUT_REQUIRED, "row changed")
        assert _ids(app.snapshot.rows) == shown  # its place waits for the index
        gate.open.set()
        await settle(pilot)
        expected = _read_store(app.backend.home)
        expected.put(Entry.of(on_page))
        expected.put(Entry.of(moved))
        assert _ids(app.snapshot.rows) == _ids(expected.window(Query(), PAGE_SIZE)[0])
        assert app.snapshot.rows[0].receipt_id == ids[0]  # the longest-waiting input now
        app.set_filter("state:failed")
        await settle(pilot)
        assert ids[-1] in _ids(app.snapshot.rows)


# ---------------------------------------------------------------- the head's SQL
_RECEIPT = st.tuples(
    st.sampled_from(STATES),
    st.sampled_from(WORK),
    st.sampled_from([AcceptanceState.PENDING, AcceptanceState.ACCEPTED]),
    st.sampled_from([c.value for c in RetrievalCondition]),
    st.integers(0, 4),  # acceptance minute: ties are broken by id
    st.sampled_from([None, -10, 3, 60]),  # expires in minutes: gone, near, far
)


def _stored(n: int, spec: tuple[Any, ...]) -> Receipt:
    state, work, acceptance, retrieval, minute, expires = spec
    return _receipt(
        n,
        server=f"srv{n % 3}",
        work_ref=work,
        state=LifecycleState(state),
        acceptance=Acceptance(
            state=acceptance, decided_by="user" if acceptance.value != "pending" else None
        ),
        retrieval=RetrievalCondition(retrieval),
        accepted_at=NOW - timedelta(minutes=minute),
        expires_at=NOW + timedelta(minutes=expires) if expires is not None else None,
    )


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_RECEIPT, max_size=30), st.integers(1, 12))
def test_the_head_is_the_first_page_of_the_index(specs: list[Any], limit: int) -> None:
    """On random stores: the page, its ``more``, the counts, the inbox and the health."""
    records = ["W-a", "W-z"]
    with tempfile.TemporaryDirectory() as tmp:
        home = Home(Path(tmp) / "home").ensure()
        with Store.open(home) as store:
            for n, spec in enumerate(specs):
                store.receipts.insert(_stored(n, spec), None, None, [])
            head, receipts = read_head(store, limit, NOW, 5, records)
            index, _ = READ_INDEX(store)
    window, more = index.window(Query(), limit)
    assert _ids(head.page) == _ids(window)
    assert head.window(limit) == (list(head.page), more)
    assert head.counts() == index.counts() and len(head) == len(index)
    assert head.first_inputs(5) == index.first_inputs(5)
    assert head.unreachable() == index.unreachable()
    assert head.grouped == {k for k in records if index.has_group(k)}
    assert set(_ids(head.page)) | set(head.inputs) <= receipts.keys()
