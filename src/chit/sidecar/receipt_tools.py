"""``task_call`` and ``receipt_*``: receipts for agents whose host lacks MCP tasks.

The call goes through the Supervisor's :class:`ReceiptGateway` (intent first, receipt on
acceptance); the sidecar only binds each receipt to the principal that started it and
answers anyone else exactly as it answers an unknown id.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as t
from mcp.server.mcpserver import MCPServer

from chit.sidecar import gateway as gw
from chit.sidecar.contract import CONTRACT
from chit.sidecar.principals import current_principal
from chit.sidecar.server import render
from chit.sidecar.service import SidecarService, failure

UNKNOWN_RECEIPT_ANSWER = failure(gw.UNKNOWN_RECEIPT)


def register_receipt_tools(
    server: MCPServer[Any], service: SidecarService, gateway: gw.ReceiptGateway
) -> None:
    """Add ``task_call``, ``receipt_status``, ``receipt_result`` and ``receipt_cancel``."""

    async def owned(receipt_id: str) -> bool:
        principal = current_principal()
        return await anyio.to_thread.run_sync(
            lambda: gw.owns(service.store.db, receipt_id, principal)
        )

    def answer(data: dict[str, Any] | None) -> t.CallToolResult:
        if data is None:
            return render(dict(UNKNOWN_RECEIPT_ANSWER), True)
        return render({"contract": CONTRACT, **data})

    @server.tool()
    async def task_call(
        server: str,
        tool: str,
        arguments: dict[str, Any],
        purpose: str,
        item_id: str | None = None,
    ) -> t.CallToolResult:
        """Start a tool call on a configured server as a task and keep a receipt for it.

        Returns {receipt_id, state, next}; poll with receipt_status, fetch with
        receipt_result, stop with receipt_cancel.
        """
        principal = current_principal()
        if item_id is not None:
            mine = await anyio.to_thread.run_sync(
                lambda: service.store.anchor(item_id, principal) is not None
            )
            if not mine:
                return render(failure("unknown item_id"), True)
        data = await gateway.start_call(
            server=server,
            tool=tool,
            arguments=arguments,
            purpose=purpose,
            work_ref=item_id,
            principal=principal,
        )
        receipt_id = data.get("receipt_id")
        if isinstance(receipt_id, str):
            await anyio.to_thread.run_sync(
                lambda: gw.link(service.store.db, receipt_id, principal, item_id)
            )
        return render({"contract": CONTRACT, **data}, receipt_id is None)

    @server.tool()
    async def receipt_status(receipt_id: str) -> t.CallToolResult:
        """Latest observed state of a receipt, its freshness and the next safe decision."""
        if not await owned(receipt_id):
            return answer(None)
        return answer(await gateway.status(receipt_id))

    @server.tool()
    async def receipt_result(receipt_id: str) -> t.CallToolResult:
        """The receipt's outcome once terminal (else its state and when to look again)."""
        if not await owned(receipt_id):
            return answer(None)
        return answer(await gateway.result(receipt_id))

    @server.tool()
    async def receipt_cancel(receipt_id: str) -> t.CallToolResult:
        """Request cancellation of the receipt's task; returns the cancellation posture."""
        if not await owned(receipt_id):
            return answer(None)
        return answer(await gateway.cancel(receipt_id))
