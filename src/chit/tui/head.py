"""The first page before the index: the top of the attention order, read from SQLite.

Reading every receipt's index entry takes seconds with 100,000 receipts on a loaded
machine, and the first paint waited for it. The first page needs only the top of the
display order: :func:`read_head` asks SQLite for it (one pass over the receipts with a
top-N sort on :data:`RANK_SQL`, the index's attention rule in SQL), with the counts by
state (an index-only scan), the inbox's ids, the unreachable servers and the page's full
receipts, all in one read snapshot. The app paints that, then reads the whole index in
a worker; a filter or a second page typed meanwhile waits for the index, and the status
line says so. Only stores of :data:`HEAD_FROM` receipts or more take this path.

No Textual here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chit import clock
from chit.receipts import LifecycleState, Receipt, RetrievalCondition
from chit.store import Store
from chit.store.db import fetch_all, snapshot
from chit.tui.entry import TERMINAL, TROUBLE, Attention, Entry
from chit.tui.loader import read_receipts
from chit.tui.view import NEAR_EXPIRY, NO_WORK

HEAD_FROM = 5000
"""From this many receipts the first load paints :func:`read_head`'s page before the
index is read (below it, reading the index takes less than the extra queries)."""


def _values(values: frozenset[str]) -> str:
    return "(" + ", ".join(f"'{v}'" for v in sorted(values)) + ")"


RANK_SQL = f"""CASE
    WHEN state = '{LifecycleState.INPUT_REQUIRED.value}' THEN {int(Attention.INPUT)}
    WHEN state NOT IN {_values(TERMINAL)} AND expires_at IS NOT NULL
        AND expires_at <= :cutoff THEN {int(Attention.NEAR_EXPIRY)}
    WHEN retrieval IN {_values(TROUBLE)} THEN {int(Attention.TROUBLE)}
    WHEN state IN {_values(TERMINAL)} AND acceptance = 'pending' THEN {int(Attention.UNJUDGED)}
    WHEN state IN {_values(TERMINAL)} THEN {int(Attention.JUDGED)}
    ELSE {int(Attention.WORKING)} END"""
""":attr:`~chit.tui.entry.Entry.rank` in SQL (``:cutoff`` is now + ``NEAR_EXPIRY``);
``tests/tui/test_tui_head.py`` holds the two to the same order."""

TOP_SQL = f"""SELECT receipt_id, coalesce(work_ref, '') AS work, {RANK_SQL} AS rank, accepted_at
FROM receipts ORDER BY rank, accepted_at, receipt_id LIMIT :limit"""
"""The first ``limit`` receipts by attention (ignoring work records), one pass."""

_AFTER = """SELECT receipt_id FROM (
    SELECT receipt_id, {rank} AS rank, accepted_at FROM receipts WHERE {where}
) WHERE (rank, accepted_at, receipt_id) > (:rank, :at, :id)
ORDER BY rank, accepted_at, receipt_id LIMIT :limit"""
RECORD_AFTER_SQL = _AFTER.format(rank=RANK_SQL, where="work_ref = :work")
"""A work record's members after a key (its ``receipts_by_work`` range)."""
LOOSE_AFTER_SQL = _AFTER.format(rank=RANK_SQL, where="(work_ref IS NULL OR work_ref = '')")
"""The receipts of no work record after a key (a pass, as :data:`TOP_SQL`)."""

# Waiting for input is a live state: ``receipts_live`` holds those receipts (store 0012).
INPUTS_SQL = (
    "SELECT receipt_id FROM receipts INDEXED BY receipts_live WHERE active = 1 AND state = ?"
    " ORDER BY receipt_id LIMIT ?"
)
UNREACHABLE_SQL = "SELECT server, receipt_id FROM receipts WHERE active = 1 AND retrieval = ?"


