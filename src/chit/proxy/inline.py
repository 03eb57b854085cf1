"""A forwarded request without a task: sent from the control socket's reader, answered
from the server's pipe reader.

:meth:`Upstreams.forward` runs one task per forwarded request, which waits for the
server's answer. For a stdio server served on the event loop
(:mod:`chit.tasks.client.pipes`) that is not needed: the request is written to the
server's stdin by the control connection's reader, and the server's answer, read by
the pipe's reader, is handed to ``reply`` (which writes the control frame at once).
Everything :meth:`Upstreams.forward` keeps is kept the same way — the request is a
route of its attachment (a host's cancel, or its proxy leaving, cancels it; the
server's questions find its host), a ``tools/call`` is a forwarded call whose question
may wait in chit's inbox, and its end is told to :class:`~chit.proxy.asks.CallPrompts`.
Requests that want progress, and servers not on pipes, take the task.
"""

from __future__ import annotations

from collections.abc import Callable

from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR

from chit.proxy.models import Answer, ForwardParams
from chit.proxy.upstream import Attachment, Upstreams, session_id, stamped
from chit.tasks.client.pipes import Outcome

CANCELLED = Answer(error={"code": INTERNAL_ERROR, "message": "request cancelled"})
"""The answer of a request cancelled before the server answered (as the task path)."""


def forward_soon(
    ups: Upstreams, att: Attachment, p: ForwardParams, reply: Callable[[Answer], None]
) -> bool:
    """Send ``p`` without a task if it can be; ``reply`` gets the answer, once.

    False (nothing sent): take :meth:`Upstreams.forward` instead.
    """
    if p.progress:
        return False
    client = ups.sup.pool.peek(att.server)
    pipes = client.pipes if client is not None else None
    if client is None or pipes is None:
        return False
    params, opts = stamped(ups.sup, client, p)
    long = p.method == "tools/call"
    route = p.route

    def done(outcome: Outcome) -> None:
        att.routes.pop(route, None)
        answer: Answer | None = None
        if isinstance(outcome, MCPError):
            answer = Answer(error=outcome.error.model_dump(mode="json", exclude_none=True))
        elif outcome is not None:
            ups.sup.pool.succeeded(att.server)
            answer = Answer(result=outcome)
        if long:
            att.forwarded.pop(route, None)
            if ups.prompts.calls:  # a question of this call waited in chit's inbox
                ups.prompts.ended(att, route, answer)
        reply(answer or CANCELLED)

    if long:
        att.forwarded[route] = p
    try:
        call = pipes.request_soon(session_id(client), p.method, params, opts["timeout"], done)
    except MCPError as exc:  # the server is gone: answered as the task path would
        done(exc)
        return True
    att.routes[route] = call
    return True


__all__ = ["CANCELLED", "forward_soon"]
