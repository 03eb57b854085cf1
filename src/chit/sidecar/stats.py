"""Observability: counts by anchor state, intent state and failure class.

Seed 000: "a rising retrying count points toward app startup or account restoration; a
rising permanent count points toward a deployed helper or client contract mismatch" — so
the counters separate exactly those.
"""

from __future__ import annotations

from typing import Any

from chit.sidecar.contract import ANCHOR_STATES, CONTRACT, FAILURE_CLASSES, INTENT_STATES
from chit.sidecar.queue import ACCOUNT_WAIT
from chit.sidecar.sql import SidecarDb, fetch_all, fetch_one, snapshot


def _counts(db: SidecarDb, sql: str, keys: tuple[str, ...]) -> dict[str, int]:
    counts = dict.fromkeys(keys, 0)
    for row in fetch_all(db, sql):
        counts[str(row[0])] = int(row[1])
    return counts


def collect(db: SidecarDb) -> dict[str, Any]:
    """Return every counter from one consistent snapshot."""
    with snapshot(db):
        anchors = _counts(db, "SELECT state, count(*) FROM anchors GROUP BY state", ANCHOR_STATES)
        intents = _counts(db, "SELECT state, count(*) FROM intents GROUP BY state", INTENT_STATES)
        classes = _counts(
            db,
            "SELECT failure_class, count(*) FROM intents WHERE failure_class IS NOT NULL"
            " GROUP BY failure_class",
            FAILURE_CLASSES,
        )
        waiting = int(
            fetch_one(
                db,
                "SELECT count(*) FROM intents WHERE state IN ('pending', 'retrying')"
                " AND state = 'retrying' AND error LIKE ?",  # IN: the due queue's index
                [ACCOUNT_WAIT + "%"],
            )[0]
        )
        decisions = _counts(
            db,
            "SELECT state, count(*) FROM decisions GROUP BY state",
            ("pending", "answered", "cancelled"),
        )
        oldest = fetch_one(
            db,
            "SELECT min(created_at) FROM intents WHERE state IN ('pending', 'retrying', 'blocked')",
        )[0]
    return {
        "contract": CONTRACT,
        "anchors": anchors,
        "intents": intents,
        "failure_classes": classes,
        "waiting_for_account": waiting,
        "decisions": decisions,
        "oldest_open_intent_at": oldest,
    }


def render(stats: dict[str, Any]) -> str:
    """A few human lines for ``chit sidecar --stats``."""

    def line(label: str, counts: dict[str, int]) -> str:
        return f"{label:<15}" + "  ".join(f"{k} {v}" for k, v in counts.items())

    lines = [
        line("anchors", stats["anchors"]),
        line("intents", stats["intents"]),
        line("failure class", stats["failure_classes"]),
        f"{'waiting':<15}{stats['waiting_for_account']} for the account (vault locked)",
        line("decisions", stats["decisions"]),
    ]
    if stats["oldest_open_intent_at"]:
        lines.append(f"{'oldest open':<15}{stats['oldest_open_intent_at']}")
    return "\n".join(lines)
