"""Unit tests for chit.receipts transitions: one test per rule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from chit.receipts import (
    AcceptanceDecided,
    AcceptanceState,
    AnswerStatus,
    CancelAcknowledged,
    CancelPosture,
    CancelRequested,
    CancelUnsupported,
    FailureClass,
    InputAnswered,
    InputRequested,
    InputRequestSeen,
    LifecycleState,
    ObservationKind,
    Receipt,
    ResultObserved,
    RetrievalCondition,
    RetrievalFailed,
    RetrievalOk,
    StatusObserved,
    TaskProtocol,
    apply,
    freshness,
    is_done,
    is_success,
    new_intent,
    open_receipt,
    outcome_unresolved,
    sync_receipt,
)

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
W, IR = LifecycleState.WORKING, LifecycleState.INPUT_REQUIRED
C, F, X = LifecycleState.COMPLETED, LifecycleState.FAILED, LifecycleState.CANCELLED


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def make(
    status: LifecycleState = W,
    protocol: TaskProtocol = TaskProtocol.EXTENSION,
    ttl_ms: int | None = 60_000,
    poll_ms: int | None = 2_000,
    check: str | None = "not isError",
) -> Receipt:
    intent = new_intent(
        request_key="01J000000000000000000000RK",
        server="demo",
        tool="slow",
        args_digest="d",
        now=T0,
    )
    return open_receipt(
        intent,
        receipt_id="01J000000000000000000000RC",
        protocol=protocol,
        created=StatusObserved(status=status, ttl_ms=ttl_ms, poll_interval_ms=poll_ms),
        now=T0,
        acceptance_check=check,
    ).receipt


def ok_result(digest: str = "sha256:aa") -> ResultObserved:
    return ResultObserved(result_digest=digest, summary="done")


def test_open_receipt_sets_policy_fields() -> None:
    r = make()
    assert r.state is W and r.version == 1
    assert r.expires_at == at(60) and r.next_check_at == at(2)
    assert r.stale_after == at(15)  # 3 × 2 s is below the 15 s floor
    assert r.acceptance.check == "not isError"
    with pytest.raises(ValueError):
        open_receipt(
            new_intent(request_key="k", server="s", tool="t", args_digest="d", now=T0),
            receipt_id="r",
            protocol=TaskProtocol.SYNC,
            created=StatusObserved(status=W),
            now=T0,
        )


def test_status_applies_and_bumps_version() -> None:
    tr = apply(make(), StatusObserved(status=IR, message="need it"), at(1))
    assert tr.applied and tr.receipt.state is IR and tr.receipt.version == 2
    assert "state" in tr.changes and tr.observation.kind is ObservationKind.STATUS


def test_terminal_never_changes_and_late_status_is_out_of_order() -> None:
    done = apply(make(), StatusObserved(status=C), at(1)).receipt
    for late in (W, IR, F, X):
        tr = apply(done, StatusObserved(status=late), at(2))
        assert tr.receipt is done and not tr.applied
        assert tr.observation.kind is ObservationKind.OUT_OF_ORDER
        assert tr.observation.status is late


def test_repeated_terminal_status_refreshes_bookkeeping_only() -> None:
    done = apply(make(), StatusObserved(status=C, message="m"), at(1)).receipt
    tr = apply(done, StatusObserved(status=C), at(5))
    assert tr.receipt.state is C and tr.changes == ("status_at",)
    assert tr.receipt.status_message == "m"


def test_older_server_update_is_out_of_order() -> None:
    r = apply(make(), StatusObserved(status=IR, server_updated_at=at(10)), at(10)).receipt
    tr = apply(r, StatusObserved(status=W, server_updated_at=at(5)), at(11))
    assert not tr.applied and tr.observation.kind is ObservationKind.OUT_OF_ORDER


def test_cancel_requested_then_completed_is_completed_despite_cancel() -> None:
    r = apply(make(), CancelRequested(), at(1)).receipt
    assert r.cancel.posture is CancelPosture.REQUESTED and r.state is W
    r = apply(r, CancelAcknowledged(), at(2)).receipt
    assert r.cancel.posture is CancelPosture.ACKNOWLEDGED and r.state is W
    r = apply(r, StatusObserved(status=C), at(3)).receipt
    assert r.state is C
    assert r.cancel.posture is CancelPosture.OBSERVED and r.cancel.observed_state is C
    assert r.cancel.completed_despite_cancel and r.cancel.observed_at == at(3)


def test_cancel_observed_cancelled() -> None:
    r = apply(make(), CancelRequested(), at(1)).receipt
    r = apply(r, StatusObserved(status=X), at(2)).receipt
    assert r.cancel.posture is CancelPosture.OBSERVED and not r.cancel.completed_despite_cancel


def test_legacy_cancel_ack_carries_cancelled_status() -> None:
    r = apply(make(protocol=TaskProtocol.LEGACY), CancelRequested(), at(1)).receipt
    r = apply(r, CancelAcknowledged(status=X), at(2)).receipt
    assert r.state is X and r.cancel.posture is CancelPosture.OBSERVED
    assert r.cancel.acknowledged_at == at(2)


def test_cancel_on_terminal_is_unnecessary() -> None:
    done = apply(make(), StatusObserved(status=F), at(1)).receipt
    r = apply(done, CancelRequested(), at(2)).receipt
    assert r.cancel.posture is CancelPosture.UNNECESSARY and r.state is F


def test_cancel_unsupported_and_already_terminal() -> None:
    r = apply(make(), CancelRequested(), at(1)).receipt
    assert apply(r, CancelUnsupported(reason="no"), at(2)).receipt.cancel.posture is (
        CancelPosture.UNSUPPORTED
    )
    refused = apply(r, CancelUnsupported(already_terminal=True), at(2)).receipt
    assert refused.cancel.posture is CancelPosture.UNNECESSARY and refused.state is W


def test_completed_with_is_error_is_unresolved_and_not_auto_accepted() -> None:
    r = apply(make(), StatusObserved(status=C), at(1)).receipt
    r = apply(r, ResultObserved(is_error=True, summary="boom"), at(2)).receipt
    assert r.state is C and r.outcome is not None and r.outcome.is_error
    assert not is_success(r) and outcome_unresolved(r)
    auto = AcceptanceDecided(state=AcceptanceState.ACCEPTED, automatic=True, decided_by="chit")
    tr = apply(r, auto, at(3))
    assert not tr.applied and tr.receipt.acceptance.state is AcceptanceState.PENDING
    manual = apply(r, AcceptanceDecided(state=AcceptanceState.ACCEPTED, why="expected"), at(3))
    assert manual.receipt.acceptance.state is AcceptanceState.ACCEPTED and is_done(manual.receipt)


def test_auto_accept_success_and_no_override_of_manual() -> None:
    r = apply(make(), ResultObserved(result_digest="x", summary="ok", status=C), at(1)).receipt
    assert is_success(r) and not is_done(r)
    rej = apply(r, AcceptanceDecided(state=AcceptanceState.REJECTED, why="wrong"), at(2)).receipt
    auto = AcceptanceDecided(state=AcceptanceState.ACCEPTED, automatic=True)
    assert not apply(rej, auto, at(3)).applied
    assert apply(r, auto, at(3)).receipt.acceptance.state is AcceptanceState.ACCEPTED


def test_acceptance_refused_on_live_task() -> None:
    tr = apply(make(), AcceptanceDecided(state=AcceptanceState.ACCEPTED), at(1))
    assert not tr.applied


def test_protocol_generations_record_what_the_server_says() -> None:
    # 2025-11-25: a tool error is `failed`; 2026: `completed` + isError. Both unresolved.
    legacy = apply(make(protocol=TaskProtocol.LEGACY), StatusObserved(status=F), at(1)).receipt
    legacy = apply(legacy, ResultObserved(is_error=True, summary="bad"), at(2)).receipt
    ext = apply(make(), ResultObserved(is_error=True, summary="bad", status=C), at(1)).receipt
    assert legacy.state is F and ext.state is C
    assert outcome_unresolved(legacy) and outcome_unresolved(ext)


def test_result_recorded_once() -> None:
    r = apply(make(), ResultObserved(result_digest="a", status=C), at(1)).receipt
    assert apply(r, ResultObserved(result_digest="a"), at(2)).changes == ()
    tr = apply(r, ResultObserved(result_digest="b"), at(2))
    assert not tr.applied and tr.observation.kind is ObservationKind.OUT_OF_ORDER
    assert tr.receipt.outcome is not None and tr.receipt.outcome.result_digest == "a"


def test_rpc_error_outcome_is_classified() -> None:
    r = apply(make(), ResultObserved(error_code=-32603, error_message="x", status=F), at(1))
    outcome = r.receipt.outcome
    assert outcome is not None and outcome.is_error
    assert outcome.failure_class is FailureClass.TRANSIENT


@pytest.mark.parametrize(
    "condition",
    [RetrievalCondition.UNREACHABLE, RetrievalCondition.INCOMPATIBLE, RetrievalCondition.VANISHED],
)
def test_retrieval_failures_never_change_state(condition: RetrievalCondition) -> None:
    r = apply(make(), StatusObserved(status=IR), at(1)).receipt
    tr = apply(r, RetrievalFailed(condition=condition, message="x"), at(2))
    assert tr.receipt.state is IR and tr.receipt.retrieval is condition
    assert tr.observation.kind is ObservationKind.RETRIEVAL_ERROR


def test_vanished_before_ttl_expired_after() -> None:
    r = make(ttl_ms=60_000)
    gone = RetrievalFailed(condition=RetrievalCondition.EXPIRED, error_code=-32602)
    assert apply(r, gone, at(30)).receipt.retrieval is RetrievalCondition.VANISHED
    assert apply(r, gone, at(60)).receipt.retrieval is RetrievalCondition.EXPIRED
    unlimited = make(ttl_ms=None)
    assert apply(unlimited, gone, at(10_000)).receipt.retrieval is RetrievalCondition.VANISHED


def test_unreachable_backs_off_and_recovers() -> None:
    r = make()
    down = RetrievalFailed(condition=RetrievalCondition.UNREACHABLE, message="refused")
    r1 = apply(r, down, at(1)).receipt
    r2 = apply(r1, down, at(2)).receipt
    assert r1.next_check_at == at(1 + 4) and r2.next_check_at == at(2 + 8)
    back = apply(r2, RetrievalOk(), at(3)).receipt
    assert back.retrieval is RetrievalCondition.FRESH and back.retrieval_failures == 0
    lost = apply(r, RetrievalFailed(condition=RetrievalCondition.VANISHED), at(1)).receipt
    assert not apply(lost, RetrievalOk(), at(2)).applied


def test_freshness_goes_stale_for_live_tasks_only() -> None:
    r = make(poll_ms=10_000)
    assert freshness(r, at(29)) is RetrievalCondition.FRESH
    assert freshness(r, at(30)) is RetrievalCondition.STALE
    done = apply(r, StatusObserved(status=C), at(1)).receipt
    assert freshness(done, at(10_000)) is RetrievalCondition.FRESH


def test_input_requests_dedupe_and_answered_never_pending_again() -> None:
    seen = InputRequestSeen(key="q1", message="Delete it?", requested_schema={"type": "object"})
    snap = StatusObserved(status=IR, input_requests=(seen, seen))
    r = apply(make(), snap, at(1)).receipt
    assert [q.key for q in r.input_requests] == ["q1"] and r.pending_inputs
    r = apply(r, InputAnswered(key="q1"), at(2)).receipt
    assert r.input_requests[0].answer_status is AnswerStatus.ANSWERED
    r = apply(r, snap, at(3)).receipt  # server has not processed the answer yet
    assert not r.pending_inputs and len(r.input_requests) == 1
    assert not apply(r, InputAnswered(key="q1", status=AnswerStatus.DECLINED), at(4)).applied
    assert not apply(r, InputRequested(request=seen), at(4)).applied


def test_leaving_input_required_loses_outstanding_requests() -> None:
    seen = InputRequestSeen(key="q1")
    r = apply(make(), StatusObserved(status=IR, input_requests=(seen,)), at(1)).receipt
    r = apply(r, StatusObserved(status=W), at(2)).receipt
    assert r.input_requests[0].answer_status is AnswerStatus.LOST


def test_snapshot_withdrawal_loses_request() -> None:
    a, b = InputRequestSeen(key="a"), InputRequestSeen(key="b")
    r = apply(make(), StatusObserved(status=IR, input_requests=(a, b)), at(1)).receipt
    r = apply(r, StatusObserved(status=IR, input_requests=(b,)), at(2)).receipt
    assert {q.key: q.answer_status for q in r.input_requests} == {
        "a": AnswerStatus.LOST,
        "b": AnswerStatus.PENDING,
    }


def test_legacy_elicitation_added_then_lost_on_terminal() -> None:
    r = make(protocol=TaskProtocol.LEGACY, status=IR)
    r = apply(r, InputRequested(request=InputRequestSeen(key="e1", message="?")), at(1)).receipt
    r = apply(r, StatusObserved(status=IR), at(2)).receipt  # legacy status: no snapshot
    assert r.pending_inputs
    r = apply(r, StatusObserved(status=F), at(3)).receipt
    assert not r.pending_inputs


def test_sync_receipt() -> None:
    intent = new_intent(request_key="k", server="s", tool="t", args_digest="d", now=T0)
    ok = sync_receipt(
        intent, receipt_id="r", result=ok_result(), now=T0, not_task_reason="forbidden"
    ).receipt
    assert ok.synchronous and ok.state is C and ok.protocol is TaskProtocol.SYNC and is_success(ok)
    err = sync_receipt(
        intent,
        receipt_id="r",
        result=ResultObserved(error_code=-32602, error_message="bad"),
        now=T0,
        not_task_reason="no tasks",
    ).receipt
    assert err.state is F and err.outcome is not None
    assert err.outcome.failure_class is FailureClass.PERMANENT


def test_naive_now_rejected() -> None:
    with pytest.raises(ValueError):
        apply(make(), StatusObserved(status=W), datetime(2026, 1, 1))


def test_malformed_events_rejected() -> None:
    with pytest.raises(ValueError):
        apply(make(), RetrievalFailed(condition=RetrievalCondition.FRESH), at(1))
    with pytest.raises(ValueError):
        apply(make(), InputAnswered(key="x", status=AnswerStatus.PENDING), at(1))
