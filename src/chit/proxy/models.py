"""What ``chit proxy`` and the engine that holds the server sessions say to each other.

The same models serve both ways of running the proxy: in process (``--no-daemon``,
tests) as Python values, and over the daemon's control socket as JSON (the ``proxy.*``
methods of :mod:`chit.daemon.proxy_methods`), validated into these classes on both
ends.

Vocabulary: an *attachment* is one proxy process serving one host for one server; a
*route* is one of the host's requests the proxy forwarded, named by the proxy, so the
server's requests and progress for it find their way back to that host.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from chit.receipts import HostInfo, Receipt

META_WORK = "io.github.chit/work"
"""``_meta`` key of a ``tools/call`` naming the sidecar work item the call belongs to."""

Prompts = Literal["host", "chit", "both"]
HostCancel = Literal["confirm", "cancel"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class HostCapabilities(_Model):
    """What the host can answer when the server asks (from its ``initialize``/envelope)."""

    elicitation: bool = False
    sampling: bool = False
    roots: bool = False


class AttachParams(_Model):
    """``proxy.attach``: a proxy starts serving ``host`` for ``server``."""

    server: str
    host: HostInfo
    capabilities: HostCapabilities = HostCapabilities()


class HostParams(_Model):
    """``proxy.host``: who the host is, once it said so (``initialize`` / envelope)."""

    host: HostInfo
    capabilities: HostCapabilities = HostCapabilities()


class UpstreamInfo(_Model):
    """The server as the engine's session negotiated it, and its proxy settings.

    Attributes:
        protocol_version: what the engine's session to the server negotiated.
        generation: the task generation of that session (None: no tasks).
        server_info: the server's ``Implementation`` (wire names).
        capabilities: the server's ``ServerCapabilities`` (wire names).
        instructions: the server's instructions, if any.
        task_support: tool name → ``required``/``optional`` for tools that can become
            tasks (2025 servers: their ``execution.taskSupport``; 2026 servers with the
            extension: every tool, ``optional``, since the server decides per call).
    """

    server: str
    protocol_version: str
    generation: str | None = None
    server_info: dict[str, Any] = Field(default_factory=dict)
    capabilities: dict[str, Any] = Field(default_factory=dict)
    instructions: str | None = None
    task_support: dict[str, str] = Field(default_factory=dict)
    prompts: Prompts = "host"
    host_cancel: HostCancel = "confirm"


class ForwardParams(_Model):
    """``proxy.request``: send the host's request to the server on the engine's session.

    ``declare_extension`` says whether the host declared the 2026 tasks extension (a
    request of a host that did not must not be answered with a task).
    """

    server: str
    method: str
    params: dict[str, Any] | None = None
    route: str
    progress: bool = False
    declare_extension: bool = False


class Answer(_Model):
    """The server's JSON-RPC answer to a forwarded request: a result or an error."""

    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class NotifyParams(_Model):
    """``proxy.notify``: a host's notification for the server."""

    server: str
    method: str
    params: dict[str, Any] | None = None


class RouteParams(_Model):
    """``proxy.cancel``: the host gave up a forwarded request (or a held call)."""

    route: str


class StartParams(_Model):
    """``proxy.start``: a ``tools/call`` that may become a task, intent first.

    Attributes:
        params: the host's ``tools/call`` params (name, arguments, ``_meta``, and on a
            2026 multi-round-trip retry ``inputResponses``/``requestState``).
        ttl_ms: the TTL the host asked for (2025 ``task.ttl``), if any.
        declare_extension: the host declared the 2026 tasks extension.
        route: names the call, for input and progress while it is being created.
    """

    server: str
    params: dict[str, Any]
    ttl_ms: int | None = None
    declare_extension: bool = True
    route: str
    host: HostInfo | None = None


class StartReply(_Model):
    """What became of a started call.

    ``task``: the server made it a task; ``receipt`` is chit's receipt of it.
    ``sync``: the server answered at once; ``result`` is the answer (a receipt too).
    ``input_required``: a 2026 server wants input before creating anything; ``result``
    is its ``InputRequiredResult`` (the host answers and calls again).
    ``error``: the server refused with a JSON-RPC ``error``.
    """

    kind: Literal["task", "sync", "input_required", "error"]
    receipt: Receipt | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class ReceiptParams(_Model):
    """``proxy.outcome``: one receipt."""

    receipt_id: str


class HostAnswerParams(_Model):
    """``proxy.answer``: the host's reply to one of the receipt's prompts, as it gave it."""

    receipt_id: str
    key: str
    reply: dict[str, Any]


class QuestionParams(_Model):
    """``proxy.question``: one of the receipt's questions (by its stored key)."""

    receipt_id: str
    key: str


class ServerRequest(_Model):
    """``proxy.question``'s result: the server's own request behind a question, redacted
    (``chit.proxy.sampled``); both None when it is not at hand — the host is then asked
    from chit's stored copy."""

    method: str | None = None
    params: dict[str, Any] | None = None


class GaveUpParams(_Model):
    """``proxy.gave_up``: the host stopped waiting for a call that is a task."""

    receipt_id: str
    why: str = Field(max_length=200)


class InputParams(_Model):
    """Engine → proxy request ``proxy.input``: the server asks the host, for ``route``."""

    route: str
    method: str
    params: dict[str, Any] | None = None


class ProgressParams(_Model):
    """Engine → proxy notification ``proxy.progress`` for a forwarded request."""

    route: str
    progress: float
    total: float | None = None
    message: str | None = None


class NoticeParams(_Model):
    """Engine → proxy notification ``proxy.notice``: a server notification for the host."""

    method: str
    params: dict[str, Any] | None = None


class ConnectedHost(_Model):
    """A host connected through ``chit proxy`` right now (for status screens)."""

    server: str
    host: HostInfo
    since: str
    pid: int | None = None
