"""``tools/call`` through the proxy: passed on, a task mirrored for the host, or held open.

Which of the three, by what the host and the server speak:

* a 2026 host that declared the tasks extension, a tool that can be a task: **started**
  (intent first); a task becomes a task of chit's own for the host
  (:mod:`chit.proxy.mirror`); a synchronous answer or an ``InputRequiredResult`` is
  handed back as it is;
* a 2026 host that did not declare it: **passed on** without the extension (the server
  answers, or says -32021; for a 2025 server's ``required`` tool the proxy says it);
* a 2025 host with ``params.task``: started, and the host gets chit's task (a
  synchronous answer too: a task already complete); for a tool that cannot be a task,
  -32601 as the server would;
* a 2025 (or older) host's plain call of a tool that can be a task: **held** — a task on
  the server all the same, the host's request kept open with progress until the result
  (:mod:`chit.proxy.held`);
* any other plain call: passed on.

A 2026 server's pre-task multi-round-trip input (``InputRequiredResult``) is handed to a
2026 host as it is; for a 2025 host the proxy asks it itself (``elicitation/create`` on
the call) and calls again with the answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST, METHOD_NOT_FOUND

from chit.proxy import wire as pwire
from chit.proxy.host import Ctx, host_of
from chit.proxy.models import StartParams, StartReply
from chit.tasks import wire
from chit.tasks.server.principal import default_principal
from chit.tasks.server.render import create_result_2025, create_result_2026

if TYPE_CHECKING:
    from chit.proxy.host import ProxyHost

MISSING_CAPABILITY = -32021
MAX_INPUT_ROUNDS = 10
PROXY_TOOL = "chit_proxy_receipt"
"""The proxy's one task tool: its tasks mirror a receipt (argument ``receipt_id``)."""


async def call_tool(host: ProxyHost, ctx: Ctx) -> dict[str, Any]:
    """Decide and run one ``tools/call`` (see the module docstring)."""
    params = dict(ctx.params or {})
    name = params.get("name")
    if not isinstance(name, str):
        return await host.forward(ctx, "tools/call", params)
    modern = pwire.is_modern(ctx.protocol_version)
    support = await host.task_support(ctx, name) if host.has_tasks else "forbidden"
    if modern:
        declared = pwire.declared_extension(params)
        if declared and support != "forbidden":
            return await _task_call(host, ctx, params, modern=True)
        if not declared and support == "required" and host.info.generation == wire.PROTOCOL_2025:
            raise MCPError(
                code=MISSING_CAPABILITY,
                message=f"Tool {name!r} must be called as a task",
                data={"requiredCapabilities": {"extensions": {wire.EXTENSION_ID: {}}}},
            )
        return await host.forward(ctx, "tools/call", params, declare=declared)
    task = params.pop("task", None)
    if task is not None:
        if support == "forbidden":
            raise MCPError(
                code=METHOD_NOT_FOUND,
                message=f"Tool {name!r} does not support task-augmented execution",
            )
        ttl = task.get("ttl") if isinstance(task, dict) else None
        return await _task_call(
            host, ctx, params, modern=False, ttl_ms=ttl if isinstance(ttl, int) else None
        )
    if support != "forbidden":
        from chit.proxy.held import held_call

        return await held_call(host, ctx, params)
    return await host.forward(ctx, "tools/call", params)


async def start(
    host: ProxyHost, ctx: Ctx, params: dict[str, Any], *, ttl_ms: int | None = None
) -> StartReply:
    """Start the call on the server (intent first); a 2025 host's pre-task input asked.

    Raises:
        MCPError: the server refused the call (its JSON-RPC error), or the host could
            not answer the server's questions.
    """
    modern = pwire.is_modern(ctx.protocol_version)
    for _ in range(MAX_INPUT_ROUNDS + 1):
        route = host.new_route(ctx)
        try:
            reply = await host.backend.start(
                StartParams(
                    server=host.server,
                    params=params,
                    ttl_ms=ttl_ms,
                    declare_extension=True,
                    route=route,
                    host=host_of(ctx),
                )
            )
        finally:
            host.routes.pop(route, None)
        if reply.kind == "error":
            error = reply.error or {}
            raise MCPError(
                code=int(error.get("code", -32603)),
                message=str(error.get("message", "")),
                data=error.get("data"),
            )
        if reply.kind != "input_required" or modern:
            return reply
        params = await _answer_rounds(host, ctx, params, reply.result or {})
    raise MCPError(code=INVALID_REQUEST, message="too many input rounds before the task")


async def _answer_rounds(
    host: ProxyHost, ctx: Ctx, params: dict[str, Any], asked: dict[str, Any]
) -> dict[str, Any]:
    """A 2025 host's answers to a 2026 server's pre-task questions: the next call's params."""
    answers: dict[str, Any] = {}
    for key, request in (asked.get("inputRequests") or {}).items():
        if not isinstance(request, dict) or not isinstance(request.get("method"), str):
            raise MCPError(code=INVALID_REQUEST, message="the server asked an unreadable question")
        route = host.new_route(ctx)
        try:
            answers[key] = await host.input(route, request["method"], request.get("params"))
        finally:
            host.routes.pop(route, None)
    again = dict(params)
    again["inputResponses"] = answers
    if asked.get("requestState") is not None:
        again["requestState"] = asked["requestState"]
    return again


async def _task_call(
    host: ProxyHost,
    ctx: Ctx,
    params: dict[str, Any],
    *,
    modern: bool,
    ttl_ms: int | None = None,
) -> dict[str, Any]:
    """The host asked for a task: start it; hand back chit's task for the receipt."""
    reply = await start(host, ctx, params, ttl_ms=ttl_ms)
    if reply.kind == "input_required" or (reply.kind == "sync" and modern):
        return pwire.for_host(
            "tools/call", reply.result or {}, ctx.protocol_version, host.info.protocol_version
        )
    assert reply.receipt is not None
    rid = reply.receipt.receipt_id
    if reply.kind == "sync" and reply.result is not None:
        host.sync_results[rid] = reply.result
    meta = params.get("_meta")
    record = await host.runtime.create(
        host.runtime.tools[PROXY_TOOL],
        {"receipt_id": rid},
        principal=default_principal(ctx),
        protocol=wire.PROTOCOL_2026 if modern else wire.PROTOCOL_2025,
        ttl_ms=ttl_ms,
        progress_token=meta.get("progressToken") if isinstance(meta, dict) else None,
        session=ctx.session,
    )
    if modern:
        return create_result_2026(record).wire()
    return create_result_2025(record, immediate=f"Started {params.get('name')} as a task.")
