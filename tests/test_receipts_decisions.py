"""The next-safe-decision table, one row per state/condition combination."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from chit.receipts import (
    AcceptanceDecided,
    AcceptanceState,
    Action,
    Actor,
    CancelAcknowledged,
    CancelRequested,
    Decision,
    Event,
    FailureClass,
    InputAnswered,
    InputKind,
    InputRequestSeen,
    LifecycleState,
    Receipt,
    ResultObserved,
    RetrievalCondition,
    RetrievalFailed,
    StatusObserved,
    TaskProtocol,
    apply,
    is_done,
    needs_user,
    new_intent,
    next_safe_decision,
    open_receipt,
    sync_receipt,
)
from chit.receipts.policy import MAX_RETRIEVAL_FAILURES

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
W, IR = LifecycleState.WORKING, LifecycleState.INPUT_REQUIRED
C, F, X = LifecycleState.COMPLETED, LifecycleState.FAILED, LifecycleState.CANCELLED
OK = ResultObserved(result_digest="sha256:1", summary="3 rows")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def receipt(
    *events: Event,
    protocol: TaskProtocol = TaskProtocol.EXTENSION,
    required: bool = True,
) -> Receipt:
    intent = new_intent(request_key="k", server="s", tool="t", args_digest="d", now=T0)
    r = open_receipt(
        intent,
        receipt_id="r",
        protocol=protocol,
        created=StatusObserved(status=W, ttl_ms=600_000, poll_interval_ms=5_000),
        now=T0,
        acceptance_check="rows > 0",
        acceptance_required=required,
    ).receipt
    for i, event in enumerate(events, start=1):
        r = apply(r, event, at(i)).receipt
    return r


def decide(r: Receipt, seconds: float = 10) -> Decision:
    return next_safe_decision(r, at(seconds))


def test_working_waits_until_next_check() -> None:
    d = decide(receipt(StatusObserved(status=W, message="step 2/5")), 2)
    assert (d.action, d.actor) == (Action.WAIT, Actor.CHIT)
    assert d.check_at == at(1 + 5) and "step 2/5" in d.reason


def test_stale_working_checks_now() -> None:
    d = decide(receipt(), 100)
    assert d.action is Action.CHECK and d.check_at == at(100) and "stale" in d.reason


def test_past_ttl_checks_whether_task_exists() -> None:
    r = receipt(StatusObserved(status=W, poll_interval_ms=300_000, ttl_ms=2_000))
    d = next_safe_decision(r, at(5))
    assert d.action is Action.CHECK and "TTL" in d.reason


def test_input_required_surfaces_exact_request_to_user() -> None:
    seen = InputRequestSeen(key="q", message="Delete 3 files?")
    r = receipt(StatusObserved(status=IR, input_requests=(seen,)))
    d = decide(r)
    assert (d.action, d.actor) == (Action.ANSWER_INPUT, Actor.USER)
    assert "Delete 3 files?" in d.reason and "not guess" in d.reason
    assert needs_user(r, at(10))


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        ("Please clarify what you're looking for:", "Please clarify what you're looking for. "),
        ("Delete 3 files?", "Delete 3 files? "),
        ("Pick one.", "Pick one. "),
        ("Pick one", "Pick one. "),
        ("  ", "(no message). "),
        (":", "(no message). "),
        (None, "(no message). "),
    ],
)
def test_the_request_ends_as_one_sentence(message: str | None, shown: str) -> None:
    """A server's own punctuation is kept, never doubled ("looking for:." was printed)."""
    seen = InputRequestSeen(key="q", message=message)
    d = decide(receipt(StatusObserved(status=IR, input_requests=(seen,))))
    assert f"] {shown}Answer, decline or cancel" in d.reason
    assert ":." not in d.reason and ".." not in d.reason


def test_url_request_names_the_url() -> None:
    seen = InputRequestSeen(key="u", kind=InputKind.URL, url="https://x.test/auth", message="m")
    d = decide(receipt(StatusObserved(status=IR, input_requests=(seen,))))
    assert "https://x.test/auth" in d.reason


def test_input_required_after_answer_waits() -> None:
    seen = InputRequestSeen(key="q")
    r = receipt(StatusObserved(status=IR, input_requests=(seen,)), InputAnswered(key="q"))
    assert decide(r, 3).action is Action.WAIT


def test_input_required_without_request_fetches_it() -> None:
    r = receipt(StatusObserved(status=IR), protocol=TaskProtocol.LEGACY)
    d = decide(r, 2)
    assert (d.action, d.actor) == (Action.CHECK, Actor.CHIT)


def test_cancel_requested_confirms_terminal_state() -> None:
    r = receipt(CancelRequested(), CancelAcknowledged())
    d = decide(r, 3)
    assert d.action is Action.CONFIRM_CANCEL and "may yet complete" in d.reason


