"""Pydantic models of the receipt domain: Receipt, Intent, Observation and their parts.

All models are frozen: a transition returns a new model (``model_copy(update=...)``), so a
receipt read from the store can never be changed behind the store's back. Every model
round-trips through ``model_dump_json`` / ``model_validate_json``; sequences are tuples
(JSON arrays) so frozen really means immutable. Timestamps must be timezone-aware.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Final

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field

from chit.receipts.states import (
    AcceptanceState,
    AnswerStatus,
    CancelPosture,
    FailureClass,
    InputKind,
    IntentState,
    LifecycleState,
    ObservationKind,
    ObservationSource,
    RetrievalCondition,
    TaskProtocol,
)

__all__ = [
    "MESSAGE_MAX",
    "SUMMARY_MAX",
    "Acceptance",
    "CancelInfo",
    "HandleRef",
    "HostInfo",
    "InputRequest",
    "Intent",
    "Message",
    "Observation",
    "Outcome",
    "Receipt",
    "Summary",
    "bound_text",
]

SUMMARY_MAX: Final = 500
"""Upper bound of an outcome summary: a receipt is a coordination record, not a result cache."""

MESSAGE_MAX: Final = 500
"""Upper bound of any server- or user-supplied message kept on a model."""

_ELLIPSIS: Final = "…"


def bound_text(text: str | None, limit: int = MESSAGE_MAX) -> str | None:
    """Cut ``text`` to at most ``limit`` characters, marking the cut with an ellipsis.

    Args:
        text: the text, or None.
        limit: the maximum length of the returned string (at least 1).

    Returns:
        None for None, else a string of length ``<= limit``.
    """
    if text is None or len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)] + _ELLIPSIS


def _bound_message(value: str | None) -> str | None:
    return bound_text(value, MESSAGE_MAX)


def _bound_summary(value: str) -> str:
    return bound_text(value, SUMMARY_MAX) or ""


Message = Annotated[str | None, AfterValidator(_bound_message)]
"""An optional message, cut to ``MESSAGE_MAX`` characters on validation."""

Summary = Annotated[str, AfterValidator(_bound_summary)]
"""A summary, cut to ``SUMMARY_MAX`` characters on validation."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    if not TYPE_CHECKING:

        def __eq__(self, other: Any) -> bool:
            # Identity first: the stored document leaves out fields at their default
            # (``exclude_defaults``), which compares every nested part with its default
            # object — most often that very object (a receipt's untouched ``cancel`` and
            # ``acceptance``), where pydantic's own comparison walks both dicts: a few µs
            # of every receipt write. Same answer: a model equals itself.
            return self is other or super().__eq__(other)


class InputRequest(_Model):
    """One server→client request the task is blocked on (the decision boundary).

    ``key`` is the extension's ``inputRequests`` key (unique for the task's life) or, for
    2025-11-25, a key chit derives from the elicitation's JSON-RPC request.
    """

    key: str
    kind: InputKind = InputKind.ELICITATION
    message: Message = None
    requested_schema: dict[str, Any] | None = None
    url: str | None = None  # URL-mode elicitation: the page the user must visit
    received_at: AwareDatetime
    answered_at: AwareDatetime | None = None
    answer_status: AnswerStatus = AnswerStatus.PENDING

    @property
    def is_pending(self) -> bool:
        """True while nobody answered, declined, cancelled or lost this request."""
        return self.answer_status is AnswerStatus.PENDING


class CancelInfo(_Model):
    """Cancellation posture: the request, its acknowledgement and what was observed.

    ``observed_state`` is the terminal state actually seen after a request; it can be
    ``completed`` (the work finished before the cancel took effect), in which case
    ``completed_despite_cancel`` is True.
    """

    posture: CancelPosture = CancelPosture.NOT_REQUESTED
    requested_at: AwareDatetime | None = None
    acknowledged_at: AwareDatetime | None = None
    observed_at: AwareDatetime | None = None
    observed_state: LifecycleState | None = None
    completed_despite_cancel: bool = False
    reason: str | None = None  # why unsupported/unnecessary, or the server's refusal


class Outcome(_Model):
    """The retrieved result (digest + bounded summary) or the JSON-RPC error of a task."""

    is_error: bool = False
    result_digest: str | None = None
    summary: Summary = ""
    structured_keys: tuple[str, ...] | None = None
    error_code: int | None = None
    error_message: Message = None
    failure_class: FailureClass | None = None
    retrieved_at: AwareDatetime

    @property
    def is_rpc_error(self) -> bool:
        """True when the outcome is a JSON-RPC error rather than a tool result."""
        return self.error_code is not None


