"""Writing a new receipt: from the server's create reply, or for a synchronous answer.

A receipt is written only once the server durably accepted the call; until then the
client holds an ``Intent``. Both constructors take the intent the call was sent under.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from chit.receipts._rules import result_rule, status_update
from chit.receipts.events import ResultObserved, StatusObserved
from chit.receipts.models import Acceptance, HandleRef, Intent, Observation, Receipt
from chit.receipts.states import (
    AcceptanceState,
    LifecycleState,
    ObservationKind,
    ObservationSource,
    TaskProtocol,
)
from chit.receipts.transitions import Transition

__all__ = ["call_receipt", "open_receipt", "sync_receipt"]


def _base(
    intent: Intent,
    *,
    receipt_id: str,
    protocol: TaskProtocol,
    state: LifecycleState,
    now: datetime,
    acceptance_check: str | None,
    acceptance_required: bool,
) -> Receipt:
    return Receipt(
        receipt_id=receipt_id,
        work_ref=intent.work_ref,
        server=intent.server,
        tool=intent.tool,
        purpose=intent.purpose,
        args_digest=intent.args_digest,
        request_key=intent.request_key,
        protocol=protocol,
        accepted_at=now,
        status_at=now,
        state=state,
        acceptance=Acceptance(
            state=AcceptanceState.PENDING if acceptance_required else AcceptanceState.NOT_REQUIRED,
            check=acceptance_check,
        ),
    )


def _created(receipt: Receipt, kind: ObservationKind, source: ObservationSource) -> Transition:
    observation = Observation(
        receipt_id=receipt.receipt_id,
        at=receipt.accepted_at,
        source=source,
        kind=kind,
        status=receipt.state,
        message=receipt.status_message if kind is ObservationKind.STATUS else None,
        applied=True,
        changes=("receipt",),
    )
    return Transition(receipt=receipt, changes=("receipt",), observation=observation)


def open_receipt(
    intent: Intent,
    *,
    receipt_id: str,
    protocol: TaskProtocol,
    created: StatusObserved,
    now: datetime,
    handle: HandleRef | None = None,
    acceptance_check: str | None = None,
    acceptance_required: bool = True,
) -> Transition:
    """Write the receipt for a call the server accepted as a task.

    Args:
        intent: the intent the call was sent under.
        receipt_id: ``ids.new_receipt_id(now)``.
        protocol: the negotiated task protocol (not ``sync``).
        created: the task as the create reply described it (status, ttl, poll interval…).
        now: when the reply arrived (``accepted_at``).
        handle: the sealed task id's reference.
        acceptance_check: the acceptance expression, if the workflow has one.
        acceptance_required: False when the outcome needs no acceptance check.

    Returns:
        A ``Transition`` whose observation is the ``create`` row of the timeline.

    Raises:
        ValueError: if ``protocol`` is ``sync``.
    """
    if protocol is TaskProtocol.SYNC:
        raise ValueError("a synchronous answer is recorded with sync_receipt")
    base = _base(
        intent,
        receipt_id=receipt_id,
        protocol=protocol,
        state=created.status,
        now=now,
        acceptance_check=acceptance_check,
        acceptance_required=acceptance_required,
    )
    receipt = status_update(base, created, now).model_copy(update={"handle": handle})
    return _created(
        Receipt.model_validate(receipt.model_dump()),
        ObservationKind.STATUS,
        ObservationSource.CREATE,
    )


def sync_receipt(
    intent: Intent,
    *,
    receipt_id: str,
    result: ResultObserved,
    now: datetime,
    not_task_reason: str,
    acceptance_check: str | None = None,
    acceptance_required: bool = True,
) -> Transition:
    """Write the receipt for a call the server answered synchronously (no task exists).

    The lifecycle is ``completed`` for a tool result (even with ``isError``: the call
    finished, the outcome is unresolved) and ``failed`` for a JSON-RPC error.

    Args:
        intent: the intent the call was sent under.
        receipt_id: ``ids.new_receipt_id(now)``.
        result: the answer (digest, bounded summary, or the JSON-RPC error).
        now: when the answer arrived.
        not_task_reason: why this was not a task (e.g. the tool forbids task support).
        acceptance_check: the acceptance expression, if the workflow has one.
        acceptance_required: False when the outcome needs no acceptance check.

    Returns:
        A ``Transition`` whose observation is the ``result`` row of the timeline.
    """
    state = LifecycleState.FAILED if result.error_code is not None else LifecycleState.COMPLETED
    base = _base(
        intent,
        receipt_id=receipt_id,
        protocol=TaskProtocol.SYNC,
        state=state,
        now=now,
        acceptance_check=acceptance_check,
        acceptance_required=acceptance_required,
    ).model_copy(
        update={"synchronous": True, "not_task_reason": not_task_reason, "server_created_at": now}
    )
    step = result_rule(base, replace(result, status=None), now)
    receipt = Receipt.model_validate(step.receipt.model_dump())
    return _created(receipt, ObservationKind.RESULT, ObservationSource.RESULT)


def call_receipt(
    intent: Intent,
    *,
    receipt_id: str,
    now: datetime,
    not_task_reason: str,
) -> Transition:
    """Write the receipt of a synchronous call still in flight (no task exists).

    ``chit proxy`` opens one when the server asks a question during a host's call of a
    tool that cannot be a task and chit's inbox is to hold the question: the receipt
    starts ``working`` and ends with the call's answer (``ResultObserved``).

    Args:
        intent: the call (recorded as accepted with the receipt).
        receipt_id: ``ids.new_receipt_id(now)``.
        now: when the question arrived.
        not_task_reason: why this is not a task.

    Returns:
        A ``Transition`` whose observation is the ``create`` row of the timeline.
    """
    base = _base(
        intent,
        receipt_id=receipt_id,
        protocol=TaskProtocol.SYNC,
        state=LifecycleState.WORKING,
        now=now,
        acceptance_check=None,
        acceptance_required=False,
    ).model_copy(
        update={"synchronous": True, "not_task_reason": not_task_reason, "server_created_at": now}
    )
    receipt = Receipt.model_validate(base.model_dump())
    return _created(receipt, ObservationKind.STATUS, ObservationSource.CREATE)
