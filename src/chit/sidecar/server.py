"""The sidecar MCP server: the ``work_*`` tools, ``work_ask``, stats, and the guard.

Validation happens in :func:`contract_guard`, a server middleware that sees the raw
``tools/call`` before the SDK's own argument validation: the size cap and the
``chit.work/1`` rules run first, so a bad call gets a readable ``isError`` result naming
the contract and *nothing* reaches the database. The tool functions then receive
arguments already known to be valid.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import anyio
import mcp_types as t
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import MCPServer

from chit.home import Home
from chit.sidecar import decisions
from chit.sidecar.contract import TOOL_FIELDS, ContractError, validate
from chit.sidecar.gateway import ReceiptGateway
from chit.sidecar.principals import current_principal
from chit.sidecar.service import UNKNOWN_ANSWER, Answer, SidecarService, failure
from chit.tasks.server import TaskContext, TaskRuntime, build_server
from chit.tasks.server.backend import is_postgres_url

Status = Literal["planned", "in_progress", "blocked", "review", "done"]
STATS_URI = "chit://sidecar/stats"
ASK_POLL_S = 0.5

INSTRUCTIONS = (
    "Declare units of work with work_start (returns item_id at once, state 'queued' until "
    "the record materializes — queued is not failure), then work_note / work_status / "
    "work_complete with that item_id; they are queued in order. work_inspect shows the "
    "anchor state and the last failure with its class. Contract: chit.work/1."
)


def render(data: dict[str, Any], is_error: bool = False) -> t.CallToolResult:
    """A tool result whose text is the canonical JSON of its structured content."""
    text = json.dumps(data, sort_keys=True, ensure_ascii=False)
    return t.CallToolResult(
        content=[t.TextContent(type="text", text=text)],
        structured_content=data,
        is_error=is_error,
    )


def _dump(result: t.CallToolResult) -> dict[str, Any]:
    return result.model_dump(by_alias=True, exclude_none=True, mode="json")


def contract_guard(service: SidecarService) -> ServerMiddleware[Any]:
    """Middleware: cap and validate sidecar tool calls before anything is stored."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/call" or not isinstance(ctx.params, dict):
            return await call_next(ctx)
        name = ctx.params.get("name")
        if not isinstance(name, str) or name not in TOOL_FIELDS:
            return await call_next(ctx)
        try:
            args = validate(name, ctx.params.get("arguments"))
        except ContractError as exc:
            return _dump(render(failure(exc.reason), True))
        if name == "work_ask":
            # A task tool: ownership must be checked here, in the caller's request (the
            # task itself runs later, outside the request's auth context).
            principal = current_principal()
            owned = await anyio.to_thread.run_sync(
                lambda: service.store.anchor(args["item_id"], principal) is not None
            )
            if not owned:
                return _dump(render(dict(UNKNOWN_ANSWER), True))
        return await call_next(ctx)

    return middleware


def _decision_id(task_id: str) -> str:
    # Derived from the task id, so a re-run after a restart finds the same question.
    return "dq_" + hashlib.sha256(task_id.encode()).hexdigest()[:24]


