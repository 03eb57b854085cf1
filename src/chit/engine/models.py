"""The engine's typed vocabulary, shared by both ends of the control socket.

Every value that crosses the :class:`chit.engine.Engine` boundary is one of these
pydantic models (or a ``Receipt`` / ``Intent`` from :mod:`chit.receipts`): the in-process
engine returns them as objects, the daemon sends them as JSON and the socket client
validates them back into the same classes. One definition, so the two ends cannot drift.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from chit.receipts import HostInfo, Intent, LifecycleState, Receipt, RetrievalCondition


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


# --------------------------------------------------------------------------- results


class ToolInfo(_Model):
    """One tool of a server: its text, its input schema and its task support."""

    name: str
    title: str | None = None
    description: str | None = None
    input_schema: dict[str, Any] = Field(default_factory=dict)
    task_support: str = "forbidden"


class ToolsInfo(_Model):
    """What a server said about itself and its tools (``chit tools SERVER``).

    Attributes:
        extension_declared: for servers on a 2026 protocol version, whether they declare
            the ``io.modelcontextprotocol/tasks`` extension; None on the 2025 handshake.
    """

    server: str
    server_name: str | None = None
    server_version: str | None = None
    protocol_version: str
    generation: str | None = None
    extension_declared: bool | None = None
    tasks_detail: str = ""
    tools: tuple[ToolInfo, ...] = ()

    def tool(self, name: str) -> ToolInfo | None:
        """The tool called ``name``, or None."""
        return next((t for t in self.tools if t.name == name), None)


class ServerStatus(_Model):
    """One registered server as the engine sees it right now.

    Attributes:
        connected: a session is open (for stdio: the child process runs).
        session_started_at: when the current session was opened.
        failures: consecutive failed connection attempts.
        last_error: why the last attempt failed (None after a success).
        retry_in_s: seconds until the next connection attempt is allowed (0: now).
        live_receipts: receipts on this server that are not settled yet.
        pid: the stdio child's process id (None for HTTP or when not running).
        log_path: where the stdio server's stderr goes (None for HTTP).
        hosts: the agent hosts connected to it through ``chit proxy`` right now.
    """

    name: str
    transport: Literal["stdio", "http"]
    connected: bool = False
    session_started_at: datetime | None = None
    failures: int = 0
    last_error: str | None = None
    retry_in_s: float = 0.0
    live_receipts: int = 0
    pid: int | None = None
    log_path: str | None = None
    hosts: tuple[HostInfo, ...] = ()


class ProtocolMessage(_Model):
    """One JSON-RPC message chit exchanged with a server (redacted: no handle, no secret).

    Attributes:
        at: when chit sent or received it.
        direction: ``sent`` or ``received``.
        kind: ``request``, ``notification``, ``response``, ``error`` or ``transport``.
        method: the JSON-RPC method, for requests and notifications.
        id: the JSON-RPC id, for requests, responses and errors.
        text: the message as compact JSON (cut at a few thousand characters).
    """

    at: datetime
    direction: Literal["sent", "received"]
    kind: str
    method: str | None = None
    id: str | None = None
    text: str


class ReconcileSummary(_Model):
    """What one reconciliation pass did (``chit reconcile --once``).

    ``viewer`` is True when another process holds the reconciler lease (``holder`` says
    who) and nothing was done.
    """

    viewer: bool
    holder: str | None = None
    checked: int = 0
    intents_unknown: int = 0
    by_state: dict[str, int] = Field(default_factory=dict)
    problems: int = 0


# --------------------------------------------------------------------------- events


class ReceiptUpdate(_Model):
    """A committed change of one receipt, with what it means for a person.

    Attributes:
        cursor: the change cursor after this change (the receipt's change number);
            subscribe again with ``since=cursor`` to miss nothing.
        receipt: the receipt as stored after the change.
        changes: the fields that changed (empty when replayed after a reconnect).
        new: the receipt did not exist before (or is seen for the first time).
        input_required: keys of input requests that newly wait for a person.
        ended: the lifecycle state it has just reached, when it just became terminal.
        problem: the retrieval condition it just fell into (unreachable, vanished, ...).
        near_expiry: it just came within a minute (or a tenth of its TTL) of expiring.
    """

    type: Literal["receipt"] = "receipt"
    cursor: int
    receipt: Receipt
    changes: tuple[str, ...] = ()
    new: bool = False
    input_required: tuple[str, ...] = ()
    ended: LifecycleState | None = None
    problem: RetrievalCondition | None = None
    near_expiry: bool = False


class IntentUpdate(_Model):
    """A call whose outcome became unknown (crash or lost reply): retry or abandon it."""

    type: Literal["intent"] = "intent"
    intent: Intent


class ServerUpdate(_Model):
    """A server session opened, closed, failed or was stopped while idle."""

    type: Literal["server"] = "server"
    status: ServerStatus
    why: str = ""


class Resync(_Model):
    """Events were lost (the subscriber fell behind): re-read, then go on from ``cursor``."""

    type: Literal["resync"] = "resync"
    cursor: int
    reason: str


EngineEvent = Annotated[
    ReceiptUpdate | IntentUpdate | ServerUpdate | Resync, Field(discriminator="type")
]
"""Everything an event stream of the engine delivers."""
