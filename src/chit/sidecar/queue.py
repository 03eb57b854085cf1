"""The executor's side of the sidecar store: claim an intent under a lease, settle it.

A claim takes the oldest due intent that is at the head of its item (no earlier intent
of the same item is still pending, retrying or blocked), so intents apply in order per
item. The library write happens *outside* this store's transaction; settling re-checks
the lease, so an executor whose lease expired cannot overwrite a newer attempt.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from chit import clock
from chit.sidecar.anchors import SidecarStore
from chit.sidecar.models import Intent
from chit.sidecar.sql import (
    claiming,
    fetch_all,
    fetch_one,
    for_update,
    immediate,
    skip_locked,
    write,
)

ACCOUNT_WAIT = "account not restored"
"""Prefix of the error of an intent waiting for the owner (never counted, never final)."""


@dataclass(frozen=True)
class Settle:
    """How an attempt ended.

    Attributes:
        state: ``applied``, ``retrying``, ``failed`` or ``blocked``.
        failure_class: ``applied`` for an idempotent replay, else the failure class.
        error: The readable reason (None when applied normally).
        anchor: New anchor state (``live``/``dead``) or None to leave it.
        count_attempt: Whether this attempt counts towards ``max_attempts``.
        backoff_s: Delay before the next attempt (retrying only).
    """

    state: str
    failure_class: str | None = None
    error: str | None = None
    anchor: str | None = None
    count_attempt: bool = True
    backoff_s: float = 0.0


def _later(seconds: float) -> str:
    return clock.iso(clock.now() + timedelta(seconds=seconds))


def claim(store: SidecarStore, worker: str, lease_s: float) -> Intent | None:
    """Lease the next due intent that heads its item, or return None.

    On PostgreSQL the row is locked ``SKIP LOCKED``: executors on other replicas claim
    other intents meanwhile instead of waiting (and one of a lease can win only once).
    """
    now = clock.iso()
    with claiming(store.db):
        row = fetch_one(
            store.db,
            "SELECT i.* FROM intents i WHERE i.state IN ('pending', 'retrying')"
            " AND i.next_attempt_at <= ? AND (i.lease_until IS NULL OR i.lease_until < ?)"
            " AND NOT EXISTS (SELECT 1 FROM intents j WHERE j.item_id = i.item_id"
            "   AND j.seq < i.seq AND j.state IN ('pending', 'retrying', 'blocked'))"
            " ORDER BY i.next_attempt_at, i.created_at LIMIT 1" + skip_locked(store.db, "i"),
            [now, now],
        )
        if row is None:
            return None
        # A lease that expired without being settled means an executor died between
        # the library write and the settle: the write may have happened.
        recovered = row["lease_owner"] is not None
        write(
            store.db,
            "UPDATE intents SET lease_owner = ?, lease_until = ? WHERE id = ?",
            [worker, _later(lease_s), row["id"]],
        )
    return Intent.from_row(row, recovered=recovered)


def settle(store: SidecarStore, intent: Intent, worker: str, result: Settle) -> bool:
    """Record the attempt's outcome (and the anchor's new state) in one transaction.

    Returns:
        False when the lease was lost meanwhile (another executor owns the intent).
    """
    now = clock.iso()
    with claiming(store.db):
        # Locked (PostgreSQL): a concurrent claim of this expired lease either committed
        # first (then the lease is not ours) or waits for this settle.
        row = fetch_one(
            store.db, "SELECT * FROM intents WHERE id = ?" + for_update(store.db), [intent.id]
        )
        if row is None or row["lease_owner"] != worker:
            return False
        attempts = int(row["attempts"]) + (1 if result.count_attempt else 0)
        state, failure_class, error = result.state, result.failure_class, result.error
        next_at = now
        if state == "retrying":
            if attempts >= int(row["max_attempts"]):
                state = "failed"
                error = f"{error} (gave up after {attempts} attempts)"
            else:
                next_at = _later(result.backoff_s)
        write(
            store.db,
            "UPDATE intents SET state = ?, failure_class = ?, error = ?, attempts = ?,"
            " next_attempt_at = ?, lease_owner = NULL, lease_until = NULL, updated_at = ?,"
            " applied_at = CASE WHEN ? = 'applied' THEN ? ELSE applied_at END WHERE id = ?",
            [state, failure_class, error, attempts, next_at, now, state, now, intent.id],
        )
        anchor_state = result.anchor
        if intent.kind == "start" and state == "failed" and anchor_state is None:
            # A start that can never apply must not keep the task key locked.
            anchor_state = "dead"
            error = f"start failed: {error}"
        if anchor_state == "live":
            write(
                store.db,
                "UPDATE anchors SET state = 'live', materialized = 1, updated_at = ?"
                " WHERE item_id = ? AND state = 'provisional'",
                [now, intent.item_id],
            )
        elif anchor_state == "dead":
            write(
                store.db,
                "UPDATE anchors SET state = 'dead', dead_reason = ?, updated_at = ?"
                " WHERE item_id = ? AND state != 'dead'",
                [error, now, intent.item_id],
            )
    return True


def wake_account_waits(store: SidecarStore) -> int:
    """Make every intent waiting for the owner due now (call when the vault unlocks)."""
    now = clock.iso()
    with immediate(store.db):
        cursor = write(
            store.db,
            # The IN term names the due-queue's partial index (SQLite uses a partial
            # index only when the query repeats its WHERE term).
            "UPDATE intents SET next_attempt_at = ? WHERE state IN ('pending', 'retrying')"
            " AND state = 'retrying' AND error LIKE ?",
            [now, ACCOUNT_WAIT + "%"],
        )
    return cursor.rowcount


def unblock(store: SidecarStore, principal: str | None, intent_id: str) -> bool:
    """A user's action on a blocked intent: make it pending again (it is re-evaluated)."""
    sql = (
        "UPDATE intents SET state = 'pending', failure_class = NULL, next_attempt_at = ?,"
        " updated_at = ? WHERE id = ? AND state = 'blocked'"
    )
    params: list[object] = [clock.iso(), clock.iso(), intent_id]
    if principal is not None:
        sql += " AND principal = ?"
        params.append(principal)
    with immediate(store.db):
        return write(store.db, sql, params).rowcount > 0


def orphaned_provisionals(store: SidecarStore, limit: int = 100) -> list[str]:
    """Provisional anchors with no open start intent (the repair path's candidates)."""
    rows = fetch_all(
        store.db,
        "SELECT a.item_id FROM anchors a WHERE a.state = 'provisional' AND NOT EXISTS"
        " (SELECT 1 FROM intents i WHERE i.item_id = a.item_id AND i.kind = 'start'"
        "  AND i.state IN ('pending', 'retrying', 'blocked')) LIMIT ?",
        [limit],
    )
    return [str(r["item_id"]) for r in rows]


def repair(store: SidecarStore, item_id: str, *, exists: bool) -> None:
    """Settle an orphaned provisional anchor: live if its item exists, else dead."""
    now = clock.iso()
    with immediate(store.db):
        if exists:
            write(
                store.db,
                "UPDATE anchors SET state = 'live', materialized = 1, updated_at = ?"
                " WHERE item_id = ? AND state = 'provisional'",
                [now, item_id],
            )
        else:
            write(
                store.db,
                "UPDATE anchors SET state = 'dead', updated_at = ?,"
                " dead_reason = 'start intent missing and the item was never created'"
                " WHERE item_id = ? AND state = 'provisional'",
                [now, item_id],
            )
