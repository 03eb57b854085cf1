"""chit's MCP task client: one interface over 2025-11-25 core tasks and the 2026 extension.

Depends only on ``mcp``, ``mcp_types``, pydantic and the standard library (plus
:mod:`chit.tasks.wire`), so it could ship on its own. Start at :class:`TaskClient`.
"""

from chit.tasks.client.client import Mode, TaskClient
from chit.tasks.client.errors import (
    FailureClass,
    IncompatibleError,
    LostError,
    PermanentError,
    ProtocolViolation,
    TaskError,
    TransientError,
    classify,
)
from chit.tasks.client.inputs import HintCallback, InputHandler, related_task_id
from chit.tasks.client.models import (
    CancelKind,
    CancelOutcome,
    ServerSummary,
    Started,
    SyncReason,
    SyncResult,
    TaskHandle,
    TaskOutcome,
    TaskSnapshot,
    ToolInfo,
)
from chit.tasks.client.spec import (
    HttpServer,
    InProcessServer,
    ServerSpec,
    StdioServer,
    TransportServer,
)

__all__ = [
    "CancelKind",
    "CancelOutcome",
    "FailureClass",
    "HintCallback",
    "HttpServer",
    "InProcessServer",
    "IncompatibleError",
    "InputHandler",
    "LostError",
    "Mode",
    "PermanentError",
    "ProtocolViolation",
    "ServerSpec",
    "ServerSummary",
    "Started",
    "StdioServer",
    "SyncReason",
    "SyncResult",
    "TaskClient",
    "TaskError",
    "TaskHandle",
    "TaskOutcome",
    "TaskSnapshot",
    "ToolInfo",
    "TransientError",
    "TransportServer",
    "classify",
    "related_task_id",
]
