"""Connecting a :class:`~chit.tasks.client.TaskClient` and reading what was negotiated."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from importlib import metadata
from typing import Any, Literal, cast

from mcp import Client
from mcp.client.session import MessageHandlerFnT
from mcp_types import Implementation
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from chit.tasks import wire
from chit.tasks.client.errors import IncompatibleError
from chit.tasks.client.extension import HintHandler, TasksClientExtension
from chit.tasks.client.inputs import InputRouter
from chit.tasks.client.pipes import ServerPipes
from chit.tasks.client.spec import ServerSpec, open_target
from chit.tasks.client.tap import Tap

Mode = Literal["auto", "legacy", "2026"]

MessageHandler = Callable[[Any], Awaitable[None]]
"""Receives every core server notification (``mcp_types`` models: progress without a
waiting request, logging messages, list changes, resource updates) as the SDK's
``message_handler`` does; task status notifications go to the hint path instead."""


def _version() -> str:
    try:
        return metadata.version("chit")
    except metadata.PackageNotFoundError:  # running from a source tree without metadata
        return "0"


async def connect(
    spec: ServerSpec,
    stack: AsyncExitStack,
    *,
    mode: Mode,
    read_timeout: float,
    router: InputRouter,
    declare_sampling: bool,
    on_notification: HintHandler,
    declare_roots: bool = False,
    tap: Tap | None = None,
    on_message: MessageHandler | None = None,
    on_pipes: Callable[[ServerPipes | None], None] | None = None,
) -> Client:
    """Open ``spec`` on ``stack`` and negotiate; the caller classifies and cleans up errors.

    Raises:
        IncompatibleError: ``mode`` is ``2026`` and the server negotiated an older version.
    """
    target = await open_target(spec, stack, tap, on_pipes)
    client = Client(
        target,
        # "2026" negotiates like "auto" and is checked below: pinning the SDK to
        # the version would skip server/discover and lose the capabilities.
        mode="auto" if mode == "2026" else mode,
        read_timeout_seconds=read_timeout,
        elicitation_callback=router.on_elicit,
        sampling_callback=router.on_sample if declare_sampling else None,
        list_roots_callback=router.on_roots if declare_roots else None,
        extensions=[TasksClientExtension(on_notification)],
        client_info=Implementation(name="chit", version=_version()),
        cache=None,
        message_handler=cast("MessageHandlerFnT | None", on_message),
    )
    connected = await stack.enter_async_context(client)
    if mode == "2026" and client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        raise IncompatibleError(
            f"server negotiated {client.protocol_version}, not 2026-07-28",
            method="server/discover",
        )
    return connected


def negotiated_generation(client: Client) -> wire.Generation | None:
    """The task generation a connected ``client`` uses, or ``None`` when it has none."""
    caps = client.server_capabilities
    if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return wire.PROTOCOL_2026 if wire.EXTENSION_ID in (caps.extensions or {}) else None
    tasks = caps.tasks
    if tasks and tasks.requests and tasks.requests.tools and tasks.requests.tools.call:
        return wire.PROTOCOL_2025
    return None
