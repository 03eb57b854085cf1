"""The connection under :class:`~chit.tasks.client.TaskClient`: lifecycle, discovery, push.

Connecting and negotiating, what was negotiated (the task generation), the server's
tools and their task support, and the task status notifications the server pushes
(turned into hints). What is done with a task - starting, observing, answering,
cancelling - is :mod:`chit.tasks.client.client`'s.
"""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, Self

import anyio
from anyio.abc import TaskGroup
from mcp import Client
from mcp.client.session import ClientSession

from chit.tasks import wire
from chit.tasks.client.connect import MessageHandler, Mode, connect, negotiated_generation
from chit.tasks.client.discovery import list_tool_infos, summarize
from chit.tasks.client.errors import IncompatibleError, classify
from chit.tasks.client.hint_queue import HintQueue
from chit.tasks.client.inputs import Hint, HintCallback, InputHandler, InputRouter
from chit.tasks.client.models import ServerSummary, ToolInfo
from chit.tasks.client.pipes import ServerPipes
from chit.tasks.client.spec import ServerSpec
from chit.tasks.client.tap import Tap

logger = logging.getLogger("chit.tasks.client.client")


async def enter_task_group(stack: AsyncExitStack) -> TaskGroup:
    """Enter a new task group on ``stack``, its exit made safe for an exit stack.

    anyio's ``TaskGroup.__aexit__`` (4.16) re-raises the exception it is handed
    (``raise exc_val``) where a ``with`` statement's exit returns False. On an exit
    stack that exception can be a later-entered exit's: the SDK's session close
    cancelled anew (HTTP: its DELETE; legacy in-process: its stream close) when the
    owner task was cancelled while connected. The re-raise sets its ``__context__``
    to the exception the stack's caller is handling; ``contextlib``'s
    ``_fix_exception_context(new, old)`` then walks ``new``'s chain to that
    exception and re-points the link to ``old`` - the same object: ``exc.__context__
    is exc`` (CPython 3.10 to 3.13.0 alike). anyio's ``task_done`` walks that chain
    without end: the legacy ``chit follow`` spin at shutdown (docs/reliability.md,
    "Hangs say where"). Returning False for the exception handed in keeps it
    propagating unchanged, as the stack does for any exit that does not suppress.
    """
    tg = anyio.create_task_group()
    await tg.__aenter__()

    async def exit_group(
        exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        try:
            return await tg.__aexit__(exc_type, exc, tb)
        except BaseException as raised:
            if exc is None or raised is not exc:
                raise
            return False

    stack.push_async_exit(exit_group)
    return tg


class ClientBase:
    """One connection to one server (see :class:`~chit.tasks.client.TaskClient`)."""

    def __init__(
        self,
        spec: ServerSpec,
        *,
        mode: Mode = "auto",
        read_timeout: float = 30.0,
        result_timeout: float = 3600.0,
        input_handler: InputHandler | None = None,
        on_hint: HintCallback | None = None,
        declare_sampling: bool = False,
        declare_roots: bool = False,
        tap: Tap | None = None,
        on_message: MessageHandler | None = None,
    ) -> None:
        """Configure the connection (the arguments are :class:`TaskClient`'s)."""
        if read_timeout <= 0 or result_timeout <= 0:
            raise ValueError("timeouts must be positive")
        self.spec = spec
        self.mode: Mode = mode
        self.read_timeout = read_timeout
        self.result_timeout = result_timeout
        self._input_handler = input_handler
        self._on_hint = on_hint
        self._declare_sampling = declare_sampling
        self._declare_roots = declare_roots
        self._tap = tap
        self._on_message = on_message
        self._client: Client | None = None
        self._stack: AsyncExitStack | None = None
        self._router = InputRouter(input_handler)
        # Per task: the input keys seen in a snapshot, and those answered (TaskClient's).
        self._seen_inputs: dict[str, set[str]] = {}
        self._handled_inputs: dict[str, set[str]] = {}
        self._wakeups: dict[str, anyio.Event] = {}
        self._support: dict[str, wire.TaskSupport] = {}
        self._tools: dict[str, ToolInfo] = {}
        # A stdio server's task notifications, read off its pipes (``hint_queue``).
        self.hints = HintQueue(self._deliver_note)
        self.pipes: ServerPipes | None = None
        """A stdio server's pipes when served on the event loop (``chit.tasks.client.pipes``):
        :meth:`ServerPipes.request` sends a request whose answer is wanted as JSON."""

    # --- lifecycle ------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        """Connect and negotiate; connection failures raise :class:`TransientError`."""
        stack = AsyncExitStack()
        await stack.__aenter__()
        try:
            # The hint queue's task: stopped (after the session closed) on exit.
            tg = await enter_task_group(stack)
            stack.callback(tg.cancel_scope.cancel)
            tg.start_soon(self.hints.run)
            self._client = await connect(
                self.spec,
                stack,
                mode=self.mode,
                read_timeout=self.read_timeout,
                router=self._router,
                declare_sampling=self._declare_sampling,
                declare_roots=self._declare_roots,
                on_notification=self._on_notification,
                tap=self._tap,
                on_message=self._on_message,
                on_pipes=self._set_pipes,
            )
        except BaseException as exc:
            # Close without re-raising through the stack: the SDK's task groups would wrap
            # ``exc`` in an ExceptionGroup and hide the typed error from callers.
            await stack.aclose()
            if isinstance(exc, Exception):
                raise classify(exc, "initialize") from exc
            raise
        self._stack = stack
        return self

    def _set_pipes(self, pipes: ServerPipes | None) -> None:
        self.pipes = pipes
        if pipes is not None:
            pipes.on_note = self.hints.offer

    async def __aexit__(self, *exc_info: Any) -> None:
        """Disconnect (kills a stdio child, closes HTTP sessions)."""
        stack, self._stack, self._client = self._stack, None, None
        if stack is not None:
            await stack.__aexit__(*exc_info)

    @property
    def client(self) -> Client:
        """The underlying ``mcp.Client`` (connected)."""
        if self._client is None:
            raise RuntimeError("TaskClient is not connected; use 'async with'")
        return self._client

    @property
    def session(self) -> ClientSession:
        """The underlying ``ClientSession``."""
        return self.client.session

    @property
    def protocol_version(self) -> str:
        """The negotiated protocol version."""
        return self.client.protocol_version

    @property
    def generation(self) -> wire.Generation | None:
        """The task generation this connection uses, or ``None`` when it has none."""
        return negotiated_generation(self.client)

    def _require(self, method: str) -> wire.Generation:
        gen = self.generation
        if gen is None:
            raise IncompatibleError("server does not support tasks", method=method)
        return gen

    # --- discovery ------------------------------------------------------------------

    async def list_tools(self) -> list[ToolInfo]:
        """All tools with their effective task support (refreshes the support cache)."""
        tools = await list_tool_infos(self.session, self.generation)
        self._support.update({t.name: t.task_support for t in tools})
        self._tools = {t.name: t for t in tools}
        return tools

    async def tool(self, name: str) -> ToolInfo | None:
        """The tool called ``name`` (None when the server has none by that name).

        Listed lazily, once per name not seen yet: servers may register tools after
        ``initialize`` (server-everything does).
        """
        if name not in self._tools:
            await self.list_tools()
        return self._tools.get(name)

    def tool_names(self) -> list[str]:
        """The names of the tools the server listed last, in its order."""
        return list(self._tools)

    def server_summary(self) -> ServerSummary:
        """Server identity and task support for a "servers" screen."""
        return summarize(self.client.server_info, self.protocol_version, self.generation)

    async def task_support(self, tool: str) -> wire.TaskSupport:
        """The tool's effective task support (listed lazily; unknown tools: forbidden)."""
        return await self._task_support(tool)

    async def _task_support(self, tool: str) -> wire.TaskSupport:
        if tool not in self._support:
            # Servers may register tools after initialize (server-everything does): list
            # lazily, once per unknown name.
            await self.list_tools()
        return self._support.get(tool, "forbidden")

    # --- server → client ----------------------------------------------------------------

    async def _deliver_note(self, task_id: str, params: dict[str, Any]) -> None:
        # Looked up at delivery: a wrapper installed on the class (benchmarks) sees it.
        await self._on_notification(task_id, params)

    async def _on_notification(self, task_id: str, params: dict[str, Any]) -> None:
        event = self._wakeups.get(task_id)
        if event is not None:
            event.set()
        if self._on_hint is not None:
            try:
                # The Hint is the task id (a str) plus the notified status, so a receiver
                # can tell a transition from a message-only change without a tasks/get.
                await self._on_hint(Hint.from_params(task_id, params))
            except Exception:
                logger.exception("on_hint callback raised")


__all__ = ["ClientBase", "enter_task_group"]
