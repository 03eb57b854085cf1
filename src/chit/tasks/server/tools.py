"""Task tool definitions: registration data, argument validation, result shaping.

A task tool is an ``async def`` whose parameters are the tool's arguments plus one
parameter annotated :class:`~chit.tasks.server.context.TaskContext` (any name). The
argument schema is derived from the other parameters with pydantic, exactly as MCP
servers usually do; the ``TaskContext`` parameter is injected by the runtime.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_type_hints

from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult
from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from chit.tasks.wire import INVALID_PARAMS, TaskSupport

ToolFn = Callable[..., Awaitable[Any]]
ClientAsk = Literal["sampling", "roots"]
"""A client capability a task tool may ask with, inside its task."""


class TaskToolError(Exception):
    """Raise from a task tool to report a *tool* error (``isError: true`` result).

    2026: the task becomes ``completed`` with ``result.isError``; 2025: ``failed``.
    Any other ordinary exception is treated the same way, with its message.
    """


class TaskProtocolError(Exception):
    """Raise from a task tool to fail the task with a JSON-RPC error object.

    Both generations report the task ``failed``; 2026 inlines ``error``, 2025 answers
    ``tasks/result`` with this error.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        """Build the error (``code`` is a JSON-RPC error code such as -32603)."""
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_error(self) -> dict[str, Any]:
        """Return the JSON-RPC error object."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class TaskGone(Exception):
    """The task became terminal (cancelled) or vanished while its worker waited."""


def refuse_undeclared(tool: TaskTool, capabilities: Any) -> None:
    """Refuse a task of ``tool`` when the client lacks a capability the task asks with.

    Raises:
        MCPError: -32602, naming the capabilities to declare (no task is created).
    """
    missing = tool.undeclared(capabilities)
    if missing:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"Tool {tool.name!r} asks the client for {' and '.join(missing)} inside"
            f" its task; declare the {' and '.join(missing)} capability to call it",
        )


class InvalidArguments(Exception):
    """The call's arguments do not match the tool's schema (-32602, nothing stored)."""

    code = INVALID_PARAMS


@dataclass(frozen=True)
class PreInput:
    """Input gathered *before* the task exists (2026 multi-round-trip, SEP-2322).

    At 2026 the server answers the ``tools/call`` with an ``InputRequiredResult`` until
    the client supplies every pre-input; the task is then created with the answers. At
    2025 (no MRTR) the task asks for the same inputs itself, as ordinary input requests.
    """

    key: str
    message: str
    schema: dict[str, Any]


@dataclass
class TaskTool:
    """One registered task tool."""

    name: str
    fn: ToolFn
    description: str | None
    task_support: TaskSupport
    resumable: bool
    args_model: type[BaseModel]
    context_param: str | None
    pre_inputs: tuple[PreInput, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)
    asks: tuple[ClientAsk, ...] = ()
    """Client capabilities its task asks with (``sampling``, ``roots``)."""

    def undeclared(self, capabilities: Any) -> list[str]:
        """Which of :attr:`asks` the client's ``ClientCapabilities`` lack."""
        return [ask for ask in self.asks if getattr(capabilities, ask, None) is None]

    def validate(self, arguments: dict[str, Any] | None) -> dict[str, Any]:
        """Validate ``arguments``; return the JSON-ready arguments to store.

        Raises:
            InvalidArguments: When validation fails.
        """
        try:
            model = self.args_model.model_validate(arguments or {})
        except ValidationError as exc:
            raise InvalidArguments(f"Invalid arguments for tool {self.name!r}: {exc}") from exc
        return model.model_dump(mode="json")

    def input_schema(self) -> dict[str, Any]:
        """Return the JSON schema of the arguments (``tools/list`` ``inputSchema``)."""
        return self.args_model.model_json_schema()

    def to_result(self, value: Any) -> dict[str, Any]:
        """Shape the tool's return value as its plain (non-task) call would have.

        ``MCPServer`` lists the tool with an ``outputSchema`` derived from its return
        annotation and answers a plain call with matching ``structuredContent``; a task's
        result gets the same shape, so a client validating the schema accepts both.
        """
        if isinstance(value, CallToolResult) or (isinstance(value, dict) and "content" in value):
            return to_call_tool_result(value)
        try:
            shaped = _result_metadata(self.fn).convert_result(value)
        except Exception:  # no schema can be derived, or the value does not fit it
            return to_call_tool_result(value)
        if not isinstance(shaped, CallToolResult):
            return to_call_tool_result(value)
        return to_call_tool_result(shaped)


def build_task_tool(
    fn: ToolFn,
    *,
    name: str | None,
    description: str | None,
    task_support: TaskSupport,
    resumable: bool,
    pre_inputs: tuple[PreInput, ...],
    asks: tuple[ClientAsk, ...] = (),
) -> TaskTool:
    """Inspect ``fn`` and return its :class:`TaskTool`."""
    from chit.tasks.server.context import TaskContext

    if task_support == "forbidden":
        raise ValueError("a task tool must have task_support 'optional' or 'required'")
    hints = get_type_hints(fn)
    context_param: str | None = None
    fields_: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        annotation = hints.get(param.name, Any)
        if annotation is TaskContext:
            context_param = param.name
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields_[param.name] = (annotation, default)
    tool_name = name or fn.__name__
    args_model = create_model(
        f"{tool_name}Arguments", __config__=ConfigDict(extra="forbid"), **fields_
    )
    return TaskTool(
        name=tool_name,
        fn=fn,
        description=description or inspect.getdoc(fn),
        task_support=task_support,
        resumable=resumable,
        args_model=args_model,
        context_param=context_param,
        pre_inputs=pre_inputs,
        asks=asks,
    )


_METADATA: dict[Any, Any] = {}


def _result_metadata(fn: ToolFn) -> Any:
    """``MCPServer``'s result conversion for a function returning what ``fn`` returns."""
    known = _METADATA.get(fn)
    if known is not None:
        return known
    from mcp.server.mcpserver.utilities.func_metadata import func_metadata

    returns = get_type_hints(fn).get("return", inspect.Parameter.empty)

    async def stand_in() -> None:
        """Takes nothing; returns what the task tool returns."""

    stand_in.__annotations__ = {} if returns is inspect.Parameter.empty else {"return": returns}
    meta = func_metadata(stand_in)
    _METADATA[fn] = meta
    return meta


def to_call_tool_result(value: Any) -> dict[str, Any]:
    """Shape a tool's return value as a ``CallToolResult`` dict (wire names)."""
    if isinstance(value, CallToolResult):
        data = value.model_dump(by_alias=True, exclude_none=True, mode="json")
        data.pop("resultType", None)
        return data
    if isinstance(value, dict) and "content" in value:
        return dict(value)
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}], "isError": False}
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    text = json.dumps(value, default=str)
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
    if isinstance(value, dict):
        result["structuredContent"] = value
    return result


def tool_error_result(message: str) -> dict[str, Any]:
    """Return a ``CallToolResult`` dict reporting a tool error."""
    return {"content": [{"type": "text", "text": message}], "isError": True}
