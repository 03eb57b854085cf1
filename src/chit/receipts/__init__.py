"""chit.receipts — the pure receipt domain.

Pydantic models, the state vocabularies, event → transition rules and the next safe
decision for a work receipt. Imports nothing of chit (not even the clock): every function
that needs the time takes ``now`` as a parameter.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chit.receipts.create import open_receipt, sync_receipt
    from chit.receipts.decisions import (
        Action,
        Actor,
        Decision,
        follow_done,
        needs_user,
        next_safe_decision,
    )
    from chit.receipts.digest import (
        args_digest,
        canonical_json,
        redact,
        result_digest,
        structured_keys,
        summarize_result,
    )
    from chit.receipts.events import (
        AcceptanceDecided,
        CancelAcknowledged,
        CancelRequested,
        CancelUnsupported,
        Event,
        HostLeft,
        InputAnswered,
        InputRequested,
        InputRequestSeen,
        ResultObserved,
        RetrievalFailed,
        RetrievalOk,
        StatusObserved,
    )
    from chit.receipts.ids import id_time, is_local_id, new_receipt_id, new_request_key
    from chit.receipts.intents import (
        IntentTransitionError,
        advance_intent,
        new_intent,
        resume_intent,
        retry_intent,
    )
    from chit.receipts.models import (
        MESSAGE_MAX,
        SUMMARY_MAX,
        Acceptance,
        CancelInfo,
        HandleRef,
        HostInfo,
        InputRequest,
        Intent,
        Observation,
        Outcome,
        Receipt,
        bound_text,
    )
    from chit.receipts.policy import (
        backoff_ms,
        classify_rpc_error,
        effective_poll_ms,
        expiry,
        stale_deadline,
    )
    from chit.receipts.queries import (
        classify_unknown_task,
        freshness,
        is_done,
        is_success,
        outcome_resolved,
        outcome_unresolved,
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
    from chit.receipts.timeline import BOOKKEEPING, is_news
    from chit.receipts.transitions import Transition, apply

# Exports load on first use: `from chit.receipts import LifecycleState` imports only the
# states module, so a command that reads no receipt never builds the pydantic models.
_LAZY: dict[str, str] = {
    "Acceptance": "chit.receipts.models",
    "AcceptanceDecided": "chit.receipts.events",
    "HostLeft": "chit.receipts.events",
    "AcceptanceState": "chit.receipts.states",
    "Action": "chit.receipts.decisions",
    "Actor": "chit.receipts.decisions",
    "AnswerStatus": "chit.receipts.states",
    "BOOKKEEPING": "chit.receipts.timeline",
    "CancelAcknowledged": "chit.receipts.events",
    "CancelInfo": "chit.receipts.models",
    "CancelPosture": "chit.receipts.states",
    "CancelRequested": "chit.receipts.events",
    "CancelUnsupported": "chit.receipts.events",
    "Decision": "chit.receipts.decisions",
    "Event": "chit.receipts.events",
    "FailureClass": "chit.receipts.states",
    "HandleRef": "chit.receipts.models",
    "HostInfo": "chit.receipts.models",
    "InputAnswered": "chit.receipts.events",
    "InputKind": "chit.receipts.states",
    "InputRequest": "chit.receipts.models",
    "InputRequestSeen": "chit.receipts.events",
    "InputRequested": "chit.receipts.events",
    "Intent": "chit.receipts.models",
    "IntentState": "chit.receipts.states",
    "IntentTransitionError": "chit.receipts.intents",
    "LifecycleState": "chit.receipts.states",
    "MESSAGE_MAX": "chit.receipts.models",
    "Observation": "chit.receipts.models",
    "ObservationKind": "chit.receipts.states",
    "ObservationSource": "chit.receipts.states",
    "Outcome": "chit.receipts.models",
    "Receipt": "chit.receipts.models",
    "ResultObserved": "chit.receipts.events",
    "RetrievalCondition": "chit.receipts.states",
    "RetrievalFailed": "chit.receipts.events",
    "RetrievalOk": "chit.receipts.events",
    "SUMMARY_MAX": "chit.receipts.models",
    "StatusObserved": "chit.receipts.events",
    "TaskProtocol": "chit.receipts.states",
    "Transition": "chit.receipts.transitions",
    "advance_intent": "chit.receipts.intents",
    "apply": "chit.receipts.transitions",
    "args_digest": "chit.receipts.digest",
    "backoff_ms": "chit.receipts.policy",
    "bound_text": "chit.receipts.models",
    "canonical_json": "chit.receipts.digest",
    "classify_rpc_error": "chit.receipts.policy",
    "classify_unknown_task": "chit.receipts.queries",
    "effective_poll_ms": "chit.receipts.policy",
    "expiry": "chit.receipts.policy",
    "follow_done": "chit.receipts.decisions",
    "freshness": "chit.receipts.queries",
    "id_time": "chit.receipts.ids",
    "is_done": "chit.receipts.queries",
    "is_local_id": "chit.receipts.ids",
    "is_news": "chit.receipts.timeline",
    "is_success": "chit.receipts.queries",
    "needs_user": "chit.receipts.decisions",
    "new_intent": "chit.receipts.intents",
    "new_receipt_id": "chit.receipts.ids",
    "new_request_key": "chit.receipts.ids",
    "next_safe_decision": "chit.receipts.decisions",
    "open_receipt": "chit.receipts.create",
    "outcome_resolved": "chit.receipts.queries",
    "outcome_unresolved": "chit.receipts.queries",
    "redact": "chit.receipts.digest",
    "result_digest": "chit.receipts.digest",
    "resume_intent": "chit.receipts.intents",
    "retry_intent": "chit.receipts.intents",
    "stale_deadline": "chit.receipts.policy",
    "structured_keys": "chit.receipts.digest",
    "summarize_result": "chit.receipts.digest",
    "sync_receipt": "chit.receipts.create",
}


def __getattr__(name: str) -> Any:
    """Load an exported name from its module on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "BOOKKEEPING",
    "MESSAGE_MAX",
    "SUMMARY_MAX",
    "Acceptance",
    "AcceptanceDecided",
    "AcceptanceState",
    "Action",
    "Actor",
    "AnswerStatus",
    "CancelAcknowledged",
    "CancelInfo",
    "CancelPosture",
    "CancelRequested",
    "CancelUnsupported",
    "Decision",
    "Event",
    "FailureClass",
    "HandleRef",
    "HostInfo",
    "HostLeft",
    "InputAnswered",
    "InputKind",
    "InputRequest",
    "InputRequestSeen",
    "InputRequested",
    "Intent",
    "IntentState",
    "IntentTransitionError",
    "LifecycleState",
    "Observation",
    "ObservationKind",
    "ObservationSource",
    "Outcome",
    "Receipt",
    "ResultObserved",
    "RetrievalCondition",
    "RetrievalFailed",
    "RetrievalOk",
    "StatusObserved",
    "TaskProtocol",
    "Transition",
    "advance_intent",
    "apply",
    "args_digest",
    "backoff_ms",
    "bound_text",
    "canonical_json",
    "classify_rpc_error",
    "classify_unknown_task",
    "effective_poll_ms",
    "expiry",
    "follow_done",
    "freshness",
    "id_time",
    "is_done",
    "is_local_id",
    "is_news",
    "is_success",
    "needs_user",
    "new_intent",
    "new_receipt_id",
    "new_request_key",
    "next_safe_decision",
    "open_receipt",
    "outcome_resolved",
    "outcome_unresolved",
    "redact",
    "result_digest",
    "resume_intent",
    "retry_intent",
    "stale_deadline",
    "structured_keys",
    "summarize_result",
    "sync_receipt",
]
