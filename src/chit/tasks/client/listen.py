"""2026 push: ``subscriptions/listen`` with ``notifications.taskIds`` (raw).

The SDK's ``listen()`` has no ``taskIds`` parameter and its event vocabulary is closed,
so this module re-does the same steps with the session's private listen plumbing:
register a demux route under a minted request id *before* sending (so the
``notifications/subscriptions/acknowledged`` frame is consumed, not raced), send the
listen request raw with no result timeout (its reply is the end of the stream), and
wait for the acknowledgement within the read timeout. The ``notifications/tasks``
frames themselves are not core events: they fall through to the
``NotificationBinding`` of :class:`TasksClientExtension`, which turns them into hints.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from itertools import count
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import MCPError

from chit.tasks import wire
from chit.tasks.client.errors import TransientError, classify

_ids = count(1)


@asynccontextmanager
async def listen_tasks(
    session: ClientSession, task_ids: Sequence[str], ack_timeout: float
) -> AsyncIterator[frozenset[str]]:
    """Open a task subscription; yield the task ids the server agreed to push.

    Raises:
        TaskError: the server refused (-32021 incompatible, -32601 ...), the connection
            failed, or no acknowledgement arrived within ``ack_timeout`` (transient).
    """
    method = wire.SUBSCRIPTIONS_LISTEN
    task_group = session._task_group
    if task_group is None:
        raise RuntimeError("listen requires an entered session")
    request_id = f"chit-tasks-listen-{next(_ids)}"
    data: dict[str, Any] = {
        "method": method,
        "params": {"notifications": {"taskIds": list(task_ids)}},
    }
    opts: CallOptions = {"request_id": request_id}
    session._stamp(data, opts)
    route = session._register_listen_route(request_id)
    scope = anyio.CancelScope()

    async def drive() -> None:
        with scope:
            try:
                await session._dispatcher.send_raw_request(method, data["params"], opts)
            except MCPError as error:
                route.settle("lost", error=error)
                return
            route.settle("graceful")

    try:
        task_group.start_soon(drive)
        with anyio.move_on_after(ack_timeout):
            await route.acked.wait()
        if route.error is not None:
            raise classify(route.error, method)
        if route.honored is None:
            raise TransientError("no acknowledgement for the task subscription", method=method)
        accepted = (route.honored.model_extra or {}).get("taskIds") or []
        yield frozenset(str(t) for t in accepted if isinstance(t, str))
    finally:
        route.settle("local")
        scope.cancel()
        session._unregister_listen_route(request_id)


__all__ = ["listen_tasks"]
