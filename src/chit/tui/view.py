"""What the screens show: plain frozen data, no Textual.

The app's live model (:mod:`chit.tui.model`) builds a :class:`Snapshot` and publishes
it; widgets render from it and never query the store themselves (memray's ``Snapshot``
/ ``SnapshotFetched`` pattern). Only a bounded window of receipts is ever in it, so a
home with 100,000 receipts costs the same to draw as one with a hundred.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

from chit.receipts import (
    AcceptanceState,
    InputRequest,
    LifecycleState,
    Observation,
    Receipt,
    RetrievalCondition,
    freshness,
    is_success,
)
from chit.receipts.decisions import Decision, next_safe_decision
from chit.store import Store, WorkNote, WorkRecord
from chit.tui.health import ServerHealth

PAGE_SIZE = 60
"""Rows per page (more than a tall terminal shows); the table asks for another page when
the cursor reaches the end. Every row of the page is drawn into the table's cells on a
filter keystroke, so the page is kept near a screenful."""

INBOX_LIMIT = 200
"""The inbox reads at most this many input-required receipts."""

NEAR_EXPIRY = timedelta(minutes=5)
"""A live receipt whose result must be retrieved within this window is "near expiry"."""

NO_WORK = ""
"""The group key of receipts that belong to no work record."""


@dataclass(frozen=True)
class Query:
    """A parsed ``/`` filter: ``state:S`` (repeatable), ``server:NAME``, ``work:REF``, text."""

    states: tuple[LifecycleState, ...] = ()
    server: str | None = None
    work_ref: str | None = None
    text: str | None = None
    errors: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        """True when the filter selects everything."""
        return not (self.states or self.server or self.work_ref or self.text)


_STATE_ALIASES = {"input": "input_required", "input-required": "input_required"}


def parse_filter(text: str) -> Query:
    """Parse the filter grammar (k9s-like): ``state:working server:demo free text``.

    Unknown ``key:`` prefixes and unknown states are reported in ``errors`` and ignored,
    so a half-typed filter never blanks the table.
    """
    try:
        words = shlex.split(text)
    except ValueError:  # an unclosed quote while typing: fall back to plain words
        words = text.split()
    states: list[LifecycleState] = []
    server = work_ref = None
    free: list[str] = []
    errors: list[str] = []
    for word in words:
        key, sep, value = word.partition(":")
        if not sep or not value:
            free.append(word)
        elif key == "state":
            for part in value.split(","):
                name = _STATE_ALIASES.get(part, part)
                try:
                    states.append(LifecycleState(name))
                except ValueError:
                    errors.append(f"unknown state {part!r}")
        elif key == "server":
            server = value
        elif key == "work":
            work_ref = value
        else:
            errors.append(f"unknown filter {key!r}: use state:, server:, work: or text")
    return Query(
        states=tuple(dict.fromkeys(states)),
        server=server,
        work_ref=work_ref,
        text=" ".join(free) or None,
        errors=tuple(errors),
    )


@dataclass(frozen=True, slots=True)
class Row:
    """One receipt as the table (and the toasts) show it: served from the index.

    A row is made from the index's entry (a keystroke in the filter reads no receipt
    JSON) or, until the index has every field, from a full receipt.
    """

    receipt_id: str
    server: str
    tool: str
    purpose: str | None
    status_message: str | None
    state: LifecycleState
    error: bool
    """Completed with an error result (the state shows ``done!``)."""
    verdict: str | None
    """The verdict's kind (see :func:`verdict_of`); None while the task runs."""
    status_at: datetime
    retrieval: RetrievalCondition
    stale_after: datetime | None
    expires_at: datetime | None
    version: int

    @property
    def is_terminal(self) -> bool:
        """True once the server reported a terminal lifecycle state."""
        return self.state.is_terminal

    def condition(self, now: datetime) -> RetrievalCondition:
        """:func:`chit.receipts.freshness` of the receipt this row shows."""
        return freshness(self, now)

    @classmethod
    def of(cls, r: Receipt) -> Row:
        """The row of a full receipt.

        Only what the row shows is kept (the index reads no more for its rows): the
        status message where it stands for a missing purpose or says why a task failed,
        the staleness deadline of a live task observed fresh.
        """
        shown = not r.purpose or r.state is LifecycleState.FAILED
        live_fresh = not r.is_terminal and r.retrieval is RetrievalCondition.FRESH
        return cls(
            r.receipt_id,
            r.server,
            r.tool,
            r.purpose,
            r.status_message if shown else None,
            r.state,
            completed_with_error(r),
            verdict_of(r.state, r.acceptance.state, r.acceptance.decided_by not in (None, "user")),
            r.status_at,
            r.retrieval,
            r.stale_after if live_fresh else None,
            r.expires_at,
            r.version,
        )


