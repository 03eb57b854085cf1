"""The sidecar's receipt gateway as a client of the home's daemon.

``chit sidecar`` lets agents whose host lacks tasks start and watch tasks
(``task_call``, ``receipt_status`` …). Through the daemon those calls share its
sessions: a stdio server's task started by an agent is the same task ``chit answer``,
``chit cancel`` and the TUI reach, and it outlives the sidecar process. Each gateway call
is one short connection (a daemon restarted meanwhile is simply started again), and the
daemon reconciles, so a status is the stored one. ``--no-daemon`` keeps the in-process
``SupervisorGateway``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from chit.engine import Engine
from chit.engine.remote import RemoteEngine
from chit.errors import ChitError, NotFound
from chit.home import Home
from chit.runtime.sidecar_host import failure_answer, receipt_origin, receipt_view


class EngineGateway:
    """``chit.sidecar.gateway.ReceiptGateway`` over the daemon (started on demand)."""

    def __init__(self, home: Home) -> None:
        """Ask the daemon of ``home``."""
        self._home = home

    async def _run(
        self, fn: Callable[[Engine], Awaitable[dict[str, Any] | None]]
    ) -> dict[str, Any] | None:
        try:
            async with RemoteEngine.open(self._home, client="sidecar") as engine:
                return await fn(engine)
        except NotFound:
            return None
        except ChitError as exc:
            return failure_answer(exc)

    async def start_call(
        self,
        *,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        purpose: str,
        work_ref: str | None,
        principal: str,
    ) -> dict[str, Any]:
        """Start the call through the daemon (intent first, receipt on acceptance)."""
        del principal  # bound by the sidecar's receipt_links, not by the library

        async def run(engine: Engine) -> dict[str, Any] | None:
            receipt = await engine.call(server, tool, arguments, purpose=purpose, work_ref=work_ref)
            return receipt_view(receipt)

        answer = await self._run(run)
        return answer if answer is not None else {"receipt_id": None, "state": "failed"}

    async def status(self, receipt_id: str) -> dict[str, Any] | None:
        """The stored view (the daemon keeps it true)."""

        async def run(engine: Engine) -> dict[str, Any] | None:
            return receipt_view(await engine.receipt(receipt_id))

        return await self._run(run)

    async def result(self, receipt_id: str) -> dict[str, Any] | None:
        """The outcome when terminal (digest, bounded summary, error), else the state."""

        async def run(engine: Engine) -> dict[str, Any] | None:
            receipt = await engine.receipt(receipt_id)
            view = receipt_view(receipt)
            out = receipt.outcome
            view["outcome"] = None if out is None else out.model_dump(mode="json")
            return view

        return await self._run(run)

    async def cancel(self, receipt_id: str) -> dict[str, Any] | None:
        """Request cancellation; the view carries the cancellation posture."""

        async def run(engine: Engine) -> dict[str, Any] | None:
            return receipt_view(await engine.cancel(receipt_id))

        return await self._run(run)

    async def origin(self, receipt_id: str) -> dict[str, Any] | None:
        """Whether a host started it through chit proxy, and the work item it named."""

        async def run(engine: Engine) -> dict[str, Any] | None:
            return receipt_origin(await engine.receipt(receipt_id))

        return await self._run(run)

    def close(self) -> None:
        """Nothing to close: every call used its own connection."""
