"""Retrieval policy: poll interval bounds, staleness, backoff, expiry and failure classes.

Deterministic (no jitter): the reconciler adds jitter when it schedules the check.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from chit.receipts.states import FailureClass

__all__ = [
    "DEFAULT_POLL_MS",
    "MAX_RETRIEVAL_FAILURES",
    "POLL_CEILING_MS",
    "POLL_FLOOR_MS",
    "STALE_FACTOR",
    "STALE_FLOOR_MS",
    "backoff_ms",
    "classify_rpc_error",
    "effective_poll_ms",
    "expiry",
    "stale_deadline",
]

POLL_FLOOR_MS: Final = 1_000  # never poll faster than this, whatever the server hints
POLL_CEILING_MS: Final = 300_000  # never leave a live task unchecked longer than this
DEFAULT_POLL_MS: Final = 5_000  # when the server gives no hint
STALE_FACTOR: Final = 3  # a status older than 3 poll intervals is stale …
STALE_FLOOR_MS: Final = 15_000  # … but never sooner than this
MAX_RETRIEVAL_FAILURES: Final = 8  # consecutive failed checks before a person must decide


def effective_poll_ms(hint_ms: int | None) -> int:
    """Clamp the server's poll interval hint into ``[POLL_FLOOR_MS, POLL_CEILING_MS]``."""
    if hint_ms is None:
        return DEFAULT_POLL_MS
    return max(POLL_FLOOR_MS, min(POLL_CEILING_MS, hint_ms))


def stale_deadline(status_at: datetime, hint_ms: int | None) -> datetime:
    """Return when an observation made at ``status_at`` stops being fresh.

    Args:
        status_at: when the status was observed.
        hint_ms: the server's poll interval hint (None: default).

    Returns:
        ``status_at + max(STALE_FACTOR × interval, STALE_FLOOR_MS)``.
    """
    window = max(STALE_FACTOR * effective_poll_ms(hint_ms), STALE_FLOOR_MS)
    return status_at + timedelta(milliseconds=window)


def backoff_ms(hint_ms: int | None, failures: int) -> int:
    """Return the wait before the next check after ``failures`` consecutive failures.

    Exponential from the effective poll interval, capped at ``POLL_CEILING_MS``.
    """
    exponent = max(0, min(failures, 16))
    return min(POLL_CEILING_MS, effective_poll_ms(hint_ms) * (1 << exponent))


def expiry(created_at: datetime, ttl_ms: int | None) -> datetime | None:
    """Return ``created_at + ttl`` or None for an unlimited (or unknown) TTL."""
    if ttl_ms is None:
        return None
    return created_at + timedelta(milliseconds=ttl_ms)


def classify_rpc_error(code: int) -> FailureClass:
    """Map a JSON-RPC error code returned *as the task's outcome* to a failure class.

    Args:
        code: the JSON-RPC error code.

    Returns:
        ``transient`` for internal/server errors (a later, deliberate retry may work),
        ``incompatible`` for unknown methods or missing capabilities, ``protocol_violation``
        for parse/invalid-request errors, else ``permanent``.
    """
    if code in (-32700, -32600):
        return FailureClass.PROTOCOL_VIOLATION
    if code in (-32601, -32021):
        return FailureClass.INCOMPATIBLE
    if code == -32603 or -32099 <= code <= -32000:
        return FailureClass.TRANSIENT
    return FailureClass.PERMANENT
