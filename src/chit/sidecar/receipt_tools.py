"""``task_call`` and ``receipt_*``: receipts for agents whose host lacks MCP tasks.

The call goes through the Supervisor's :class:`ReceiptGateway` (intent first, receipt on
acceptance); the sidecar only binds each receipt to the principal that started it and
answers anyone else exactly as it answers an unknown id.

A receipt an agent's host started through ``chit proxy`` (a host without tasks that
gave up on a held call leaves one) can be read with ``receipt_status`` and
``receipt_result`` by that agent — see :func:`chit.sidecar.gateway.may_read_proxied` —
but not cancelled here: a host's cancel of such a task is the person's decision in chit
(or the server's ``host_cancel`` setting), not the agent's.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as t
from mcp.server.mcpserver import MCPServer

from chit.sidecar import gateway as gw
from chit.sidecar.contract import CONTRACT
from chit.sidecar.principals import LOCAL_PRINCIPAL, current_principal
from chit.sidecar.server import render
from chit.sidecar.service import SidecarService, failure

UNKNOWN_RECEIPT_ANSWER = failure(gw.UNKNOWN_RECEIPT)
PROXIED_CANCEL = (
    "this receipt was started through chit proxy: a person cancels it in chit"
    " (chit cancel), or the server's host_cancel setting does when the host cancels"
)


def register_receipt_tools(
    server: MCPServer[Any], service: SidecarService, gateway: gw.ReceiptGateway
) -> None:
    """Add ``task_call``, ``receipt_status``, ``receipt_result`` and ``receipt_cancel``."""

    async def owned(receipt_id: str) -> bool:
        principal = current_principal()
        return await anyio.to_thread.run_sync(
            lambda: gw.owns(service.store.db, receipt_id, principal)
        )

    async def proxied(receipt_id: str) -> bool:
        """The caller may read ``receipt_id``, which its host started through chit proxy."""
        principal = current_principal()
        if await anyio.to_thread.run_sync(lambda: gw.linked(service.store.db, receipt_id)):
            return False  # another principal's task_call: private to it
        origin = await gateway.origin(receipt_id)
        work_ref = (origin or {}).get("work_ref")
        owns_item = isinstance(work_ref, str) and (
            await anyio.to_thread.run_sync(
                lambda: service.store.anchor(work_ref, principal) is not None
            )
        )
        local = principal == LOCAL_PRINCIPAL
        return gw.may_read_proxied(origin, local=local, owns_item=owns_item)

    async def readable(receipt_id: str) -> bool:
        return await owned(receipt_id) or await proxied(receipt_id)

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
        if not await readable(receipt_id):
            return answer(None)
        return answer(await gateway.status(receipt_id))

    @server.tool()
    async def receipt_result(receipt_id: str) -> t.CallToolResult:
        """The receipt's outcome once terminal (else its state and when to look again).

        Also for a task your host started through chit proxy and stopped waiting for
        (the receipt id is in the call's progress messages).
        """
        if not await readable(receipt_id):
            return answer(None)
        return answer(await gateway.result(receipt_id))

    @server.tool()
    async def receipt_cancel(receipt_id: str) -> t.CallToolResult:
        """Request cancellation of the receipt's task; returns the cancellation posture."""
        if not await owned(receipt_id):
            if await proxied(receipt_id):
                return render(failure(PROXIED_CANCEL), True)
            return answer(None)
        return answer(await gateway.cancel(receipt_id))
