"""Which b-trees a receipt write touches, and which index each listing query reads.

Store 0012 lists ended receipts from ``receipts_ended`` and live ones from
``receipts_live``, so a new (live) receipt is written to four b-trees: the table, its
id's index, ``receipts_live`` and the timeline. With ``synchronous=FULL`` each is about
one 4 KiB page synced per commit (docs/performance.md, "Write path, 2026-12-02 13:15").
These tests fail when an index is added to ``receipts`` or a write reaches one more tree,
and when a listing query stops reading the index meant for it.
"""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from chit import clock
from chit.home import Home
from chit.receipts import LifecycleState, Receipt
from chit.store import Store
from chit.store.db import connect, fetch_all, immediate
from chit.store.migrations import SCHEMA_VERSION, migrations
from chit.tui.head import INPUTS_SQL
from tests.store_support import T0, make_obs, make_receipt

BLOB, FP = b"\x01sealed-bytes", "fp0123456789"
LIVE = [LifecycleState.WORKING, LifecycleState.INPUT_REQUIRED]
ENDED = [LifecycleState.COMPLETED, LifecycleState.FAILED, LifecycleState.CANCELLED]
# Page 1 is rewritten when the file grows, the pointer map with each new page
# (auto_vacuum): both come with growth, as in any table.
_GROWTH = {"sqlite_schema", "(pointer map)"}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(Home(tmp_path / "home")) as opened:
        yield opened


def _trees_per_commit(store: Store, write: list[object]) -> list[set[str]]:
    """Run each write as its own commit; return the b-trees each commit wrote to."""
    conn = store.db.conn
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    for step in write:
        step()  # type: ignore[operator]
    data = Path(f"{store.path}-wal").read_bytes()
    page_size = struct.unpack(">I", data[8:12])[0]
    owner = {int(page): str(name) for name, page in conn.execute("SELECT name, pageno FROM dbstat")}
    commits: list[set[str]] = [set()]
    offset = 32
    while offset + 24 <= len(data):
        page, db_size = struct.unpack(">II", data[offset : offset + 8])
        commits[-1].add(owner.get(page, "(pointer map)"))
        if db_size:
            commits.append(set())
        offset += 24 + page_size
    conn.execute("PRAGMA wal_autocheckpoint=1000")
    return [trees - _GROWTH for trees in commits[:-1]]


def _insert(store: Store, i: int, state: LifecycleState) -> object:
    r = make_receipt(
        f"r{i:05d}",
        request_key=f"r{i:05d}",  # as chit makes them (0009): no request-key entry
        state=state,
        server=f"srv{i % 3}",
        status_at=T0 + timedelta(seconds=i),
        next_check_at=T0 + timedelta(seconds=i + 5),
    )
    return lambda: store.receipts.insert(r, BLOB, FP, [make_obs(r.receipt_id)])


def test_the_receipt_indexes_are_the_ones_counted_here(store: Store) -> None:
    """A new index on ``receipts`` is one more page in every write it covers: add it here
    only with its figures in docs/performance.md."""
    rows = store.db.conn.execute("PRAGMA index_list(receipts)").fetchall()
    assert {(str(r[1]), bool(r[4])) for r in rows} == {
        ("sqlite_autoindex_receipts_1", False),
        ("receipts_live", True),
        ("receipts_ended", True),
        ("receipts_unretrieved", True),
        ("receipts_by_work", True),
        ("receipts_by_request_key", True),
    }


def test_a_new_live_receipt_writes_four_btrees(store: Store) -> None:
    for i in range(60):  # past the first pages
        _insert(store, i, LIVE[i % 2])()
    commits = _trees_per_commit(store, [_insert(store, 100 + i, LIVE[i % 2]) for i in range(40)])
    four = {"receipts", "sqlite_autoindex_receipts_1", "receipts_live", "observations"}
    assert all(trees <= four for trees in commits), commits
    assert set().union(*commits) == four


def test_an_ended_receipt_enters_the_listing_index(store: Store) -> None:
    commits = _trees_per_commit(store, [_insert(store, i, ENDED[i % 3]) for i in range(30)])
    ended = {"receipts", "sqlite_autoindex_receipts_1", "receipts_ended", "observations"}
    assert all(ended <= trees <= ended | {"receipts_unretrieved"} for trees in commits), commits
    # A cancelled receipt's result is never fetched: it stays out of the reconciler's index.
    assert all("receipts_unretrieved" not in trees for trees in commits[2::3]), commits


def _plans(store: Store, call: object) -> list[str]:
    """The query plan of each statement ``call`` runs on the store's connection."""
    seen: list[str] = []
    conn = store.db.conn
    conn.set_trace_callback(seen.append)
    try:
        call()  # type: ignore[operator]
    finally:
        conn.set_trace_callback(None)
    plain = sqlite3.connect(store.path)
    try:
        return [
            " | ".join(str(row[3]) for row in plain.execute(f"EXPLAIN QUERY PLAN {sql}"))
            for sql in seen
            if sql.lstrip().upper().startswith("SELECT")
        ]
    finally:
        plain.close()


