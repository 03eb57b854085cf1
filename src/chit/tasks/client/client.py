"""``TaskClient``: one task interface over both MCP task generations.

The generation is chosen once per connection from what was negotiated:

* protocol ``2026-07-28`` and ``io.modelcontextprotocol/tasks`` in the server's
  ``capabilities.extensions`` → the extension (server decides per call);
* a handshake version with ``capabilities.tasks.requests.tools.call`` → 2025 core tasks,
  gated per tool by ``execution.taskSupport``;
* otherwise no tasks: ``start`` answers synchronously and says why.

The connection itself (lifecycle, discovery, pushed notifications) is
:class:`~chit.tasks.client.base.ClientBase`; this module is what is done with tasks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
from mcp_types import (
    INVALID_REQUEST,
    CallToolResult,
    ErrorData,
    InputRequest,
    InputResponse,
    RequestParamsMeta,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from chit.tasks import wire
from chit.tasks.client import legacy, modern
from chit.tasks.client.base import ClientBase
from chit.tasks.client.connect import Mode
from chit.tasks.client.errors import IncompatibleError, TransientError, classify
from chit.tasks.client.inputs import InputHandler
from chit.tasks.client.listen import listen_tasks
from chit.tasks.client.models import (
    CancelOutcome,
    Started,
    SyncReason,
    SyncResult,
    TaskHandle,
    TaskOutcome,
    TaskSnapshot,
)
from chit.tasks.client.parse import parse_call_result

POLL_FLOOR_S = 0.05
POLL_CEILING_S = 10.0
DEFAULT_POLL_S = 1.0


class TaskClient(ClientBase):
    """Async context manager around ``mcp.Client`` for starting and supervising tasks.

    Args:
        spec: Where the server is (:class:`StdioServer`, :class:`HttpServer`,
            :class:`InProcessServer`).
        mode: ``auto`` (negotiate), ``legacy`` (force 2025-11-25 handshake) or ``2026``.
        read_timeout: Seconds to wait for any ordinary reply. Always set: the SDK waits
            forever on a garbage or mis-addressed reply without one.
        result_timeout: Seconds for the blocking 2025 ``tasks/result``, the 2026 poll loop
            in :meth:`result`, and synchronous (non-task) tool calls.
        input_handler: Answers elicitation/sampling for tasks without a per-task handler
            and pre-creation (MRTR) input; receives the related task id or ``None``.
        on_hint: Called with a :class:`~chit.tasks.client.inputs.Hint` (the task id as a
            ``str``, plus the notified status) whenever a status notification arrives.
        declare_sampling: Also declare the sampling capability (routed like elicitation).
        declare_roots: Also declare the roots capability (``roots/list`` routed likewise).
        tap: Shown every JSON-RPC message sent and received (the protocol log).
        on_message: Receives the server's other notifications (logging, list changes,
            resource updates, progress), e.g. to relay them to a proxied host.
    """

    # --- start ----------------------------------------------------------------------

    async def start(
        self,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        request_key: str,
        ttl_ms: int | None = None,
    ) -> Started:
        """Call ``tool``, as a task where the server allows it.

        Args:
            tool: Tool name.
            arguments: Tool arguments.
            request_key: chit's idempotency key (``_meta["io.github.chit/request-key"]``);
                resend with the same key after a transient failure to get the same task.
            ttl_ms: Requested retention (2025 only; the server may override it).

        Returns:
            A :class:`TaskHandle`, or a :class:`SyncResult` with the reason.
        """
        args = dict(arguments or {})
        meta = {wire.META_REQUEST_KEY: request_key}
        gen = self.generation
        if gen == wire.PROTOCOL_2025:
            if await self._task_support(tool) == "forbidden":
                plain = await self._plain_call(tool, args, meta)
                return SyncResult(plain, SyncReason.TOOL_FORBIDS_TASKS)
            made = await legacy.create(self.session, tool, args, meta, ttl_ms, self.read_timeout)
            if isinstance(made, TaskHandle):
                return made
            return SyncResult(parse_call_result(made, "tools/call"), SyncReason.SERVER_CHOSE_SYNC)
        if gen is None and self.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            plain = await self._plain_call(tool, args, meta)
            return SyncResult(plain, SyncReason.NO_TASKS_CAPABILITY)
        # 2026 (with or without the extension): the same call path also resolves MRTR.
        made26 = await modern.create(
            self.session, tool, args, meta, self._timeout_for_create(gen), self._pre_task_input
        )
        if isinstance(made26, TaskHandle):
            return made26
        reason = SyncReason.SERVER_CHOSE_SYNC if gen else SyncReason.NO_TASKS_CAPABILITY
        return SyncResult(made26, reason)

    def _timeout_for_create(self, gen: wire.Generation | None) -> float:
        # A task create must be answered promptly; without the extension the call runs
        # synchronously to completion and gets the long timeout.
        return self.read_timeout if gen else self.result_timeout

    async def _plain_call(
        self, tool: str, args: dict[str, Any], meta: dict[str, Any]
    ) -> CallToolResult:
        try:
            return await self.session.call_tool(
                tool,
                args,
                read_timeout_seconds=self.result_timeout,
                meta=cast(RequestParamsMeta, meta),
            )
        except Exception as exc:
            raise classify(exc, "tools/call") from exc

    async def _pre_task_input(self, key: str, request: InputRequest) -> InputResponse | ErrorData:
        del key
        if self._input_handler is None:
            return ErrorData(code=INVALID_REQUEST, message="no input handler configured")
        return await self._input_handler(None, request)

    # --- observe ----------------------------------------------------------------------

    async def get(self, task_id: str) -> TaskSnapshot:
        """``tasks/get``: one observation; 2026 snapshots carry inline payloads."""
        if self._require(wire.TASKS_GET) == wire.PROTOCOL_2025:
            return await legacy.get(self.session, task_id, self.pipes)
        seen = self._seen_inputs.setdefault(task_id, set())
        snap = await modern.get(self.session, task_id, frozenset(seen))
        seen.update(snap.input_requests)
        return snap

    async def result(
        self, task_id: str, *, on_input: InputHandler | None = None, timeout: float | None = None
    ) -> TaskOutcome:
        """Wait for the task's final payload.

        2025: blocking ``tasks/result``; elicitation/sampling requests that arrive meanwhile
        with related-task ``_meta`` for ``task_id`` go to ``on_input`` (else the client's
        ``input_handler``). 2026: polls ``tasks/get`` (honouring ``pollIntervalMs``, woken
        early by hints) until terminal, answering outstanding ``inputRequests`` not
        yet handled by this client with ``on_input`` when given.

        Raises:
            TransientError: ``timeout`` elapsed (2026) or the 2025 request timed out.
        """
        limit = timeout if timeout is not None else self.result_timeout
        if self._require(wire.TASKS_RESULT) == wire.PROTOCOL_2025:
            with self._router.routing(task_id, on_input):
                return await legacy.result(self.session, task_id, limit, self.pipes)
        with anyio.move_on_after(limit):
            while True:
                snap = await self.get(task_id)
                if snap.terminal:
                    return TaskOutcome(status=snap.status, result=snap.result, error=snap.error)
                if on_input is not None and await self._answer_with(task_id, snap, on_input):
                    continue
                await self._sleep(task_id, snap.poll_interval_ms)
        raise TransientError("task did not finish in time", method=wire.TASKS_GET)

    async def _answer_with(self, task_id: str, snap: TaskSnapshot, handler: InputHandler) -> bool:
        """Answer every outstanding key not yet handled here; True when something was sent."""
        handled = self._handled_inputs.setdefault(task_id, set())
        answers: dict[str, InputResponse] = {}
        for key in sorted(set(snap.input_requests) - handled):
            reply = await handler(task_id, snap.input_requests[key])
            handled.add(key)  # a declined key is not asked again on the next poll
            if not isinstance(reply, ErrorData):
                answers[key] = reply
        if answers:
            await self.answer(task_id, answers)
        return bool(answers)

    async def _sleep(self, task_id: str, poll_ms: int | None) -> None:
        seconds = DEFAULT_POLL_S if poll_ms is None else poll_ms / 1000
        seconds = min(max(seconds, POLL_FLOOR_S), POLL_CEILING_S)
        event = self._wakeups.setdefault(task_id, anyio.Event())
        with anyio.move_on_after(seconds):
            await event.wait()
        self._wakeups.pop(task_id, None)

    # --- act ------------------------------------------------------------------------

    async def answer(self, task_id: str, responses: dict[str, InputResponse]) -> None:
        """2026: answer outstanding ``inputRequests`` (partial sets allowed) via ``tasks/update``.

        Raises:
            IncompatibleError: on 2025, where input is answered through the handler.
        """
        if self._require(wire.TASKS_UPDATE) != wire.PROTOCOL_2026:
            raise IncompatibleError(
                "2025 input is answered through the input handler", method=wire.TASKS_UPDATE
            )
        await modern.update(self.session, task_id, responses)
        self._seen_inputs.setdefault(task_id, set()).update(responses)
        self._handled_inputs.setdefault(task_id, set()).update(responses)

    async def cancel(self, task_id: str) -> CancelOutcome:
        """Ask the server to cancel; see :class:`CancelOutcome` for what each kind means."""
        if self._require(wire.TASKS_CANCEL) == wire.PROTOCOL_2026:
            await modern.cancel(self.session, task_id)
            self._seen_inputs.pop(task_id, None)
            self._handled_inputs.pop(task_id, None)
            return CancelOutcome(kind="acknowledged")
        try:
            snap = await legacy.cancel(self.session, task_id)
        except Exception as exc:
            err = classify(exc, wire.TASKS_CANCEL)
            if err.failure_class != "lost":
                raise err from exc
            # -32602 means either "unknown id" or "already terminal"; tasks/get tells which
            # (and raises LostError itself when the id is really unknown).
            current = await legacy.get(self.session, task_id, self.pipes)
            if not current.terminal:
                raise err from exc
            return CancelOutcome(kind="already_terminal", snapshot=current)
        return CancelOutcome(kind="cancelled", snapshot=snap)

    @asynccontextmanager
    async def watch(self, task_ids: Sequence[str]) -> AsyncIterator[frozenset[str]]:
        """Ask the server to push status changes of ``task_ids`` as hints while open.

        2026: a ``subscriptions/listen`` stream with ``taskIds``; yields the ids the
        server acknowledged (it silently drops unknown ones). 2025: servers push
        ``notifications/tasks/status`` unasked, so nothing is sent and the empty set is
        yielded. Either way hints reach ``on_hint``; polling stays the source of truth.
        """
        if self._require(wire.SUBSCRIPTIONS_LISTEN) != wire.PROTOCOL_2026:
            yield frozenset()
            return
        async with listen_tasks(self.session, task_ids, self.read_timeout) as accepted:
            yield accepted


__all__ = ["Mode", "TaskClient"]
