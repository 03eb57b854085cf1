"""What one check asks a task's server, and the receipt events the answers amount to.

A live task is asked ``tasks/get``; an ended one without its result is asked for the
result (2025 ``tasks/result``, 2026 inline in ``tasks/get``), digested and summarised,
with the acceptance verdict on it. A 2025 push saying the task ended goes straight to
the ``tasks/result`` that end implies (one round trip instead of two); a 2026 push saying
it ended *is* the ``tasks/get`` answer (:meth:`TaskObserver.told`: no round trip).
"""

from __future__ import annotations

from chit.receipts import (
    Event,
    LifecycleState,
    ObservationSource,
    Receipt,
    StatusObserved,
    TaskProtocol,
)
from chit.reconcile.outcomes import (
    acceptance_event,
    failure_event,
    result_event,
    result_json,
    status_event,
)
from chit.tasks import wire
from chit.tasks.client import TaskClient, TaskError, TaskSnapshot
from chit.tasks.client.inputs import Hint
from chit.tasks.client.models import TaskOutcome
from chit.tasks.client.parse import parse_detailed_2026

RESULT_FIRST_S = 2.0
"""How long a hint-implied 2025 ``tasks/result`` may take before the check falls back to
``tasks/get`` (an ended task answers at once; a wrong hint must not hold a slot)."""


class TaskObserver:
    """Turns a task's answers into receipt events (no store, no scheduling)."""

    def __init__(self, digest_key: bytes, read_timeout: float) -> None:
        """Digest results with ``digest_key``; wait ``read_timeout`` for a 2025 result."""
        self.digest_key = digest_key
        self.read_timeout = read_timeout
        self.ends_told = 0  # ends folded from a 2026 push (``told``)

    async def observe(
        self,
        client: TaskClient,
        receipt: Receipt,
        task_id: str,
        source: ObservationSource,
        ended: Hint | None = None,
    ) -> list[Event]:
        """Ask about one task and return what was seen, as receipt events.

        ``ended``: a 2025 push said the task ended (see :meth:`_result_first`).
        """
        if receipt.is_terminal:  # status known, result still to retrieve
            return await self._result(client, receipt, receipt.state, task_id, None)
        if ended is not None and receipt.protocol is TaskProtocol.LEGACY:
            first = await self._result_first(client, receipt, task_id, ended)
            if first is not None:
                return first
        if ended is not None:  # a check already waiting for its slot when the end came
            told = self.told(receipt, task_id, ended)
            if told is not None:
                return told
        snap = await client.get(task_id)
        events: list[Event] = [status_event(snap, source)]
        if snap.terminal and receipt.outcome is None:
            events += await self._result(
                client, receipt, LifecycleState(snap.status), task_id, snap
            )
        return events

    def told(self, receipt: Receipt, task_id: str, hint: Hint) -> list[Event] | None:
        """A 2026 push said the task ended: what it carries, as a ``tasks/get`` answer.

        The extension's ``notifications/tasks`` carries "a complete DetailedTask for the
        current status, identical to what ``tasks/get`` would have returned at that
        moment" (SEP-2663, *Task Status Notifications*), result or error included, and a
        terminal status never changes again: asking ``tasks/get`` would bring the same
        object a round trip (and a connection slot) later. It is checked exactly as that
        reply would be (``parse_detailed_2026``, the task id included). None — ask the
        ordinary way — for a 2025 receipt, a push kept without its params, one that does
        not parse, or one that is not terminal.
        """
        if receipt.protocol is not TaskProtocol.EXTENSION or receipt.is_terminal:
            return None
        if hint.params is None:
            return None
        try:
            snap = parse_detailed_2026(hint.params, wire.NOTIFICATION_TASKS, task_id)
        except TaskError:
            return None
        if not snap.terminal:
            return None
        events: list[Event] = [status_event(snap, ObservationSource.NOTIFICATION)]
        if receipt.outcome is None:
            outcome = TaskOutcome(status=snap.status, result=snap.result, error=snap.error)
            events += self._outcome_events(receipt, outcome)
        self.ends_told += 1
        return events

    async def _result_first(
        self, client: TaskClient, receipt: Receipt, task_id: str, hint: Hint
    ) -> list[Event] | None:
        """A 2025 push said the task ended: ask ``tasks/result`` straight away.

        Its answer is the confirmation (2025 answers it only once the task is terminal,
        and says completed or failed) and the result in one round trip, instead of a
        ``tasks/get`` and then the ``tasks/result``. Any failure (a wrong hint that would
        block, a transport error) returns None: the check goes the ordinary way.
        """
        try:
            outcome = await client.result(task_id, timeout=RESULT_FIRST_S)
        except TaskError:
            return None
        status = LifecycleState(outcome.status)
        seen = StatusObserved(
            status=status,
            source=ObservationSource.NOTIFICATION,
            message=hint.status_message,
            server_updated_at=hint.updated_at,
        )
        if status is LifecycleState.CANCELLED:
            return [seen]  # a cancelled task has no result to record
        return [seen, *self._outcome_events(receipt, outcome)]

    async def _result(
        self,
        client: TaskClient,
        receipt: Receipt,
        status: LifecycleState,
        task_id: str,
        snap: TaskSnapshot | None,
    ) -> list[Event]:
        if status is LifecycleState.CANCELLED:
            return []  # a cancelled task has no result to retrieve
        if receipt.protocol is TaskProtocol.EXTENSION:
            if snap is None:
                snap = await client.get(task_id)
            outcome = TaskOutcome(status=snap.status, result=snap.result, error=snap.error)
        else:
            try:
                outcome = await client.result(task_id, timeout=self.read_timeout)
            except TaskError as exc:
                # Keep the terminal status we saw; record why the result is missing.
                return [failure_event(exc, ObservationSource.RESULT)]
        return self._outcome_events(receipt, outcome)

    def _outcome_events(self, receipt: Receipt, outcome: TaskOutcome) -> list[Event]:
        """The result (digested) and the acceptance verdict on it, if any."""
        if outcome.result is None and outcome.error is None:
            return []
        events: list[Event] = [
            result_event(outcome.result, outcome.error, digest_key=self.digest_key)
        ]
        raw = result_json(outcome.result) if outcome.result is not None else None
        verdict = acceptance_event(receipt, raw)
        if verdict is not None:
            events.append(verdict)
        return events
