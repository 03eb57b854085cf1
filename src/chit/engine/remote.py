"""The Engine over the control socket: a client of the home's daemon.

``async with RemoteEngine.open(home) as engine:`` connects (starting the daemon when
none answers) and greets it (:class:`chit.engine.socket_client.SocketClient`), then
serves every ``Engine`` method as one JSON-RPC request with the method's timeout.
"""

from __future__ import annotations

from typing import Any

import anyio

from chit import clock
from chit.engine import rpc
from chit.engine.models import (
    ProtocolMessage,
    ReceiptUpdate,
    ReconcileSummary,
    Resync,
    ServerStatus,
    ToolsInfo,
)
from chit.engine.socket_client import ProtocolMismatch, SocketClient
from chit.engine.start import DaemonUnavailable
from chit.receipts import Receipt, RetrievalCondition, follow_done

FOLLOW_RECHECK_S = 1.0
"""A follower re-judges its receipt this often even without events (time passes)."""
_LOST = (RetrievalCondition.VANISHED, RetrievalCondition.EXPIRED, RetrievalCondition.INCOMPATIBLE)


class RemoteEngine(SocketClient):
    """The daemon's client (implements :class:`chit.engine.Engine`)."""

    async def call(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        purpose: str | None = None,
        work_ref: str | None = None,
        ttl_ms: int | None = None,
        accept_if: str | None = None,
    ) -> Receipt:
        """See ``Engine.call``."""
        params = rpc.CallParams(
            server=server,
            tool=tool,
            arguments=arguments,
            purpose=purpose,
            work_ref=work_ref,
            ttl_ms=ttl_ms,
            accept_if=accept_if,
        )
        receipt: Receipt = await self._request("call", params)
        return receipt

    async def answer(
        self,
        receipt_id: str,
        key: str | None = None,
        content: dict[str, Any] | None = None,
        *,
        decline: bool = False,
        cancel: bool = False,
    ) -> Receipt:
        """See ``Engine.answer``."""
        params = rpc.AnswerParams(
            receipt_id=receipt_id, key=key, content=content, decline=decline, cancel=cancel
        )
        receipt: Receipt = await self._request("answer", params)
        return receipt

    async def cancel(self, receipt_id: str) -> Receipt:
        """See ``Engine.cancel``."""
        receipt: Receipt = await self._request("cancel", rpc.ReceiptParams(receipt_id=receipt_id))
        return receipt

    async def accept(self, receipt_id: str, why: str | None = None) -> Receipt:
        """See ``Engine.accept``."""
        params = rpc.DecideParams(receipt_id=receipt_id, why=why)
        receipt: Receipt = await self._request("accept", params)
        return receipt

    async def reject(self, receipt_id: str, why: str) -> Receipt:
        """See ``Engine.reject``."""
        params = rpc.DecideParams(receipt_id=receipt_id, why=why)
        receipt: Receipt = await self._request("reject", params)
        return receipt

    async def reopen(self, receipt_id: str) -> Receipt:
        """See ``Engine.reopen``."""
        receipt: Receipt = await self._request("reopen", rpc.ReceiptParams(receipt_id=receipt_id))
        return receipt

    async def protocol_log(self, server: str, *, limit: int = 100) -> list[ProtocolMessage]:
        """See ``Engine.protocol_log``: the daemon's log of its session with ``server``."""
        params = rpc.ProtocolLogParams(server=server, limit=limit)
        messages: list[ProtocolMessage] = await self._request("protocol.log", params)
        return messages

    async def receipt(self, receipt_id: str) -> Receipt:
        """See ``Engine.receipt``."""
        params = rpc.ReceiptParams(receipt_id=receipt_id)
        receipt: Receipt = await self._request("receipt", params)
        return receipt

    async def follow(self, receipt_id: str) -> Receipt:
        """See ``Engine.follow``: the daemon reconciles; this watches its events."""
        async with self.events(receipt_id=receipt_id) as stream:
            current = await self.receipt(receipt_id)
            if follow_done(current, clock.now()) and self._predates_daemon(current):
                # What the store says is the last word of an earlier daemon (a stdio
                # server's task may have ended with it): have this one look first, or
                # "input required" sends the person to answer a task that is gone.
                await self.reconcile_now()
                current = await self.receipt(receipt_id)
            while not follow_done(current, clock.now()):
                with anyio.move_on_after(FOLLOW_RECHECK_S):
                    try:
                        event = await stream.receive()
                    except anyio.EndOfStream:
                        raise DaemonUnavailable(
                            f"chit's daemon went away while following {current.receipt_id}; "
                            f"follow it again with `chit follow {current.receipt_id}`"
                        ) from None
                    if isinstance(event, ReceiptUpdate):
                        current = event.receipt
                    elif isinstance(event, Resync):
                        current = await self.receipt(current.receipt_id)
            return current

    def _predates_daemon(self, receipt: Receipt) -> bool:
        """Live as stored, and last observed before the running daemon started."""
        if receipt.is_terminal or receipt.retrieval in _LOST or self.hello is None:
            return False
        try:
            started = clock.parse_iso(self.hello.started_at)
        except ValueError:
            return False
        return receipt.status_at < started

    async def tools(self, server: str, *, timeout: float | None = None) -> ToolsInfo:
        """See ``Engine.tools``."""
        info: ToolsInfo = await self._request(
            "tools", rpc.ToolsParams(server=server, timeout=timeout), (timeout or 0) + 15
        )
        return info

    async def servers(self) -> list[ServerStatus]:
        """See ``Engine.servers``."""
        statuses: list[ServerStatus] = await self._request("servers", rpc.NoParams())
        return statuses

    async def reconcile_now(self) -> ReconcileSummary:
        """See ``Engine.reconcile_now``."""
        summary: ReconcileSummary = await self._request("reconcile", rpc.NoParams())
        return summary

    async def retry_intent(
        self,
        request_key: str,
        arguments: dict[str, Any] | None = None,
        *,
        ttl_ms: int | None = None,
        accept_if: str | None = None,
    ) -> Receipt:
        """See ``Engine.retry_intent``."""
        params = rpc.RetryParams(
            request_key=request_key, arguments=arguments, ttl_ms=ttl_ms, accept_if=accept_if
        )
        receipt: Receipt = await self._request("intent.retry", params)
        return receipt

    async def abandon_intent(self, request_key: str) -> None:
        """See ``Engine.abandon_intent``."""
        await self._request("intent.abandon", rpc.IntentParams(request_key=request_key))


__all__ = ["ProtocolMismatch", "RemoteEngine"]
