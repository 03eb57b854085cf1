"""The host-facing half of ``chit proxy``: what the host's MCP session sees.

:class:`ProxyHost` is the middleware of the proxy's MCP server (:mod:`chit.proxy.server`).
Everything that is not a task is forwarded to the server through the engine and its
answer handed back, shaped for the host's protocol version when it differs from the
server's: tools, resources, prompts, completions, logging, custom methods. The host
sees the server's own name, version, instructions and capabilities, plus task support
in the host's own generation whenever the server has tasks in either. ``tools/call``
is decided in :mod:`chit.proxy.calls`; ``tasks/*`` are served by chit's own task
runtime over the proxy's task store, each task mirroring a receipt
(:mod:`chit.proxy.mirror`).

It is also the engine's :class:`~chit.proxy.upstream.HostPeer`: the server's requests
and progress for a forwarded request come back here by the request's *route*.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import weakref
from typing import Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ToolsListChanged,
)
from mcp_types import INVALID_REQUEST, ServerCapabilities
from mcp_types import methods as mcp_methods
from pydantic import BaseModel

from chit.proxy import wire as pwire
from chit.proxy.backend import ProxyBackend
from chit.proxy.inputs import CAPABILITY
from chit.proxy.models import (
    ForwardParams,
    HostCapabilities,
    HostParams,
    NotifyParams,
    UpstreamInfo,
)
from chit.receipts import HostInfo, InputKind
from chit.tasks import wire
from chit.tasks.server import TaskRuntime

log = logging.getLogger("chit.proxy")
Ctx = ServerRequestContext[Any, Any]

TASKS_2025: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
_LOCAL = frozenset({"ping", "subscriptions/listen"})
_HOST_ONLY_NOTICES = frozenset(
    {"notifications/initialized", "notifications/cancelled", "notifications/progress"}
)
"""The host's notifications that concern its own session with the proxy, not the server."""
_LIST_CHANGED = {
    "notifications/tools/list_changed": ToolsListChanged,
    "notifications/prompts/list_changed": PromptsListChanged,
    "notifications/resources/list_changed": ResourcesListChanged,
}


