"""A host without task support calls a tool that can be a task: the call is held open.

The call still becomes a task on the server (intent first, a receipt), so it survives
the host: its timeout, its cancel, its exit. Meanwhile the host's request stays open:

* progress notifications go out on every change of the receipt and every
  :func:`heartbeat_s` seconds (when the host gave a ``progressToken``) — most hosts
  reset their request timeout on progress;
* a prompt of the server is asked of the host (``elicitation/create``,
  ``sampling/createMessage`` or ``roots/list`` on the call) when the server's
  ``prompts`` setting allows and the host declared the capability (a sampling or roots
  refusal, error -1 / -32600, declines it; other errors leave it); otherwise it waits in
  chit's inbox, and an answer given there (``chit answer``, the TUI) lets the call go
  on. The first answer wins: a host question answered in chit is withdrawn;
* at the end the host gets the result, as a plain call would have returned it.

If the host cancels, times out or goes away, the task is *not* cancelled: its receipt
notes that the host stopped waiting, the person sees it, and the agent can fetch the
result later with the sidecar's ``receipt_result`` (every progress message names the
receipt). Only the server's ``host_cancel =
"cancel"`` setting, or a person cancelling in chit, cancels it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup
from mcp.shared.exceptions import MCPError

from chit.errors import ChitError
from chit.proxy import wire as pwire
from chit.proxy.calls import start
from chit.proxy.host import Ctx
from chit.proxy.inputs import host_request
from chit.proxy.mirror import OUTCOME_RETRY_S, is_cancellation, newest, unwrap
from chit.proxy.wire import heartbeat_s
from chit.receipts import InputKind, InputRequest, LifecycleState, Receipt
from chit.tasks.server.asking import REFUSALS

if TYPE_CHECKING:
    from chit.proxy.host import ProxyHost

log = logging.getLogger("chit.proxy")


class Held:
    """One held call: follow its receipt, keep the host's request alive, ask, answer."""

    def __init__(self, host: ProxyHost, ctx: Ctx, receipt_id: str) -> None:
        """Hold ``ctx``'s request open for the receipt ``receipt_id``."""
        self.host = host
        self.ctx = ctx
        self.rid = receipt_id
        self.latest: Receipt | None = None
        self.changed = anyio.Event()
        self.asking: dict[str, anyio.CancelScope] = {}
        self.step = 0
        self.heartbeat = heartbeat_s()

    async def wait(self) -> Receipt:
        """Until the receipt ends (or is lost); progress and prompts meanwhile."""
        try:
            return await self._wait()
        except BaseExceptionGroup as group:
            raise unwrap(group) from None

    async def _wait(self) -> Receipt:
        async with (
            self.host.backend.receipt_events(self.rid) as stream,
            anyio.create_task_group() as tg,
        ):
            self.latest = await self.host.backend.receipt(self.rid)
            tg.start_soon(self._pump, stream)
            while True:
                # A fresh event before reading: a change while the progress is sent or
                # questions are asked wakes the next wait (set on the old one, it was lost).
                self.changed = anyio.Event()
                receipt = self.latest
                await self._progress(receipt)
                if receipt.is_terminal or receipt.retrieval.is_lost:
                    break
                self._ask(tg, receipt)
                with anyio.move_on_after(self.heartbeat):
                    await self.changed.wait()
            tg.cancel_scope.cancel()
        return receipt

    async def _pump(self, stream: Any) -> None:
        async for event in stream:
            self.latest = await newest(self.host, self.rid, self.latest, event)
            self.changed.set()

    async def _progress(self, receipt: Receipt) -> None:
        self.step += 1
        # The receipt id rides along: an agent whose host gives up fetches the result
        # later with the sidecar's receipt_result (the host gets no other answer).
        message = receipt.status_message or f"task {receipt.state.value}"
        message = f"{message} (chit receipt {self.rid})"
        try:
            await self.ctx.session.report_progress(self.step, None, message)
        except Exception as exc:  # the host's stream is gone: its cancel will follow
            log.debug("progress not sent: %s", type(exc).__name__)

    def _ask(self, tg: TaskGroup, receipt: Receipt) -> None:
        pending = {q.key: q for q in receipt.pending_inputs}
        for key, scope in list(self.asking.items()):
            if key not in pending:
                scope.cancel()  # answered in chit first: withdraw the host's question
        if receipt.state is not LifecycleState.INPUT_REQUIRED:
            return
        for key, q in pending.items():
            if key in self.asking or host_request(q) is None or not self.host.may_ask(q.kind):
                continue
            scope = anyio.CancelScope()
            self.asking[key] = scope
            tg.start_soon(self._ask_one, q, scope)

    async def _ask_one(self, q: InputRequest, scope: anyio.CancelScope) -> None:
        key, kind = q.key, q.kind
        with scope:
            # A sampling question as its server sent it (else from the stored copy).
            sent = None
            if kind is InputKind.SAMPLING:
                sent = await self.host.backend.question(self.rid, key)
            request = host_request(q, sent)
            if request is None:
                return
            route = self.host.new_route(self.ctx)
            try:
                reply = await self.host.input(route, request["method"], request["params"])
            except MCPError as exc:
                if kind is InputKind.ELICITATION or exc.error.code not in REFUSALS:
                    log.info("the host could not be asked (%s); the prompt waits in chit", exc)
                    return
                # The spec's refusal of a sampling or roots request: the host declined it,
                # as a 2025 task's host does on tasks/result (chit.tasks.server.asking).
                error = {"code": exc.error.code, "message": exc.error.message}
                reply = {"action": "decline", "error": error}
            except Exception as exc:
                log.info("the host could not be asked (%s); the prompt waits in chit", exc)
                return
            finally:
                self.host.routes.pop(route, None)
            try:
                await self.host.backend.answer_for_host(self.rid, key, reply)
            except ChitError as exc:  # refused (it stays in chit's inbox), or answered there
                log.info("the host's answer was not delivered: %s", exc.message)


async def held_call(host: ProxyHost, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
    """Run a plain call as a task on the server and hold the host's request open."""
    reply = await start(host, ctx, params)
    upstream = host.info.protocol_version
    if reply.kind != "task" or reply.receipt is None:
        return pwire.for_host("tools/call", reply.result or {}, ctx.protocol_version, upstream)
    rid = reply.receipt.receipt_id
    try:
        receipt = await Held(host, ctx, rid).wait()
    except BaseException as exc:
        if not is_cancellation(exc):
            raise
        with anyio.CancelScope(shield=True):
            why = "cancelled its call, timed out or went away"
            try:
                await host.backend.gave_up(rid, why)
            except ChitError as exc:
                log.info("could not note that the host left %s: %s", rid, exc.message)
        raise
    if receipt.retrieval.is_lost and not receipt.is_terminal:
        raise MCPError(code=-32603, message=f"The server no longer knows the task ({rid})")
    if receipt.state is LifecycleState.CANCELLED:
        raise MCPError(code=-32603, message="The task was cancelled")
    for pause in (*OUTCOME_RETRY_S, None):
        try:
            answer = await host.backend.outcome(rid)
            break
        except ChitError as exc:
            if pause is None:
                raise MCPError(code=-32603, message=f"The result cannot be fetched: {exc}") from exc
            await anyio.sleep(pause)
    if answer.error is not None:
        raise MCPError(
            code=int(answer.error.get("code", -32603)),
            message=str(answer.error.get("message", "")),
            data=answer.error.get("data"),
        )
    return pwire.for_host("tools/call", answer.result or {}, ctx.protocol_version, upstream)
