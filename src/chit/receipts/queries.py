"""Read-only questions about a receipt: success, done, freshness, expiry classification."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from chit.receipts.models import Receipt
from chit.receipts.states import AcceptanceState, LifecycleState, RetrievalCondition

__all__ = [
    "classify_unknown_task",
    "freshness",
    "is_done",
    "is_success",
    "outcome_resolved",
    "outcome_unresolved",
]


def is_success(receipt: Receipt) -> bool:
    """True only for ``completed`` with a retrieved outcome that is not an error.

    A completed lifecycle with ``isError`` (or a JSON-RPC error) is *not* a success, and
    neither is ``completed`` before its result was retrieved.
    """
    outcome = receipt.outcome
    return (
        receipt.state is LifecycleState.COMPLETED
        and outcome is not None
        and not outcome.is_error
        and outcome.error_code is None
    )


def outcome_resolved(receipt: Receipt) -> bool:
    """True when the requested outcome is known to have been achieved (same as ``is_success``)."""
    return is_success(receipt)


def outcome_unresolved(receipt: Receipt) -> bool:
    """True when the lifecycle is finished but the requested outcome was not achieved.

    That covers ``completed`` with an error result, ``failed``, ``cancelled`` and
    ``completed`` whose result can no longer be retrieved.
    """
    return receipt.is_terminal and not is_success(receipt)


def is_done(receipt: Receipt) -> bool:
    """True when dependent work may proceed: accepted, or success with no check required."""
    if receipt.acceptance.state is AcceptanceState.ACCEPTED:
        return True
    return receipt.acceptance.state is AcceptanceState.NOT_REQUIRED and is_success(receipt)


class _Observed(Protocol):
    """What freshness needs: a receipt, or the TUI's row made from the index."""

    @property
    def retrieval(self) -> RetrievalCondition: ...
    @property
    def is_terminal(self) -> bool: ...
    @property
    def stale_after(self) -> datetime | None: ...


def freshness(receipt: _Observed, now: datetime) -> RetrievalCondition:
    """Return the retrieval condition as of ``now``.

    A ``fresh`` condition on a live task becomes ``stale`` once ``now`` passes
    ``stale_after``. A terminal state never changes, so a terminal receipt never goes
    stale; every other condition (unreachable, vanished, …) is returned as stored.
    """
    if (
        receipt.retrieval is RetrievalCondition.FRESH
        and not receipt.is_terminal
        and receipt.stale_after is not None
        and now >= receipt.stale_after
    ):
        return RetrievalCondition.STALE
    return receipt.retrieval


def classify_unknown_task(receipt: Receipt, now: datetime) -> RetrievalCondition:
    """Decide what a "task not found" (e.g. -32602 on ``tasks/get``) means at ``now``.

    Returns:
        ``expired`` when ``now`` is at or past ``expires_at`` (normal end of retention),
        otherwise ``vanished`` (gone before its TTL, or with no TTL at all).
    """
    if receipt.expires_at is not None and now >= receipt.expires_at:
        return RetrievalCondition.EXPIRED
    return RetrievalCondition.VANISHED
