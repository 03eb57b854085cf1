"""Receipts for agents whose MCP host lacks tasks (seed 002's compatibility tools).

The sidecar must not import ``chit.runtime`` (the runtime hosts the sidecar's executor),
so it declares what it needs as :class:`ReceiptGateway`; the Supervisor implements it and
``chit sidecar`` wires the two. Receipts are private to the principal that started them:
the link is kept in the sidecar store's ``receipt_links`` table, and any other principal
gets the answer an unknown id gets, byte for byte.
"""

from __future__ import annotations

from typing import Any, Protocol

from chit import clock
from chit.sidecar.sql import SidecarDb, fetch_one, immediate, write

UNKNOWN_RECEIPT = "unknown receipt_id"


class ReceiptGateway(Protocol):
    """What the sidecar asks of the Supervisor (all answers are JSON-able dicts)."""

    async def start_call(
        self,
        *,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        purpose: str,
        work_ref: str | None,
        principal: str,
    ) -> dict[str, Any]:
        """Write the intent, send the call as a task, write the receipt on acceptance.

        Returns:
            At least ``receipt_id`` (None when the server refused), ``state`` and
            ``next`` (the next safe decision).
        """

    async def status(self, receipt_id: str) -> dict[str, Any] | None:
        """Latest observed state, freshness and the next safe decision (None: unknown)."""

    async def result(self, receipt_id: str) -> dict[str, Any] | None:
        """The outcome once terminal, else the state and when to look again."""

    async def cancel(self, receipt_id: str) -> dict[str, Any] | None:
        """Request cancellation; returns the cancellation posture."""


def link(db: SidecarDb, receipt_id: str, principal: str, item_id: str | None) -> None:
    """Bind a receipt to the principal that started it."""
    with immediate(db):
        write(
            db,
            "INSERT INTO receipt_links (receipt_id, principal, item_id, created_at)"
            " VALUES (?, ?, ?, ?) ON CONFLICT(receipt_id) DO NOTHING",
            [receipt_id, principal, item_id, clock.iso()],
        )


def owns(db: SidecarDb, receipt_id: str, principal: str) -> bool:
    """True when ``principal`` started ``receipt_id`` through this sidecar."""
    row = fetch_one(
        db,
        "SELECT 1 FROM receipt_links WHERE receipt_id = ? AND principal = ?",
        [receipt_id, principal],
    )
    return row is not None
