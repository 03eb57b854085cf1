"""Property tests: random event sequences (both protocols) never break a receipt invariant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from chit.receipts import (
    AcceptanceDecided,
    AcceptanceState,
    Action,
    Actor,
    AnswerStatus,
    CancelAcknowledged,
    CancelPosture,
    CancelRequested,
    CancelUnsupported,
    Event,
    InputAnswered,
    InputKind,
    InputRequested,
    InputRequestSeen,
    LifecycleState,
    Observation,
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
    next_safe_decision,
    open_receipt,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
KEYS = ("a", "b", "c")
LIVE_CANCEL = (CancelPosture.REQUESTED, CancelPosture.ACKNOWLEDGED)

statuses = st.sampled_from(list(LifecycleState))
opt_status = st.none() | statuses
seen = st.builds(
    InputRequestSeen,
    key=st.sampled_from(KEYS),
    kind=st.sampled_from(list(InputKind)),
    message=st.none() | st.text(max_size=700),
)
status_events = st.builds(
    StatusObserved,
    status=statuses,
    message=st.none() | st.text(max_size=20),
    server_updated_at=st.none() | st.integers(0, 500).map(lambda s: T0 + timedelta(seconds=s)),
    poll_interval_ms=st.none() | st.integers(0, 600_000),
    ttl_ms=st.none() | st.integers(0, 400_000),
    unlimited_ttl=st.booleans(),
    input_requests=st.none() | st.lists(seen, max_size=3).map(tuple),
)
result_events = st.builds(
    ResultObserved,
    is_error=st.booleans(),
    result_digest=st.sampled_from(["sha256:1", "sha256:2", None]),
    summary=st.text(max_size=900),
    error_code=st.none() | st.sampled_from([-32602, -32603, -32601, -32700, 1]),
    status=opt_status,
)
events: st.SearchStrategy[Event] = st.one_of(
    status_events,
    status_events,
    result_events,
    st.builds(CancelRequested),
    st.builds(CancelAcknowledged, status=opt_status),
    st.builds(CancelUnsupported, already_terminal=st.booleans()),
    st.builds(
        RetrievalFailed,
        condition=st.sampled_from(
            [
                RetrievalCondition.UNREACHABLE,
                RetrievalCondition.VANISHED,
                RetrievalCondition.EXPIRED,
                RetrievalCondition.INCOMPATIBLE,
            ]
        ),
        message=st.none() | st.text(max_size=30),
    ),
    st.builds(RetrievalOk),
    st.builds(InputRequested, request=seen),
    st.builds(
        InputAnswered,
        key=st.sampled_from(KEYS),
        status=st.sampled_from(
            [AnswerStatus.ANSWERED, AnswerStatus.DECLINED, AnswerStatus.CANCELLED]
        ),
    ),
    st.builds(
        AcceptanceDecided,
        state=st.sampled_from(list(AcceptanceState)),
        automatic=st.booleans(),
    ),
)
steps = st.lists(st.tuples(events, st.integers(0, 120)), max_size=25)
protocols = st.sampled_from([TaskProtocol.LEGACY, TaskProtocol.EXTENSION])


def start(protocol: TaskProtocol, status: LifecycleState, ttl: int | None) -> Receipt:
    intent = new_intent(request_key="k", server="s", tool="t", args_digest="d", now=T0)
    return open_receipt(
        intent,
        receipt_id="r",
        protocol=protocol,
        created=StatusObserved(status=status, ttl_ms=ttl),
        now=T0,
    ).receipt


def event_status(event: Event) -> LifecycleState | None:
    if isinstance(event, StatusObserved | ResultObserved | CancelAcknowledged):
        return event.status
    return None


def check_receipt(r: Receipt, now: datetime) -> None:
    """Invariants that hold for every single receipt."""
    cancel = r.cancel
    if cancel.posture in LIVE_CANCEL:
        assert not r.is_terminal
    if cancel.posture is CancelPosture.OBSERVED:
        assert r.is_terminal and cancel.observed_state is r.state
        assert cancel.requested_at is not None and cancel.observed_at is not None
    else:
        assert cancel.observed_state is None
    assert cancel.completed_despite_cancel == (
        cancel.posture is CancelPosture.OBSERVED
        and cancel.observed_state is LifecycleState.COMPLETED
    )
    if cancel.acknowledged_at is not None:
        assert cancel.requested_at is not None and cancel.acknowledged_at >= cancel.requested_at
    keys = [q.key for q in r.input_requests]
    assert len(keys) == len(set(keys))
    if r.is_terminal:
        assert not r.pending_inputs
    if r.acceptance.state not in (AcceptanceState.PENDING, AcceptanceState.NOT_REQUIRED):
        assert r.is_terminal
    if is_success(r):
        assert r.state is LifecycleState.COMPLETED and r.outcome and not r.outcome.is_error
    if r.outcome is not None:
        assert len(r.outcome.summary) <= 500
        if r.outcome.error_code is not None:
            assert r.outcome.is_error
    if r.retrieval is RetrievalCondition.EXPIRED:
        assert r.expires_at is not None
    if r.is_terminal:
        assert freshness(r, now + timedelta(days=30)) is not RetrievalCondition.STALE
    # JSON round trip
    assert Receipt.model_validate_json(r.model_dump_json()) == r
    # the decision is total and explains itself
    decision = next_safe_decision(r, now)
    assert decision.reason
    if r.is_terminal:
        assert decision.action not in (Action.WAIT, Action.CONFIRM_CANCEL, Action.ANSWER_INPUT)
    if is_done(r):
        assert decision.action is Action.PROCEED
    if decision.action in (Action.WAIT, Action.CHECK, Action.RECONNECT):
        assert decision.actor is Actor.CHIT and decision.check_at is not None


@settings(max_examples=300, deadline=None)
@given(
    protocol=protocols,
    first=st.sampled_from([LifecycleState.WORKING, LifecycleState.INPUT_REQUIRED]),
    ttl=st.none() | st.integers(0, 600_000),
    sequence=steps,
)
def test_random_sequences_keep_every_invariant(
    protocol: TaskProtocol,
    first: LifecycleState,
    ttl: int | None,
    sequence: list[tuple[Event, int]],
) -> None:
    r = start(protocol, first, ttl)
    now = T0
    first_terminal: LifecycleState | None = None
    settled_keys: set[str] = set()
    outcome = None
    check_receipt(r, now)
    for event, dt in sequence:
        now += timedelta(seconds=dt)
        tr = apply(r, event, now)
        new, obs = tr.receipt, tr.observation
        # bookkeeping: applied ⇔ changes ⇔ version bump; unapplied ⇒ same object
        assert obs.applied == bool(tr.changes)
        if tr.applied:
            assert new.version == r.version + 1
        else:
            assert new is r
        assert Observation.model_validate_json(obs.model_dump_json()) == obs
        # the lifecycle is the server's: it only changes to a state the event reported
        if new.state is not r.state:
            assert event_status(event) is new.state
            assert not r.is_terminal
        # retrieval problems never touch the lifecycle
        if isinstance(event, RetrievalFailed | RetrievalOk):
            assert new.state is r.state
        # terminal states never change; a different later status is out of order
        if r.is_terminal:
            assert new.state is r.state
            if isinstance(event, StatusObserved) and event.status is not r.state:
                assert not tr.applied and obs.kind is ObservationKind.OUT_OF_ORDER
        if new.is_terminal and first_terminal is None:
            first_terminal = new.state
        if first_terminal is not None:
            assert new.state is first_terminal
        # a cancel request on a live task is recorded as requested, never as cancelled
        if isinstance(event, CancelRequested) and not r.is_terminal:
            assert new.state is r.state
            assert new.cancel.posture in LIVE_CANCEL
        if r.cancel.posture in LIVE_CANCEL and new.is_terminal and not r.is_terminal:
            assert new.cancel.posture is CancelPosture.OBSERVED
            assert new.cancel.completed_despite_cancel == (new.state is LifecycleState.COMPLETED)
        if isinstance(event, CancelRequested) and r.is_terminal:
            assert new.cancel.posture in (
                CancelPosture.UNNECESSARY,
                CancelPosture.OBSERVED,
            )
        # an automatic check never accepts an unresolved outcome
        if isinstance(event, AcceptanceDecided) and event.automatic and tr.applied:
            if new.acceptance.state is AcceptanceState.ACCEPTED:
                assert is_success(new)
            assert r.acceptance.state is AcceptanceState.PENDING
        # input requests: a settled key is never pending again
        for q in new.input_requests:
            if q.key in settled_keys:
                assert not q.is_pending
        settled_keys |= {q.key for q in new.input_requests if not q.is_pending}
        # vanished vs expired follow the TTL
        if isinstance(event, RetrievalFailed) and event.condition.is_lost:
            if new.retrieval is RetrievalCondition.EXPIRED:
                assert new.expires_at is not None and now >= new.expires_at
            else:
                assert new.retrieval is RetrievalCondition.VANISHED
                assert new.expires_at is None or now < new.expires_at
            assert not new.pending_inputs
        # the outcome is recorded once
        if outcome is not None:
            assert new.outcome == outcome
        outcome = new.outcome
        check_receipt(new, now)
        r = new


@settings(max_examples=100, deadline=None)
@given(protocol=protocols, sequence=steps, later=st.integers(0, 10_000))
def test_freshness_is_stale_only_when_fresh_live_and_late(
    protocol: TaskProtocol, sequence: list[tuple[Event, int]], later: int
) -> None:
    r = start(protocol, LifecycleState.WORKING, None)
    now = T0
    for event, dt in sequence:
        now += timedelta(seconds=dt)
        r = apply(r, event, now).receipt
    probe = now + timedelta(seconds=later)
    condition = freshness(r, probe)
    if condition is RetrievalCondition.STALE:
        assert r.retrieval is RetrievalCondition.FRESH and not r.is_terminal
        assert r.stale_after is not None and probe >= r.stale_after
    else:
        assert condition is r.retrieval
