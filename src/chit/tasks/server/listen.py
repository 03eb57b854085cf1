"""2026 push: ``subscriptions/listen`` with ``notifications.taskIds`` → ``notifications/tasks``.

The SDK's ``ListenHandler`` knows only the core event kinds, so this handler replaces it
on the server: a listen request without ``taskIds`` is passed to the SDK handler
unchanged; one with ``taskIds`` (which needs the tasks extension, else -32021) gets a
stream carrying both the core events it asked for and a ``notifications/tasks``
(the full DetailedTask, as ``tasks/get`` would return it) on every change of an
accepted task. Only ids visible to the caller are accepted and echoed in the ack.

A task may be run by another process sharing the task store, whose changes this
process never hears of: the stream also re-reads the accepted rows every ``poll_s`` and
pushes those whose ``lastUpdatedAt`` moved since the last push.
"""

from __future__ import annotations

import logging
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

from chit.tasks.server.render import detailed_2026
from chit.tasks.wire import EXTENSION_ID, NOTIFICATION_TASKS, is_terminal

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.subscriptions import SubscriptionBus

    from chit.tasks.server.ext2026 import TasksExtension

logger = logging.getLogger(__name__)


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
        send, recv = anyio.create_memory_object_stream[Any](1024)
        wanted = set(accepted)

        def on_event(event: Any) -> None:
            if event_matches(honored_core, uris, event):
                _offer(send, event)

        def on_task(task_id: str) -> None:
            if task_id in wanted:
                _offer(send, task_id)

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
            # Rows as acknowledged: only later changes are pushed.
            seen = {t: r.updated_at_ms for t in wanted if (r := store.get(t)) is not None}
            while True:
                with anyio.move_on_after(self._ext.runtime.poll_s) as tick:
                    item = await recv.receive()
                if tick.cancelled_caught:
                    self._poll(wanted, seen, send)
                    continue
                if isinstance(item, str):
                    record = self._ext.runtime.store.get(item)
                    if record is None:
                        continue
                    seen[item] = record.updated_at_ms
                    body = detailed_2026(record).wire()
                    body.pop("resultType", None)
                    body["_meta"] = meta
                    note = TaskNotification(params=TaskNotificationParams.model_validate(body))
                    await ctx.session.send_notification(note, related_request_id=subscription_id)  # type: ignore[arg-type]
                    if is_terminal(record.status):
                        wanted.discard(item)
                else:
                    await ctx.session.send_notification(
                        event_to_notification(item, meta), related_request_id=subscription_id
                    )
        finally:
            remove()
            unsubscribe()
            send.close()
            recv.close()
        return SubscriptionsListenResult(_meta=meta)

    def _poll(self, wanted: set[str], seen: dict[str, int], send: Any) -> None:
        """Offer the tasks whose row changed since their last push (changed elsewhere)."""
        for task_id in list(wanted):
            record = self._ext.runtime.store.get(task_id)
            if record is not None and seen.get(task_id) != record.updated_at_ms:
                seen[task_id] = record.updated_at_ms
                _offer(send, task_id)


def _offer(send: Any, item: Any) -> None:
    try:
        send.send_nowait(item)
    except (anyio.WouldBlock, anyio.ClosedResourceError):
        logger.debug("listen stream full or closed; dropped %r", item)
