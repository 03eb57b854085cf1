"""Callback types for input (elicitation / sampling) and status hints, and routing helpers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from mcp.client.session import ClientRequestContext
from mcp_types import (
    INVALID_REQUEST,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    CreateMessageResultWithTools,
    ElicitRequest,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    InputRequest,
    InputResponse,
    ListRootsRequest,
    ListRootsResult,
)

from chit.tasks import wire

InputHandler = Callable[[str | None, InputRequest], Awaitable[InputResponse | ErrorData]]
"""Answers one server→client input request.

Called with the related task id (``None`` for input that belongs to no task, e.g. a
2026 multi-round-trip exchange before the task exists) and the request
(``ElicitRequest`` / ``CreateMessageRequest``). Return the response, or ``ErrorData`` to
decline. A supervisor that parks input durably returns only once a human answered.
"""

HintCallback = Callable[[str], Awaitable[None]]
"""Receives a task id whose status may have changed; re-poll it (never trust the push).

``TaskClient`` passes a :class:`Hint`: a ``str`` (the task id, so one-argument callbacks
written for plain ids keep working) that also says what the notification claimed.
"""


class Hint(str):
    """A task id from a status notification, with the status the notification claimed.

    Subclassing ``str`` keeps :data:`HintCallback` compatible: the hint *is* the task id
    (equal to and hashing like it). ``status`` and ``status_message`` are only what the
    push said - a prompt for deciding how urgently to re-poll, and which request to send
    (a 2025 end implies a ``tasks/result``), never a fact recorded unconfirmed. Only a
    2026 end whose ``params`` parse as the DetailedTask ``tasks/get`` would return is
    folded as that answer (``chit.reconcile.observe.TaskObserver.told``).

    Attributes:
        status: the notified status (``working``, ``completed``, …), None if absent.
        status_message: the notified status message, None if absent.
        updated_at: the notified ``lastUpdatedAt``, None if absent or not a timestamp.
        params: the notification's params as received (unchecked; a 2026
            ``notifications/tasks`` carries the whole DetailedTask), None if not kept.
    """

    status: str | None
    status_message: str | None
    updated_at: datetime | None
    params: Mapping[str, Any] | None

    def __new__(
        cls,
        task_id: str,
        status: str | None = None,
        status_message: str | None = None,
        updated_at: datetime | None = None,
    ) -> Hint:
        """Wrap ``task_id`` with what the notification said."""
        hint = super().__new__(cls, task_id)
        hint.status = status
        hint.status_message = status_message
        hint.updated_at = updated_at
        hint.params = None
        return hint

    @classmethod
    def from_params(cls, task_id: str, params: Mapping[str, Any]) -> Hint:
        """Build a hint from raw notification params (ill-typed fields count as absent)."""
        status = params.get("status")
        message = params.get("statusMessage")
        hint = cls(
            task_id,
            status if isinstance(status, str) else None,
            message if isinstance(message, str) else None,
            _moment(params.get("lastUpdatedAt")),
        )
        hint.params = params
        return hint


def _moment(value: Any) -> datetime | None:
    """An aware timestamp from an ISO 8601 string (naive: UTC), or None if unusable."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def related_task_id(*metas: Mapping[str, Any] | None) -> str | None:
    """Return the 2025 related-task id from the first ``_meta`` that carries one."""
    for meta in metas:
        if not meta:
            continue
        related = meta.get(wire.META_RELATED_TASK)
        if isinstance(related, Mapping):
            task_id = related.get("taskId")
            if isinstance(task_id, str) and task_id:
                return task_id
    return None


class InputRouter:
    """Routes 2025 server→client elicitation/sampling to the handler of the related task.

    While :meth:`TaskClient.result` waits on ``tasks/result`` for a task, requests whose
    related-task ``_meta`` names that task go to the handler given for it; everything
    else goes to the default handler; with neither, the request is declined.
    """

    def __init__(self, default: InputHandler | None) -> None:
        self.default = default
        self._per_task: dict[str, InputHandler] = {}

    @contextmanager
    def routing(self, task_id: str, handler: InputHandler | None) -> Iterator[None]:
        """Route ``task_id``'s input to ``handler`` for the duration of the block."""
        if handler is not None:
            self._per_task[task_id] = handler
        try:
            yield
        finally:
            if handler is not None:
                self._per_task.pop(task_id, None)

    async def route(
        self, context: ClientRequestContext, request: InputRequest
    ) -> InputResponse | ErrorData:
        """Answer ``request`` through the matching handler."""
        task_id = related_task_id(request.params.meta if request.params else None, context.meta)
        handler = self._per_task.get(task_id) if task_id else None
        handler = handler or self.default
        if handler is None:
            return ErrorData(code=INVALID_REQUEST, message="no input handler for this request")
        return await handler(task_id, request)

    async def on_elicit(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        """``elicitation_callback`` for ``mcp.Client``."""
        reply = await self.route(context, ElicitRequest(params=params))
        if isinstance(reply, ElicitResult | ErrorData):
            return reply
        return ErrorData(code=INVALID_REQUEST, message="handler returned a non-elicitation reply")

    async def on_sample(
        self, context: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult | CreateMessageResultWithTools | ErrorData:
        """``sampling_callback`` for ``mcp.Client``."""
        reply = await self.route(context, CreateMessageRequest(params=params))
        if isinstance(reply, ListRootsResult | ElicitResult):
            return ErrorData(code=INVALID_REQUEST, message="handler returned a non-sampling reply")
        return reply

    async def on_roots(self, context: ClientRequestContext) -> ListRootsResult | ErrorData:
        """``list_roots_callback`` for ``mcp.Client``."""
        reply = await self.route(context, ListRootsRequest())
        if isinstance(reply, ListRootsResult | ErrorData):
            return reply
        return ErrorData(code=INVALID_REQUEST, message="handler returned a non-roots reply")


__all__ = ["Hint", "HintCallback", "InputHandler", "InputRouter", "related_task_id"]
