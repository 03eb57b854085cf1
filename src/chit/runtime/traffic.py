"""Server → client traffic that belongs to no receipt: who handles it.

The sessions the engine holds are shared: a server's elicitation or sampling request
for a call that is not a watched task, and its notifications (logging, list changes,
resource updates), arrive on the one session of that server. By default nothing wants
them (input is declined, notifications are dropped, as before). ``chit proxy`` plugs in
here to route them to the host whose call they belong to.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp_types import INVALID_REQUEST, ErrorData

from chit.receipts import HostInfo

log = logging.getLogger("chit.runtime")

InputRoute = Callable[[str, str | None, Any], Awaitable[Any]]
"""(server, related task id or None, InputRequest) → InputResponse | ErrorData."""

MessageRoute = Callable[[str, Any], Awaitable[None]]
"""(server, notification model)."""

HostsOf = Callable[[str], tuple[HostInfo, ...]]
"""server → the agent hosts attached to it through ``chit proxy`` right now."""


class ServerTraffic:
    """The engine's handlers for server → client traffic; replace them to route it."""

    def __init__(self) -> None:
        """Start with nobody listening: input is declined, notifications dropped."""
        self.input: InputRoute | None = None
        self.message: MessageRoute | None = None
        self.hosts: HostsOf | None = None

    def connected_hosts(self, server: str) -> tuple[HostInfo, ...]:
        """The hosts attached to ``server`` through ``chit proxy`` (none without a proxy)."""
        return self.hosts(server) if self.hosts is not None else ()

    async def on_input(self, server: str, task_id: str | None, request: Any) -> Any:
        """Hand an input request to the route, or decline it."""
        if self.input is None:
            return ErrorData(code=INVALID_REQUEST, message="no handler for this request")
        return await self.input(server, task_id, request)

    async def on_message(self, server: str, notification: Any) -> None:
        """Hand a notification to the route (a failing route is logged, never raised)."""
        if self.message is None:
            return
        try:
            await self.message(server, notification)
        except Exception:
            log.exception("relaying a notification of %s failed", server)
