"""The last JSON-RPC messages chit exchanged with each server (a bounded log, redacted).

The connection pool taps every server's transport (``chit.tasks.client.tap``) into one
:class:`ProtocolLog`: a ring of the last :data:`PER_SERVER` messages per server, kept as
the SDK's objects (no work per message beyond an append). They are rendered only when a
person asks (the TUI's protocol pane, lazygit's command log as the model), and redacted
then: every handle and configuration secret this process knows is replaced by its
marker (``task#<fingerprint>``), and any remaining ``taskId`` value is masked, so the log
never shows a handle even for a task chit has not sealed yet.
"""

from __future__ import annotations

import json
from collections import deque
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chit import clock
from chit.redaction import REGISTRY

PER_SERVER = 300
"""Messages kept per server (oldest dropped first)."""

TEXT_MAX = 4000
"""Characters of one message's JSON shown (the rest is cut with a note)."""

MASK = "task#(not sealed)"
"""What a ``taskId`` the vault has not fingerprinted yet is shown as."""


@dataclass(frozen=True, slots=True)
class _Logged:
    at: datetime
    direction: str
    message: Any


@dataclass(frozen=True)
class LoggedMessage:
    """One rendered message.

    Attributes:
        at: when chit sent or received it.
        direction: ``sent`` or ``received``.
        kind: ``request``, ``notification``, ``response``, ``error`` or ``transport``
            (a failure the transport reported instead of a message).
        method: the JSON-RPC method (requests and notifications).
        id: the JSON-RPC id (requests, responses, errors).
        text: the message as compact JSON, redacted, at most :data:`TEXT_MAX` characters.
    """

    at: datetime
    direction: str
    kind: str
    method: str | None
    id: str | None
    text: str


def _mask(value: Any) -> Any:
    """``value`` with every ``taskId`` string replaced (handles must never show)."""
    if isinstance(value, dict):
        return {
            k: (MASK if k == "taskId" and isinstance(v, str) and "#" not in v else _mask(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return value


def render(logged: _Logged) -> LoggedMessage:
    """One message as a person reads it (redacted; see the module docstring)."""
    message = logged.message
    if isinstance(message, Exception):
        text = REGISTRY.everything().text(f"{type(message).__name__}: {message}")
        return LoggedMessage(logged.at, logged.direction, "transport", None, None, text)
    body = getattr(message, "message", message)
    dump = getattr(body, "model_dump", None)
    data: Any
    if isinstance(body, dict):  # sent or received as JSON (chit.tasks.client.pipes)
        data = body
    else:
        data = dump(mode="json", by_alias=True, exclude_none=True) if callable(dump) else str(body)
    kind = "notification"
    if isinstance(data, dict):
        if "error" in data:
            kind = "error"
        elif "result" in data:
            kind = "response"
        elif "id" in data:
            kind = "request"
    method = data.get("method") if isinstance(data, dict) else None
    ident = data.get("id") if isinstance(data, dict) else None
    # Redact the text first (a handle may sit inside any string), then mask what is left.
    text = REGISTRY.everything().text(json.dumps(data, ensure_ascii=False))
    # A redaction marker may have broken the JSON: then the redacted text stands.
    with suppress(ValueError):
        text = json.dumps(_mask(json.loads(text)), ensure_ascii=False)
    if len(text) > TEXT_MAX:
        text = text[:TEXT_MAX] + f"… ({len(text) - TEXT_MAX} more characters)"
    return LoggedMessage(
        logged.at,
        logged.direction,
        kind,
        str(method) if method is not None else None,
        str(ident) if ident is not None else None,
        text,
    )


class ProtocolLog:
    """The message rings of every server (one event loop writes, any reader reads)."""

    def __init__(self, per_server: int = PER_SERVER) -> None:
        """Empty rings of ``per_server`` messages each."""
        self._per_server = per_server
        self._rings: dict[str, deque[_Logged]] = {}

    def tap(self, server: str) -> Any:
        """The observer to give ``server``'s transport (``chit.tasks.client.tap.Tap``)."""
        ring = self._rings.setdefault(server, deque(maxlen=self._per_server))

        def observe(direction: str, message: Any) -> None:
            ring.append(_Logged(clock.now(), direction, message))

        return observe

    def messages(self, server: str, limit: int = 100) -> list[LoggedMessage]:
        """The last ``limit`` messages of ``server``, oldest first, rendered and redacted."""
        ring = self._rings.get(server)
        if not ring:
            return []
        recent = list(ring)[-max(1, limit) :]
        return [render(logged) for logged in recent]
