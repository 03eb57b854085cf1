"""Wire vocabulary of MCP tasks, both generations, shared by chit's client and server.

Two task protocols exist and do not interoperate:

* **2025-11-25** core tasks: ``params.task`` on ``tools/call``, a *nested*
  ``CreateTaskResult`` (``{"task": {...}}``), ``ttl``/``pollInterval``, a blocking
  ``tasks/result``, ``tasks/list`` and ``notifications/tasks/status``.
* **2026-07-28** with the ``io.modelcontextprotocol/tasks`` extension (SEP-2663): a
  *flat* ``CreateTaskResult`` with ``resultType: "task"``, ``ttlMs``/``pollIntervalMs``,
  ``tasks/get`` carrying the result, error or ``inputRequests`` inline, ``tasks/update``,
  an ack-only ``tasks/cancel`` and ``notifications/tasks`` via ``subscriptions/listen``.

This module holds only constants and pydantic models (no behaviour), so it is safe for
the client adapter and the server runtime to depend on it. Field names are snake_case
in Python with camelCase wire aliases; dump with ``by_alias=True, exclude_none=True``.
Models allow extra keys where the specs leave objects open (results, ``_meta``).
"""

from __future__ import annotations

from typing import Any, Final, Literal

from mcp_types import RequestParams
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

# --- protocol versions and extension id ---------------------------------------------

PROTOCOL_2025: Final = "2025-11-25"
"""The protocol version with core (legacy) tasks."""
PROTOCOL_2026: Final = "2026-07-28"
"""The protocol version with the tasks extension."""
Generation = Literal["2025-11-25", "2026-07-28"]
"""Which task protocol a task was created through (stored with each task)."""

EXTENSION_ID: Final = "io.modelcontextprotocol/tasks"
"""The tasks extension identifier (``capabilities.extensions`` key)."""

# --- method names -------------------------------------------------------------------

TASKS_GET: Final = "tasks/get"
TASKS_RESULT: Final = "tasks/result"  # 2025 only (2026: -32601)
TASKS_LIST: Final = "tasks/list"  # 2025 only (2026: -32601)
TASKS_CANCEL: Final = "tasks/cancel"
TASKS_UPDATE: Final = "tasks/update"  # 2026 only
NOTIFICATION_TASK_STATUS: Final = "notifications/tasks/status"  # 2025
NOTIFICATION_TASKS: Final = "notifications/tasks"  # 2026, via subscriptions/listen
SUBSCRIPTIONS_LISTEN: Final = "subscriptions/listen"

# --- _meta keys ---------------------------------------------------------------------

META_RELATED_TASK: Final = "io.modelcontextprotocol/related-task"
"""``{"taskId": ...}`` on messages related to a 2025 task (MUST on ``tasks/result``)."""
META_MODEL_IMMEDIATE_RESPONSE: Final = "io.modelcontextprotocol/model-immediate-response"
"""Optional text on a create result the host may hand to the model right away."""
META_REQUEST_KEY: Final = "io.github.chit/request-key"
"""chit's idempotency key on task-creating ``tools/call`` (see ``docs/tasks-server.md``)."""
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
"""Per-request client capabilities on 2026 (where the extension is declared)."""

# --- error codes --------------------------------------------------------------------

INVALID_PARAMS: Final = -32602
"""Unknown, expired or foreign task id; cancelling a terminal 2025 task; bad inputs."""
METHOD_NOT_FOUND: Final = -32601
"""Method absent for the negotiated generation; 2025 ``taskSupport`` violations."""
INTERNAL_ERROR: Final = -32603
MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021
"""2026: the request did not declare the tasks extension but needs it."""
HEADER_MISMATCH: Final = -32020
"""2026 HTTP: ``Mcp-Name``/``Mcp-Method`` do not match the body."""

# --- statuses -----------------------------------------------------------------------

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL_STATUSES: Final[frozenset[str]] = frozenset({"completed", "failed", "cancelled"})
TaskSupport = Literal["forbidden", "optional", "required"]
"""2025 per-tool ``execution.taskSupport`` (absent means forbidden)."""


def is_terminal(status: str) -> bool:
    """Return True when ``status`` can never change again."""
    return status in TERMINAL_STATUSES


class WireModel(BaseModel):
    """Base: camelCase aliases, populate by either name, unknown keys kept."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    def wire(self) -> dict[str, Any]:
        """Dump as a JSON-ready dict with wire names and no ``None`` members."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class ErrorObject(WireModel):
    """A JSON-RPC error object (``FailedTask.error``; stored for failed tasks)."""

    code: int
    message: str
    data: Any = None


# --- 2025-11-25 ---------------------------------------------------------------------


class TaskMetadata2025(WireModel):
    """``params.task`` on a task-augmented 2025 ``tools/call``."""

    ttl: int | None = None


class Task2025(WireModel):
    """A 2025-11-25 Task (``tasks/get`` and ``tasks/cancel`` results, notifications)."""

    task_id: str
    status: TaskStatus
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl: int | None
    poll_interval: int | None = None

    def wire(self) -> dict[str, Any]:
        """Dump for the wire; ``ttl`` is kept even when null (null means unlimited)."""
        data = super().wire()
        data.setdefault("ttl", None)
        return data


