"""The engine's side of ``chit proxy``: hosts attached to the shared server sessions.

Runs where the sessions live (the daemon, or the proxy process itself with
``--no-daemon``). A proxy *attaches* for one host and one server; its requests are sent
on the engine's one session of that server (:meth:`Upstreams.forward`), and what the
server sends back that belongs to no receipt is routed to the host it concerns:

* an elicitation, sampling or roots request goes to the host of the newest request in
  flight on that server whose host declared the capability (the wire does not say
  which request it belongs to; over stdio, nothing does) — else (and per the server's
  ``prompts``) it waits in chit's inbox (:mod:`chit.proxy.asks`);
* progress of a forwarded request goes to its host (the proxy asked for it);
* other notifications (logging, list changes, resource updates) go to every host
  attached to that server.

Tool calls that may become tasks go through :mod:`chit.proxy.starts` (intent first).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import anyio
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    ErrorData,
    InputRequest,
    ProgressNotification,
)
from pydantic import BaseModel, ValidationError

from chit import clock
from chit.proxy import wire as pwire
from chit.proxy.asks import CallPrompts
from chit.proxy.models import (
    Answer,
    AttachParams,
    ConnectedHost,
    ForwardParams,
    HostParams,
    NotifyParams,
    UpstreamInfo,
)
from chit.receipts import HostInfo
from chit.reconcile import questions
from chit.runtime import Supervisor
from chit.runtime.servers import connect
from chit.servers import Registry
from chit.tasks.client import TaskClient

log = logging.getLogger("chit.proxy")


class HostPeer(Protocol):
    """How the engine reaches one proxy (a socket connection, or the proxy in process)."""

    def input(self, route: str, method: str, params: dict[str, Any] | None) -> Awaitable[Any]:
        """Ask the host (for ``route``); return the result dict, raise ``MCPError``."""
        ...

    def progress(
        self, route: str, progress: float, total: float | None, message: str | None
    ) -> Awaitable[None]:
        """Relay progress of a forwarded request."""
        ...

    def notice(self, method: str, params: dict[str, Any] | None) -> Awaitable[None]:
        """Relay a server notification."""
        ...


class Cancellable(Protocol):
    """A request in flight that can be cancelled."""

    def cancel(self) -> None:
        """Cancel it (its answer, if any, is then "request cancelled")."""
        ...


@dataclass(eq=False)
class Attachment:
    """One proxy serving one host for one server."""

    number: int
    params: AttachParams
    peer: HostPeer
    since: str
    pid: int | None = None
    info: UpstreamInfo | None = None
    routes: dict[str, Cancellable] = field(default_factory=dict)
    """Requests of this host in flight on the server, oldest first (cancel scopes, or
    the :class:`~chit.tasks.client.pipes.PipeCall` of a request without a task)."""
    forwarded: dict[str, ForwardParams] = field(default_factory=dict)
    """The ``tools/call`` requests among them (a server question may wait for a person)."""

    @property
    def server(self) -> str:
        """The server this attachment proxies."""
        return self.params.server


_CAPABILITY = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


class Upstreams:
    """Attachments of proxies to the engine's server sessions; see the module docstring."""

    def __init__(self, supervisor: Supervisor) -> None:
        """Serve proxies on ``supervisor``'s sessions (and take its unrouted traffic)."""
        self.sup = supervisor
        self._numbers = itertools.count(1)
        self.attachments: dict[int, Attachment] = {}
        supervisor.traffic.input = self._on_input
        supervisor.traffic.message = self._on_message
        supervisor.traffic.hosts = self._hosts_of
        self.prompts = CallPrompts(supervisor)

    # --- attachments ----------------------------------------------------------------

    async def attach(
        self, params: AttachParams, peer: HostPeer, *, pid: int | None = None
    ) -> tuple[Attachment, UpstreamInfo]:
        """Connect the server's session (if needed) and register the host.

        Raises:
            NotFound: no such server. ServerUnreachable: it cannot be reached.
        """
        spec = Registry(self.sup.home.config_path, lambda: self.sup.handles.vault).get(
            params.server
        )
        client = await connect(self.sup.pool, params.server)
        info = await describe(params.server, client)
        info = info.model_copy(update={"prompts": spec.prompts, "host_cancel": spec.host_cancel})
        att = Attachment(next(self._numbers), params, peer, clock.iso(), pid, info)
        self.attachments[att.number] = att
        log.info("a host attached to %s", params.server)  # who it is comes with initialize
        return att, info

    def set_host(self, att: Attachment, params: HostParams) -> None:
        """The host introduced itself: record who it is and what it can answer."""
        att.params = att.params.model_copy(
            update={"host": params.host, "capabilities": params.capabilities}
        )
        log.info("host %s is on %s", params.host.label, att.server)

    def detach(self, att: Attachment) -> None:
        """The proxy went away: cancel its requests in flight, forget it."""
        for scope in list(att.routes.values()):  # a request without a task leaves at once
            scope.cancel()
        if self.attachments.pop(att.number, None) is not None:
            log.info("host %s detached from %s", att.params.host.label, att.server)

    def _hosts_of(self, server: str) -> tuple[HostInfo, ...]:
        return tuple(a.params.host for a in self.attachments.values() if a.server == server)

    def hosts(self) -> list[ConnectedHost]:
        """The hosts attached right now."""
        return [
            ConnectedHost(server=a.server, host=a.params.host, since=a.since, pid=a.pid)
            for a in self.attachments.values()
        ]

    # --- forwarding -----------------------------------------------------------------

    async def forward(self, att: Attachment, p: ForwardParams) -> Answer:
        """Send one request of the host on the engine's session; the server's answer.

        A transport failure is answered as a JSON-RPC error (the host sees the server as
        unreachable), and the session is reconnected on the next use.
        """
        client = await connect(self.sup.pool, att.server)
        params, opts = stamped(self.sup, client, p)
        long = p.method == "tools/call"
        if p.progress:

            async def relay(progress: float, total: float | None, message: str | None) -> None:
                await _quietly(att.peer.progress(p.route, progress, total, message))

            opts["on_progress"] = relay
        if long:
            att.forwarded[p.route] = p
        answer: Answer | None = None
        with anyio.CancelScope() as scope:
            att.routes[p.route] = scope
            try:
                raw = await _send(client, p, params, opts)
                self.sup.pool.succeeded(att.server)
                answer = Answer(result=raw)
            except MCPError as exc:
                answer = Answer(error=exc.error.model_dump(mode="json", exclude_none=True))
            except Exception as exc:
                self.sup.pool.broken(att.server, client)
                message = f"chit could not reach server {att.server!r}: {type(exc).__name__}"
                answer = Answer(error={"code": INTERNAL_ERROR, "message": message})
            finally:
                att.routes.pop(p.route, None)
                if long:
                    att.forwarded.pop(p.route, None)
                    if self.prompts.calls:  # a question of this call waited in chit's inbox
                        self.prompts.ended(att, p.route, answer)
        return answer or Answer(error={"code": INTERNAL_ERROR, "message": "request cancelled"})

    def cancel(self, att: Attachment, route: str) -> None:
        """The host cancelled a forwarded request (``notifications/cancelled`` upstream)."""
        scope = att.routes.get(route)
        if scope is not None:
            scope.cancel()

    async def notify(self, att: Attachment, p: NotifyParams) -> None:
        """Send one notification of the host to the server."""
        client = await connect(self.sup.pool, att.server)
        data: dict[str, Any] = {"method": p.method, "params": pwire.host_params(p.params)}
        opts: dict[str, Any] = {}
        client.session._stamp(data, opts)  # type: ignore[arg-type]
        await client.session._dispatcher.notify(p.method, data["params"], opts)  # type: ignore[arg-type]

    # --- server → host --------------------------------------------------------------

    async def _on_input(self, server: str, task_id: str | None, request: InputRequest) -> Any:
        """A server request outside a task: to a host that can answer, or chit's inbox.

        The question goes to the newest host in flight that declared the capability
        (unless ``prompts`` is ``chit``). It waits in chit's inbox instead when no such
        host exists, and in both with ``prompts = "both"`` (:mod:`chit.proxy.asks`):
        under the receipt of the newest ``tools/call`` in flight, or — asked outside
        any call — under a receipt of its own. An elicitation outside any call is
        chit's only while a host is attached (else it may be chit's own call's, which
        cannot wait: it is declined, as before).
        """
        method = str(getattr(request, "method", ""))
        want = _CAPABILITY.get(method)
        if task_id is not None or want is None:
            return ErrorData(code=INVALID_REQUEST, message="no host to ask for this request")
        mine = [a for a in sorted(self.attachments.values(), key=lambda a: -a.number)]
        mine = [a for a in mine if a.server == server]
        live = [a for a in mine if a.routes]
        first = live[0] if live else mine[0] if mine else None
        setting = first.info.prompts if first is not None and first.info is not None else "host"
        asker = None
        if setting != "chit":
            asker = next((a for a in live if getattr(a.params.capabilities, want)), None)
        if asker is not None and setting == "host":
            return await self._host_only(asker, method, request)
        host = None
        if asker is not None:
            host = partial(self._ask_host, asker, next(reversed(asker.routes)), method, request)
        call = _newest_call(([asker] if asker is not None else []) + live)
        if call is not None:
            return await self.prompts.ask(call[0], call[1], request, host)
        if method == "elicitation/create" and not mine:
            return ErrorData(code=INVALID_REQUEST, message="no host can answer this request")
        return await self.prompts.ask_alone(server, request, host)

    async def _host_only(self, asker: Attachment, method: str, request: InputRequest) -> Any:
        """Ask the host alone (``prompts = "host"`` and it declared the capability)."""
        try:
            raw = await self._ask_host(asker, next(reversed(asker.routes)), method, request)
        except MCPError as exc:
            return exc.error
        except Exception as exc:
            log.info("asking host %s failed: %s", asker.params.host.label, type(exc).__name__)
            return ErrorData(code=INTERNAL_ERROR, message="the host did not answer")
        return _input_result(request, raw)

    @staticmethod
    async def _ask_host(att: Attachment, route: str, method: str, request: InputRequest) -> Any:
        body = request.params
        params = body.model_dump(by_alias=True, mode="json", exclude_none=True) if body else None
        return await att.peer.input(route, method, params)

    async def _on_message(self, server: str, notification: Any) -> None:
        if isinstance(notification, ProgressNotification) or not isinstance(
            notification, BaseModel
        ):
            return  # progress reaches its request's host through on_progress
        body = notification.model_dump(by_alias=True, mode="json", exclude_none=True)
        method, params = body.get("method"), body.get("params")
        if not isinstance(method, str):
            return
        for att in list(self.attachments.values()):
            if att.server == server:
                await _quietly(att.peer.notice(method, params))


