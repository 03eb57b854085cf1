"""The index serves the table: rows without receipt reads, free text found by ``find``.

Behaviour only (figures are in ``benchmarks/tui.py``): the rows the index makes once it
is filled are the rows the full receipts make, and the text search's two paths (hits
found with ``str.find`` and sorted, or the display order walked) give what the plain
walk of :meth:`ReceiptIndex.ordered` gives, through changes that move and retext entries.
A ``state:`` filter walks only that state's entries (per-state lists) and gives what a
display order made from scratch and filtered gives, through random changes (Hypothesis).
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chit.receipts import Acceptance, AcceptanceState, LifecycleState, Outcome
from chit.store import Store
from chit.tui import index as index_module
from chit.tui import loader
from chit.tui.entry import matches
from chit.tui.index import Entry, ReceiptIndex
from chit.tui.view import Query, Row, parse_filter
from tests.tui.seed import NOW, _receipt, receipts, rid, seed


def _more(home_root: Path) -> None:
    """Receipts whose table fields live only in their JSON."""
    extra = [
        _receipt(  # an error result: "done!"
            20,
            state=LifecycleState.COMPLETED,
            outcome=Outcome(is_error=True, summary="boom", retrieved_at=NOW),
        ),
        _receipt(  # accepted by a check, not by a person
            21,
            state=LifecycleState.COMPLETED,
            outcome=Outcome(summary="ok", retrieved_at=NOW),
            acceptance=Acceptance(state=AcceptanceState.ACCEPTED, decided_by="chit:auto"),
        ),
        _receipt(  # rejected by a person
            22,
            state=LifecycleState.COMPLETED,
            outcome=Outcome(summary="meh", retrieved_at=NOW),
            acceptance=Acceptance(state=AcceptanceState.REJECTED, decided_by="user"),
        ),
        _receipt(23, purpose=None, status_message="step 3 of 9", stale_after=NOW),  # no purpose
        _receipt(  # completed, its result not fetched yet: plain "done"
            24, state=LifecycleState.COMPLETED, stale_after=NOW - timedelta(minutes=1)
        ),
    ]
    from chit.home import Home

    with Store.open(Home(home_root)) as store:
        for r in extra:
            store.receipts.insert(r, None, None, [])


def test_a_filled_index_makes_the_rows_the_full_receipts_make(tmp_path: Path) -> None:
    home = seed(tmp_path / "home")
    _more(home.root)
    with Store.open(home) as store:
        index, _ = loader.read_index(store)
        before = index.get(rid(20))
        assert before is not None and not index.known(before)  # columns only, until filled
        index.fill(loader.read_extras(store))
        stored = {r.receipt_id: r for r in store.receipts.list(limit=100).items}
    assert len(stored) == len(receipts()) + 5
    for receipt_id, receipt in stored.items():
        entry = index.get(receipt_id)
        assert entry is not None and index.known(entry)
        assert entry.to_row() == Row.of(receipt), receipt_id
    rows = {i: index.get(rid(i)).to_row() for i in (4, 20, 21, 22, 23)}  # type: ignore[union-attr]
    assert rows[20].error and not rows[4].error  # failed is "failed", not "done!"
    assert rows[21].verdict == "checked_ok" and rows[22].verdict == "rejected"
    assert rows[23].status_message == "step 3 of 9" and rows[23].stale_after == NOW


def test_the_fill_never_overwrites_a_newer_entry(tmp_path: Path) -> None:
    home = seed(tmp_path / "home")
    _more(home.root)
    with Store.open(home) as store:
        index, _ = loader.read_index(store)
        extras = loader.read_extras(store)
        fresh = store.receipts.require(rid(20)).model_copy(
            update={"outcome": Outcome(summary="fixed", retrieved_at=NOW), "version": 9}
        )
    index.put(Entry.of(fresh))  # an event that arrived while the fill was read
    index.fill(extras)
    entry = index.get(rid(20))
    assert entry is not None and entry.version == 9 and not entry.to_row().error


def _entry(n: int, rng: random.Random) -> Entry:
    words = ["alpha", "beta", "gamma", "delta", "job", "build", "x\x00y"]
    return Entry.from_row(
        f"01R{n:023d}",
        rng.choice(["demo", "srv1", "srv2"]),
        rng.choice(["t", "slow_compute"]),
        " ".join(rng.choice(words) for _ in range(3)) + f" {n}",
        rng.choice([None, None, "W-a", "W-b"]),
        rng.choice([s.value for s in LifecycleState]),
        "fresh",
        rng.choice(["pending", "accepted"]),
        f"2026-03-01T11:{rng.randrange(60):02d}:00.000Z",
        None,
        1,
        "2026-03-01T11:00:00.000Z",
    )


QUERIES = [
    "alpha",
    "ALPHA beta",
    "state:failed job",
    "server:srv1 1",
    "work:W-a gamma",
    "zzz",
    "7",
    "y",
    "x\x00y",
]


@pytest.mark.parametrize("sparse", [-1, 10**9], ids=["walk", "find"])
def test_both_text_paths_match_the_plain_walk_through_changes(
    sparse: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_module, "SPARSE", sparse)
    rng = random.Random(12)
    index = ReceiptIndex([_entry(n, rng) for n in range(400)], now=NOW)
    for round_ in range(30):
        for query_text in QUERIES:
            query = parse_filter(query_text)
            expected = list(index.ordered(query))
            for limit in (5, 1000):
                window, more = index.window(query, limit)
                assert window == expected[:limit], (round_, query_text, limit)
                assert more == (len(expected) > limit)
        for _ in range(25):  # changes: new text, new state, new receipts, removals
            n = rng.randrange(460)
            if rng.random() < 0.1:
                index.remove(f"01R{n:023d}")
                continue
            changed = _entry(n, rng)
            old = index.get(changed.receipt_id)
            changed.version = (old.version + 1) if old is not None else 1
            index.put(changed)


@pytest.mark.parametrize("joined_first", [False, True], ids=["adopted", "joined-meanwhile"])
def test_the_text_joined_in_a_worker_serves_the_same_hits(joined_first: bool) -> None:
    rng = random.Random(5)
    index = ReceiptIndex([_entry(n, rng) for n in range(300)], now=NOW)
    count, text = index.prejoin_text()  # what the fill worker makes
    if joined_first:  # a text query on the UI thread before the worker's result came
        index.window(parse_filter("zzz"), 10)
    for n in (3, 301):  # changes meanwhile: a new text for one, a new receipt
        changed = _entry(n, rng)
        old = index.get(changed.receipt_id)
        changed.version = (old.version + 1) if old is not None else 1
        index.put(changed)
    index.adopt_text(count, text)
    for query_text in QUERIES:
        query = parse_filter(query_text)
        assert index.window(query, 1000)[0] == list(index.ordered(query)), query_text


def _placed(n: int, state: str, work: str | None, server: str, minute: int, version: int) -> Entry:
    return Entry.from_row(
        rid(n),
        server,
        "t",
        f"job {n}",
        work,
        state,
        "fresh",
        "pending",
        f"2026-03-01T11:{minute:02d}:00.000Z",
        None,
        version,
        "2026-03-01T11:00:00.000Z",
    )


def _brute(index: ReceiptIndex, ids: set[str], query: Query) -> list[str]:
    """The display order from scratch (records by their first member), then the filter."""
    entries = [e for i in ids if (e := index.get(i)) is not None]
    records: dict[str, list[Entry]] = {}
    for entry in entries:
        records.setdefault(entry.work_ref, []).append(entry)
    runs = sorted(
        (sorted(m, key=lambda e: e.sort_key) for m in records.values()), key=lambda m: m[0].sort_key
    )
    text = query.text.lower() if query.text else None
    return [e.receipt_id for run in runs for e in run if matches(e, query, text)]


STATES = [s.value for s in LifecycleState]
WORK = [None, None, "W-a", "W-b", "W-c"]


def _ids(entries: list[Entry]) -> list[str]:
    return [e.receipt_id for e in entries]


STATE_QUERIES = [
    "state:failed",
    "state:working",
    "state:input state:failed",
    "state:completed server:srv1",
    "state:working work:W-a",
    "state:cancelled job",
    "work:W-b",
    "server:srv2",
    "",
]

_CHANGE = st.tuples(
    st.integers(0, 25),
    st.sampled_from(STATES),
    st.sampled_from(WORK),
    st.sampled_from(["srv1", "srv2"]),
    st.integers(0, 5),
    st.booleans(),  # remove instead
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_CHANGE, max_size=40), st.lists(_CHANGE, max_size=40))
def test_state_lists_match_a_plain_filter_through_changes(
    start: list[Any], changes: list[Any]
) -> None:
    versions: dict[str, int] = {}

    def made(change: tuple[Any, ...]) -> Entry:
        n, state, work, server, minute, _ = change
        versions[rid(n)] = versions.get(rid(n), 0) + 1
        return _placed(n, state, work, server, minute, versions[rid(n)])

    index = ReceiptIndex([made(c) for c in start], now=NOW)
    for change in [None, *changes]:
        if change is not None and change[5]:
            index.remove(rid(change[0]))
        elif change is not None:
            index.put(made(change))
        for text in STATE_QUERIES:
            query = parse_filter(text)
            expected = _brute(index, set(versions), query)
            for limit in (3, 1000):
                window, more = index.window(query, limit)
                assert _ids(window) == expected[:limit], (text, limit)
                assert more == (len(expected) > limit)


class _Counting(dict[str, Entry]):
    """The index's entries, counting look-ups (what a filter visits)."""

    reads = 0

    def __getitem__(self, key: str) -> Entry:
        self.reads += 1
        return super().__getitem__(key)


def test_a_state_filter_visits_only_that_states_entries() -> None:
    """``state:failed srv3`` (a common text: the order is walked, not ``find``)."""
    working = [_placed(n, "working", None, "srv3", n % 60, 1) for n in range(3000)]
    failed = [_placed(n, "failed", None, "srv3", n % 60, 1) for n in range(3000, 3030)]
    index = ReceiptIndex([*working, *failed], now=NOW)
    counting = _Counting(index._entries)
    index._entries = counting
    window, more = index.window(parse_filter("state:failed srv3"), 10)
    assert _ids(window) == [e.receipt_id for e in sorted(failed, key=lambda e: e.sort_key)][:10]
    assert more and counting.reads == 11  # ten hits and the one that says "more"
    moved = _placed(5, "failed", None, "srv3", 5, 2)  # a working receipt fails
    index.put(moved)
    counting.reads = 0
    window, _ = index.window(parse_filter("state:failed"), 100)
    assert rid(5) in _ids(window) and len(window) == 31 and counting.reads == 31
    window, _ = index.window(parse_filter("state:working"), 5000)
    assert rid(5) not in _ids(window) and len(window) == 2999
