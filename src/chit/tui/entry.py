"""One receipt as the index sees it: a few fields, its attention group, its table row.

An :class:`Entry` is made from the store's projection columns (no JSON parsed) when the
index is read, or from a full receipt (an engine event, the first page). No Textual here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from chit import clock
from chit.receipts import (
    AcceptanceState,
    LifecycleState,
    Receipt,
    RetrievalCondition,
)
from chit.tui.view import NO_WORK, Query, Row, completed_with_error, verdict_of


class Attention(IntEnum):
    """What a receipt asks of the person, most urgent first."""

    INPUT = 0
    """A prompt waits for an answer."""
    NEAR_EXPIRY = 1
    """A live task comes to the end of its TTL soon."""
    TROUBLE = 2
    """The server is unreachable, or the task vanished, expired or is incompatible."""
    UNJUDGED = 3
    """The task ended and nobody has judged its outcome."""
    WORKING = 4
    """Running; nothing to do."""
    JUDGED = 5
    """Ended and judged: history."""


TROUBLE: frozenset[str] = frozenset(
    c.value
    for c in (
        RetrievalCondition.UNREACHABLE,
        RetrievalCondition.VANISHED,
        RetrievalCondition.EXPIRED,
        RetrievalCondition.INCOMPATIBLE,
    )
)
TERMINAL: frozenset[str] = frozenset(
    s.value for s in (LifecycleState.COMPLETED, LifecycleState.FAILED, LifecycleState.CANCELLED)
)


@dataclass(slots=True)
class Entry:
    """One receipt as the index sees it (times are ISO strings: they sort as text)."""

    receipt_id: str
    server: str
    tool: str
    work_ref: str
    state: str
    retrieval: str
    acceptance: str
    accepted_at: str
    expires_at: str | None
    version: int
    hay: str
    """Lower-case id, server, tool, purpose and work ref: what free text matches."""
    purpose: str | None = None
    status_at: str = ""
    near: bool = False
    """Within :data:`~chit.tui.view.NEAR_EXPIRY` of its TTL (set by the index's clock)."""
    # What the table shows that lives only in the receipt's JSON. An entry read from the
    # store's columns lacks these until :meth:`ReceiptIndex.fill` (a background read)
    # sets them; one made from a full receipt has them (``known``).
    stale_after: str | None = None
    status_message: str | None = None
    error: bool = False
    """Completed with an error result (``isError`` or a JSON-RPC error)."""
    by_check: bool = False
    """Accepted or rejected by an acceptance check, not by a person."""
    known: bool = False
    row: Row | None = None
    """The table's row of this entry, made once (an entry is replaced when it changes)."""

    @property
    def rank(self) -> Attention:
        """This entry's attention group."""
        if self.state == LifecycleState.INPUT_REQUIRED.value:
            return Attention.INPUT
        terminal = self.state in TERMINAL
        if self.near and not terminal:
            return Attention.NEAR_EXPIRY
        if self.retrieval in TROUBLE:
            return Attention.TROUBLE
        if terminal:
            pending = self.acceptance == AcceptanceState.PENDING.value
            return Attention.UNJUDGED if pending else Attention.JUDGED
        return Attention.WORKING

    @property
    def sort_key(self) -> tuple[int, str, str]:
        """Attention first, then acceptance time (stable), then id (unique)."""
        return (self.rank, self.accepted_at, self.receipt_id)

    def to_row(self) -> Row:
        """The table's row (only for a ``known`` entry, or once the index is filled)."""
        if self.row is None:
            state = LifecycleState(self.state)
            self.row = Row(
                self.receipt_id,
                self.server,
                self.tool,
                self.purpose,
                self.status_message,
                state,
                self.error,
                verdict_of(state, AcceptanceState(self.acceptance), self.by_check),
                clock.parse_iso(self.status_at),
                RetrievalCondition(self.retrieval),
                clock.parse_iso(self.stale_after) if self.stale_after else None,
                clock.parse_iso(self.expires_at) if self.expires_at else None,
                self.version,
            )
        return self.row

    @classmethod
    def of(cls, r: Receipt) -> Entry:
        """The entry of a full receipt (from an engine event), with what the table shows."""
        entry = cls.from_row(
            r.receipt_id,
            r.server,
            r.tool,
            r.purpose,
            r.work_ref,
            r.state.value,
            r.retrieval.value,
            r.acceptance.state.value,
            clock.iso(r.accepted_at),
            clock.iso(r.expires_at) if r.expires_at is not None else None,
            r.version,
            clock.iso(r.status_at),
        )
        entry.stale_after = clock.iso(r.stale_after) if r.stale_after is not None else None
        entry.status_message = r.status_message
        entry.error = completed_with_error(r)
        entry.by_check = r.acceptance.decided_by not in (None, "user")
        entry.known = True
        entry.row = Row.of(r)
        return entry

    @classmethod
    def from_row(
        cls,
        receipt_id: str,
        server: str,
        tool: str,
        purpose: str | None,
        work_ref: str | None,
        state: str,
        retrieval: str,
        acceptance: str,
        accepted_at: str,
        expires_at: str | None,
        version: int,
        status_at: str,
    ) -> Entry:
        """The entry of a store row (the projection columns, no JSON parsed)."""
        hay = f"{receipt_id} {server} {tool} {purpose or ''} {work_ref or ''}".lower()
        return cls(
            receipt_id,
            server,
            tool,
            work_ref or NO_WORK,
            state,
            retrieval,
            acceptance,
            accepted_at,
            expires_at,
            version,
            hay,
            purpose,
            status_at,
        )


Extras = tuple[str, int, str | None, str | None, int | None, str | None]
"""``(receipt_id, version, stale_after, status_message, error, decided_by)`` of a receipt."""


def matches(entry: Entry, query: Query, text: str | None) -> bool:
    """True when ``entry`` passes the ``/`` filter (``text`` is the lower-cased free text)."""
    if query.states and entry.state not in {s.value for s in query.states}:
        return False
    if query.server is not None and entry.server != query.server:
        return False
    if query.work_ref is not None and entry.work_ref != query.work_ref:
        return False
    return text is None or text in entry.hay
