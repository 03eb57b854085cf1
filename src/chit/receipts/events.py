"""Events: what chit observed or did, fed to ``transitions.apply``.

Events carry facts reported by the server (or decided by a person), never conclusions:
the transition rules decide what they mean for the receipt. They are plain frozen
dataclasses; the time of an event is the ``now`` passed to ``apply``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from chit.receipts.states import (
    AcceptanceState,
    AnswerStatus,
    FailureClass,
    InputKind,
    LifecycleState,
    ObservationSource,
    RetrievalCondition,
)

__all__ = [
    "AcceptanceDecided",
    "CancelAcknowledged",
    "CancelRequested",
    "CancelUnsupported",
    "Event",
    "HostLeft",
    "InputAnswered",
    "InputRequestSeen",
    "InputRequested",
    "ResultObserved",
    "RetrievalFailed",
    "RetrievalOk",
    "StatusObserved",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class InputRequestSeen:
    """An input request as the server sent it (no local bookkeeping yet)."""

    key: str
    kind: InputKind = InputKind.ELICITATION
    message: str | None = None
    requested_schema: dict[str, Any] | None = None
    url: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusObserved:
    """The server reported the task's status (``tasks/get``, a notification, create, …).

    ``input_requests`` is the extension's keyed snapshot: None means "not reported" (the
    2025-11-25 protocol never reports it in status), a tuple is the complete current set.
    ``ttl_ms`` None means "not reported"; ``unlimited_ttl`` records an explicit ``null``.
    """

    status: LifecycleState
    source: ObservationSource = ObservationSource.POLL
    message: str | None = None
    server_created_at: datetime | None = None
    server_updated_at: datetime | None = None
    poll_interval_ms: int | None = None
    ttl_ms: int | None = None
    unlimited_ttl: bool = False
    input_requests: tuple[InputRequestSeen, ...] | None = None
    asked_at: datetime | None = None
    """When chit sent the request this status answers (None: not known). A 2025 prompt
    received after it is newer than this status (see ``status_rule``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultObserved:
    """The task's result or JSON-RPC error was retrieved.

    ``status``, when given, is the lifecycle state reported with the result (the
    extension's inline result on ``tasks/get``); it is applied first like a status.
    A JSON-RPC error sets ``error_code`` (and ``is_error`` is implied).
    """

    is_error: bool = False
    result_digest: str | None = None
    summary: str = ""
    structured_keys: tuple[str, ...] | None = None
    error_code: int | None = None
    error_message: str | None = None
    failure_class: FailureClass | None = None
    status: LifecycleState | None = None
    source: ObservationSource = ObservationSource.RESULT


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelRequested:
    """chit sent (or is about to send) ``tasks/cancel``."""

    source: ObservationSource = ObservationSource.CANCEL


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelAcknowledged:
    """The server acknowledged ``tasks/cancel``.

    ``status`` is the task state returned with the acknowledgement (2025-11-25 returns
    the task, normally ``cancelled``; the extension returns an empty ack, so None).
    """

    status: LifecycleState | None = None
    message: str | None = None
    source: ObservationSource = ObservationSource.CANCEL


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelUnsupported:
    """The server cannot cancel this task (no cancel support, or it refused).

    ``already_terminal`` marks a refusal because the task had already ended (2025-11-25
    answers -32602 then): the cancel was unnecessary rather than unsupported.
    """

    reason: str | None = None
    already_terminal: bool = False
    source: ObservationSource = ObservationSource.CANCEL


@dataclass(frozen=True, slots=True, kw_only=True)
class RetrievalFailed:
    """A check failed: server unreachable, task unknown to it, or reply unreadable.

    For an unknown task id pass ``VANISHED`` or ``EXPIRED``: the transition decides which
    from the receipt's ``expires_at`` (unknown before the TTL ran out is ``vanished``).
    """

    condition: RetrievalCondition
    message: str | None = None
    error_code: int | None = None
    source: ObservationSource = ObservationSource.POLL


@dataclass(frozen=True, slots=True, kw_only=True)
class RetrievalOk:
    """The server was reached again (e.g. after a reconnect), without a status yet."""

    source: ObservationSource = ObservationSource.POLL


@dataclass(frozen=True, slots=True, kw_only=True)
class InputRequested:
    """One input request arrived on its own (2025-11-25: an elicitation on tasks/result)."""

    request: InputRequestSeen
    source: ObservationSource = ObservationSource.RESULT


@dataclass(frozen=True, slots=True, kw_only=True)
class InputAnswered:
    """The user answered, declined or cancelled an input request (and chit sent it)."""

    key: str
    status: AnswerStatus = AnswerStatus.ANSWERED
    source: ObservationSource = ObservationSource.ANSWER


@dataclass(frozen=True, slots=True, kw_only=True)
class AcceptanceDecided:
    """An acceptance verdict. ``automatic`` verdicts may only accept a clean success."""

    state: AcceptanceState
    check: str | None = None
    why: str | None = None
    decided_by: str = "user"
    automatic: bool = False
    source: ObservationSource = field(default=ObservationSource.USER)


@dataclass(frozen=True, slots=True, kw_only=True)
class HostLeft:
    """The agent host that started the task through ``chit proxy`` stopped waiting for it.

    ``why``: it cancelled its request, timed out, or went away. The task is not
    cancelled by this: it runs on, and its receipt keeps it.
    """

    why: str
    source: ObservationSource = ObservationSource.USER


Event = (
    StatusObserved
    | ResultObserved
    | CancelRequested
    | CancelAcknowledged
    | CancelUnsupported
    | RetrievalFailed
    | RetrievalOk
    | InputRequested
    | InputAnswered
    | AcceptanceDecided
    | HostLeft
)
"""Every event ``transitions.apply`` understands."""
