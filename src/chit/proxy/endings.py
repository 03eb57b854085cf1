"""How a receipt of chit proxy's inbox questions ends (:mod:`chit.proxy.asks`)."""

from __future__ import annotations

from mcp_types import INTERNAL_ERROR

from chit.proxy.models import Answer
from chit.receipts import (
    AnswerStatus,
    Event,
    HostLeft,
    InputAnswered,
    LifecycleState,
    ObservationSource,
    Receipt,
    ResultObserved,
    StatusObserved,
)
from chit.reconcile import result_event
from chit.tasks.client import TaskError
from chit.tasks.client.parse import parse_call_result


def call_end_events(answer: Answer | None, *, stopped: bool, digest_key: bytes) -> list[Event]:
    """What ended a call that had a question in chit's inbox, as receipt events.

    ``answer`` None: the host cancelled, timed out or left; ``stopped``: ``chit cancel``.
    """
    if answer is None or stopped:
        why = "cancelled in chit" if stopped else "the host cancelled, timed out or left"
        events: list[Event] = [] if stopped else [HostLeft(why=why)]
        events.append(
            StatusObserved(
                status=LifecycleState.CANCELLED,
                source=ObservationSource.CANCEL,
                message=f"the call was cancelled on the server: {why}",
            )
        )
        return events
    if answer.error is not None:
        code = answer.error.get("code")
        message = str(answer.error.get("message", ""))
        return [
            ResultObserved(
                is_error=True,
                error_code=code if isinstance(code, int) else INTERNAL_ERROR,
                error_message=message[:2000],
                status=LifecycleState.FAILED,
            )
        ]
    try:
        result = parse_call_result(answer.result or {}, "tools/call")
    except TaskError as exc:
        return [
            ResultObserved(
                is_error=True,
                error_code=INTERNAL_ERROR,
                error_message=f"the server's answer cannot be read: {exc.message}",
                status=LifecycleState.FAILED,
            )
        ]
    return [result_event(result, None, status=LifecycleState.COMPLETED, digest_key=digest_key)]


def alone_end_events(receipt: Receipt, *, stopped: bool) -> list[Event]:
    """The end of a question the server asked outside any call (its receipt's only one).

    Answered or declined in chit: ``completed`` (the server has the answer or the
    refusal). Not answered — the server stopped waiting, or ``chit cancel`` (``stopped``):
    ``cancelled``, the question lost.
    """
    answered = [q for q in receipt.input_requests if not q.is_pending]
    if stopped or not answered:
        why = "cancelled in chit" if stopped else "the server stopped waiting for it"
        events: list[Event] = [
            InputAnswered(key=q.key, status=AnswerStatus.LOST) for q in receipt.pending_inputs
        ]
        events.append(
            StatusObserved(
                status=LifecycleState.CANCELLED,
                source=ObservationSource.CANCEL,
                message=f"the question was not answered: {why}",
            )
        )
        return events
    how = answered[-1].answer_status
    what = "answered in chit"
    if how is not AnswerStatus.ANSWERED:
        what = f"{how} in chit (the server got an error)"
    return [ResultObserved(summary=f"the question was {what}", status=LifecycleState.COMPLETED)]


__all__ = ["alone_end_events", "call_end_events"]