def register_ask(runtime: TaskRuntime, service: SidecarService) -> None:
    """Register the ``work_ask`` task tool (both task generations)."""

    async def work_ask(
        task: TaskContext, item_id: str, question: str, schema: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Ask the human in chit a question about a work item and wait for the decision.

        The question waits in chit (`chit sidecar decisions`, the TUI); the task completes
        with {"decision_id", "answer"} once someone answers (`chit sidecar decide`).
        """

        def park() -> str:
            anchor = service.store.anchor(item_id)
            principal = anchor.principal if anchor is not None else ""
            found = decisions.get(service.store.db, _decision_id(task.task_id))
            if found is None:
                found = decisions.ask(
                    service.store.db,
                    principal,
                    item_id,
                    question,
                    schema,
                    decision_id=_decision_id(task.task_id),
                )
            return found.id

        decision_id = await anyio.to_thread.run_sync(park)
        await task.set_status(f"waiting for a decision in chit ({decision_id})")
        while True:
            if task.cancelled:
                await anyio.to_thread.run_sync(
                    lambda: decisions.cancel(service.store.db, decision_id)
                )
                return {"decision_id": decision_id, "state": "cancelled"}
            found = await anyio.to_thread.run_sync(
                lambda: decisions.get(service.store.db, decision_id)
            )
            if found is not None and found.state != "pending":
                return {"decision_id": decision_id, "state": found.state, "answer": found.answer}
            await anyio.sleep(ASK_POLL_S)

    with warnings.catch_warnings():
        # The contract names the argument "schema", which pydantic warns shadows
        # BaseModel.schema; the generated model never calls that method.
        warnings.simplefilter("ignore", UserWarning)
        runtime.task_tool("work_ask", task_support="optional", resumable=True)(work_ask)


def build_sidecar_server(
    home: Home,
    *,
    sidecar_path: Path | str | None = None,
    on_queued: Callable[[], None] | None = None,
    gateway: ReceiptGateway | None = None,
    **server_options: Any,
) -> tuple[Any, SidecarService]:
    """Return ``(MCPServer, service)`` for the sidecar of ``home``.

    Args:
        home: The chit home.
        sidecar_path: Override the sidecar store: a file, or a ``postgresql://`` URL
            (then ``work_ask`` tasks live in that database too, so every replica answers
            for them).
        on_queued: Called whenever an intent was queued (wakes an in-process executor).
        gateway: The Supervisor's receipt gateway; without it the receipt tools are absent.
        server_options: Passed to ``MCPServer`` (e.g. ``auth``, ``token_verifier``).
    """
    service = SidecarService(home, sidecar_path=sidecar_path, on_queued=on_queued)
    tasks_db: Path | str
    if is_postgres_url(str(sidecar_path or "")):
        tasks_db = str(sidecar_path)
    else:
        # The task store creates its file 0600 with the schema in place.
        tasks_db = home.ensure().root / "sidecar-tasks.db"
    runtime = TaskRuntime(tasks_db, max_argument_bytes=1 << 20)
    register_ask(runtime, service)
    server = build_server(
        "chit-sidecar",
        runtime,
        principal_of=lambda _ctx: current_principal(),
        version="1",
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        **server_options,
    )
    # Outermost of the user middleware: before the task layer sees the call.
    server.middleware.insert(len(server.middleware) - 1, contract_guard(service))
    register_work_tools(server, service)
    if gateway is not None:
        from chit.sidecar.receipt_tools import register_receipt_tools

        register_receipt_tools(server, service, gateway)
    return server, service


def register_work_tools(server: MCPServer[Any], service: SidecarService) -> None:
    """Add ``work_start`` … ``work_stats`` and the stats resource to ``server``."""

    def out(answer: Answer) -> t.CallToolResult:
        return render(*answer)

    @server.tool()
    def work_start(
        task_key: str, title: str, purpose: str | None = None, idempotency_key: str | None = None
    ) -> t.CallToolResult:
        """Declare a unit of work. Returns {item_id, state, materialized} at once.

        state "queued" means the id and the start are durable while the record is not
        visible yet (not a failure). The same task_key returns the same item while it is
        provisional or live; the same idempotency_key returns the same intent.
        """
        args = {"task_key": task_key, "title": title, "purpose": purpose}
        if idempotency_key is not None:
            args["idempotency_key"] = idempotency_key
        return out(service.start(current_principal(), args))

    @server.tool()
    def work_note(item_id: str, text: str, idempotency_key: str | None = None) -> t.CallToolResult:
        """Add a note to a work item; accepted (queued in order) even before it materializes."""
        args = {"item_id": item_id, "text": text, "idempotency_key": idempotency_key}
        return out(service.follow(current_principal(), "note", _clean(args)))

    @server.tool()
    def work_status(
        item_id: str, status: Status, idempotency_key: str | None = None
    ) -> t.CallToolResult:
        """Replace the item's status (planned, in_progress, blocked, review, done)."""
        args = {"item_id": item_id, "status": status, "idempotency_key": idempotency_key}
        return out(service.follow(current_principal(), "status", _clean(args)))

    @server.tool()
    def work_complete(
        item_id: str, summary: str | None = None, idempotency_key: str | None = None
    ) -> t.CallToolResult:
        """Mark the item completed, with an optional summary."""
        args = {"item_id": item_id, "summary": summary, "idempotency_key": idempotency_key}
        return out(service.follow(current_principal(), "complete", _clean(args)))

    @server.tool()
    def work_inspect(item_id: str) -> t.CallToolResult:
        """Anchor state (provisional/live/dead), materialized, pending intents, last failure."""
        return out(service.inspect(current_principal(), item_id))

    @server.tool()
    def work_stats() -> t.CallToolResult:
        """Counts by anchor state, intent state and failure class (all principals)."""
        return render(service.stats())

    @server.resource(STATS_URI, mime_type="application/json")
    def stats_resource() -> str:
        """The sidecar's counters (same as work_stats)."""
        return json.dumps(service.stats(), sort_keys=True)


def _clean(args: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in args.items() if v is not None}
