"""The task runtime: creates tasks durably, runs workers, parks inputs, cancels.

Protocol-neutral: both the 2026 extension (``ext2026``) and the 2025-11-25 handlers
(``legacy2025``) call into one :class:`TaskRuntime`. The store is the channel between
the parts: a worker waiting for input polls the row for answers after each change
signal, so answers given through ``tasks/update`` (2026) or an elicitation on
``tasks/result`` (2025) reach it the same way, survive a restart, and reach it from
another process sharing the store (see ``owners``).

Store writes run in a worker thread, one at a time (``write``): a write may wait for
another process's database lock (``busy_timeout``) or a slow fsync, and on the event
loop that would stall every request of the process, ``tasks/cancel`` included. Waiting
writes are ordered by a :class:`~chit.tasks.server.writes.WriteQueue`: durable writes
first, status-message writes merged per task and after them.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from anyio.abc import TaskGroup

from chit.tasks.clock import Now, to_ms, utc_now
from chit.tasks.server.backend import TaskBackend, open_task_store
from chit.tasks.server.creation import create_task
from chit.tasks.server.errors import NOT_FOUND_MESSAGE, TaskError, args_digest, not_found, task_ref
from chit.tasks.server.notify import Notifier
from chit.tasks.server.owners import INTERRUPTED, Ownership
from chit.tasks.server.record import TaskRecord
from chit.tasks.server.registry import ToolRegistry
from chit.tasks.server.tools import TaskTool
from chit.tasks.server.writes import Superseded, WriteQueue

if TYPE_CHECKING:
    from chit.tasks.server.workers import Ask
from chit.tasks.wire import INTERNAL_ERROR

logger = logging.getLogger(__name__)
T = TypeVar("T")

MINUTE_MS = 60_000
DAY_MS = 24 * 60 * MINUTE_MS
__all__ = ["NOT_FOUND_MESSAGE", "TaskError", "TaskRuntime", "args_digest", "not_found"]


class TaskRuntime(ToolRegistry):
    """Task tools, the persistent store and the workers of one server process."""

    def __init__(
        self,
        store: TaskBackend | str | Path,
        *,
        now: Now = utc_now,
        default_ttl_ms: int = DAY_MS,
        min_ttl_ms: int = MINUTE_MS,
        max_ttl_ms: int = 7 * DAY_MS,
        poll_interval_ms: int = 500,
        max_argument_bytes: int = 1 << 20,
        heartbeat_s: float = 2.0,
        stale_s: float | None = None,
        poll_s: float = 0.2,
    ) -> None:
        """Configure the runtime; call :meth:`running` to start workers and recovery.

        Args:
            store: A store (:class:`~chit.tasks.server.backend.TaskBackend`), the path of a
                SQLite file, or a ``postgresql://`` URL (several replicas share it).
            now: Clock (aware UTC datetimes); injectable for tests.
            default_ttl_ms: TTL when the client asks for none (24 h).
            min_ttl_ms: Lower clamp of requested TTLs (1 min).
            max_ttl_ms: Upper clamp of requested TTLs (7 days).
            poll_interval_ms: ``pollInterval``/``pollIntervalMs`` suggested to clients.
            max_argument_bytes: Largest accepted JSON encoding of a call's arguments.
            heartbeat_s: How often this process refreshes its owner row and sweeps orphans.
            stale_s: Heartbeat age after which an owner counts as dead (3 × heartbeat).
            poll_s: How often rows are re-read for changes made by other processes.
        """
        self.store: TaskBackend = open_task_store(store) if isinstance(store, str | Path) else store
        self.now = now
        self.default_ttl_ms = default_ttl_ms
        self.min_ttl_ms = min_ttl_ms
        self.max_ttl_ms = max_ttl_ms
        self.poll_interval_ms = poll_interval_ms
        self.max_argument_bytes = max_argument_bytes
        self.poll_s = poll_s
        self.tools: dict[str, TaskTool] = {}
        self.notifier = Notifier(self)
        self.ownership = Ownership(self, heartbeat_s, stale_s or 3 * heartbeat_s)
        self.scopes: dict[str, anyio.CancelScope] = {}
        """Cancel scopes of the workers running in this process, by task id."""
        self._tg: TaskGroup | None = None
        # One write at a time (they serialise on the lock anyway): durable writes first,
        # status-message writes merged per task (latest wins).
        self.writes = WriteQueue()
        self._changed: dict[str, anyio.Event] = {}
        self._listeners: list[Callable[[str, str | None], None]] = []

    # --- lifecycle ------------------------------------------------------------------

    @property
    def owner_id(self) -> str:
        """This process's owner identity (recorded on the tasks it runs)."""
        return self.ownership.owner_id

    @asynccontextmanager
    async def running(self) -> AsyncIterator[TaskRuntime]:
        """Run workers for the server's lifetime (enter from the server lifespan)."""
        self.ownership.renew()
        resumed = self.recover()
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                for task_id in resumed:
                    self.start(task_id)
                tg.start_soon(self.ownership.run)
                tg.start_soon(self.notifier.run)
                tg.start_soon(self.store.follow, self.remote_changed)
                try:
                    yield self
                finally:
                    self._tg = None
                    tg.cancel_scope.cancel()
        finally:
            try:
                changes = {**INTERRUPTED, "updated_at_ms": self.now_ms()}
                self.store.release(self.owner_id, changes)
            except Exception:  # peers will find the tasks orphaned once the heartbeat is stale
                logger.warning("could not release tasks at shutdown", exc_info=True)

    def recover(self) -> list[str]:
        """Register this owner, then settle tasks whose owner is dead (blocking).

        Tasks of a *live* owner (another process on the same store) are left alone.

        Returns:
            Ids of resumable tasks claimed for re-running (the caller starts them).
        """
        self.store.purge_expired(self.now_ms())
        self.store.heartbeat(self.ownership.row())
        return self.ownership.settle_orphans()

    async def write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking (durable) store call in a worker thread, one at a time.

        Durable writes run in arrival order, ahead of pending status-message writes.
        """
        return await self.writes.run(partial(fn, *args, **kwargs))

    # --- creation -------------------------------------------------------------------

    async def create(
        self,
        tool: TaskTool,
        arguments: dict[str, Any] | None,
        *,
        principal: str,
        protocol: str,
        ttl_ms: int | None = None,
        request_key: str | None = None,
        progress_token: str | int | None = None,
        gathered: dict[str, dict[str, Any]] | None = None,
        session: Any = None,
    ) -> TaskRecord:
        """Validate, store durably, then start the task; return its row.

        With ``request_key``, an identical earlier call (same principal, tool and
        arguments) returns that call's task instead; different arguments are an error.

        Raises:
            TaskError: -32602 for oversized or invalid arguments or a key conflict.
        """
        return await create_task(
            self,
            tool,
            arguments,
            principal=principal,
            protocol=protocol,
            ttl_ms=ttl_ms,
            request_key=request_key,
            progress_token=progress_token,
            gathered=gathered,
            session=session,
        )

    # --- lookup ---------------------------------------------------------------------

    def visible(self, task_id: str, principal: str) -> TaskRecord:
        """Return the task if it exists, belongs to ``principal`` and has not expired.

        Raises:
            TaskError: The same -32602 for every one of those three failures.
        """
        record = self.store.get(task_id) if isinstance(task_id, str) else None
        if record is None or not secrets.compare_digest(record.principal, principal):
            raise not_found()
        if record.expires_at_ms <= self.now_ms():
            raise not_found()
        return record

    def is_cancel_requested(self, task_id: str) -> bool:
        """Return True when this process's worker for the task should stop.

        Reads the shared row, so a cancel recorded by another process counts, and so
        does a task that is terminal or was taken over by another owner.
        """
        record = self.store.get(task_id)
        return (
            record is None
            or record.cancel_requested
            or record.status not in ("working", "input_required")
            or record.owner_id != self.owner_id
        )

    # --- changes ----------------------------------------------------------------------

    async def wait_change(self, task_id: str, timeout: float | None = None) -> None:
        """Wait until the task changes here, or ``timeout`` (default ``poll_s``) passes.

        Changes made by other processes are only seen by re-reading the row, hence the
        short default: callers loop, re-reading after each wake-up.
        """
        event = self._changed.setdefault(task_id, anyio.Event())
        with anyio.move_on_after(self.poll_s if timeout is None else timeout):
            await event.wait()

    def wake(self, task_id: str) -> None:
        """Wake waiters of ``task_id`` without notifying clients (a row changed elsewhere)."""
        event = self._changed.pop(task_id, None)
        if event is not None:
            event.set()

    def remote_changed(self, task_id: str | None, status: str | None) -> None:
        """React to a change another process made (the store's change feed).

        Wakes waiters (a worker parked for input, a 2025 ``tasks/result``), pushes to this
        process's subscribers, and lets the owner's watch re-read its tasks at once (a
        cancel answered by another replica stops the worker without waiting ``poll_s``).

        Args:
            task_id: The task, or ``None`` when changes may have been missed (everything
                watched is re-read).
            status: Its status after the change; ``None`` when the change kept it.
        """
        self.ownership.poke()
        if task_id is None:
            for waiting in list(self._changed):
                self.wake(waiting)
            return
        self.wake(task_id)
        for listener in list(self._listeners):
            listener(task_id, status)
        self.notifier.offer(task_id, status)

    def add_listener(self, callback: Callable[[str, str | None], None]) -> Callable[[], None]:
        """Call ``callback(task_id, status)`` on every task change; return the remover.

        ``status`` is the task's status after the change, ``None`` when the change kept it
        (a status message only): push queues send transitions first.
        """
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback) if callback in self._listeners else None

    async def changed(self, task_id: str, status: str | None = None, *, kept: bool = False) -> None:
        """Wake waiters of ``task_id`` and push status notifications.

        Args:
            task_id: The task that changed.
            status: Its status after the change, if the caller knows it.
            kept: The change left the status as it was (message only); otherwise an
                unknown ``status`` is read from the row, so push can tell transitions.
        """
        self.wake(task_id)
        if status is None and not kept:
            record = self.store.get(task_id)
            status = record.status if record is not None else None
        for listener in list(self._listeners):
            listener(task_id, status)
        await self.notifier.status_changed(task_id, status)

    async def _set(
        self, task_id: str, *, worker: bool = True, durable: bool = True, **changes: Any
    ) -> bool:
        """Change an active task; a ``worker`` write only while this process owns it."""
        changes["updated_at_ms"] = self.now_ms()
        owner = self.owner_id if worker else None
        message = not durable and set(changes) == {"status_message", "updated_at_ms"}
        write = partial(
            self.store.update, task_id, only_if_active=True, owner=owner, durable=durable, **changes
        )
        try:
            done = await self.writes.run(
                write,
                key=task_id,
                message=message,
                replaces_message="status_message" in changes,
                until_stored=worker,
                ref=task_ref(task_id),
            )
        except Superseded:
            return True  # a newer write of the task carries the change (and notifies)
        if done:
            await self.changed(task_id, changes.get("status"), kept="status" not in changes)
        return done

    async def set_status_message(self, task_id: str, message: str) -> None:
        """Update the status message of an active task (cosmetic: not fsynced)."""
        await self._set(task_id, status_message=message, durable=False)

    async def report_progress(
        self, task_id: str, progress: float, total: float | None, message: str | None
    ) -> None:
        """Forward progress (2025 notification) and mirror ``message`` as the status message."""
        await self.notifier.progress(task_id, progress, total, message)
        if message:
            await self.set_status_message(task_id, message)

    # --- input ------------------------------------------------------------------------

    async def request_inputs(
        self, task_id: str, requests: dict[str, Ask]
    ) -> dict[str, dict[str, Any]]:
        """Park the task in ``input_required`` until every key in ``requests`` is answered."""
        from chit.tasks.server.workers import park_for_inputs

        return await park_for_inputs(self, task_id, requests)

    async def answer(self, task_id: str, responses: dict[str, dict[str, Any]]) -> None:
        """Record client answers to pending input requests (unknown keys are ignored)."""
        record = await self.write(self.store.add_responses, task_id, responses)
        if record is not None:
            await self.changed(task_id, kept=True)  # answers alone keep the status

    # --- cancellation -------------------------------------------------------------------

    async def cancel(
        self, task_id: str, message: str = "Cancelled at the client's request"
    ) -> bool:
        """Cancel an active task (status ``cancelled`` at once); False if already terminal.

        The row is the channel: when another process runs the task, its owner sees the
        terminal row within ``poll_s`` and stops the worker (which can no longer write).
        """
        done = await self._set(
            task_id, worker=False, status="cancelled", status_message=message, cancel_requested=True
        )
        scope = self.scopes.get(task_id)
        if scope is not None:
            scope.cancel()
        return done

    # --- workers --------------------------------------------------------------------------

    def start(self, task_id: str) -> None:
        """Start the worker of a task this process owns."""
        if self._tg is None:
            raise TaskError(code=INTERNAL_ERROR, message="Task runtime is not running")
        from chit.tasks.server.workers import run_task

        self._tg.start_soon(run_task, self, task_id)

    def now_ms(self) -> int:
        """Return the runtime clock as epoch milliseconds."""
        return to_ms(self.now())
