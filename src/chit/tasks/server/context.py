"""What a running task tool sees: :class:`TaskContext`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chit.tasks.server.runtime import TaskRuntime


class TaskContext:
    """Handle given to a task tool while it runs.

    All methods persist through the runtime, so a client polling ``tasks/get`` sees the
    change, and a restarted server still knows about it.
    """

    def __init__(self, runtime: TaskRuntime, task_id: str, tool: str) -> None:
        """Bind the context to one task (built by the runtime, not by tool authors)."""
        self._runtime = runtime
        self.task_id = task_id
        self.tool = tool
        self._last_progress: float | None = None
        self._input_counter = 0
        self.gathered: dict[str, dict[str, Any]] = {}
        """Answers to the tool's pre-inputs (``PreInput``), keyed by pre-input key."""

    @property
    def cancelled(self) -> bool:
        """True once ``tasks/cancel`` was accepted for this task (check between steps)."""
        return self._runtime.is_cancel_requested(self.task_id)

    async def set_status(self, message: str) -> None:
        """Set the human-readable ``statusMessage`` (keeps the status)."""
        await self._runtime.set_status_message(self.task_id, message)

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report progress.

        2025: a ``notifications/progress`` on the creating request's ``progressToken``
        (valid for the task's life), strictly increasing: a value not above the last
        one is dropped. 2026 forbids progress notifications for tasks, so there (and
        always) ``message`` also becomes the ``statusMessage``.
        """
        if self._last_progress is not None and progress <= self._last_progress:
            return
        self._last_progress = progress
        await self._runtime.report_progress(self.task_id, progress, total, message)

    async def request_input(
        self, message: str, schema: dict[str, Any], *, key: str | None = None
    ) -> dict[str, Any]:
        """Ask the client for input and wait for the answer (an ``ElicitResult`` dict).

        The task parks in ``input_required``. 2026: the request appears in
        ``tasks/get`` ``inputRequests`` and is answered by ``tasks/update``. 2025: it
        is delivered as ``elicitation/create`` on the client's open ``tasks/result``.

        Returns:
            The client's answer, e.g. ``{"action": "accept", "content": {...}}``.
        """
        answers = await self.request_inputs({key or self._next_key(): (message, schema)})
        return next(iter(answers.values()))

    async def request_inputs(
        self, requests: dict[str, tuple[str, dict[str, Any]]]
    ) -> dict[str, dict[str, Any]]:
        """Ask several questions at once; return when *all* are answered.

        Keys become the ``inputRequests`` keys (unique for the task's lifetime; a
        resumed run reuses them, so answers given before a restart still count).
        """
        return await self._runtime.request_inputs(self.task_id, dict(requests))

    async def request_sampling(
        self,
        prompt: str,
        *,
        system_prompt: str | None = None,
        max_tokens: int = 400,
        key: str | None = None,
        history: Sequence[tuple[str, str]] = (),
        options: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Ask the client's model (or person) for a reply to ``prompt``; wait for it.

        The tool must be registered with ``asks=("sampling",)``. 2026: a
        ``sampling/createMessage`` entry of ``inputRequests``; 2025: that request sent
        on the client's open ``tasks/result``. ``history`` (``(role, text)`` pairs) comes
        before ``prompt`` in the conversation; ``options`` are further request fields as
        the wire names them (``modelPreferences``, ``temperature``, ``stopSequences``,
        ``includeContext``, ``metadata``).

        Returns:
            A ``CreateMessageResult`` dict (``content.text``, ``model``), or, when the
            client declined, a dict with ``"action": "decline"`` (and, on 2025, the
            client's JSON-RPC ``error``).
        """
        turns = [*history, ("user", prompt)]
        params: dict[str, Any] = {
            **(options or {}),
            "messages": [
                {"role": role, "content": {"type": "text", "text": text}} for role, text in turns
            ],
            "maxTokens": max_tokens,
        }
        if system_prompt is not None:
            params["systemPrompt"] = system_prompt
        request = {"method": "sampling/createMessage", "params": params}
        return await self._ask_one(key, request)

    async def request_roots(self, *, key: str | None = None) -> dict[str, Any]:
        """Ask the client which roots (``file://`` URIs) the task may use; wait for them.

        The tool must be registered with ``asks=("roots",)``.

        Returns:
            A ``ListRootsResult`` dict (``roots``), or a ``"decline"`` dict as for
            :meth:`request_sampling`.
        """
        return await self._ask_one(key, {"method": "roots/list", "params": {}})

    async def _ask_one(self, key: str | None, request: dict[str, Any]) -> dict[str, Any]:
        answers = await self._runtime.request_inputs(
            self.task_id, {key or self._next_key(): request}
        )
        return next(iter(answers.values()))

    def _next_key(self) -> str:
        self._input_counter += 1
        return f"input-{self._input_counter}"
