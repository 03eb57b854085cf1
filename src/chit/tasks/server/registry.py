"""Registering task tools: the ``task_tool`` decorator of :class:`TaskRuntime`."""

from __future__ import annotations

from collections.abc import Callable

from chit.tasks.server.tools import ClientAsk, PreInput, TaskTool, ToolFn, build_task_tool
from chit.tasks.wire import TaskSupport


class ToolRegistry:
    """The task tools of one server process, by name (a base of ``TaskRuntime``)."""

    tools: dict[str, TaskTool]

    def task_tool(
        self,
        name: str | None = None,
        *,
        task_support: TaskSupport = "optional",
        resumable: bool = False,
        description: str | None = None,
        pre_inputs: tuple[PreInput, ...] = (),
        asks: tuple[ClientAsk, ...] = (),
    ) -> Callable[[ToolFn], ToolFn]:
        """Decorator registering an ``async def`` as a task tool.

        Args:
            name: Tool name (default: the function name).
            task_support: ``"optional"`` (runs synchronously for clients without task
                support) or ``"required"`` (such clients get an error).
            resumable: Re-run the tool after a crash instead of failing the task.
            description: Tool description (default: the docstring).
            pre_inputs: Inputs gathered before the task is created (see ``PreInput``).
            asks: Client capabilities the tool's task asks with (``"sampling"``,
                ``"roots"``: ``TaskContext.request_sampling`` / ``request_roots``). A
                call from a client that did not declare them is refused (-32602)
                before any task exists: the question could never be asked.
        """

        def register(fn: ToolFn) -> ToolFn:
            tool = build_task_tool(
                fn,
                name=name,
                description=description,
                task_support=task_support,
                resumable=resumable,
                pre_inputs=pre_inputs,
                asks=asks,
            )
            self.tools[tool.name] = tool
            return fn

        return register
