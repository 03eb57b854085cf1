"""The closed vocabularies of a work receipt.

Every enum is a ``StrEnum`` so it serialises as its plain value in JSON and in the store's
indexed columns. Values are part of the persisted contract: add members, never rename them.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "AcceptanceState",
    "AnswerStatus",
    "CancelPosture",
    "FailureClass",
    "InputKind",
    "IntentState",
    "LifecycleState",
    "ObservationKind",
    "ObservationSource",
    "RetrievalCondition",
    "TaskProtocol",
]


class LifecycleState(StrEnum):
    """The task's lifecycle as the *server* reported it; chit never invents one."""

    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        """True for ``completed``, ``failed`` and ``cancelled`` (they never change)."""
        return self in _TERMINAL


_TERMINAL = frozenset({LifecycleState.COMPLETED, LifecycleState.FAILED, LifecycleState.CANCELLED})


class RetrievalCondition(StrEnum):
    """How well chit can currently see the task; independent of the lifecycle state.

    ``vanished`` means the server no longer knows the id although its TTL has not run
    out; ``expired`` means it is gone after ``expires_at`` (a normal end of retention).
    """

    FRESH = "fresh"
    STALE = "stale"
    UNREACHABLE = "unreachable"
    VANISHED = "vanished"
    EXPIRED = "expired"
    INCOMPATIBLE = "incompatible"

    @property
    def is_lost(self) -> bool:
        """True when the task can no longer be retrieved at all (vanished or expired)."""
        return self in (RetrievalCondition.VANISHED, RetrievalCondition.EXPIRED)


class CancelPosture(StrEnum):
    """What is known about cancellation: the client's intent is not the task's state."""

    NOT_REQUESTED = "not_requested"
    REQUESTED = "requested"
    ACKNOWLEDGED = "acknowledged"
    OBSERVED = "observed"
    UNSUPPORTED = "unsupported"
    UNNECESSARY = "unnecessary"


class AcceptanceState(StrEnum):
    """Whether the outcome passed the workflow's acceptance check (separate from lifecycle)."""

    PENDING = "pending"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    NOT_REQUIRED = "not_required"


class IntentState(StrEnum):
    """A call chit is about to send (or sent) before the server accepted it durably."""

    SENDING = "sending"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    UNKNOWN = "unknown"  # crashed or timed out between send and reply
    ABANDONED = "abandoned"  # the user gave up on an unknown intent
    RETRIED = "retried"  # superseded by a new intent the user chose to send


class ObservationSource(StrEnum):
    """Where an observation came from (the timeline's source column)."""

    CREATE = "create"
    POLL = "poll"
    NOTIFICATION = "notification"
    RESULT = "result"
    CANCEL = "cancel"
    RESTART = "restart"
    ANSWER = "answer"
    USER = "user"


class ObservationKind(StrEnum):
    """What an observation recorded."""

    STATUS = "status"
    CANCEL_REQUESTED = "cancel_requested"
    CANCEL_ACKNOWLEDGED = "cancel_acknowledged"
    CANCEL_UNSUPPORTED = "cancel_unsupported"
    RETRIEVAL_ERROR = "retrieval_error"
    RETRIEVAL_OK = "retrieval_ok"
    RESULT = "result"
    INPUT_REQUEST = "input_request"
    INPUT_ANSWERED = "input_answered"
    ACCEPTANCE = "acceptance"
    OUT_OF_ORDER = "out_of_order"
    HOST = "host"  # the agent host that started the task through chit proxy stopped waiting


class TaskProtocol(StrEnum):
    """The task protocol generation negotiated for this call.

    ``2025-11-25``: core experimental tasks (a tool ``isError`` result makes the task
    ``failed``). ``2026-07-28``: the ``io.modelcontextprotocol/tasks`` extension (a tool
    ``isError`` result is ``completed`` with ``result.isError``; ``failed`` is reserved for
    JSON-RPC errors). ``sync``: the server answered the call synchronously, no task exists.
    """

    LEGACY = "2025-11-25"
    EXTENSION = "2026-07-28"
    SYNC = "sync"


class FailureClass(StrEnum):
    """How an error should be handled: it decides the bounded recovery path."""

    TRANSIENT = "transient"  # retrying the *check* may help (timeouts, 5xx, disconnects)
    PERMANENT = "permanent"  # the server refused the work; retrying the same call won't help
    LOST = "lost"  # the task is gone (vanished/expired); its effect is unknown
    INCOMPATIBLE = "incompatible"  # protocol/version mismatch
    PROTOCOL_VIOLATION = "protocol_violation"  # the server broke the contract


class InputKind(StrEnum):
    """The kind of server→client request a task is blocked on."""

    ELICITATION = "elicitation"
    SAMPLING = "sampling"
    ROOTS = "roots"
    URL = "url"


class AnswerStatus(StrEnum):
    """The life of one input request."""

    PENDING = "pending"
    ANSWERED = "answered"
    DECLINED = "declined"
    CANCELLED = "cancelled"
    LOST = "lost"  # the task moved on (or ended) without our answer
