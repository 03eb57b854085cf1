"""Write-behind for checks that saw nothing new but freshness.

A check whose reply changed only ``FRESHNESS`` (``status_at``, ``next_check_at``,
``stale_after``) and the timeline's repeat count needs no commit of its own: losing it
in a crash only makes the receipt look a few seconds older, and due at once after a
restart (where every live receipt is checked anyway). Such a check is kept in memory
(:class:`WriteBehind`): the receipt as the checks see it — the stored version, the newer
freshness — and its observations, folded into repeats. They are written together, many
receipts per transaction, once the oldest has waited :data:`WRITE_BEHIND_S`; a receipt's
pending freshness also goes with its next real change (``PendingWrite.carried``), and
everything is written at shutdown. A freshness write that finds the version moved
(someone else wrote) is dropped: the other write is newer than anything it held.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from chit.receipts import Observation, Receipt, is_news
from chit.store import Store, immediate
from chit.store.db import write
from chit.store.observation_repo import append_repeated
from chit.store.receipt_rows import FRESHEN, freshen_params

log = logging.getLogger("chit.reconcile")

WRITE_BEHIND_S = 5.0
"""Longest a check that saw nothing new waits in memory before it is written. The stored
``status_at`` then lags the newest poll by at most this plus the loop's tick (1 s) and a
commit; ``stale_after`` is at least 15 s (``STALE_FLOOR_MS``) and three poll intervals
past ``status_at``, so no reader of the store sees a receipt polled on time as stale."""

FLUSH_CHUNK = 64
"""Receipts per write-behind transaction: a batch of real changes waiting for the worker
connection waits for one chunk (a few ms), not for every receipt held."""


@dataclass(eq=False)
class Behind:
    """One receipt's checks not written yet.

    Attributes:
        receipt: the receipt as the checks see it — the stored version, newer freshness.
        rows: ``[observation, repeats beyond it, last repeat's time]``, oldest first: the
            timeline rows the checks would have written, repeats counted, not listed.
        since: monotonic time of the oldest check held.
    """

    receipt: Receipt
    rows: list[list[Any]] = field(default_factory=list)
    since: float = 0.0

    def add(self, observations: Sequence[Observation]) -> None:
        """Hold ``observations``: a repeat of the row before it (what the store would fold
        into that row, ``observation_repo``) is counted on it."""
        for obs in observations:
            last = self.rows[-1] if self.rows else None
            if (
                last is not None
                and not is_news(obs)
                and last[0].kind == obs.kind
                and last[0].status == obs.status
                and last[0].message == obs.message
            ):
                last[1] += 1
                last[2] = obs.at
            else:
                self.rows.append([obs, 0, None])


def write_rows(store: Store, rows: Sequence[list[Any]]) -> None:
    """Append held timeline rows inside the caller's transaction (repeats in one step)."""
    for obs, extra, last_at in rows:
        append_repeated(store.db, obs, extra, last_at)


def write_chunk(entries: Sequence[Behind], store: Store) -> list[Receipt | None]:
    """Write held freshness in one transaction; per entry, the stored receipt (the next
    version) or None when someone else wrote it meanwhile (dropped: theirs is newer)."""
    stored: list[Receipt | None] = []
    with immediate(store.db):
        for entry in entries:
            held = entry.receipt
            doc = held.model_copy(update={"version": held.version + 1})
            if write(store.db, FRESHEN, freshen_params(doc, held.version)).rowcount != 1:
                stored.append(None)
                continue
            write_rows(store, entry.rows)
            stored.append(doc)
    return stored


class WriteBehind:
    """The checks held in memory, by receipt id (see the module docstring)."""

    def __init__(self, interval_s: float = WRITE_BEHIND_S) -> None:
        """Hold checks up to ``interval_s`` (monotonic seconds) before writing them."""
        self.interval_s = interval_s
        self.pending: dict[str, Behind] = {}  # insertion order: the oldest first
        # rid → the version a flush wrote, until that receipt's next held check: a check
        # that read the copy from before the flush is moved onto it (``hold``).
        self.flushed: dict[str, int] = {}
        self.flushing = False
        self.held = 0  # checks held (not committed on their own)
        self.written = 0  # receipts written by flushes
        self.dropped = 0  # held freshness found overtaken by another write

    def __len__(self) -> int:
        return len(self.pending)

    def hold(
        self,
        base: Receipt,
        after: Receipt,
        observations: Sequence[Observation],
        now: float,
        update: dict[str, Any] | None = None,
    ) -> Receipt:
        """Hold a check of ``base`` that folded to ``after`` (freshness only), with
        ``update`` (its jittered next check) applied; return the receipt as the checks
        now see it (``base``'s stored version)."""
        rid = base.receipt_id
        version = base.version
        moved = self.flushed.pop(rid, None)
        if moved == version + 1:  # read before our own flush wrote it: on top of that
            version = moved
        kept = after.model_copy(update={**(update or {}), "version": version})
        entry = self.pending.get(rid)
        if entry is None:
            entry = self.pending[rid] = Behind(kept, since=now)
        else:
            entry.receipt = kept  # a version moved by someone else: the flush will miss
        entry.add(observations)
        self.held += 1
        return kept

    def take(self, receipt_id: str) -> Behind | None:
        """Remove and return ``receipt_id``'s held checks (a real change writes them)."""
        self.flushed.pop(receipt_id, None)
        return self.pending.pop(receipt_id, None)

    def ahead(self, receipt_id: str) -> Receipt | None:
        """The held copy of ``receipt_id`` (its next check is newer than the store's)."""
        entry = self.pending.get(receipt_id)
        return entry.receipt if entry is not None else None

    def due_at(self) -> float | None:
        """When the oldest held check must be written (monotonic), None when none is."""
        for entry in self.pending.values():
            return entry.since + self.interval_s
        return None

    def chunk(self, size: int = FLUSH_CHUNK) -> list[Behind]:
        """Remove and return up to ``size`` held receipts, the oldest first."""
        taken: list[Behind] = []
        for rid in list(self.pending)[:size]:
            taken.append(self.pending.pop(rid))
        return taken

    def landed(self, entry: Behind, stored: Receipt | None) -> Receipt | None:
        """After a flush committed: the receipt the checks should now hold, if any.

        A check held for the same receipt while the flush ran was folded on the version
        before it: it moves onto the stored one.
        """
        if stored is None:
            self.dropped += 1
            return None
        self.written += 1
        rid = stored.receipt_id
        newer = self.pending.get(rid)
        if newer is not None and newer.receipt.version == entry.receipt.version:
            newer.receipt = newer.receipt.model_copy(update={"version": stored.version})
            return newer.receipt
        if newer is None:
            self.flushed[rid] = stored.version
        return stored


__all__ = ["FLUSH_CHUNK", "WRITE_BEHIND_S", "Behind", "WriteBehind", "write_chunk", "write_rows"]