async def _send(
    client: TaskClient, p: ForwardParams, params: dict[str, Any], opts: dict[str, Any]
) -> dict[str, Any]:
    """Send on the session; the server's result (its JSON), or ``MCPError``.

    Over a stdio server's pipes a request without progress goes out as JSON and its
    answer comes back as JSON (:meth:`ServerPipes.request`, under an id of the
    session's own counter); otherwise through the SDK's dispatcher.
    """
    pipes = client.pipes
    if pipes is None or p.progress:
        dispatcher = client.session._dispatcher
        return await dispatcher.send_raw_request(p.method, params, opts)  # type: ignore[arg-type]
    return await pipes.request(session_id(client), p.method, params, opts["timeout"])


def stamped(
    sup: Supervisor, client: TaskClient, p: ForwardParams
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The host's params as the engine's session sends them, and the call's options.

    The host's envelope is replaced by the session's stamp (without the tasks extension
    when the host did not declare it); ``timeout``: a ``tools/call`` may run as long as
    a result may take, anything else the session's read timeout.
    """
    data: dict[str, Any] = {"method": p.method, "params": pwire.host_params(p.params)}
    opts: dict[str, Any] = {}
    client.session._stamp(data, opts)  # type: ignore[arg-type]
    if not p.declare_extension:
        pwire.undeclare_extension(data["params"])
    long = p.method == "tools/call"
    opts["timeout"] = sup.pool.options.result_timeout if long else client.read_timeout
    return data["params"], opts


def session_id(client: TaskClient) -> int:
    """A request id of the session's own counter (never one of its requests' ids)."""
    dispatcher: Any = client.session._dispatcher
    request_id: int = dispatcher._allocate_id()
    while request_id in dispatcher._pending:
        request_id = dispatcher._allocate_id()
    return request_id


def _newest_call(attachments: list[Attachment]) -> tuple[Attachment, str] | None:
    """The newest ``tools/call`` in flight among ``attachments`` (first match wins)."""
    for att in attachments:
        if att.forwarded:
            return att, next(reversed(att.forwarded))
    return None


async def describe(server: str, client: TaskClient) -> UpstreamInfo:
    """What the engine's session knows about ``server``, with its tools' task support."""
    sdk = client.client
    caps = sdk.server_capabilities
    info = sdk.server_info
    support: dict[str, str] = {}
    if client.generation is not None:
        for tool in await client.list_tools():
            if tool.task_support in ("required", "optional"):
                support[tool.name] = tool.task_support
    return UpstreamInfo(
        server=server,
        protocol_version=client.protocol_version,
        generation=client.generation,
        server_info=info.model_dump(by_alias=True, mode="json", exclude_none=True) if info else {},
        capabilities=caps.model_dump(by_alias=True, mode="json", exclude_none=True) if caps else {},
        instructions=client.session.instructions,
        task_support=support,
    )


def _input_result(request: InputRequest, raw: Any) -> Any:
    """Validate the host's answer into the SDK model the server session expects."""
    try:
        return questions.host_result(request, raw)
    except ValidationError:
        method = getattr(request, "method", "request")
        return ErrorData(code=INVALID_REQUEST, message=f"the host's answer to {method} is invalid")


async def _quietly(call: Awaitable[None]) -> None:
    """Relay without letting a gone host break the session's receive path."""
    try:
        with anyio.fail_after(10):
            await call
    except Exception as exc:
        log.debug("relay to a host failed: %s", type(exc).__name__)


__all__ = ["Attachment", "HostPeer", "Upstreams", "describe"]
