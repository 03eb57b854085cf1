"""Cancellation, retrieval, input and acceptance rules."""

from __future__ import annotations

from datetime import datetime, timedelta

from chit.receipts._rules import LIVE_CANCEL, K, Step, lose, status_rule
from chit.receipts.events import (
    AcceptanceDecided,
    CancelAcknowledged,
    CancelUnsupported,
    HostLeft,
    InputAnswered,
    InputRequested,
    RetrievalFailed,
    StatusObserved,
)
from chit.receipts.models import (
    Acceptance,
    CancelInfo,
    InputRequest,
    Receipt,
    bound_text,
)
from chit.receipts.policy import (
    backoff_ms,
)
from chit.receipts.queries import classify_unknown_task, is_success
from chit.receipts.states import (
    AcceptanceState,
    AnswerStatus,
    CancelPosture,
    RetrievalCondition,
)


def _with_cancel(r: Receipt, **update: object) -> Receipt:
    return r.model_copy(
        update={"cancel": CancelInfo.model_validate({**r.cancel.model_dump(), **update})}
    )


def cancel_requested_rule(r: Receipt, now: datetime) -> Step:
    posture = r.cancel.posture
    if r.is_terminal:
        if posture in (CancelPosture.NOT_REQUESTED, CancelPosture.UNSUPPORTED):
            why = f"the task had already ended ({r.state})"
            new = _with_cancel(r, posture=CancelPosture.UNNECESSARY, reason=why)
            return Step(new, K.CANCEL_REQUESTED, r.state, f"cancel unnecessary: {why}")
        return Step(r, K.CANCEL_REQUESTED, r.state, f"cancel already {posture}")
    if posture in LIVE_CANCEL:
        return Step(r, K.CANCEL_REQUESTED, r.state, f"cancel already {posture}")
    new = _with_cancel(
        r, posture=CancelPosture.REQUESTED, requested_at=now, acknowledged_at=None, reason=None
    )
    return Step(new, K.CANCEL_REQUESTED, r.state, "cancel requested")


def cancel_acknowledged_rule(r: Receipt, ev: CancelAcknowledged, now: datetime) -> Step:
    cancel = r.cancel
    if r.is_terminal:
        if cancel.posture is CancelPosture.OBSERVED:
            new = _with_cancel(r, acknowledged_at=cancel.acknowledged_at or now)
        elif cancel.posture is CancelPosture.UNNECESSARY:
            new = r
        else:
            why = f"acknowledged after the task had ended ({r.state})"
            new = _with_cancel(r, posture=CancelPosture.UNNECESSARY, reason=why)
        return Step(new, K.CANCEL_ACKNOWLEDGED, ev.status, ev.message)
    new = _with_cancel(
        r,
        posture=CancelPosture.ACKNOWLEDGED,
        requested_at=cancel.requested_at or now,
        acknowledged_at=now,
        reason=None,
    )
    message = ev.message
    if ev.status is not None:
        step = status_rule(new, StatusObserved(status=ev.status, source=ev.source), now)
        if step.rejected:
            message = step.message  # keep the acknowledgement, drop the stale status
        else:
            new = step.receipt
    return Step(new, K.CANCEL_ACKNOWLEDGED, ev.status, message)


def cancel_unsupported_rule(r: Receipt, ev: CancelUnsupported) -> Step:
    if r.cancel.posture is CancelPosture.OBSERVED:
        return Step(r, K.CANCEL_UNSUPPORTED, r.state, ev.reason)
    if r.is_terminal or ev.already_terminal:
        posture = CancelPosture.UNNECESSARY
    else:
        posture = CancelPosture.UNSUPPORTED
    new = _with_cancel(r, posture=posture, reason=bound_text(ev.reason))
    return Step(new, K.CANCEL_UNSUPPORTED, r.state, ev.reason)


# --- retrieval -------------------------------------------------------------------------


def retrieval_failed_rule(r: Receipt, ev: RetrievalFailed, now: datetime) -> Step:
    condition = ev.condition
    if condition in (RetrievalCondition.FRESH, RetrievalCondition.STALE):
        raise ValueError(f"a retrieval failure cannot be {condition}")
    if condition.is_lost:
        condition = classify_unknown_task(r, now)
    failures = r.retrieval_failures + 1
    needs_check = not r.is_terminal or r.outcome is None
    if condition is RetrievalCondition.UNREACHABLE and needs_check:
        delay = timedelta(milliseconds=backoff_ms(r.poll_interval_ms, failures))
        next_check: datetime | None = now + delay
    else:
        next_check = None  # lost or incompatible: checking again the same way cannot help
    inputs = r.input_requests
    if condition.is_lost:
        inputs = tuple(lose(q) for q in inputs)
    detail = ev.message or str(condition)
    if ev.error_code is not None:
        detail = f"{detail} (code {ev.error_code})"
    new = r.model_copy(
        update={
            "retrieval": condition,
            "retrieval_error": bound_text(detail),
            "retrieval_failures": failures,
            "next_check_at": next_check,
            "input_requests": inputs,
        }
    )
    return Step(new, K.RETRIEVAL_ERROR, None, f"{condition}: {detail}")


