"""Errors of the task runtime, and the request-key argument digest."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from mcp.shared.exceptions import MCPError

from chit.tasks.wire import INVALID_PARAMS

NOT_FOUND_MESSAGE = "Failed to retrieve task: Task not found"
"""The one message for unknown, expired and foreign ids (they must be indistinguishable)."""


class TaskError(MCPError):
    """A JSON-RPC error raised by the runtime (handlers let it propagate)."""


def not_found() -> TaskError:
    """Return the error for an unknown, expired or foreign task id."""
    return TaskError(code=INVALID_PARAMS, message=NOT_FOUND_MESSAGE)


def args_digest(tool: str, arguments: dict[str, Any]) -> str:
    """Return the SHA-256 of the canonical JSON of (tool, arguments)."""
    canonical = json.dumps(
        [tool, arguments], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode()).hexdigest()
