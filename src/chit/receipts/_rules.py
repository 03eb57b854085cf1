"""Status and result rules (see ``transitions`` for the rules in prose)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

from chit.receipts.events import (
    ResultObserved,
    StatusObserved,
)
from chit.receipts.models import (
    CancelInfo,
    InputRequest,
    Outcome,
    Receipt,
    bound_text,
)
from chit.receipts.policy import (
    classify_rpc_error,
    effective_poll_ms,
    expiry,
    stale_deadline,
)
from chit.receipts.states import (
    AnswerStatus,
    CancelPosture,
    LifecycleState,
    ObservationKind,
    RetrievalCondition,
)

K = ObservationKind
LIVE_CANCEL = (CancelPosture.REQUESTED, CancelPosture.ACKNOWLEDGED)


class Step(NamedTuple):
    """What one rule decided: the new receipt and the timeline row's fields."""

    receipt: Receipt
    kind: ObservationKind
    status: LifecycleState | None = None
    message: str | None = None
    rejected: bool = False  # the event must not change anything (out of order, refused)


def status_rule(r: Receipt, ev: StatusObserved, now: datetime) -> Step:
    older = (
        ev.server_updated_at is not None
        and r.server_updated_at is not None
        and ev.server_updated_at < r.server_updated_at
    )
    if older:
        why = f"{ev.status} reported with an older update time than the recorded {r.state}"
        return Step(r, K.OUT_OF_ORDER, ev.status, why, rejected=True)
    if _before_a_prompt(r, ev):
        why = f"{ev.status} reported to a request sent before the pending prompt arrived"
        return Step(r, K.OUT_OF_ORDER, ev.status, why, rejected=True)
    if r.is_terminal:
        if ev.status is not r.state:
            why = f"{ev.status} after terminal {r.state}: ignored, terminal states never change"
            return Step(r, K.OUT_OF_ORDER, ev.status, why, rejected=True)
        refreshed = r.model_copy(
            update={
                "status_at": now,
                "retrieval": RetrievalCondition.FRESH,
                "retrieval_error": None,
                "retrieval_failures": 0,
            }
        )
        return Step(refreshed, K.STATUS, ev.status, ev.message)
    return Step(status_update(r, ev, now), K.STATUS, ev.status, ev.message)


def _before_a_prompt(r: Receipt, ev: StatusObserved) -> bool:
    """A live non-input status answering a request sent before a pending prompt arrived.

    A 2025 server may answer ``tasks/get`` from the row as it was just before its task
    parked again, and send the new prompt on ``tasks/result`` ahead of that reply (a
    tool that asks, gets its answer, then asks again). Applied, that status would mark
    the new prompt lost although the server's request for it is open.
    """
    if ev.asked_at is None or ev.input_requests is not None:
        return False  # a 2026 snapshot says itself which prompts are pending
    if ev.status is LifecycleState.INPUT_REQUIRED or ev.status.is_terminal:
        return False
    return any(q.is_pending and q.received_at >= ev.asked_at for q in r.input_requests)


def status_update(r: Receipt, ev: StatusObserved, now: datetime) -> Receipt:
    """Return ``r`` with a *live* status applied (no terminal/ordering guard: use ``apply``).

    Exposed for building a new receipt from the server's create reply.
    """
    poll = ev.poll_interval_ms if ev.poll_interval_ms is not None else r.poll_interval_ms
    created = r.server_created_at or ev.server_created_at
    ttl = None if ev.unlimited_ttl else (ev.ttl_ms if ev.ttl_ms is not None else r.ttl_ms)
    terminal = ev.status.is_terminal
    if not terminal:
        next_check: datetime | None = now + timedelta(milliseconds=effective_poll_ms(poll))
    else:
        # A terminal task is checked once more only to retrieve its result.
        next_check = now if r.outcome is None else None
    return r.model_copy(
        update={
            "state": ev.status,
            "status_message": bound_text(ev.message),
            "status_at": now,
            "server_created_at": created,
            "server_updated_at": ev.server_updated_at or r.server_updated_at,
            "poll_interval_ms": poll,
            "ttl_ms": ttl,
            "expires_at": expiry(created or r.accepted_at, ttl),
            "input_requests": _inputs_after_status(r, ev, now),
            "cancel": _cancel_after_status(r.cancel, ev.status, now),
            "retrieval": RetrievalCondition.FRESH,
            "retrieval_error": None,
            "retrieval_failures": 0,
            "next_check_at": next_check,
            "stale_after": None if terminal else stale_deadline(now, poll),
        }
    )


