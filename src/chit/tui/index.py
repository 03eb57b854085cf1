"""The receipt index: every receipt in a few fields, kept in attention order.

The entries (:mod:`chit.tui.entry`) are kept in the display order
(:mod:`chit.tui.order`: a change moves one entry, a ``state:`` filter visits only that
state's entries) with their joined text (:mod:`chit.tui.text`), the counts by state, the
inbox and the unreachable servers. The ``/`` filter walks that order and stops at the
first page of matches, so a keystroke never reads SQLite.

No Textual here; the app owns one index and changes it on the UI thread only.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Iterator
from datetime import datetime

from chit import clock
from chit.receipts import LifecycleState, RetrievalCondition
from chit.tui.entry import TERMINAL, Attention, Entry, Extras, matches
from chit.tui.order import AttentionOrder
from chit.tui.text import JoinedText
from chit.tui.view import NEAR_EXPIRY, Query

__all__ = ["SPARSE", "Attention", "Entry", "Extras", "ReceiptIndex"]

SPARSE = 2000
"""Up to about this many hits of a free text (estimated from a sample), the hits are found
with ``str.find`` and sorted; above it the display order is walked (it stops at the first
page, which comes soon when matches are that dense)."""


class ReceiptIndex:
    """Every receipt's entry, ordered by work record and attention; see the module doc."""

    def __init__(self, entries: Iterable[Entry] = (), now: datetime | None = None) -> None:
        self._entries: dict[str, Entry] = {}
        self._expiring: list[tuple[str, str]] = []
        self._counts: dict[str, int] = {s.value: 0 for s in LifecycleState}
        self._inputs: set[str] = set()
        self._inputs_sorted: list[str] | None = None
        self._unreachable: dict[str, set[str]] = {}
        self._cutoff = clock.iso((now or clock.now()) + NEAR_EXPIRY)
        self._filled = False
        self._text = JoinedText()
        for entry in entries:
            self._entries[entry.receipt_id] = entry
            self._text.add(entry.receipt_id, entry.hay)
            self._mark_near(entry, None)
            self._count(entry, 1)
        self._order = AttentionOrder(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def filled(self) -> bool:
        """True once :meth:`fill` gave every entry what the table shows."""
        return self._filled

    def fill(self, extras: Iterable[Extras]) -> None:
        """Complete the entries read from the store's columns with what the table shows.

        ``extras`` lists only the entries whose fields differ from the defaults (read in
        the background after the first paint); an entry changed since that read (another
        version, or made from a full receipt) keeps what it has.
        """
        entries = self._entries
        for receipt_id, version, stale_after, message, error, decided_by in extras:
            entry = entries.get(receipt_id)
            if entry is None or entry.known or entry.version > version:
                continue
            entry.stale_after = stale_after
            entry.status_message = message
            entry.error = bool(error)
            entry.by_check = decided_by not in (None, "user")
        self._filled = True

    def prejoin_text(self) -> tuple[int, str]:
        """For a worker: the free-text search's joined text, made off the UI thread.

        Joining 100,000 entries' text takes ~90 ms: made here, the first text query
        after the start does not pay it (:meth:`adopt_text` takes it on the UI thread).
        """
        return self._text.prejoin()

    def adopt_text(self, count: int, text: str) -> None:
        """Take what :meth:`prejoin_text` made (ignored if the text was joined meanwhile)."""
        self._text.adopt(count, text)

    def known(self, entry: Entry) -> bool:
        """True when ``entry`` has every field the table shows."""
        return entry.known or self._filled

    def __contains__(self, receipt_id: object) -> bool:
        return receipt_id in self._entries

    def has_group(self, work_ref: str) -> bool:
        """True when ``work_ref`` has at least one receipt."""
        return self._order.has_group(work_ref)

    def get(self, receipt_id: str) -> Entry | None:
        """The entry of ``receipt_id``, if indexed."""
        return self._entries.get(receipt_id)

    def counts(self) -> dict[LifecycleState, int]:
        """How many receipts are in each lifecycle state (kept as entries change)."""
        return {LifecycleState(state): n for state, n in self._counts.items()}

    @property
    def inputs(self) -> frozenset[str]:
        """The ids of receipts waiting for input (the inbox)."""
        return frozenset(self._inputs)

    def first_inputs(self, limit: int) -> list[str]:
        """The first ``limit`` ids waiting for input, in id order (sorted once per change:
        with 20,000 of them, sorting on every snapshot was most of a keystroke's build)."""
        if self._inputs_sorted is None:
            self._inputs_sorted = sorted(self._inputs)
        return self._inputs_sorted[:limit]

    def unreachable(self) -> dict[str, frozenset[str]]:
        """Servers with live receipts that cannot be reached, and those receipts' ids."""
        return {server: frozenset(ids) for server, ids in self._unreachable.items() if ids}

    def _count(self, entry: Entry, delta: int) -> None:
        self._counts[entry.state] = self._counts.get(entry.state, 0) + delta
        if entry.state == LifecycleState.INPUT_REQUIRED.value:
            self._inputs_sorted = None
            if delta > 0:
                self._inputs.add(entry.receipt_id)
            else:
                self._inputs.discard(entry.receipt_id)
        if entry.retrieval == RetrievalCondition.UNREACHABLE.value and entry.state not in TERMINAL:
            ids = self._unreachable.setdefault(entry.server, set())
            if delta > 0:
                ids.add(entry.receipt_id)
            else:
                ids.discard(entry.receipt_id)

    # ------------------------------------------------------------------ changes
    def put(self, entry: Entry) -> bool:
        """Add or replace an entry (an older version than the indexed one is ignored).

        Returns:
            True when the entry's place in the order changed.
        """
        old = self._entries.get(entry.receipt_id)
        if old is not None and old.version > entry.version:
            return False
        if old is None or old.hay != entry.hay:
            self._add_text(entry)
        self._mark_near(entry, old)
        if old is not None:
            self._count(old, -1)
        self._count(entry, 1)
        moved = old is None or old.sort_key != entry.sort_key or old.work_ref != entry.work_ref
        # A new state in the same place (failed → cancelled, both unjudged) still moves
        # the entry between the per-state lists.
        replace = moved or (old is not None and old.state != entry.state)
        if replace and old is not None:
            self._order.unplace(old)
        self._entries[entry.receipt_id] = entry
        if replace:
            self._order.place(entry)
        return moved

    def remove(self, receipt_id: str) -> bool:
        """Drop a receipt (deleted from the store); True when it was indexed."""
        old = self._entries.pop(receipt_id, None)
        if old is None:
            return False
        self._count(old, -1)
        self._order.unplace(old)
        return True

    def advance(self, now: datetime) -> list[str]:
        """Move the clock: live receipts that came near their TTL change group.

        Returns:
            The ids that moved (cheap: a heap pops only what crossed the line).
        """
        self._cutoff = clock.iso(now + NEAR_EXPIRY)
        moved: list[str] = []
        while self._expiring and self._expiring[0][0] <= self._cutoff:
            expires_at, receipt_id = heapq.heappop(self._expiring)
            entry = self._entries.get(receipt_id)
            if entry is None or entry.near or entry.expires_at != expires_at:
                continue  # gone, already near, or re-indexed with another TTL (own item)
            if entry.state in TERMINAL:
                continue
            self._order.unplace(entry)
            entry.near = True
            self._order.place(entry)
            moved.append(receipt_id)
        return moved

    def _mark_near(self, entry: Entry, old: Entry | None) -> None:
        live = entry.state not in TERMINAL
        entry.near = live and entry.expires_at is not None and entry.expires_at <= self._cutoff
        # One heap item per TTL value: a receipt re-indexed on every poll adds none.
        fresh_ttl = old is None or old.expires_at != entry.expires_at
        if live and entry.expires_at is not None and not entry.near and fresh_ttl:
            heapq.heappush(self._expiring, (entry.expires_at, entry.receipt_id))

    # ------------------------------------------------------------------ reading
    def ordered(self, query: Query | None = None) -> Iterator[Entry]:
        """Entries in display order (work records by their most urgent member), filtered."""
        text = query.text.lower() if query is not None and query.text else None
        selective = query is not None and not query.is_empty
        for run in self._order.runs(None, None):
            for _, _, receipt_id in run:
                entry = self._entries[receipt_id]
                if not selective or matches(entry, query, text):  # type: ignore[arg-type]
                    yield entry

    def _add_text(self, entry: Entry) -> None:
        if len(self._text.ids) > 2 * len(self._entries) + 1000:  # mostly old texts: rebuild
            self._text = JoinedText()
            for e in self._entries.values():
                self._text.add(e.receipt_id, e.hay)
        self._text.add(entry.receipt_id, entry.hay)

    def _sparse(self, text: str) -> bool:
        """Few entries hold ``text``: a count over a sixteenth of the joined text says."""
        joined = self._text.joined()
        return joined.count(text, 0, len(joined) // 16 + len(text)) * 16 <= SPARSE

    def _text_window(self, query: Query, text: str, limit: int) -> tuple[list[Entry], bool]:
        """:meth:`window` for a query with free text that few entries hold."""
        states = frozenset(s.value for s in query.states) if query.states else None
        server, work = query.server, query.work_ref
        joined = self._text.joined()
        starts, ids, entries = self._text.starts, self._text.ids, self._entries
        found: dict[str, Entry] = {}
        at = joined.find(text)
        while at >= 0:
            i = bisect.bisect_right(starts, at) - 1
            entry = entries.get(ids[i])
            if (
                entry is not None
                and entry.receipt_id not in found
                and text in entry.hay  # its current text (this one may be an old one)
                and (states is None or entry.state in states)
                and (server is None or entry.server == server)
                and (work is None or entry.work_ref == work)
            ):
                found[entry.receipt_id] = entry
            at = joined.find(text, starts[i + 1]) if i + 1 < len(starts) else -1
        ordered = sorted(found.values(), key=self._order.position)
        return ordered[:limit], len(ordered) > limit

    def window(self, query: Query, limit: int) -> tuple[list[Entry], bool]:
        """The first ``limit`` matching entries, and whether more match.

        The filter's hot loop (a keystroke with 100,000 receipts may walk all of them):
        the query's parts are resolved once and tested inline, cheapest first, with no
        generator or call per entry (half the time of :meth:`ordered`). A ``state:``
        or ``work:`` filter walks only that state's (that record's) entries.
        """
        text = query.text.lower() if query.text else None
        if text is not None and self._sparse(text):
            return self._text_window(query, text, limit)
        states = frozenset(s.value for s in query.states) if query.states else None
        server = query.server
        entries = self._entries
        found: list[Entry] = []
        for run in self._order.runs(states, query.work_ref):
            for member in run:
                entry = entries[member[2]]
                if server is not None and entry.server != server:
                    continue
                if text is not None and text not in entry.hay:
                    continue
                if len(found) == limit:
                    return found, True
                found.append(entry)
        return found, False
