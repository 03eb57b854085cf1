"""The TUI's live model of one home: the index, the receipts on screen, work records.

Loaded once from the store, then kept true by engine events (a changed receipt arrives
whole) and by a cheap check for what other processes wrote; never re-read on a timer.
A large store shows its first page (:class:`~chit.tui.head.Head`) while the index is
read; changes that arrive meanwhile are kept and applied to the index when it comes.
:meth:`LiveModel.build` turns it into the frozen :class:`~chit.tui.view.Snapshot` the
screens render, and says which receipts or records it still has to read first.

No Textual here; the app changes the model on the UI thread only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from chit import clock
from chit.receipts import Receipt
from chit.store import WorkRecord
from chit.tui.head import Head
from chit.tui.health import ServerHealth, words
from chit.tui.index import Entry, ReceiptIndex
from chit.tui.loader import Marks, RecordInfo
from chit.tui.view import INBOX_LIMIT, NO_WORK, Group, Prompt, Query, Question, Row, Snapshot


@dataclass(frozen=True)
class Need:
    """What :meth:`LiveModel.build` could not show without reading the store."""

    receipts: frozenset[str] = frozenset()
    records: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.receipts or self.records)


@dataclass
class LiveModel:
    """See the module docstring."""

    index: ReceiptIndex | None = None
    head: Head | None = None
    """The first page, shown until the index is read (large stores only)."""
    receipts: dict[str, Receipt] = field(default_factory=dict)
    records: dict[str, RecordInfo] = field(default_factory=dict)
    open_records: tuple[WorkRecord, ...] = ()
    questions: tuple[Question, ...] = ()
    marks: Marks = field(default_factory=lambda: Marks(None, None))
    _early: list[Receipt] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        """True once the first load arrived (the first page, or the whole index)."""
        return self.index is not None or self.head is not None

    @property
    def complete(self) -> bool:
        """True once the whole index is read (filters and later pages need it)."""
        return self.index is not None

    def entry(self, receipt_id: str) -> Entry | None:
        """The index's (or the first page's) entry of ``receipt_id``."""
        view = self.index if self.index is not None else self.head
        return view.get(receipt_id) if view is not None else None

    # ------------------------------------------------------------------ changes
    def adopt(self, index: ReceiptIndex, marks: Marks) -> None:
        """Take the index; changes that arrived meanwhile are applied on top."""
        self.index, self.marks, self.head = index, marks, None
        early, self._early = self._early, []
        for receipt in early:
            self.apply(receipt)

    def apply(self, receipt: Receipt) -> bool:
        """A receipt as committed (an event, or found by the store check).

        Returns:
            True when the view may have changed (an older version changes nothing).
        """
        if self.index is None:
            self._early.append(receipt)
            return self._on_head(receipt)
        entry = self.index.get(receipt.receipt_id)
        if entry is not None and entry.version > receipt.version:
            return False
        cached = self.receipts.get(receipt.receipt_id)
        indexed = entry is not None and entry.version >= receipt.version
        if indexed and cached is not None and cached.version >= receipt.version:
            return False  # seen already (the cache alone can be ahead: a first-page row)
        self.index.put(Entry.of(receipt))
        self.receipts[receipt.receipt_id] = receipt
        self._mark(receipt)
        return True

    def _on_head(self, receipt: Receipt) -> bool:
        """A change before the index: a row on the first page shows it (its place waits)."""
        self._mark(receipt)
        if self.head is None or receipt.receipt_id not in self.head:
            return False
        cached = self.receipts.get(receipt.receipt_id)
        if cached is not None and cached.version >= receipt.version:
            return False
        self.receipts[receipt.receipt_id] = receipt
        return True

    def _mark(self, receipt: Receipt) -> None:
        status = clock.iso(receipt.status_at)
        if self.marks.status_at is None or status > self.marks.status_at:
            # The check for other writers starts after what events already brought.
            self.marks = Marks(status, self.marks.work)

    def forget(self, receipt_id: str) -> bool:
        """A receipt that no longer exists."""
        self.receipts.pop(receipt_id, None)
        return self.index is not None and self.index.remove(receipt_id)

    def merge(self, receipts: dict[str, Receipt], records: dict[str, RecordInfo]) -> None:
        """Receipts and records read for :class:`Need` (older copies never win)."""
        for receipt_id, receipt in receipts.items():
            cached = self.receipts.get(receipt_id)
            if cached is None or cached.version <= receipt.version:
                self.receipts[receipt_id] = receipt
        self.records.update(records)

    # ------------------------------------------------------------------ reading
    def build(self, query: Query, limit: int, now: datetime) -> tuple[Snapshot, Need]:
        """The view of the first ``limit`` matching receipts at ``now``.

        Rows come from the index (no receipt read) once it is filled; before that, from
        the full receipts, and those still missing are the :class:`Need`. Before the
        index, the first page (:class:`Head`) serves the empty filter's first page; a
        filter, or a page past it, shows what it can and says it waits (``indexing``).
        """
        index: ReceiptIndex | Head
        indexing = False
        if self.index is not None:
            index = self.index
            window, more = index.window(query, limit)
        elif self.head is not None:
            index = self.head
            indexing = not (query.is_empty and index.serves(limit))
            window, more = index.window(limit) if query.is_empty else ([], False)
            more = more and not indexing  # no further page is asked for until the index
        else:
            return Snapshot(now=now, query=query), Need()
        rows: dict[str, Row] = {}
        missing: set[str] = set()
        for entry in window:
            newer = self.receipts.get(entry.receipt_id) if self.index is None else None
            if newer is not None and newer.version > entry.version:  # changed meanwhile
                rows[entry.receipt_id] = Row.of(newer)
            elif index.known(entry):
                rows[entry.receipt_id] = entry.to_row()
            elif (receipt := self.receipts.get(entry.receipt_id)) is not None:
                rows[entry.receipt_id] = Row.of(receipt)
            else:
                missing.add(entry.receipt_id)
        inputs = index.first_inputs(INBOX_LIMIT)
        unreachable = index.unreachable()
        witnesses = {server: min(ids) for server, ids in unreachable.items()}
        full = inputs + sorted(witnesses.values())
        missing.update(i for i in full if i not in self.receipts)
        keys = list(dict.fromkeys(e.work_ref for e in window))
        extra = (
            [r.id for r in self.open_records if not index.has_group(r.id)] if query.is_empty else []
        )
        missing_records = frozenset(
            k for k in [*keys, *extra] if k != NO_WORK and k not in self.records
        )
        need = Need(frozenset(missing), missing_records)
        groups = self._groups(window, rows, keys, extra)
        self._trim([*rows, *full])
        prompts = sorted(
            (Prompt(r, q) for i in inputs if (r := self.receipts.get(i)) for q in r.pending_inputs),
            key=lambda p: (p.request.received_at, p.receipt.receipt_id),
        )
        health = tuple(
            ServerHealth(server, len(unreachable[server]), words(self._reason(witness)))
            for server, witness in sorted(witnesses.items())
        )
        snapshot = Snapshot(
            now=now,
            query=query,
            groups=groups,
            counts=index.counts(),
            total=len(index),
            prompts=tuple(prompts),
            questions=self.questions,
            more=more,
            loaded=len(window),
            health=health,
            indexing=indexing,
        )
        return snapshot, need

    def _reason(self, receipt_id: str) -> str | None:
        receipt = self.receipts.get(receipt_id)
        return receipt.retrieval_error if receipt is not None else None

    def _groups(
        self, window: list[Entry], rows: dict[str, Row], keys: list[str], extra: list[str]
    ) -> tuple[Group, ...]:
        members: dict[str, list[Row]] = {k: [] for k in keys}
        for entry in window:
            row = rows.get(entry.receipt_id)
            if row is not None:
                members[entry.work_ref].append(row)
        groups = [self._group(k, tuple(members[k])) for k in keys]
        groups += [self._group(k, ()) for k in extra]
        return tuple(g for g in groups if g.rows or g.record is not None)

    def _group(self, key: str, receipts: tuple[Row, ...]) -> Group:
        info = self.records.get(key) if key != NO_WORK else None
        record = info.record if info is not None else None
        notes = info.notes if info is not None else ()
        return Group(key, record, notes, receipts)

    def _trim(self, keep: Iterable[str]) -> None:
        """Forget receipts far from the screen (the index still has their entries)."""
        keep = set(keep)
        if len(self.receipts) > 4 * max(len(keep), 100):
            self.receipts = {k: v for k, v in self.receipts.items() if k in keep}
