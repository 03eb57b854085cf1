"""Requests sent as JSON on a stdio server's pipes, and their answers (``pipes``).

A :class:`PipeCall` waits for one answer: the server's result, its error, the timeout
(with a courtesy ``notifications/cancelled``, as the SDK sends one), the connection's
end, or its caller's cancel — whichever comes first, told to its ``done`` callback once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import ValidationError

Outcome = dict[str, Any] | MCPError | None
"""How a request sent as JSON ends: the server's result, an ``MCPError`` (the server's
error, ``REQUEST_TIMEOUT``, ``CONNECTION_CLOSED``), or None (its caller cancelled it)."""


def closed() -> MCPError:
    """The error of a request whose connection ended."""
    return MCPError(code=CONNECTION_CLOSED, message="Connection closed")


class PipeCall:
    """A request sent as JSON, waiting for its answer (``ServerPipes.request_soon``)."""

    __slots__ = (
        "calls",
        "done",
        "finished",
        "key",
        "method",
        "request_id",
        "send_cancel",
        "timeout",
        "timer",
    )

    def __init__(
        self,
        calls: dict[Any, PipeCall],
        send_cancel: Callable[[int, str], None],
        request_id: int,
        method: str,
        timeout: float,
        done: Callable[[Outcome], None],
    ) -> None:
        """A call registered in ``calls`` once sent; ``send_cancel`` tells the server."""
        self.calls = calls
        self.send_cancel = send_cancel
        self.request_id = request_id
        self.key = coerce_request_id(request_id)
        self.method = method
        self.timeout = timeout
        self.done = done
        self.finished = False
        self.timer: asyncio.TimerHandle | None = None

    def _finish(self, outcome: Outcome) -> None:
        if self.finished:
            return
        self.finished = True
        if self.calls.get(self.key) is self:
            del self.calls[self.key]
        if self.timer is not None:
            self.timer.cancel()
        self.done(outcome)

    def settle(self, outcome: Outcome) -> None:
        """The server answered (or the connection ended)."""
        self._finish(outcome)

    def expire(self) -> None:
        """The timeout passed: a courtesy cancel, as the SDK sends one."""
        if not self.finished:
            self.send_cancel(self.request_id, f"timed out after {self.timeout}s")
            message = f"Request {self.method!r} timed out"
            self._finish(MCPError(code=REQUEST_TIMEOUT, message=message))

    def cancel(self) -> None:
        """The caller gave up: tell the server; the outcome is None."""
        if not self.finished:
            self.send_cancel(self.request_id, "caller cancelled")
            self._finish(None)


class Reply:
    """An answer to a :class:`PipeCall`, queued behind earlier messages of the server."""

    __slots__ = ("call", "outcome")

    def __init__(self, call: PipeCall, outcome: Outcome) -> None:
        """Settle ``call`` with ``outcome`` when the session's loop reaches it."""
        self.call = call
        self.outcome = outcome


def parse_answer(line: bytes) -> tuple[Any, Outcome, dict[str, Any]] | None:
    """``(id key, outcome, message)`` if ``line`` is a well-formed answer, else None.

    Anything else (a request, a notification, an answer that is not well formed) is
    for the session's own path, which judges it as the SDK does.
    """
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0" or "method" in msg:
        return None
    rid = msg.get("id")
    if isinstance(rid, bool) or not isinstance(rid, int | str):
        return None
    outcome: Outcome
    if isinstance(msg.get("result"), dict) and "error" not in msg:
        outcome = msg["result"]
    elif isinstance(msg.get("error"), dict) and "result" not in msg:
        try:
            error = types.ErrorData.model_validate(msg["error"])
        except ValidationError:
            return None
        outcome = MCPError(code=error.code, message=error.message, data=error.data)
    else:
        return None
    return coerce_request_id(rid), outcome, msg


__all__ = ["Outcome", "PipeCall", "Reply", "closed", "parse_answer"]