class ProxyHost:
    """State and middleware of one proxy for one server (see the module docstring)."""

    def __init__(self, backend: ProxyBackend, info: UpstreamInfo, runtime: TaskRuntime) -> None:
        """Serve ``info.server`` through ``backend``; host tasks live in ``runtime``."""
        self.backend = backend
        self.info = info
        self.runtime = runtime
        self.support: dict[str, str] = dict(info.task_support)
        self.listed: set[str] = set()
        """Every tool name the server's ``tools/list`` gave (those not in ``support``
        cannot be tasks): a call of one needs no new listing."""
        self.support_stale = False
        self.routes: dict[str, Ctx] = {}
        self._route_ids = itertools.count(1)
        self.sessions: weakref.WeakSet[ServerSession] = weakref.WeakSet()
        self.sync_results: dict[str, dict[str, Any]] = {}
        self.bus: Any = None  # the MCP server's subscription bus (2026 listen streams)
        self.can_elicit = False
        self.can_sample = False
        self.can_list_roots = False
        self.session_version: str | None = None
        """The protocol version of the host's handshake (None for a 2026 host)."""
        self._introduced = False

    @property
    def server(self) -> str:
        """The proxied server's registry name."""
        return self.info.server

    @property
    def has_tasks(self) -> bool:
        """The server has tasks in some generation (so the host is offered them)."""
        return self.info.generation is not None

    def may_ask(self, kind: InputKind = InputKind.ELICITATION) -> bool:
        """The server's prompts may go to this host, and it declared the capability that
        answers a question of ``kind`` (elicitation, sampling, roots; a URL: never)."""
        if self.info.prompts == "chit":
            return False
        want = CAPABILITY.get(kind)
        return {
            "elicitation": self.can_elicit,
            "sampling": self.can_sample,
            "roots": self.can_list_roots,
        }.get(want or "", False)

    @property
    def introduced(self) -> bool:
        """The host has told who it is (its first request went the full path)."""
        return self._introduced

    def fast_route(self) -> str:
        """Name a request of the fast path (no request context: never asked anything)."""
        return f"r{next(self._route_ids)}"

    def new_route(self, ctx: Ctx) -> str:
        """Name one of the host's requests (the engine routes the server's replies by it)."""
        route = f"r{next(self._route_ids)}"
        self.routes[route] = ctx
        return route

    # --- the middleware --------------------------------------------------------------

    async def __call__(self, ctx: Ctx, call_next: CallNext) -> HandlerResult:
        """Route one inbound message (see the module docstring)."""
        if ctx.request_id is None:
            if ctx.method not in _HOST_ONLY_NOTICES:
                await self._notify_server(ctx)
            return await call_next(ctx)  # and the SDK's own bookkeeping
        self.sessions.add(ctx.session)
        caps = ctx.session.client_capabilities
        if caps is not None:
            self.can_elicit = caps.elicitation is not None
            self.can_sample = caps.sampling is not None
            self.can_list_roots = caps.roots is not None
        if not pwire.is_modern(ctx.protocol_version):
            self.session_version = ctx.protocol_version
        method = ctx.method
        if method == "initialize":
            result = await call_next(ctx)
            await self._introduce(ctx)
            return self._initialize_result(result)
        await self._introduce(ctx)
        if method == "server/discover":
            return self._discover_result(await call_next(ctx))
        if method in _LOCAL or method.startswith("tasks/"):
            return await call_next(ctx)
        if method == "tools/call":
            from chit.proxy.calls import call_tool

            return await call_tool(self, ctx)
        if method == "tools/list":
            return await self.list_tools(ctx)
        return await self.forward(ctx, method, dict(ctx.params or {}))

    async def forward(
        self, ctx: Ctx, method: str, params: dict[str, Any], *, declare: bool | None = None
    ) -> dict[str, Any]:
        """Send the host's request to the server; its answer shaped for the host."""
        meta = params.get("_meta")
        wants_progress = isinstance(meta, dict) and "progressToken" in meta
        if declare is None:
            declare = pwire.is_modern(ctx.protocol_version) and pwire.declared_extension(params)
        route = self.new_route(ctx)
        try:
            answer = await self.backend.request(
                ForwardParams(
                    server=self.server,
                    method=method,
                    params=params,
                    route=route,
                    progress=wants_progress,
                    declare_extension=declare,
                )
            )
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self.backend.cancel_route(route)
            raise
        finally:
            self.routes.pop(route, None)
        if answer.error is not None:
            raise MCPError(
                code=int(answer.error.get("code", -32603)),
                message=str(answer.error.get("message", "")),
                data=answer.error.get("data"),
            )
        return pwire.for_host(
            method, answer.result or {}, ctx.protocol_version, self.info.protocol_version
        )

    async def _notify_server(self, ctx: Ctx) -> None:
        """Pass a host's notification on (``roots/list_changed``, custom ones)."""
        params = NotifyParams(server=self.server, method=ctx.method, params=dict(ctx.params or {}))
        try:
            await self.backend.notify(params)
        except Exception as exc:  # a notification has nobody to report a failure to
            log.info("notification %s not passed on: %s", ctx.method, type(exc).__name__)

    async def list_tools(self, ctx: Ctx) -> dict[str, Any]:
        """``tools/list`` forwarded; learns task support; 2025 hosts see ``taskSupport``."""
        result = await self.forward(ctx, "tools/list", dict(ctx.params or {}))
        if not (ctx.params or {}).get("cursor"):
            self.support, self.listed = {}, set()
        self.support.update(pwire.task_support_of(result, self.info.generation))
        self.listed.update(pwire.tool_names(result))
        self.support_stale = False
        if ctx.protocol_version == wire.PROTOCOL_2025 and self.has_tasks:
            return pwire.annotate_tools(result, self.support)
        return result

    async def task_support(self, ctx: Ctx, tool: str) -> str:
        """``required``/``optional``/``forbidden`` for ``tool`` (listing once if unknown)."""
        known = tool in self.support or tool in self.listed
        if self.has_tasks and (self.support_stale or not known):
            with contextlib.suppress(MCPError):
                await self.list_tools(ctx)
        return self.support.get(tool, "forbidden")

    # --- who the host is ------------------------------------------------------------------

    async def _introduce(self, ctx: Ctx) -> None:
        """Tell the engine who the host is, once (for receipts and status screens)."""
        if self._introduced:
            return
        host = host_of(ctx)
        if host is None:
            return
        self._introduced = True
        caps = ctx.session.client_capabilities
        await self.backend.set_host(
            HostParams(
                host=host,
                capabilities=HostCapabilities(
                    elicitation=bool(caps and caps.elicitation),
                    sampling=bool(caps and caps.sampling),
                    roots=bool(caps and caps.roots),
                ),
            )
        )

    def _capabilities(self, modern: bool) -> dict[str, Any]:
        caps = dict(self.info.capabilities)
        caps.pop("tasks", None)
        extensions = dict(caps.pop("extensions", None) or {})
        extensions.pop(wire.EXTENSION_ID, None)
        if modern:
            if self.has_tasks:
                extensions[wire.EXTENSION_ID] = {}
            if extensions:
                caps["extensions"] = extensions
        elif self.has_tasks:
            caps["tasks"] = TASKS_2025
        try:  # the host's version may lack some of the server's capability fields
            return ServerCapabilities.model_validate(caps).model_dump(
                by_alias=True, mode="json", exclude_none=True
            )
        except ValueError:
            return caps

    def _initialize_result(self, result: HandlerResult) -> dict[str, Any]:
        data = _as_dict(result)
        data["capabilities"] = self._capabilities(False)
        if self.info.server_info:
            data["serverInfo"] = dict(self.info.server_info)
        if self.info.instructions is not None:
            data["instructions"] = self.info.instructions
        return data

    def _discover_result(self, result: HandlerResult) -> dict[str, Any]:
        data = _as_dict(result)
        data["capabilities"] = self._capabilities(True)
        if self.info.instructions is not None:
            data["instructions"] = self.info.instructions
        return data

    # --- the engine's HostPeer -----------------------------------------------------------

    async def input(self, route: str, method: str, params: dict[str, Any] | None) -> Any:
        """The server asks the host, for the request ``route`` (elicitation, sampling)."""
        ctx = self.routes.get(route)
        if ctx is None or pwire.is_modern(ctx.protocol_version):
            # No request to ride on, or a 2026 host (no server→client requests there).
            raise MCPError(code=INVALID_REQUEST, message="the host cannot be asked now")
        request = mcp_methods.parse_server_request(method, ctx.protocol_version, params)
        reply = await ctx.session.send_request(
            request,  # type: ignore[arg-type]
            _AnyResult,
            metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
        )
        return reply.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def progress(
        self, route: str, progress: float, total: float | None, message: str | None
    ) -> None:
        """Relay progress of a forwarded request to its host."""
        ctx = self.routes.get(route)
        if ctx is not None:
            await ctx.session.report_progress(progress, total, message)

    async def notice(self, method: str, params: dict[str, Any] | None) -> None:
        """A notification of the server: to every host session, and to 2026 listeners."""
        if method in _LIST_CHANGED:
            self.support_stale = self.support_stale or method.startswith("notifications/tools")
            if self.bus is not None:
                await self.bus.publish(_LIST_CHANGED[method]())
        elif method == "notifications/resources/updated" and self.bus is not None:
            uri = (params or {}).get("uri")
            if isinstance(uri, str):
                await self.bus.publish(ResourceUpdated(uri=uri))
        for session in list(self.sessions):
            if pwire.is_modern(session.protocol_version):
                continue
            try:
                note = mcp_methods.parse_server_notification(
                    method, session.protocol_version, params
                )
                await session.send_notification(note)  # type: ignore[arg-type]
            except Exception as exc:
                log.debug("notice %s not relayed: %s", method, type(exc).__name__)


class _AnyResult(BaseModel):
    """Any result object (validated by the SDK for the method already)."""

    model_config = {"extra": "allow"}


def host_of(ctx: Ctx) -> HostInfo | None:
    """The host's ``clientInfo`` (from ``initialize``, or a 2026 request's envelope)."""
    params = ctx.session.client_params
    info: Any = params.client_info if params is not None else None
    if info is None:
        meta = (ctx.params or {}).get("_meta")
        raw = meta.get(pwire.CLIENT_INFO_META_KEY) if isinstance(meta, dict) else None
        if isinstance(raw, dict):
            return HostInfo(
                name=str(raw.get("name") or "") or None,
                version=str(raw.get("version") or "") or None,
                protocol=ctx.protocol_version,
            )
        return None
    return HostInfo(name=info.name, version=info.version, protocol=ctx.protocol_version)


def _as_dict(result: HandlerResult) -> dict[str, Any]:
    if isinstance(result, BaseModel):
        data: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return data
    return dict(result or {})
