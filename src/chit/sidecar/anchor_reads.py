"""Reading the sidecar store: anchors, intents, and one item's state as ``inspect`` shows it.

A mixin of :class:`~chit.sidecar.anchors.SidecarStore` (which holds the request-side
writes); it reads only, through ``fetch_one``/``fetch_all`` on the store's connection.
"""

from __future__ import annotations

from typing import Any

from chit.sidecar.models import Anchor, Intent
from chit.sidecar.sql import SidecarDb, fetch_all, fetch_one


class UnknownItem(LookupError):
    """No such item for this principal (also: it belongs to another principal)."""


class AnchorReads:
    """The reads of :class:`~chit.sidecar.anchors.SidecarStore` (mixed into it)."""

    db: SidecarDb

    # --- reads --------------------------------------------------------------------

    def anchor(self, item_id: str, principal: str | None = None) -> Anchor | None:
        """The anchor of ``item_id`` (restricted to ``principal`` when given)."""
        sql = "SELECT * FROM anchors WHERE item_id = ?"
        params: list[Any] = [item_id]
        if principal is not None:
            sql += " AND principal = ?"
            params.append(principal)
        row = fetch_one(self.db, sql, params)
        return Anchor.from_row(row) if row is not None else None

    def intent(self, intent_id: str) -> Intent | None:
        """One intent by id."""
        row = fetch_one(self.db, "SELECT * FROM intents WHERE id = ?", [intent_id])
        return Intent.from_row(row) if row is not None else None

    def intents_of(self, item_id: str) -> list[Intent]:
        """An item's intents in order."""
        rows = fetch_all(self.db, "SELECT * FROM intents WHERE item_id = ? ORDER BY seq", [item_id])
        return [Intent.from_row(r) for r in rows]

    def anchors(self, *, state: str | None = None, limit: int = 500) -> list[Anchor]:
        """Anchors (optionally of one state), oldest update first.

        The page is chosen from ``anchors_by_state`` alone (it carries the update time),
        so only the rows returned are read.
        """
        where = "" if state is None else " WHERE state = ?"
        params: list[Any] = [] if state is None else [state]
        sql = (
            "SELECT * FROM anchors WHERE item_id IN (SELECT item_id FROM anchors"
            f"{where} ORDER BY updated_at, item_id LIMIT ?) ORDER BY updated_at, item_id"
        )
        return [Anchor.from_row(r) for r in fetch_all(self.db, sql, [*params, limit])]

    # --- inspection -------------------------------------------------------------------

    def inspect(self, principal: str, item_id: str) -> dict[str, Any]:
        """Anchor state, materialized, open intents and the last failure with its class.

        Raises:
            UnknownItem: no such item for ``principal``.
        """
        anchor = self.anchor(item_id, principal)
        if anchor is None:
            raise UnknownItem(item_id)
        intents = self.intents_of(item_id)
        open_ = [i for i in intents if i.state in ("pending", "retrying", "blocked")]
        failures = [i for i in intents if i.error is not None]
        last = max(failures, key=lambda i: i.updated_at) if failures else None
        return {
            "item_id": anchor.item_id,
            "state": anchor.state,
            "anchor": anchor.state,
            "materialized": anchor.materialized,
            "task_key": anchor.task_key,
            "dead_reason": anchor.dead_reason,
            "pending": [
                {
                    "intent_id": i.id,
                    "kind": i.kind,
                    "seq": i.seq,
                    "state": i.state,
                    "failure_class": i.failure_class,
                    "reason": i.error,
                    "attempts": i.attempts,
                    "next_attempt_at": i.next_attempt_at,
                }
                for i in open_
            ],
            "applied": sum(1 for i in intents if i.state == "applied"),
            "last_failure": None
            if last is None
            else {
                "intent_id": last.id,
                "kind": last.kind,
                "state": last.state,
                "failure_class": last.failure_class,
                "reason": last.error,
                "at": last.updated_at,
            },
            "created_at": anchor.created_at,
            "updated_at": anchor.updated_at,
        }