def test_every_listing_reads_its_partial_index(store: Store) -> None:
    for i in range(100):
        _insert(store, i, (LIVE + ENDED)[i % 5])()
    page = store.receipts.list(limit=5)
    assert page.next_cursor is not None
    lists = {
        "all": lambda: store.receipts.list(limit=5),
        "deep": lambda: store.receipts.list(limit=5, after=page.next_cursor),
        "ended": lambda: store.receipts.list(state=ENDED, limit=5),
        "one ended": lambda: store.receipts.list(state=LifecycleState.FAILED, server="srv1"),
        "live": lambda: store.receipts.list(state=LifecycleState.WORKING, limit=5),
        "mixed": lambda: store.receipts.list(state=[LIVE[0], ENDED[0]], limit=5),
        "newest": store.receipts.newest_status_at,
        "since": lambda: store.receipts.observed_since(page.items[-1].status_at),
        "counts": store.receipts.counts_by_state,
        "inbox": lambda: fetch_all(store.db, INPUTS_SQL, [LIVE[1].value, 5]),
    }
    for name, call in lists.items():
        plans = _plans(store, call)
        assert plans, name
        for plan in plans:
            # Neither a walk of the table nor of the id's index in place of a range.
            assert "SCAN receipts |" not in f"{plan} |", (name, plan)
            assert "SCAN receipts USING INDEX sqlite_autoindex" not in plan, (name, plan)
        joined = " ".join(plans)
        if name in ("all", "deep", "ended", "one ended", "mixed", "newest", "since", "counts"):
            assert "INDEX receipts_ended" in joined, (name, joined)
        if name in ("all", "deep", "mixed", "newest", "since", "counts"):  # entries only
            assert "COVERING INDEX receipts_ended" in joined, (name, joined)
        if name in ("all", "deep", "live", "mixed", "newest", "since", "counts", "inbox"):
            assert "INDEX receipts_live" in joined, (name, joined)
        if name in ("all", "deep", "live", "mixed", "newest", "since", "counts", "inbox"):
            assert "COVERING INDEX receipts_live" in joined, (name, joined)
        if name == "counts":
            assert "TEMP B-TREE" not in joined, joined
        if name in ("ended", "one ended"):  # a range already in page order: no sort
            assert "TEMP B-TREE" not in joined and "receipts_live" not in joined, (name, joined)


def test_pages_merge_live_and_ended_receipts_in_status_order(store: Store) -> None:
    """The same pages as one ordered list of every receipt, through every cursor."""
    made = []
    for i in range(120):
        state = (LIVE + ENDED)[(i * 7) % 5]
        r = make_receipt(
            f"r{i:05d}", state=state, server=f"srv{i % 3}", status_at=T0 + timedelta(seconds=i % 17)
        )
        store.receipts.insert(r, BLOB, FP, [make_obs(r.receipt_id)])
        made.append(r)
    for states, server in (
        (None, None), (LIVE, None), (ENDED, "srv2"), ([LIVE[1], ENDED[2]], None),
        ([LIVE[0]], "srv0"),
    ):  # fmt: skip
        want = sorted(
            (r for r in made if (states is None or r.state in states)
             and (server is None or r.server == server)),
            key=lambda r: (r.status_at, r.receipt_id),
            reverse=True,
        )  # fmt: skip
        got, after = [], None
        while True:
            page = store.receipts.list(state=states, server=server, limit=7, after=after)
            got.extend(page.items)
            after = page.next_cursor
            if after is None:
                break
        assert [r.receipt_id for r in got] == [r.receipt_id for r in want], (states, server)
    assert store.receipts.newest_status_at() == clock.iso(max(r.status_at for r in made))
    counts = store.receipts.counts_by_state()
    assert counts == {s: sum(r.state == s for r in made) for s in LifecycleState}


def _expected_pages(made: list[Receipt], states: list[LifecycleState] | None) -> list[str]:
    keep = [r for r in made if r.server == "srv1" and (states is None or r.state in states)]
    keep.sort(key=lambda r: (r.status_at, r.receipt_id), reverse=True)
    return [r.receipt_id for r in keep]


def test_a_schema_11_file_migrates_and_lists_the_same_receipts(tmp_path: Path) -> None:
    """0012 only swaps an index: every row of a schema-11 file stays, and its pages,
    counts and marks are what its receipts say (the old queries need the old index)."""
    path = tmp_path / "chit.db"
    db = connect(path)
    with immediate(db):
        migrations.apply(db, stop_before="0012_listing_ended_only")
    old = Store(db, path, 11)
    made = []
    for i in range(90):
        r = make_receipt(
            f"r{i:05d}",
            request_key=f"r{i:05d}" if i % 4 else f"rk{i}",  # old- and new-style keys
            state=(LIVE + ENDED)[(i * 3) % 5],
            server=f"srv{i % 3}",
            status_at=T0 + timedelta(seconds=i % 13),
        )
        old.receipts.insert(r, BLOB, FP, [make_obs(r.receipt_id)])
        made.append(r)
    rows = db.conn.execute("SELECT * FROM receipts ORDER BY change_seq").fetchall()
    assert db.conn.execute("PRAGMA user_version").fetchone()[0] == 11
    db.close()
    with Store.open_path(path) as migrated:
        assert migrated.schema_version == SCHEMA_VERSION == 12
        conn = migrated.db.conn
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert "receipts_by_state" not in names and "receipts_ended" in names
        assert conn.execute("SELECT * FROM receipts ORDER BY change_seq").fetchall() == rows
        for states in (None, LIVE, ENDED, [LIVE[0], ENDED[1]]):
            got, after = [], None
            while True:
                page = migrated.receipts.list(state=states, server="srv1", limit=4, after=after)
                got.extend(r.receipt_id for r in page.items)
                if (after := page.next_cursor) is None:
                    break
            assert got == _expected_pages(made, states), states
        counts = migrated.receipts.counts_by_state()
        assert counts == {s: sum(r.state == s for r in made) for s in LifecycleState}
        assert migrated.receipts.newest_status_at() == clock.iso(max(r.status_at for r in made))
        since = migrated.receipts.observed_since(None)
        assert [r.receipt_id for r in since] == [
            r.receipt_id for r in sorted(made, key=lambda r: (r.status_at, r.receipt_id))
        ]
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
