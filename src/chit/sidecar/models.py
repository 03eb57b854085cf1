"""Rows of the sidecar store and the answers the tools give, in the shared vocabulary."""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from typing import Any

from chit import clock
from chit.sidecar.contract import CONTRACT

ITEM_PREFIX = "wi_"
INTENT_PREFIX = "in_"

#: How a stored intent state is reported to the caller (``queued`` is not failure).
RESPONSE_STATE = {
    "pending": "queued",
    "retrying": "retrying",
    "blocked": "blocked",
    "applied": "applied",
    "failed": "failed",
}

DEAD_REASON = "target deleted: start a new record"
UNKNOWN_ITEM = "unknown item_id"
"""The one answer for an item id that does not exist *or* belongs to another principal."""


def _sortable_id(prefix: str, random_bytes: int, wall: float | None = None) -> str:
    """``prefix`` + creation time (ms, 11 hex digits) + ``random_bytes`` random bytes.

    Time first so ids sort by creation: the sidecar's tables and indexes are keyed on
    these ids, and a random key lands on a random page (and splits it) on every
    openWork, where a time-ordered one appends (measured: docs/performance.md). The
    random part alone carries the id's strength; the prefix only says when it was made.
    """
    stamp = int((clock.wall() if wall is None else wall) * 1000) & 0xFFFFFFFFFFF
    tail = base64.urlsafe_b64encode(os.urandom(random_bytes)).decode().rstrip("=")
    return f"{prefix}{stamp:011x}{tail}"


def new_item_id(wall: float | None = None) -> str:
    """A fresh item id: its creation time (``wall``, a POSIX time; default now), then 192
    random bits (ids double as capabilities on stdio)."""
    return _sortable_id(ITEM_PREFIX, 24, wall)


def new_intent_id(wall: float | None = None) -> str:
    """A fresh intent id: its creation time (``wall``; default now), then 96 random bits
    (intents are never addressed without their principal, so the id needs to be unique,
    not secret)."""
    return _sortable_id(INTENT_PREFIX, 12, wall)


@dataclass(frozen=True)
class Anchor:
    """The sidecar's record that an item id was issued, and how far it got."""

    item_id: str
    principal: str
    task_key: str
    state: str
    materialized: bool
    created_at: str
    updated_at: str
    dead_reason: str | None

    @classmethod
    def from_row(cls, row: Any) -> Anchor:
        """Build from an ``anchors`` row."""
        return cls(
            item_id=row["item_id"],
            principal=row["principal"],
            task_key=row["task_key"],
            state=row["state"],
            materialized=bool(row["materialized"]),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            dead_reason=row["dead_reason"],
        )


@dataclass(frozen=True)
class Intent:
    """One requested change to an item, applied in ``seq`` order by the executor."""

    id: str
    item_id: str
    principal: str
    kind: str
    payload: dict[str, Any]
    idempotency_key: str | None
    request_hash: str
    seq: int
    state: str
    failure_class: str | None
    error: str | None
    attempts: int
    max_attempts: int
    next_attempt_at: str
    created_at: str
    updated_at: str
    #: True when a previous lease expired unfinished (the executor died mid-apply), so
    #: the library write may already have happened.
    recovered: bool = False

    @classmethod
    def from_row(cls, row: Any, *, recovered: bool = False) -> Intent:
        """Build from an ``intents`` row."""
        return cls(
            id=row["id"],
            item_id=row["item_id"],
            principal=row["principal"],
            kind=row["kind"],
            payload=json.loads(row["payload"]),
            idempotency_key=row["idempotency_key"],
            request_hash=row["request_hash"],
            seq=int(row["seq"]),
            state=row["state"],
            failure_class=row["failure_class"],
            error=row["error"],
            attempts=int(row["attempts"]),
            max_attempts=int(row["max_attempts"]),
            next_attempt_at=row["next_attempt_at"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            recovered=recovered,
        )


@dataclass(frozen=True)
class Outcome:
    """What a mutating tool answers: the request's state and the anchor's."""

    item_id: str
    state: str  # queued | retrying | blocked | applied | failed | dead
    anchor: str  # provisional | live | dead
    materialized: bool
    failure_class: str | None = None
    reason: str | None = None
    intent_id: str | None = None
    replayed: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The tool result's structured content."""
        data: dict[str, Any] = {
            "contract": CONTRACT,
            "item_id": self.item_id,
            "state": self.state,
            "anchor": self.anchor,
            "materialized": self.materialized,
            "failure_class": self.failure_class,
            "reason": self.reason,
            "replayed": self.replayed,
        }
        data.update(self.extra)
        return data


def intent_outcome(anchor: Anchor, intent: Intent, *, replayed: bool = False) -> Outcome:
    """Describe ``intent`` on ``anchor`` in the shared vocabulary."""
    state = RESPONSE_STATE[intent.state]
    if intent.state == "failed" and anchor.state == "dead" and intent.failure_class == "permanent":
        state = "dead" if intent.error == (anchor.dead_reason or DEAD_REASON) else state
    return Outcome(
        item_id=anchor.item_id,
        state=state,
        anchor=anchor.state,
        materialized=anchor.materialized,
        failure_class=intent.failure_class,
        reason=intent.error,
        intent_id=intent.id,
        replayed=replayed,
    )


def dead_outcome(anchor: Anchor) -> Outcome:
    """The answer for a follow-up sent to a dead anchor (never queued)."""
    return Outcome(
        item_id=anchor.item_id,
        state="dead",
        anchor="dead",
        materialized=anchor.materialized,
        failure_class="permanent",
        reason=anchor.dead_reason or DEAD_REASON,
    )
