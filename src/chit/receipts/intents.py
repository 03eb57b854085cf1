"""Intent lifecycle: written before the request leaves, so a crash is ``unknown``, not lost.

::

    sending ──► accepted | rejected | unknown
    unknown ──► accepted | rejected | abandoned | retried

``accepted``, ``rejected``, ``abandoned`` and ``retried`` are final. An ``unknown`` intent
is never re-sent automatically: the server may have started the work, and neither task
protocol lets a client find a task whose create reply it never saw. A person decides.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from chit.receipts.models import Intent, bound_text
from chit.receipts.states import IntentState

__all__ = [
    "IntentTransitionError",
    "advance_intent",
    "new_intent",
    "resume_intent",
    "retry_intent",
]

_S = IntentState
_ALLOWED: Final[dict[IntentState, frozenset[IntentState]]] = {
    _S.SENDING: frozenset({_S.ACCEPTED, _S.REJECTED, _S.UNKNOWN}),
    _S.UNKNOWN: frozenset({_S.ACCEPTED, _S.REJECTED, _S.ABANDONED, _S.RETRIED}),
}


class IntentTransitionError(ValueError):
    """The requested intent transition is not allowed from the intent's state."""


def new_intent(
    *,
    request_key: str,
    server: str,
    tool: str,
    args_digest: str,
    now: datetime,
    purpose: str | None = None,
    work_ref: str | None = None,
    attempts: int = 1,
) -> Intent:
    """Return a ``sending`` intent, to be stored *before* the request is sent.

    Args:
        request_key: the intent's key (``ids.new_request_key``).
        server: the server name.
        tool: the tool name.
        args_digest: ``digest.args_digest`` of the arguments (never the arguments).
        now: the current time.
        purpose: the one-line purpose.
        work_ref: the work item this call belongs to.
        attempts: 1 for a first attempt, more for a deliberate retry.

    Returns:
        The new intent.
    """
    return Intent(
        request_key=request_key,
        server=server,
        tool=tool,
        args_digest=args_digest,
        purpose=purpose,
        work_ref=work_ref,
        state=IntentState.SENDING,
        created_at=now,
        updated_at=now,
        attempts=attempts,
    )


def advance_intent(
    intent: Intent,
    state: IntentState,
    now: datetime,
    *,
    receipt_id: str | None = None,
    error: str | None = None,
) -> Intent:
    """Move ``intent`` to ``state``.

    Args:
        intent: the current intent.
        state: the new state.
        now: the current time.
        receipt_id: required for ``accepted`` (the receipt written for it).
        error: why it was rejected / became unknown (bounded).

    Returns:
        The updated intent.

    Raises:
        IntentTransitionError: if the transition is not allowed or ``receipt_id`` is missing.
    """
    if state not in _ALLOWED.get(intent.state, frozenset()):
        raise IntentTransitionError(f"intent cannot go from {intent.state} to {state}")
    if state is IntentState.ACCEPTED and not receipt_id:
        raise IntentTransitionError("an accepted intent needs its receipt id")
    return intent.model_copy(
        update={
            "state": state,
            "updated_at": now,
            "receipt_id": receipt_id if receipt_id is not None else intent.receipt_id,
            "error": bound_text(error) if error is not None else intent.error,
        }
    )


def resume_intent(intent: Intent, now: datetime) -> Intent:
    """On restart, turn a ``sending`` intent into ``unknown``; other states are returned as is.

    The process died between writing the intent and learning the answer, so whether the
    server accepted the call is unknown.
    """
    if intent.state is not IntentState.SENDING:
        return intent
    return advance_intent(
        intent, IntentState.UNKNOWN, now, error="interrupted before the server's reply"
    )


def retry_intent(intent: Intent, now: datetime, request_key: str) -> tuple[Intent, Intent]:
    """Supersede an ``unknown`` intent by a new one the user chose to send.

    Args:
        intent: the unknown intent.
        now: the current time.
        request_key: the new intent's key.

    Returns:
        ``(old intent marked retried, new sending intent with attempts + 1)``.

    Raises:
        IntentTransitionError: if ``intent`` is not ``unknown``.
    """
    old = advance_intent(intent, IntentState.RETRIED, now)
    new = new_intent(
        request_key=request_key,
        server=intent.server,
        tool=intent.tool,
        args_digest=intent.args_digest,
        now=now,
        purpose=intent.purpose,
        work_ref=intent.work_ref,
        attempts=intent.attempts + 1,
    )
    return old, new
