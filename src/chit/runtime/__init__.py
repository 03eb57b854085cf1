"""chit.runtime — the Supervisor that wires store, vault, servers and the reconciler.

Headless: importing it never loads Textual. Start at :class:`Supervisor`.
"""

from chit.runtime.events import (
    Cancelled,
    Completed,
    EngineEvent,
    EventBus,
    Failed,
    InputRequired,
    IntentUnknown,
    NearExpiry,
    ReceiptChanged,
    RetrievalProblem,
)
from chit.runtime.keys import unlock_vault
from chit.runtime.options import SupervisorOptions
from chit.runtime.reconciling import ReconcileReport
from chit.runtime.supervisor import Supervisor

__all__ = [
    "Cancelled",
    "Completed",
    "EngineEvent",
    "EventBus",
    "Failed",
    "InputRequired",
    "IntentUnknown",
    "NearExpiry",
    "ReceiptChanged",
    "ReconcileReport",
    "RetrievalProblem",
    "Supervisor",
    "SupervisorOptions",
    "unlock_vault",
]
