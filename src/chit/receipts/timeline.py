"""Which observations are news: a timeline records changes, not polls.

A poll that finds the task as it was still moves the receipt's bookkeeping (the
observation time, the next check, the failure count) but tells a reader nothing new;
its observation is folded into the row before it (a repeat count and a last-seen time)
instead of adding a row. News is a change of the lifecycle state, the status message,
the input requests, the retrieval condition or its error, the TTL, the cancellation
posture, the outcome or the acceptance (docs/receipt-states.md, "Timeline").
"""

from __future__ import annotations

from typing import Final

from chit.receipts.models import Observation

__all__ = ["BOOKKEEPING", "is_news"]

BOOKKEEPING: Final = frozenset(
    {
        "status_at",
        "server_created_at",
        "server_updated_at",
        "poll_interval_ms",
        "next_check_at",
        "stale_after",
        "retrieval_failures",
    }
)
"""Receipt fields a check moves without telling anything new."""


def is_news(observation: Observation) -> bool:
    """True when ``observation`` changed something a reader of the timeline must see.

    An observation that changed only ``BOOKKEEPING`` fields (or nothing) is not news: the
    store folds it into the previous row when that row says the same (kind, status and
    message), and appends it otherwise.
    """
    return any(name not in BOOKKEEPING for name in observation.changes)