class CreateTaskResult2025(WireModel):
    """The nested 2025 create reply: ``{"task": Task, "_meta"?: ...}``."""

    task: Task2025
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class ListTasksResult2025(WireModel):
    """``tasks/list`` reply (2025)."""

    tasks: list[Task2025]
    next_cursor: str | None = None


# --- 2026-07-28 extension -----------------------------------------------------------


class Task2026(WireModel):
    """A 2026 extension Task (flat; ``ttlMs``/``pollIntervalMs``)."""

    task_id: str
    status: TaskStatus
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None

    def wire(self) -> dict[str, Any]:
        """Dump for the wire; ``ttlMs`` is kept even when null (null means unlimited)."""
        data = super().wire()
        data.setdefault("ttlMs", None)
        return data


class DetailedTask2026(Task2026):
    """``tasks/get`` result / ``notifications/tasks`` params: Task plus status-specific data.

    ``input_requests`` is set for ``input_required`` (key → ``elicitation/create`` |
    ``sampling/createMessage`` | ``roots/list`` request object ``{"method", "params"}``);
    ``result`` for ``completed`` (the original ``CallToolResult``); ``error`` for
    ``failed`` (a JSON-RPC error object).
    """

    input_requests: dict[str, dict[str, Any]] | None = None
    result: dict[str, Any] | None = None
    error: ErrorObject | None = None


class CreateTaskResult2026(Task2026):
    """The flat 2026 create reply: ``Result & Task`` with ``resultType: "task"``."""

    result_type: Literal["task"] = "task"
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class GetTaskResult2026(DetailedTask2026):
    """``tasks/get`` reply (2026): ``resultType`` is ``"complete"`` per the normative text.

    Clients should not key on it (the spec's own examples show ``"task"``).
    """

    result_type: str | None = "complete"
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class AckResult2026(WireModel):
    """Empty acknowledgement of ``tasks/update`` and ``tasks/cancel`` (2026)."""

    result_type: str | None = "complete"
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


# --- request params (both generations) ------------------------------------------------


class TaskIdParams(RequestParams):
    """``{taskId}``: params of ``tasks/get``, ``tasks/result``, ``tasks/cancel``."""

    model_config = ConfigDict(extra="allow")

    task_id: str


class UpdateTaskParams(TaskIdParams):
    """``tasks/update`` params (2026): answers keyed like the task's ``inputRequests``.

    Values are ``ElicitResult`` / ``CreateMessageResult`` / ``ListRootsResult`` objects;
    they are kept as raw dicts here and interpreted by the server per key.
    """

    input_responses: dict[str, dict[str, Any]] = Field(default_factory=dict)


class ListTasksParams(RequestParams):
    """``tasks/list`` params (2025)."""

    model_config = ConfigDict(extra="allow")

    cursor: str | None = None


class TaskSubscriptionNotifications(WireModel):
    """Task part of ``subscriptions/listen`` ``params.notifications`` (2026)."""

    task_ids: list[str] | None = None


def related_task_meta(task_id: str) -> dict[str, Any]:
    """Return the ``_meta`` fragment tying a 2025 message to ``task_id``."""
    return {META_RELATED_TASK: {"taskId": task_id}}


def extension_declared(client_capabilities: Any) -> bool:
    """Return True when ``client_capabilities`` (model or dict) declare the tasks extension."""
    if client_capabilities is None:
        return False
    if isinstance(client_capabilities, BaseModel):
        client_capabilities = client_capabilities.model_dump(by_alias=True, exclude_none=True)
    if not isinstance(client_capabilities, dict):
        return False
    extensions = client_capabilities.get("extensions") or {}
    return isinstance(extensions, dict) and EXTENSION_ID in extensions


__all__ = [
    "EXTENSION_ID",
    "HEADER_MISMATCH",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "META_CLIENT_CAPABILITIES",
    "META_MODEL_IMMEDIATE_RESPONSE",
    "META_RELATED_TASK",
    "META_REQUEST_KEY",
    "METHOD_NOT_FOUND",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "NOTIFICATION_TASKS",
    "NOTIFICATION_TASK_STATUS",
    "PROTOCOL_2025",
    "PROTOCOL_2026",
    "SUBSCRIPTIONS_LISTEN",
    "TASKS_CANCEL",
    "TASKS_GET",
    "TASKS_LIST",
    "TASKS_RESULT",
    "TASKS_UPDATE",
    "TERMINAL_STATUSES",
    "AckResult2026",
    "CreateTaskResult2025",
    "CreateTaskResult2026",
    "DetailedTask2026",
    "ErrorObject",
    "Generation",
    "GetTaskResult2026",
    "ListTasksParams",
    "ListTasksResult2025",
    "Task2025",
    "Task2026",
    "TaskIdParams",
    "TaskMetadata2025",
    "TaskStatus",
    "TaskSubscriptionNotifications",
    "TaskSupport",
    "UpdateTaskParams",
    "extension_declared",
    "is_terminal",
    "related_task_meta",
]