def lose(q: InputRequest) -> InputRequest:
    if not q.is_pending:
        return q
    return q.model_copy(update={"answer_status": AnswerStatus.LOST})


def _inputs_after_status(r: Receipt, ev: StatusObserved, now: datetime) -> tuple[InputRequest, ...]:
    requests = list(r.input_requests)
    leaving = ev.status is not LifecycleState.INPUT_REQUIRED and (
        r.state is LifecycleState.INPUT_REQUIRED or ev.status.is_terminal
    )
    if leaving:
        # The task moved on without (all of) our answers: they can no longer be given.
        requests = [lose(q) for q in requests]
    if ev.input_requests is not None:
        snapshot = {seen.key for seen in ev.input_requests}
        # A snapshot is complete: a pending key missing from it was withdrawn.
        requests = [q if q.key in snapshot else lose(q) for q in requests]
        if ev.status is LifecycleState.INPUT_REQUIRED:
            known = {q.key for q in requests}
            for seen in ev.input_requests:
                if seen.key in known:
                    continue  # dedupe: answered keys are never re-added as pending
                known.add(seen.key)
                requests.append(
                    InputRequest(
                        key=seen.key,
                        kind=seen.kind,
                        message=seen.message,
                        requested_schema=seen.requested_schema,
                        url=seen.url,
                        received_at=now,
                    )
                )
    return tuple(requests)


def _cancel_after_status(cancel: CancelInfo, status: LifecycleState, now: datetime) -> CancelInfo:
    if not status.is_terminal or cancel.posture not in LIVE_CANCEL:
        return cancel
    return cancel.model_copy(
        update={
            "posture": CancelPosture.OBSERVED,
            "observed_at": now,
            "observed_state": status,
            "completed_despite_cancel": status is LifecycleState.COMPLETED,
        }
    )


# --- result --------------------------------------------------------------------------


def result_rule(r: Receipt, ev: ResultObserved, now: datetime) -> Step:
    if ev.status is not None:
        step = status_rule(r, StatusObserved(status=ev.status, source=ev.source), now)
        if step.rejected:
            return step
        r = step.receipt
    code = ev.error_code
    is_error = ev.is_error or code is not None
    if r.outcome is not None:
        same = (r.outcome.result_digest, r.outcome.error_code, r.outcome.is_error) == (
            ev.result_digest,
            code,
            is_error,
        )
        if same:
            return Step(r, K.RESULT, r.state, "result already recorded")
        why = "a different result after the recorded one: kept the first"
        return Step(r, K.OUT_OF_ORDER, r.state, why, rejected=True)
    failure = ev.failure_class
    if failure is None and code is not None:
        failure = classify_rpc_error(code)
    outcome = Outcome(
        is_error=is_error,
        result_digest=ev.result_digest,
        summary=ev.summary,
        structured_keys=ev.structured_keys,
        error_code=code,
        error_message=ev.error_message,
        failure_class=failure,
        retrieved_at=now,
    )
    # On a live task (result seen before its terminal status) check the status right away.
    next_check = None if r.is_terminal else now
    new = r.model_copy(update={"outcome": outcome, "next_check_at": next_check})
    message = ev.error_message if code is not None else ev.summary
    return Step(new, K.RESULT, r.state, message)
