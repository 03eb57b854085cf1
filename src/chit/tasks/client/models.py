"""Plain value objects the task client hands to its callers (one shape for both generations)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from mcp_types import CallToolResult, InputRequest, Tool

from chit.tasks import wire


class SyncReason(StrEnum):
    """Why a ``start`` was answered synchronously instead of becoming a task."""

    NO_TASKS_CAPABILITY = "server has no tasks capability"
    TOOL_FORBIDS_TASKS = "tool taskSupport is forbidden"
    SERVER_CHOSE_SYNC = "server chose to answer synchronously"


@dataclass(frozen=True)
class TaskHandle:
    """A task the server durably accepted: everything a receipt needs at creation.

    ``task_id`` is a bearer secret: store it sealed and keep it out of logs.
    """

    generation: wire.Generation
    task_id: str
    status: wire.TaskStatus
    status_message: str | None
    created_at: datetime
    updated_at: datetime
    ttl_ms: int | None
    poll_interval_ms: int | None
    model_immediate_response: str | None = None

    def __repr__(self) -> str:
        # Never print the bearer id in full; a short prefix is enough to tell tasks apart.
        return (
            f"TaskHandle(generation={self.generation!r}, task_id={self.task_id[:6]!r}..., "
            f"status={self.status!r})"
        )


@dataclass(frozen=True)
class SyncResult:
    """A ``start`` that did not become a task: the ordinary tool result and why."""

    result: CallToolResult
    reason: SyncReason


Started = TaskHandle | SyncResult
"""What :meth:`TaskClient.start` returns."""


@dataclass(frozen=True)
class TaskSnapshot:
    """One observation of a task (from ``tasks/get`` or a full 2026 notification).

    Attributes:
        input_requests: 2026 only - every *outstanding* input request, by key.
        new_input_keys: the subset of ``input_requests`` this client had not seen in an
            earlier snapshot and has not answered (the spec asks clients to dedupe).
        result: 2026 only - the inline ``CallToolResult`` of a ``completed`` task.
        error: 2026 only - the inline JSON-RPC error of a ``failed`` task.
    """

    generation: wire.Generation
    task_id: str
    status: wire.TaskStatus
    status_message: str | None
    created_at: datetime
    updated_at: datetime
    ttl_ms: int | None
    poll_interval_ms: int | None
    input_requests: dict[str, InputRequest] = field(default_factory=dict)
    new_input_keys: frozenset[str] = frozenset()
    result: CallToolResult | None = None
    error: wire.ErrorObject | None = None

    @property
    def terminal(self) -> bool:
        """True when the status can never change again."""
        return wire.is_terminal(self.status)

    def __repr__(self) -> str:
        return (
            f"TaskSnapshot(generation={self.generation!r}, task_id={self.task_id[:6]!r}..., "
            f"status={self.status!r}, inputs={sorted(self.input_requests)!r})"
        )


@dataclass(frozen=True)
class TaskOutcome:
    """The final payload of a terminal task.

    Exactly one of ``result`` / ``error`` is set for ``completed`` and ``failed`` tasks;
    a ``cancelled`` task may carry neither (or the server's error for "no result").
    A ``CallToolResult`` with ``isError`` is an unresolved outcome, not a success.
    """

    status: wire.TaskStatus
    result: CallToolResult | None = None
    error: wire.ErrorObject | None = None

    @property
    def is_error(self) -> bool:
        """True for a JSON-RPC error or a tool result flagged ``isError``."""
        return self.error is not None or bool(self.result is not None and self.result.is_error)


CancelKind = Literal["cancelled", "acknowledged", "already_terminal"]


@dataclass(frozen=True)
class CancelOutcome:
    """What a ``tasks/cancel`` achieved.

    * ``cancelled`` - 2025: the server returned the task in ``cancelled`` (``snapshot``).
    * ``acknowledged`` - 2026: an ack only; cancellation is cooperative and eventual, keep
      polling to observe the real terminal state (which may be ``completed``).
    * ``already_terminal`` - the task had already finished (``snapshot`` holds what a
      follow-up ``tasks/get`` saw, when the server still had it).
    """

    kind: CancelKind
    snapshot: TaskSnapshot | None = None


@dataclass(frozen=True)
class ToolInfo:
    """A tool with what the task protocol lets chit do with it.

    ``task_support`` is the 2025 ``execution.taskSupport`` (``forbidden`` when absent or
    when the server lacks the tasks capability); on 2026 it is ``optional`` when the
    server declares the extension (the server decides per call) and ``forbidden``
    otherwise.
    """

    name: str
    title: str | None
    description: str | None
    input_schema: dict[str, Any]
    task_support: wire.TaskSupport
    tool: Tool


@dataclass(frozen=True)
class ServerSummary:
    """What the "servers" screen shows about a connection."""

    name: str | None
    version: str | None
    protocol_version: str
    generation: wire.Generation | None
    tasks_supported: bool
    tasks_detail: str


__all__ = [
    "CancelKind",
    "CancelOutcome",
    "ServerSummary",
    "Started",
    "SyncReason",
    "SyncResult",
    "TaskHandle",
    "TaskOutcome",
    "TaskSnapshot",
    "ToolInfo",
]
