"""Which action works where: by screen, and by the selected receipt's state.

One pure function decides for the footer (``check_action``), the ``?`` screen and the
command palette alike, so a key is shown exactly where pressing it does something.
Textual reads ``True`` as shown, ``False`` as hidden and ``None`` as greyed out; chit
greys out only what read-only mode forbids (the action exists, but not here, now).
"""

from __future__ import annotations

from enum import StrEnum

from chit.receipts import AcceptanceState, Receipt


class Place(StrEnum):
    """Where the person is."""

    MAIN = "main"
    DETAIL = "detail"
    INBOX = "inbox"
    SERVERS = "servers"
    LOG = "log"
    """A server's protocol log."""
    FORM = "form"
    """A full-screen form (new call): typing goes to fields, only its own keys act."""
    MODAL = "modal"
    """A dialog over another screen: only the dialog's keys act."""
    HELP = "help"


NAVIGATION = {"inbox": Place.INBOX, "servers": Place.SERVERS, "new_call": Place.FORM}
"""Actions that open a screen, and the place they open."""

RECEIPT_ACTIONS = frozenset({"answer", "cancel_task", "accept", "reject"})
"""Actions on the selected receipt."""

MUTATING = frozenset({"answer", "cancel_task", "accept", "reject", "new_call", "undo"})
"""Actions that change something: greyed out while read-only."""

NEEDS_ENGINE = frozenset({"protocol_log"})
"""Actions that only an engine can answer: greyed out while read-only (no engine runs)."""

BROWSING = frozenset({Place.MAIN, Place.DETAIL, Place.INBOX, Place.SERVERS, Place.LOG})
"""Places where the app's own keys act."""


def can_answer(receipt: Receipt | None) -> bool:
    """A pending prompt waits on ``receipt``."""
    return receipt is not None and bool(receipt.pending_inputs)


def can_cancel(receipt: Receipt | None) -> bool:
    """``receipt`` is a live task (cooperative cancel may still apply)."""
    return receipt is not None and not receipt.is_terminal and not receipt.synchronous


def can_judge(receipt: Receipt | None, verdict: AcceptanceState) -> bool:
    """``receipt`` ended and its acceptance is not already ``verdict``."""
    return receipt is not None and receipt.is_terminal and receipt.acceptance.state is not verdict


def allowed(
    action: str,
    place: Place,
    receipt: Receipt | None,
    *,
    readonly: bool = False,
    has_prompt: bool = False,
    can_undo: bool = False,
    server: str | None = None,
) -> bool | None:
    """Whether ``action`` (an app-level action name) works at ``place`` now.

    Args:
        action: the action name (``answer``, ``cancel_task``, ``inbox``, …).
        place: the active screen's kind.
        receipt: the selected receipt there, if any.
        readonly: nothing may change (greys out what would otherwise work).
        has_prompt: the selected row is a prompt or question (the inbox's rows).
        can_undo: a verdict was given a moment ago and may be taken back.
        server: the server selected there (a receipt's, or the servers screen's row).
    """
    if action == "help":
        return place is not Place.HELP
    if place not in BROWSING:
        return False
    verdict: bool
    if action in NAVIGATION:
        verdict = NAVIGATION[action] is not place
    elif action == "answer":
        verdict = has_prompt or can_answer(receipt)
    elif action == "cancel_task":
        verdict = can_cancel(receipt)
    elif action == "accept":
        verdict = can_judge(receipt, AcceptanceState.ACCEPTED)
    elif action == "reject":
        verdict = can_judge(receipt, AcceptanceState.REJECTED)
    elif action == "undo":
        verdict = can_undo
    elif action == "protocol_log":
        verdict = place is not Place.LOG and server is not None
    else:  # quit, reconcile, the palette's own: wherever the app's keys act
        verdict = True
    if verdict and readonly and action in MUTATING | NEEDS_ENGINE:
        return None
    return verdict
