"""chit.reconcile — keeps receipts true: the lease, the schedule, the reconciler.

* :class:`Lease` — one active reconciler per home (heartbeat row in the store).
* :class:`ConnectionPool` — one task-client connection per server, reconnected with
  backoff, bounded concurrency.
* :class:`Reconciler` — due scan, hints coalesced into immediate ``tasks/get``, result
  retrieval once, acceptance, retrieval conditions.
* :class:`LegacyInbox` — 2025 prompts received on an open ``tasks/result``.
"""

# Re-exported for callers that validate before they reach the engine (the TUI's forms).
from chit.receipts.acceptance import parse_check
from chit.receipts.answers import validate_answer
from chit.reconcile.connections import ClientOptions, ConnectionPool, SpecResolver
from chit.reconcile.handles import HandleBook, HandleUnavailable, handle_aad
from chit.reconcile.inbox import LegacyInbox, answer_status
from chit.reconcile.lease import Lease
from chit.reconcile.outcomes import (
    acceptance_event,
    failure_event,
    result_event,
    result_json,
    status_event,
)
from chit.reconcile.reconciler import Reconciler
from chit.reconcile.writer import ReceiptWriter

__all__ = [
    "ClientOptions",
    "ConnectionPool",
    "HandleBook",
    "HandleUnavailable",
    "Lease",
    "LegacyInbox",
    "ReceiptWriter",
    "Reconciler",
    "SpecResolver",
    "acceptance_event",
    "answer_status",
    "failure_event",
    "handle_aad",
    "parse_check",
    "result_event",
    "result_json",
    "status_event",
    "validate_answer",
]