def retrieval_ok_rule(r: Receipt) -> Step:
    if r.retrieval is not RetrievalCondition.UNREACHABLE:
        # Reaching the server proves nothing about a lost task or an unreadable reply.
        return Step(r, K.RETRIEVAL_OK, None, f"server reachable; condition stays {r.retrieval}")
    new = r.model_copy(
        update={
            "retrieval": RetrievalCondition.FRESH,
            "retrieval_error": None,
            "retrieval_failures": 0,
        }
    )
    return Step(new, K.RETRIEVAL_OK, None, "server reachable again")


# --- input -----------------------------------------------------------------------------


def input_requested_rule(r: Receipt, ev: InputRequested, now: datetime) -> Step:
    seen = ev.request
    if r.is_terminal:
        return Step(r, K.INPUT_REQUEST, r.state, f"request {seen.key} after the task ended")
    if r.input_request(seen.key) is not None:
        return Step(r, K.INPUT_REQUEST, r.state, f"request {seen.key} already recorded")
    request = InputRequest(
        key=seen.key,
        kind=seen.kind,
        message=seen.message,
        requested_schema=seen.requested_schema,
        url=seen.url,
        received_at=now,
    )
    new = r.model_copy(update={"input_requests": (*r.input_requests, request)})
    return Step(new, K.INPUT_REQUEST, r.state, seen.message)


def input_answered_rule(r: Receipt, ev: InputAnswered, now: datetime) -> Step:
    if ev.status is AnswerStatus.PENDING:
        raise ValueError("an answer cannot have status pending")
    request = r.input_request(ev.key)
    if request is None or not request.is_pending:
        state = "unknown" if request is None else str(request.answer_status)
        return Step(r, K.INPUT_ANSWERED, r.state, f"request {ev.key} is {state}: not answered")
    answered = request.model_copy(update={"answer_status": ev.status, "answered_at": now})
    inputs = tuple(answered if q.key == ev.key else q for q in r.input_requests)
    new = r.model_copy(update={"input_requests": inputs})
    return Step(new, K.INPUT_ANSWERED, r.state, f"request {ev.key} {ev.status}")


# --- acceptance ------------------------------------------------------------------------


def acceptance_rule(r: Receipt, ev: AcceptanceDecided, now: datetime) -> Step:
    def refuse(why: str) -> Step:
        return Step(r, K.ACCEPTANCE, r.state, why, rejected=True)

    if not r.is_terminal:
        return refuse(f"nothing to accept yet: the task is {r.state}")
    if ev.automatic:
        if r.acceptance.state is not AcceptanceState.PENDING:
            return refuse(f"already {r.acceptance.state}: an automatic check cannot override")
        if ev.state is AcceptanceState.ACCEPTED and not is_success(r):
            return refuse("an automatic check cannot accept an unresolved outcome")
    acceptance = Acceptance(
        state=ev.state,
        check=ev.check if ev.check is not None else r.acceptance.check,
        why=ev.why,
        decided_at=None if ev.state is AcceptanceState.PENDING else now,
        decided_by=None if ev.state is AcceptanceState.PENDING else ev.decided_by,
    )
    new = r.model_copy(update={"acceptance": acceptance})
    return Step(new, K.ACCEPTANCE, r.state, f"{ev.state} by {ev.decided_by}: {ev.why or ''}")


def host_left_rule(r: Receipt, ev: HostLeft, now: datetime) -> Step:
    """The host that started the task stopped waiting: noted once, the task runs on."""
    if r.host is None or r.host.left_at is not None:
        return Step(r, K.HOST, r.state, f"host stopped waiting ({ev.why})", rejected=True)
    host = r.host.model_copy(update={"left_at": now, "left_why": bound_text(ev.why)})
    ended = "" if r.is_terminal else "; the task runs on"
    message = f"{r.host.label} stopped waiting ({ev.why}){ended}"
    return Step(r.model_copy(update={"host": host}), K.HOST, r.state, message)
