"""Fixture tools of ``chit demo-server``.

Names and behaviour follow what the MCP conformance ``tasks-*`` scenarios expect
(``@modelcontextprotocol/conformance`` 0.2.0-alpha.12), so the same server serves the
conformance suite, chit's own tests and hands-on demos.
"""

from __future__ import annotations

from typing import Any

import anyio

from chit.tasks.server import PreInput, TaskContext, TaskProtocolError, TaskRuntime, TaskToolError

CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "confirm": {"type": "boolean", "title": "Confirm", "description": "Really do it?"}
    },
    "required": ["confirm"],
}
NAME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "title": "Name"}},
    "required": ["name"],
}
SUMMARY_HISTORY: tuple[tuple[str, str], ...] = (
    ("user", "You will be given a task's notes to summarise."),
    ("assistant", "Ready: send the notes."),
)
"""The turns before ``summarize_notes``'s own question in its sampling request."""
SUMMARY_OPTIONS: dict[str, Any] = {
    "modelPreferences": {
        "hints": [{"name": "claude-haiku"}],
        "intelligencePriority": 0.3,
        "speedPriority": 0.9,
    },
    "temperature": 0.2,
    "stopSequences": ["\n\n"],
    "includeContext": "none",
    "metadata": {"purpose": "one-line summary"},
}
"""The further fields of ``summarize_notes``'s sampling request (wire names)."""


def _accepted(answer: dict[str, Any]) -> dict[str, Any] | None:
    """Return the content of an accepted elicitation answer, else None."""
    if answer.get("action") != "accept":
        return None
    content = answer.get("content")
    return content if isinstance(content, dict) else {}


def register_task_tools(runtime: TaskRuntime) -> None:
    """Register the demo task tools on ``runtime`` (before the server is built)."""

    @runtime.task_tool("slow_compute", task_support="optional")
    async def slow_compute(task: TaskContext, seconds: float = 1.0, label: str = "job") -> str:
        """Work for `seconds` seconds, reporting progress; cancellable at any step."""
        steps = max(1, min(100, int(seconds * 4)))
        for step in range(steps):
            await task.progress(step, steps, f"Computing {label}: step {step + 1} of {steps}")
            await anyio.sleep(seconds / steps)
        await task.progress(steps, steps, f"Computing {label}: finishing")
        return f"Computed {label} in {seconds:g} s"

    @runtime.task_tool("failing_job", task_support="required")
    async def failing_job(task: TaskContext) -> str:
        """Always ends with a tool execution error after about a second."""
        await task.set_status("Connecting to the upstream service")
        await anyio.sleep(1.0)
        raise TaskToolError("Upstream service rejected the job: quota exceeded")

    @runtime.task_tool("protocol_error_job", task_support="optional")
    async def protocol_error_job(task: TaskContext) -> str:
        """Fails with a JSON-RPC error (the task becomes `failed` with `error`)."""
        await task.set_status("Loading job state")
        await anyio.sleep(0.2)
        raise TaskProtocolError(-32603, "Internal error: job state is corrupt", {"stage": "load"})

    @runtime.task_tool("confirm_delete", task_support="optional")
    async def confirm_delete(task: TaskContext, filename: str = "example.txt") -> str:
        """Ask for confirmation, then (pretend to) delete `filename`."""
        await task.set_status(f"Checking {filename}")
        answer = await task.request_input(
            f"Delete {filename}? This cannot be undone.", CONFIRM_SCHEMA, key="confirm"
        )
        content = _accepted(answer)
        if not content or not content.get("confirm"):
            return f"Kept {filename}: deletion not confirmed"
        await task.set_status(f"Deleting {filename}")
        await anyio.sleep(0.1)
        return f"Deleted {filename}"

    @runtime.task_tool("multi_input", task_support="optional")
    async def multi_input(task: TaskContext) -> str:
        """Ask two questions at once; partial answers keep the task waiting."""
        answers = await task.request_inputs(
            {
                "name": ("What name should the report use?", NAME_SCHEMA),
                "confirm": ("Publish the report when done?", CONFIRM_SCHEMA),
            }
        )
        name = (_accepted(answers["name"]) or {}).get("name", "anonymous")
        publish = bool((_accepted(answers["confirm"]) or {}).get("confirm"))
        await task.set_status("Writing the report")
        await anyio.sleep(0.1)
        return f"Report for {name} written ({'published' if publish else 'not published'})"

    @runtime.task_tool(
        "test_tool_with_task",
        task_support="required",
        pre_inputs=(PreInput("user_name", "What is your name?", NAME_SCHEMA),),
    )
    async def test_tool_with_task(task: TaskContext) -> str:
        """Gathers `user_name` first (multi-round-trip), then works as a task."""
        name = (_accepted(task.gathered.get("user_name", {})) or {}).get("name", "stranger")
        await task.set_status(f"Preparing a greeting for {name}")
        await anyio.sleep(0.3)
        return f"Hello, {name}! Your task is complete."

    @runtime.task_tool("summarize_notes", task_support="required", asks=("sampling", "roots"))
    async def summarize_notes(task: TaskContext, notes: str = "Shipped the release.") -> str:
        """Ask the client's model (or person) for a summary of `notes` and for the roots
        to work in, inside the task; complete with the reply (needs sampling and roots)."""
        await task.set_status("Asking for a summary")
        # A request with every field a server may set, so a client (or chit proxy's
        # host) can be checked to receive it as sent.
        reply = await task.request_sampling(
            f"Summarise the notes of task {task.task_id} in one line: {notes}",
            system_prompt="You write one-line summaries.",
            max_tokens=200,
            key="summary",
            history=SUMMARY_HISTORY,
            options=SUMMARY_OPTIONS,
        )
        if reply.get("action") == "decline":
            return "No summary: the client declined to write one"
        content = reply.get("content")
        text = content.get("text", "") if isinstance(content, dict) else ""
        await task.set_status("Asking where to work")
        roots = await task.request_roots(key="roots")
        uris = [r.get("uri", "") for r in roots.get("roots") or [] if isinstance(r, dict)]
        where = ", ".join(uris) if uris else "no roots"
        return f"Summary by {reply.get('model', 'an unknown model')}: {text} (roots: {where})"

    @runtime.task_tool("resumable_job", task_support="optional", resumable=True)
    async def resumable_job(task: TaskContext, seconds: float = 1.0) -> str:
        """Like slow_compute but re-run from scratch if the server restarts mid-way."""
        await task.set_status("Working (resumable)")
        await anyio.sleep(seconds)
        return f"Resumable job done after {seconds:g} s"


def register_plain_tools(server: Any) -> None:
    """Register the synchronous demo tools on the ``MCPServer``."""

    @server.tool()  # type: ignore[untyped-decorator]
    def greet(name: str = "World") -> str:
        """Say hello (synchronous; never a task)."""
        return f"Hello, {name}!"

    @server.tool()  # type: ignore[untyped-decorator]
    def test_simple_text() -> str:
        """Conformance fixture: a plain text result."""
        return "This is a simple text response for testing."