def test_completed_without_result_retrieves_it() -> None:
    d = decide(receipt(StatusObserved(status=C)), 2)
    assert (d.action, d.actor) == (Action.RETRIEVE_RESULT, Actor.CHIT)


def test_completed_ok_evaluates_acceptance_then_done() -> None:
    r = receipt(StatusObserved(status=C), OK)
    d = decide(r)
    assert (d.action, d.actor) == (Action.EVALUATE, Actor.AGENT) and "rows > 0" in d.reason
    tr = apply(r, AcceptanceDecided(state=AcceptanceState.ACCEPTED, automatic=True), at(5))
    assert decide(tr.receipt).action is Action.PROCEED and is_done(tr.receipt)


def test_completed_ok_without_required_check_proceeds() -> None:
    r = receipt(StatusObserved(status=C), OK, required=False)
    assert decide(r).action is Action.PROCEED and is_done(r)


def test_completed_with_is_error_is_unresolved() -> None:
    r = receipt(ResultObserved(is_error=True, summary="quota exceeded", status=C))
    d = decide(r)
    assert d.action is Action.RESOLVE_ERROR and "unresolved" in d.reason
    assert "quota exceeded" in d.reason and not is_done(r)


def test_legacy_failed_tool_error_is_also_unresolved() -> None:
    r = receipt(
        StatusObserved(status=F), ResultObserved(is_error=True), protocol=TaskProtocol.LEGACY
    )
    d = decide(r)
    assert d.action is Action.RESOLVE_ERROR and "2025-11-25" in d.reason


def test_completed_despite_cancel_goes_to_user() -> None:
    r = receipt(CancelRequested(), StatusObserved(status=C), OK)
    d = decide(r)
    assert (d.action, d.actor) == (Action.EVALUATE, Actor.USER) and "cancel" in d.reason


def test_cancelled_as_requested_stops() -> None:
    assert decide(receipt(CancelRequested(), StatusObserved(status=X))).action is Action.STOP


def test_cancelled_unrequested_recovers() -> None:
    d = decide(receipt(StatusObserved(status=X, message="operator")))
    assert d.action is Action.RECOVER and "operator" in d.reason


@pytest.mark.parametrize(
    ("code", "failure"),
    [(-32603, FailureClass.TRANSIENT), (-32602, FailureClass.PERMANENT)],
)
def test_failed_with_rpc_error_recovers_without_blind_replay(
    code: int, failure: FailureClass
) -> None:
    r = receipt(ResultObserved(error_code=code, error_message="nope", status=F))
    d = decide(r)
    assert d.action is Action.RECOVER and str(failure) in d.reason and "blindly" in d.reason


@pytest.mark.parametrize(
    ("condition", "word"),
    [
        (RetrievalCondition.VANISHED, "vanished"),
        (RetrievalCondition.INCOMPATIBLE, "cannot read"),
    ],
)
def test_lost_or_unreadable_live_task_goes_to_user(
    condition: RetrievalCondition, word: str
) -> None:
    d = decide(receipt(StatusObserved(status=W), RetrievalFailed(condition=condition)))
    assert (d.action, d.actor) == (Action.RECOVER, Actor.USER)
    assert word in d.reason and "last known state working" in d.reason


def test_expired_live_task() -> None:
    r = receipt(StatusObserved(status=W, ttl_ms=1_000))
    r = apply(r, RetrievalFailed(condition=RetrievalCondition.VANISHED), at(50)).receipt
    assert r.retrieval is RetrievalCondition.EXPIRED
    assert "expired" in next_safe_decision(r, at(51)).reason


def test_completed_but_result_lost() -> None:
    r = receipt(StatusObserved(status=C), RetrievalFailed(condition=RetrievalCondition.VANISHED))
    d = decide(r)
    assert (d.action, d.actor) == (Action.RECOVER, Actor.USER)


def test_unreachable_reconnects_then_escalates() -> None:
    down = RetrievalFailed(condition=RetrievalCondition.UNREACHABLE, message="refused")
    r = receipt(down)
    d = decide(r, 2)
    assert (d.action, d.actor) == (Action.RECONNECT, Actor.CHIT) and d.check_at == r.next_check_at
    r = receipt(*([down] * MAX_RETRIEVAL_FAILURES))
    assert decide(r, 100).actor is Actor.USER


def test_rejected_asks_for_recovery() -> None:
    r = receipt(StatusObserved(status=C), OK)
    r = apply(r, AcceptanceDecided(state=AcceptanceState.REJECTED, why="empty"), at(5)).receipt
    d = decide(r)
    assert d.action is Action.RECOVER and "empty" in d.reason and not is_done(r)


def test_synchronous_call_is_evaluated() -> None:
    intent = new_intent(request_key="k", server="s", tool="t", args_digest="d", now=T0)
    r = sync_receipt(intent, receipt_id="r", result=OK, now=T0, not_task_reason="sync only")
    d = decide(r.receipt)
    assert d.action is Action.EVALUATE and "synchronously" in d.reason
