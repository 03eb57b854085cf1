"""Cancels: record requested → acknowledged → observed, in that order, as it happens."""

from __future__ import annotations

from collections.abc import Callable

from chit.receipts import (
    CancelAcknowledged,
    CancelRequested,
    CancelUnsupported,
    Event,
    LifecycleState,
    ObservationSource,
    Receipt,
    RetrievalCondition,
    RetrievalFailed,
    TaskProtocol,
)
from chit.reconcile import ConnectionPool, HandleBook, ReceiptWriter, Reconciler, status_event
from chit.runtime.servers import connect, typed_error
from chit.tasks.client import TaskError


class Cancels:
    """Asks servers to cancel tasks and records the posture they answer with."""

    def __init__(
        self,
        writer: ReceiptWriter,
        handles: HandleBook,
        pool: ConnectionPool,
        reconciler: Reconciler,
    ) -> None:
        """Wire the parts."""
        self.writer = writer
        self.store = writer.store
        self.handles = handles
        self.pool = pool
        self.reconciler = reconciler
        self.live: Callable[[Receipt], bool] | None = None
        """Set by ``chit proxy``'s engine side: stops a call that is not a task while it
        waits here for an answer in chit (True when there was one)."""

    async def cancel(self, receipt_id: str) -> Receipt:
        """Ask the server to cancel; record requested → acknowledged → observed.

        The returned receipt carries the posture; on 2026 the cancel is cooperative and
        the final state (possibly ``completed``) is observed by later checks.
        """
        receipt = self.store.receipts.get_by_prefix(receipt_id)
        rid = receipt.receipt_id
        if receipt.is_terminal or receipt.protocol is TaskProtocol.SYNC:
            after = self.writer.apply(rid, [CancelRequested()])
            if self.live is not None and not receipt.is_terminal:
                self.live(after)  # its call ends now; the call's end is recorded then
            return after
        # Open the handle and connect first: ``requested`` is recorded only when the
        # request can actually leave (HandleUnavailable exits 4, unreachable exits 6).
        task_id = self.handles.task_id(receipt)
        client = await connect(self.pool, receipt.server)
        self.writer.apply(rid, [CancelRequested()])
        events: list[Event]
        try:
            done = await client.cancel(task_id)
        except TaskError as exc:
            if exc.failure_class == "incompatible":
                events = [CancelUnsupported(reason=exc.message)]
            elif exc.failure_class == "lost":
                ended = self.pool.lost_with_process(
                    receipt.server, receipt.accepted_at, receipt.expires_at
                )
                events = [
                    RetrievalFailed(
                        condition=RetrievalCondition.VANISHED,
                        message=f"{ended} ({exc.message})" if ended else exc.message,
                        error_code=exc.code,
                        source=ObservationSource.CANCEL,
                    )
                ]
            else:
                raise typed_error(exc, "the cancel request failed") from exc
            return self.writer.apply(rid, events)
        snap = done.snapshot
        if done.kind == "cancelled" and snap is not None:
            events = [
                CancelAcknowledged(status=LifecycleState(snap.status), message=snap.status_message)
            ]
        elif done.kind == "acknowledged":
            events = [CancelAcknowledged()]
        else:
            events = [CancelUnsupported(reason="the task had already ended", already_terminal=True)]
            if snap is not None:
                events.insert(0, status_event(snap, ObservationSource.CANCEL))
        after = self.writer.apply(rid, events)
        if not after.is_terminal or after.outcome is None:
            after = await self.reconciler.check(rid, ObservationSource.CANCEL) or after
        return after
