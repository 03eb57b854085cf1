"""Callback types for input (elicitation / sampling) and status hints, and routing helpers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp_types import ErrorData, InputRequest, InputResponse

from chit.tasks import wire

InputHandler = Callable[[str | None, InputRequest], Awaitable[InputResponse | ErrorData]]
"""Answers one server→client input request.

Called with the related task id (``None`` for input that belongs to no task, e.g. a
2026 multi-round-trip exchange before the task exists) and the request
(``ElicitRequest`` / ``CreateMessageRequest``). Return the response, or ``ErrorData`` to
decline. A supervisor that parks input durably returns only once a human answered.
"""

HintCallback = Callable[[str], Awaitable[None]]
"""Receives a task id whose status may have changed; re-poll it (never trust the push)."""


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


__all__ = ["HintCallback", "InputHandler", "related_task_id"]
