"""A person's verdict on a terminal receipt's outcome (no server, no vault needed)."""

from __future__ import annotations

from chit.errors import Conflict, UsageError
from chit.receipts import AcceptanceDecided, AcceptanceState, Receipt
from chit.reconcile import ReceiptWriter


def decide_acceptance(
    writer: ReceiptWriter, receipt_id: str, state: AcceptanceState, why: str | None
) -> Receipt:
    """Record a person's verdict on a terminal receipt.

    Raises:
        Conflict: the receipt is not terminal yet.
        UsageError: a rejection without a reason.
    """
    if state is AcceptanceState.REJECTED and not (why or "").strip():
        raise UsageError("say why the outcome is rejected (--why)")
    receipt = writer.store.receipts.get_by_prefix(receipt_id)
    if not receipt.is_terminal:
        raise Conflict(f"receipt {receipt.receipt_id} is {receipt.state}: decide once it ended")
    event = AcceptanceDecided(
        state=state, check=receipt.acceptance.check, why=why, decided_by="user"
    )
    after = writer.apply(receipt.receipt_id, [event])
    if after.acceptance.state is not state:
        raise Conflict(f"receipt {receipt.receipt_id}: the acceptance could not be recorded")
    return after


def reopen_acceptance(writer: ReceiptWriter, receipt_id: str) -> Receipt:
    """Take back a verdict: the outcome waits for a person's judgment again (undo).

    Raises:
        Conflict: the receipt is not terminal, or nobody has judged it.
    """
    receipt = writer.store.receipts.get_by_prefix(receipt_id)
    if receipt.is_terminal and receipt.acceptance.state is AcceptanceState.PENDING:
        raise Conflict(f"receipt {receipt.receipt_id} has no verdict to take back")
    return decide_acceptance(writer, receipt.receipt_id, AcceptanceState.PENDING, None)