def completed_with_error(r: Receipt) -> bool:
    """Completed, its result retrieved, and that result is an error."""
    completed = r.state is LifecycleState.COMPLETED and r.outcome is not None
    return completed and not is_success(r)


def verdict_of(state: LifecycleState, acceptance: AcceptanceState, by_check: bool) -> str | None:
    """Which verdict a receipt shows (None while the task runs)."""
    if not state.is_terminal:
        return None
    if acceptance is AcceptanceState.ACCEPTED:
        return "checked_ok" if by_check else "accepted"
    if acceptance is AcceptanceState.REJECTED:
        return "checked_bad" if by_check else "rejected"
    if acceptance is AcceptanceState.NOT_REQUIRED:
        return "not_required"
    return "to_judge"


@dataclass(frozen=True)
class Group:
    """Receipts of one work record (or of none), in attention order."""

    key: str
    record: WorkRecord | None
    notes: tuple[WorkNote, ...]
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class Prompt:
    """One pending input request in the inbox."""

    receipt: Receipt
    request: InputRequest


@dataclass(frozen=True)
class Question:
    """A ``work_ask`` question an agent parked in the sidecar, with its work record.

    Attributes:
        decision_id: the sidecar's decision id (answer / withdraw by it).
        item_id: the work record the question is about.
        question: what the agent asked.
        schema: the answer's JSON schema (None: a free-text answer).
        asked_at: when it was asked.
        record: the work record, when the library has it.
    """

    decision_id: str
    item_id: str
    question: str
    schema: dict[str, Any] | None
    asked_at: datetime
    record: WorkRecord | None = None

    @property
    def work_label(self) -> str:
        """The work record's title, else its id."""
        return self.record.title if self.record is not None else self.item_id


@dataclass(frozen=True)
class Snapshot:
    """Everything the main screen needs, read at ``now``."""

    now: datetime
    query: Query
    groups: tuple[Group, ...] = ()
    counts: dict[LifecycleState, int] = field(default_factory=dict)
    total: int = 0
    prompts: tuple[Prompt, ...] = ()
    questions: tuple[Question, ...] = ()
    more: bool = False
    loaded: int = 0
    health: tuple[ServerHealth, ...] = ()
    indexing: bool = False
    """The filter (or the next page) waits for the index, still being read at start."""

    @cached_property
    def rows(self) -> tuple[Row, ...]:
        """Every receipt shown, in display order."""
        return tuple(r for g in self.groups for r in g.rows)

    @property
    def waiting(self) -> int:
        """What waits for a person: input prompts plus agents' questions."""
        return len(self.prompts) + len(self.questions)


EMPTY = Snapshot(now=datetime.fromtimestamp(0).astimezone(), query=Query())
"""The snapshot shown before the first load finishes."""


@dataclass(frozen=True)
class Detail:
    """One receipt with its timeline and next safe decision (the detail pane)."""

    receipt: Receipt
    timeline: tuple[Observation, ...]
    decision: Decision
    now: datetime
    record: WorkRecord | None = None


