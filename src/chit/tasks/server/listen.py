"""2026 push: ``subscriptions/listen`` with ``notifications.taskIds`` → ``notifications/tasks``.

The SDK's ``ListenHandler`` knows only the core event kinds, so this handler replaces it
on the server: a listen request without ``taskIds`` is passed to the SDK handler
unchanged; one with ``taskIds`` (which needs the tasks extension, else -32021) gets a
stream carrying both the core events it asked for and a ``notifications/tasks``
(the full DetailedTask, as ``tasks/get`` would return it) on every change of an
accepted task. Only ids visible to the caller are accepted and echoed in the ack. A task
already terminal when the listen is acknowledged is announced once at once (it will not
change again); a live one is announced at its next change.

Task changes go through a per-stream :class:`~chit.tasks.server.coalesce.CoalescingQueue`:
at most one pending notification per task (the row is read when it is sent, so the
latest state wins), status transitions ahead of message-only changes, which are
throttled to one per task per :data:`~chit.tasks.server.notify.MESSAGE_INTERVAL_S` and to
:data:`~chit.tasks.server.notify.MESSAGE_RATE_PER_S` on the stream.
Core events are not coalesced; they go out in order, ahead of task notifications.

A task may be run by another process sharing the task store, whose changes this
process never hears of: the stream also re-reads the accepted rows every ``poll_s`` and
offers those whose ``lastUpdatedAt`` moved since the last push.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING, Any, Literal

import anyio
from mcp.server.mcpserver.server import require_client_extension
from mcp.server.subscriptions import ListenHandler, _honored_subset
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY, event_matches, event_to_notification
from mcp_types import (
    Notification,
    NotificationParams,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
)
from pydantic import ConfigDict

from chit.tasks.server.coalesce import CoalescingQueue
from chit.tasks.server.notify import MESSAGE_INTERVAL_S, MESSAGE_RATE_PER_S
from chit.tasks.server.render import detailed_2026
from chit.tasks.wire import EXTENSION_ID, NOTIFICATION_TASKS, is_terminal

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.subscriptions import SubscriptionBus

    from chit.tasks.server.ext2026 import TasksExtension

logger = logging.getLogger(__name__)
EVENT_QUEUE_SIZE = 1024
MAX_POLL_GAP = 10


class TaskNotificationParams(NotificationParams):
    """Params of ``notifications/tasks``: a DetailedTask (open shape)."""

    model_config = ConfigDict(extra="allow")


class TaskNotification(Notification[TaskNotificationParams, Literal["notifications/tasks"]]):
    """``notifications/tasks`` (2026 tasks extension)."""

    method: Literal["notifications/tasks"] = NOTIFICATION_TASKS
    params: TaskNotificationParams


class TaskListenHandler:
    """``subscriptions/listen`` handler adding task subscriptions to the SDK's."""

    def __init__(self, bus: SubscriptionBus, ext: TasksExtension) -> None:
        """Serve core events from ``bus`` and task changes from ``ext.runtime``."""
        self._core = ListenHandler(bus)
        self._bus = bus
        self._ext = ext

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        """Serve one listen stream (see module docstring)."""
        requested = (params.notifications.model_extra or {}).get("taskIds")
        if requested is None:
            return await self._core(ctx, params)
        require_client_extension(ctx, EXTENSION_ID)
        subscription_id = ctx.request_id
        if subscription_id is None:
            raise MCPError(code=-32600, message="subscriptions/listen requires a request id")
        principal = self._ext.principal_of(ctx)
        accepted: list[str] = []
        for task_id in requested if isinstance(requested, list) else []:
            try:
                self._ext.runtime.visible(str(task_id), principal)
            except MCPError:
                continue  # unknown and foreign ids are silently not acknowledged
            accepted.append(str(task_id))
        honored_core = _honored_subset(params.notifications)
        honored = SubscriptionFilter.model_validate(
            {**honored_core.model_dump(by_alias=True, exclude_none=True), "taskIds": accepted}
        )
        uris = frozenset(honored_core.resource_subscriptions or ())
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}
        wanted = set(accepted)
        queue = CoalescingQueue[str](MESSAGE_INTERVAL_S, max_chatter_per_s=MESSAGE_RATE_PER_S)
        events: deque[Any] = deque()

        def on_event(event: Any) -> None:
            if not event_matches(honored_core, uris, event):
                return
            if len(events) >= EVENT_QUEUE_SIZE:
                logger.debug("listen stream full; dropped %r", event)
                return
            events.append(event)
            queue.wake()

        def on_task(task_id: str, status: str | None) -> None:
            if task_id in wanted:
                queue.offer(task_id, status)

        unsubscribe = self._bus.subscribe(on_event)
        remove = self._ext.runtime.add_listener(on_task)
        try:
            await ctx.session.send_notification(
                SubscriptionsAcknowledgedNotification(
                    params=SubscriptionsAcknowledgedNotificationParams(
                        notifications=honored, _meta=meta
                    )
                ),
                related_request_id=subscription_id,
            )
            store = self._ext.runtime.store
            # Rows as acknowledged: only later changes are pushed — except a task that
            # ended before the listen began. It never changes again, so without one
            # notification now its listener would wait for ever (a client that listens
            # right after creating a short task, or after its last check, loses the race).
            for task_id in wanted:
                if (record := store.get(task_id)) is None:
                    continue
                if is_terminal(record.status):
                    queue.offer(task_id, record.status)
                else:
                    queue.sent(task_id, record.status, record.updated_at_ms)
            poll_s = self._ext.runtime.poll_s
            # Re-read the rows after poll_s of quiet (as cheap as before when busy), but
            # at least every MAX_POLL_GAP poll intervals, so a busy stream still sees
            # changes made by other processes.
            last_poll = idle_since = anyio.current_time()
            while True:
                now = anyio.current_time()
                due = min(idle_since + poll_s, last_poll + MAX_POLL_GAP * poll_s)
                await queue.wait(max(0.0, due - now))
                now = anyio.current_time()
                if now >= min(idle_since + poll_s, last_poll + MAX_POLL_GAP * poll_s):
                    self._poll(wanted, queue)
                    last_poll = idle_since = now
                if events or len(queue):
                    idle_since = now
                while events:
                    await ctx.session.send_notification(
                        event_to_notification(events.popleft(), meta),
                        related_request_id=subscription_id,
                    )
                task_id = queue.pop()
                if task_id is None:
                    continue
                record = store.get(task_id)
                if record is None or queue.is_older(task_id, record.updated_at_ms):
                    continue  # never show a client an older state after a newer one
                queue.sent(task_id, record.status, record.updated_at_ms)
                body = detailed_2026(record).wire()
                body.pop("resultType", None)
                body["_meta"] = meta
                note = TaskNotification(params=TaskNotificationParams.model_validate(body))
                await ctx.session.send_notification(note, related_request_id=subscription_id)  # type: ignore[arg-type]
                if is_terminal(record.status):
                    wanted.discard(task_id)
                    queue.forget(task_id)
        finally:
            remove()
            unsubscribe()
        return SubscriptionsListenResult(_meta=meta)

    def _poll(self, wanted: set[str], queue: CoalescingQueue[str]) -> None:
        """Offer the tasks whose row changed since their last push (changed elsewhere)."""
        for task_id in list(wanted):
            record = self._ext.runtime.store.get(task_id)
            if record is not None and queue.sent_version(task_id) != record.updated_at_ms:
                queue.offer(task_id, record.status)