class Acceptance(_Model):
    """The workflow's verdict on the outcome, and the check that decides it."""

    state: AcceptanceState = AcceptanceState.PENDING
    check: str | None = None  # the acceptance expression text, e.g. "not isError"
    why: Message = None
    decided_at: AwareDatetime | None = None
    decided_by: str | None = None  # "user", "agent", "chit:auto", …


class HostInfo(_Model):
    """The agent host that started a task through ``chit proxy`` (its ``clientInfo``)."""

    name: Message = None
    version: Message = None
    protocol: str | None = None  # the protocol version the host negotiated with the proxy
    left_at: AwareDatetime | None = None  # when it stopped waiting for the task
    left_why: Message = None  # why: it cancelled, timed out or went away

    @property
    def label(self) -> str:
        """``name version`` for listings (``unknown host`` when it said nothing)."""
        text = " ".join(p for p in (self.name, self.version) if p)
        return text or "unknown host"


class HandleRef(_Model):
    """A reference to the sealed task handle; the ciphertext itself lives only in the store."""

    fingerprint: str
    key_id: str


class Receipt(_Model):
    """A durable work receipt: the nine elements of seed 003, nothing raw.

    ``version`` is the receipt's revision: 1 when written, +1 on every applied change, so
    the store can write with optimistic concurrency.
    """

    # work reference
    receipt_id: str
    work_ref: str | None = None
    server: str
    host: HostInfo | None = None  # the agent host that started it through chit proxy
    # operation purpose
    tool: str
    purpose: str | None = None
    args_digest: str
    request_key: str
    protocol: TaskProtocol
    # accepted-at / status-at
    accepted_at: AwareDatetime
    status_at: AwareDatetime
    server_created_at: AwareDatetime | None = None
    server_updated_at: AwareDatetime | None = None
    # lifecycle state
    state: LifecycleState
    status_message: Message = None
    # decision boundary
    input_requests: tuple[InputRequest, ...] = ()
    # retrieval & freshness
    poll_interval_ms: int | None = Field(default=None, ge=0)
    next_check_at: AwareDatetime | None = None
    stale_after: AwareDatetime | None = None
    ttl_ms: int | None = Field(default=None, ge=0)
    expires_at: AwareDatetime | None = None
    retrieval: RetrievalCondition = RetrievalCondition.FRESH
    retrieval_error: Message = None
    retrieval_failures: int = Field(default=0, ge=0)  # consecutive, reset on success
    # cancellation posture
    cancel: CancelInfo = CancelInfo.model_construct()  # no validator built at import
    # outcome & acceptance
    outcome: Outcome | None = None
    acceptance: Acceptance = Acceptance.model_construct()
    # data boundary
    handle: HandleRef | None = None
    synchronous: bool = False
    not_task_reason: str | None = None
    retained: str = "argument digest, result digest and a bounded summary"
    version: int = Field(default=1, ge=1)

    @property
    def is_terminal(self) -> bool:
        """True once the server reported a terminal lifecycle state."""
        return self.state.is_terminal

    @property
    def pending_inputs(self) -> tuple[InputRequest, ...]:
        """The input requests still waiting for an answer, oldest first."""
        return tuple(r for r in self.input_requests if r.is_pending)

    def input_request(self, key: str) -> InputRequest | None:
        """Return the input request with ``key``, or None."""
        return next((r for r in self.input_requests if r.key == key), None)


class Intent(_Model):
    """A call written *before* it is sent, so a crash between send and reply is visible."""

    request_key: str
    server: str
    tool: str
    args_digest: str
    purpose: str | None = None
    work_ref: str | None = None
    state: IntentState = IntentState.SENDING
    created_at: AwareDatetime
    updated_at: AwareDatetime
    receipt_id: str | None = None
    error: Message = None
    attempts: int = Field(default=1, ge=0)


class Observation(_Model):
    """One row of a receipt's timeline. ``applied`` is False when it changed nothing.

    A timeline records changes, not polls: an observation that brings no news (see
    ``chit.receipts.timeline``) and looks like the row before it is folded into that row,
    which counts it in ``repeats`` (seen that many times, ×N) and ``last_at`` (the last).
    """

    receipt_id: str
    at: AwareDatetime
    source: ObservationSource
    kind: ObservationKind
    status: LifecycleState | None = None
    message: Message = None
    applied: bool = True
    changes: tuple[str, ...] = ()
    repeats: int = Field(default=1, ge=1)
    last_at: AwareDatetime | None = None