@dataclass(frozen=True)
class RecordDetail:
    """One work record with its notes (the detail pane on a group row)."""

    record: WorkRecord
    notes: tuple[WorkNote, ...]
    receipts: int


def load_detail(store: Store, receipt_id: str, now: datetime) -> Detail | None:
    """Read one receipt's detail, or None when it no longer exists."""
    receipt = store.receipts.get(receipt_id)
    if receipt is None:
        return None
    record = store.work.get(receipt.work_ref) if receipt.work_ref else None
    return Detail(
        receipt=receipt,
        timeline=tuple(store.observations.timeline(receipt_id)),
        decision=next_safe_decision(receipt, now),
        now=now,
        record=record,
    )


def load_record(store: Store, work_id: str) -> RecordDetail | None:
    """Read one work record's detail, or None when it no longer exists."""
    record = store.work.get(work_id)
    if record is None:
        return None
    count = len(store.receipts.list(work_ref=work_id, limit=1000))
    return RecordDetail(record, tuple(store.work.notes(work_id)), count)


# ------------------------------------------------------------------ formatting
def ago(now: datetime, at: datetime) -> str:
    """``12 s ago`` / ``3 min ago`` / ``2 h ago`` / ``4 d ago``."""
    seconds = max(0, int((now - at).total_seconds()))
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    if seconds < 172800:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} d ago"


def countdown(now: datetime, at: datetime | None) -> str:
    """Time left until ``at``: ``4m12s``, ``2h05m``, ``expired``, or ``—`` without a TTL."""
    if at is None:
        return "—"
    seconds = int((at - now).total_seconds())
    if seconds <= 0:
        return "expired"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 172800:
        return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"
    return f"{seconds // 86400}d"


def observed(row: Row, now: datetime) -> tuple[str, RetrievalCondition]:
    """The freshness text of a receipt and the condition that colours it."""
    condition = row.condition(now)
    text = f"observed {ago(now, row.status_at)}"
    if condition is not RetrievalCondition.FRESH:
        text = f"{condition.value}, {text}"
    return text, condition


def near_expiry(receipt: Receipt | Row, now: datetime) -> bool:
    """True for a live receipt whose ``expires_at`` falls within :data:`NEAR_EXPIRY`."""
    if receipt.is_terminal or receipt.expires_at is None:
        return False
    return now < receipt.expires_at <= now + NEAR_EXPIRY


def clock_marks(snapshot: Snapshot, *, coarse: bool = True) -> tuple[object, ...]:
    """Every text of ``snapshot`` that moves with the clock alone, as the screens show it.

    Two snapshots with the same marks look the same at any time (everything else in them
    changes only with the data), so a clock tick publishes only when these differ.

    Args:
        coarse: include the texts that move by the minute or slower ("26 min ago", a
            countdown in hours) and the minute itself (times shown elsewhere, a
            receipt's detail, move at least once a minute). Without them: only what
            moves by the second ("12 s ago", "4m12s", near expiry).
    """
    now = snapshot.now
    marks: list[object] = [now.replace(second=0, microsecond=0)] if coarse else []

    def mark(text: object, fine: bool) -> None:
        if coarse or fine:
            marks.append(text)

    for group in snapshot.groups:
        if group.record is not None:
            text = ago(now, group.record.updated_at)
            mark(text, text.endswith(" s ago"))
        for r in group.rows:
            seen = observed(r, now)
            mark(seen, seen[0].endswith(" s ago"))
            if not r.is_terminal:
                left = countdown(now, r.expires_at)
                mark((left, near_expiry(r, now)), left.endswith("s") or left == "expired")
    for at in [p.request.received_at for p in snapshot.prompts] + [
        q.asked_at for q in snapshot.questions
    ]:
        text = ago(now, at)
        mark(text, text.endswith(" s ago"))
    return tuple(marks)