@dataclass(frozen=True)
class Head:
    """The first page and the store-wide figures the first snapshot shows.

    Answers what :meth:`~chit.tui.model.LiveModel.build` asks of an index, for the
    empty filter and the first page only.
    """

    page: tuple[Entry, ...]
    """The first receipts in display order, made from their full receipts."""
    total: int
    state_counts: dict[LifecycleState, int]
    inputs: tuple[str, ...]
    """The first ids waiting for input, in id order (the inbox)."""
    down: dict[str, frozenset[str]]
    """Servers with live receipts that cannot be reached, and those receipts' ids."""
    grouped: frozenset[str]
    """Of the work records asked about, those with receipts."""

    def __len__(self) -> int:
        return self.total

    def __contains__(self, receipt_id: object) -> bool:
        return any(e.receipt_id == receipt_id for e in self.page)

    def get(self, receipt_id: str) -> Entry | None:
        """The page's entry of ``receipt_id``."""
        return next((e for e in self.page if e.receipt_id == receipt_id), None)

    def serves(self, limit: int) -> bool:
        """True when the page holds the first ``limit`` receipts (or every receipt)."""
        return limit <= len(self.page) or len(self.page) == self.total

    def window(self, limit: int) -> tuple[list[Entry], bool]:
        """The first ``limit`` entries (at most the page), and whether more exist."""
        shown = list(self.page[:limit])
        return shown, self.total > len(shown)

    def known(self, entry: Entry) -> bool:
        """Always: the page's entries were made from full receipts."""
        return True

    def first_inputs(self, limit: int) -> list[str]:
        """The first ``limit`` ids waiting for input, in id order."""
        return list(self.inputs[:limit])

    def unreachable(self) -> dict[str, frozenset[str]]:
        """Servers with live receipts that cannot be reached, and those receipts' ids."""
        return dict(self.down)

    def has_group(self, work_ref: str) -> bool:
        """True when ``work_ref`` has receipts (asked about at the read, or on the page)."""
        return work_ref in self.grouped or any(e.work_ref == work_ref for e in self.page)

    def counts(self) -> dict[LifecycleState, int]:
        """How many receipts are in each lifecycle state."""
        return dict(self.state_counts)


def read_head(
    store: Store, limit: int, now: datetime, inbox: int, records: Sequence[str] = ()
) -> tuple[Head, dict[str, Receipt]]:
    """The first ``limit`` receipts in display order and the store-wide figures.

    Args:
        store: the store to read (one read snapshot).
        limit: how many receipts the page holds.
        now: the clock, for the near-expiry group.
        inbox: how many input-required ids the inbox takes.
        records: work records whose having receipts the first snapshot asks.

    Returns:
        The :class:`Head`, and the full receipts of the page, the inbox and one receipt
        of each unreachable server (what the first snapshot shows of them).
    """
    cutoff = clock.iso(now + NEAR_EXPIRY)
    with snapshot(store.db) as db:
        top = fetch_all(db, TOP_SQL, {"cutoff": cutoff, "limit": limit})
        ids = _page(db, top, limit, cutoff)
        counts = store.receipts.counts_by_state()
        inputs = tuple(
            row[0]
            for row in fetch_all(db, INPUTS_SQL, [LifecycleState.INPUT_REQUIRED.value, inbox])
        )
        down: dict[str, set[str]] = {}
        for server, receipt_id in fetch_all(
            db, UNREACHABLE_SQL, [RetrievalCondition.UNREACHABLE.value]
        ):
            down.setdefault(server, set()).add(receipt_id)
        grouped = _grouped(db, records)
        witnesses = [min(found) for found in down.values()]  # the health line's reasons
        receipts = read_receipts(store, [*ids, *inputs, *witnesses])
    page = tuple(Entry.of(receipts[i]) for i in ids if i in receipts)
    head = Head(
        page=page,
        total=sum(counts.values()),
        state_counts=counts,
        inputs=inputs,
        down={server: frozenset(found) for server, found in down.items()},
        grouped=grouped,
    )
    return head, receipts


def _grouped(db: Any, records: Sequence[str]) -> frozenset[str]:
    """Which of ``records`` have receipts (``receipts_by_work``)."""
    if not records:
        return frozenset()
    marks = ", ".join("?" for _ in records)
    sql = f"SELECT DISTINCT work_ref FROM receipts WHERE work_ref IN ({marks})"
    return frozenset(row[0] for row in fetch_all(db, sql, list(records)))


def _page(db: Any, top: list[Any], limit: int, cutoff: str) -> list[str]:
    """The first ``limit`` ids in display order, from the first ``limit`` by attention.

    The display order lists work records by their most urgent member (their head), each
    with all its members. Every record on the first page has its head among the first
    ``limit`` by attention, and so do the members that come before the last of those;
    a record's later members (if the page reaches past them) are read after that key.
    """
    runs: dict[str, list[str]] = {}
    for row in top:
        runs.setdefault(row["work"], []).append(row["receipt_id"])
    if len(top) < limit:  # every receipt is here
        return [i for run in runs.values() for i in run][:limit]
    last = top[-1]
    after = {"rank": last["rank"], "at": last["accepted_at"], "id": last["receipt_id"]}
    ids: list[str] = []
    for work, run in runs.items():  # in the order of their heads
        ids.extend(run)
        if len(ids) >= limit:
            break
        sql = LOOSE_AFTER_SQL if work == NO_WORK else RECORD_AFTER_SQL
        params = {**after, "cutoff": cutoff, "work": work, "limit": limit - len(ids)}
        if work == NO_WORK:
            del params["work"]
        ids.extend(row[0] for row in fetch_all(db, sql, params))
    return ids[:limit]
