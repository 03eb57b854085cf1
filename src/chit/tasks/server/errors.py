"""Errors of the task runtime, and the request-key argument digest."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from mcp.shared.exceptions import MCPError

from chit.tasks.wire import INVALID_PARAMS

NOT_FOUND_MESSAGE = "Failed to retrieve task: Task not found"
"""The one message for unknown, expired and foreign ids (they must be indistinguishable)."""


def task_ref(task_id: str) -> str:
    """How the server's own logs name a task: ``task#`` and a hash, never the id.

    A task id is a bearer credential for its status and result; logs are read more
    widely than the task store. The id is 192 random bits, so its SHA-256 can be neither
    reversed nor guessed, yet two log lines about one task still match.
    """
    return "task#" + hashlib.sha256(task_id.encode("utf-8")).hexdigest()[:12]


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
