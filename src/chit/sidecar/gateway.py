"""Receipts for agents whose MCP host lacks tasks (seed 002's compatibility tools).

The sidecar must not import ``chit.runtime`` (the runtime hosts the sidecar's executor),
so it declares what it needs as :class:`ReceiptGateway`; the Supervisor implements it and
``chit sidecar`` wires the two. Receipts are private to the principal that started them:
the link is kept in the sidecar store's ``receipt_links`` table, and any other principal
gets the answer an unknown id gets, byte for byte.

A receipt that an agent's host started through ``chit proxy`` has no link (the proxy is
not the sidecar). Its agent reads it all the same (:func:`may_read_proxied`): over stdio
(the one local principal, the same user that runs the proxy), or as the principal whose
work item the host's call named (``_meta["io.github.chit/work"]``).
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

    async def origin(self, receipt_id: str) -> dict[str, Any] | None:
        """Who started the receipt: ``{"proxied": bool, "work_ref": str | None}``.

        ``proxied``: an agent host started it through ``chit proxy``. None: unknown id.
        """


def link(db: SidecarDb, receipt_id: str, principal: str, item_id: str | None) -> None:
    """Bind a receipt to the principal that started it."""
    with immediate(db):
        write(
            db,
            "INSERT INTO receipt_links (receipt_id, principal, item_id, created_at)"
            " VALUES (?, ?, ?, ?) ON CONFLICT(receipt_id) DO NOTHING",
            [receipt_id, principal, item_id, clock.iso()],
        )


def linked(db: SidecarDb, receipt_id: str) -> bool:
    """True when some principal started ``receipt_id`` through the sidecar."""
    row = fetch_one(db, "SELECT 1 FROM receipt_links WHERE receipt_id = ?", [receipt_id])
    return row is not None


def may_read_proxied(origin: dict[str, Any] | None, *, local: bool, owns_item: bool) -> bool:
    """Whether ``principal`` may read a receipt it did not start through the sidecar.

    Only a receipt started through ``chit proxy`` qualifies, and only for the local
    principal (stdio: the agent runs as the user whose proxy started it) or for the
    principal that owns the work item the host's call named.

    Args:
        origin: The gateway's :meth:`ReceiptGateway.origin` answer.
        local: The caller is the stdio (or ``--no-auth``) principal.
        owns_item: The caller owns the anchor of ``origin["work_ref"]``.
    """
    if origin is None or not origin.get("proxied"):
        return False
    return local or owns_item


def owns(db: SidecarDb, receipt_id: str, principal: str) -> bool:
    """True when ``principal`` started ``receipt_id`` through this sidecar."""
    row = fetch_one(
        db,
        "SELECT 1 FROM receipt_links WHERE receipt_id = ? AND principal = ?",
        [receipt_id, principal],
    )
    return row is not None
