"""chit.receipts — the pure receipt domain.

Pydantic models, the state vocabularies, event → transition rules and the next safe
decision for a work receipt. Imports nothing of chit (not even the clock): every function
that needs the time takes ``now`` as a parameter.
"""

from chit.receipts.models import (
    MESSAGE_MAX,
    SUMMARY_MAX,
    Acceptance,
    CancelInfo,
    HandleRef,
    InputRequest,
    Intent,
    Observation,
    Outcome,
    Receipt,
    bound_text,
)
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
    "AcceptanceState",
    "AnswerStatus",
    "CancelInfo",
    "CancelPosture",
    "FailureClass",
    "HandleRef",
    "InputKind",
    "InputRequest",
    "Intent",
    "IntentState",
    "LifecycleState",
    "Observation",
    "ObservationKind",
    "ObservationSource",
    "Outcome",
    "Receipt",
    "RetrievalCondition",
    "TaskProtocol",
    "bound_text",
]
