"""The control socket's protocol: JSON-RPC 2.0, one JSON object per line.

Both ends import this module: the frame reader and writer, the protocol version, every
method with its parameter model, result type and client-side timeout, and the mapping
of chit's errors onto JSON-RPC errors and back (the exit code travels in ``data``).

Framing: compact JSON never contains a raw newline, so a frame is one line. A frame
larger than :data:`MAX_FRAME` ends the connection (a peer that sends one is broken or
hostile). Events are JSON-RPC notifications ``{"method": "event", "params":
{"subscription": ID, "event": {...}}}``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from chit.engine.models import (
    EngineEvent,
    ProtocolMessage,
    ReconcileSummary,
    ServerStatus,
    ToolsInfo,
)
from chit.errors import ChitError, Conflict, ExitCode, NotFound, UsageError
from chit.receipts import Receipt
from chit.receipts.schemas import deferred_adapter

PROTOCOL_VERSION = 1
"""Bumped on any incompatible change of a method, a model or the framing."""

MAX_FRAME = 8 * 1024 * 1024
"""Largest frame either end accepts (bytes, newline excluded)."""

# JSON-RPC error codes: the standard ones, and chit's own for a ChitError.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
CHIT_ERROR = -32000
HELLO_REQUIRED = -32001


class _Params(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


# --------------------------------------------------------------------------- handshake


class HelloParams(_Params):
    """The first request on every connection."""

    protocol: int
    chit_version: str
    client: str = "cli"


class HelloResult(_Params):
    """Who answered: the daemon's protocol, version, process and home."""

    protocol: int
    chit_version: str
    pid: int
    home: str
    socket: str
    started_at: str
    cursor: int


class DaemonStatus(_Params):
    """``chit daemon status``: the process, its clients and its server sessions."""

    pid: int
    home: str
    socket: str
    started_at: str
    chit_version: str
    protocol: int
    clients: int
    reconciling: bool
    log_path: str
    servers: tuple[ServerStatus, ...] = ()


# --------------------------------------------------------------------------- methods


class CallParams(_Params):
    """``call``."""

    server: str
    tool: str
    arguments: dict[str, Any] | None = None
    purpose: str | None = None
    work_ref: str | None = None
    ttl_ms: int | None = None
    accept_if: str | None = None


class AnswerParams(_Params):
    """``answer``."""

    receipt_id: str
    key: str | None = None
    content: dict[str, Any] | None = None
    decline: bool = False
    cancel: bool = False


class ReceiptParams(_Params):
    """``cancel``, ``receipt``."""

    receipt_id: str


class DecideParams(_Params):
    """``accept``, ``reject``."""

    receipt_id: str
    why: str | None = None


class ToolsParams(_Params):
    """``tools``."""

    server: str
    timeout: float | None = Field(default=None, gt=0)


class RetryParams(_Params):
    """``intent.retry``."""

    request_key: str
    arguments: dict[str, Any] | None = None
    ttl_ms: int | None = None
    accept_if: str | None = None


class IntentParams(_Params):
    """``intent.abandon``."""

    request_key: str


class SubscribeParams(_Params):
    """``events.subscribe``: one receipt, or everything; replay after ``since``.

    The client names the subscription, so it is ready for events that overtake the
    reply; the reply comes once the subscription is live.
    """

    subscription: str = Field(min_length=1, max_length=64)
    receipt_id: str | None = None
    since: int | None = None


class SubscribeResult(_Params):
    """The subscription is live; ``receipt_id`` is the full id a prefix matched."""

    receipt_id: str | None = None


class UnsubscribeParams(_Params):
    """``events.unsubscribe``."""

    subscription: str


class NoParams(_Params):
    """Methods without parameters."""


class ProtocolLogParams(_Params):
    """``protocol.log``."""

    server: str
    limit: int = Field(default=100, ge=1, le=1000)


class EventParams(_Params):
    """The params of an ``event`` notification."""

    subscription: str
    event: EngineEvent


class Method(BaseModel):
    """One method: its name, parameters, result and how long a client waits for it."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, defer_build=True)

    name: str
    params: type[_Params]
    result: Any
    timeout_s: float


def _method(name: str, params: type[_Params], result: Any, timeout_s: float) -> Method:
    # Constructed, not validated: these are constants, and validating them would build
    # Method's schema (and load pydantic's plugins) in every client at import.
    return Method.model_construct(
        name=name, params=params, result=deferred_adapter(result), timeout_s=float(timeout_s)
    )


_LONG = 3700.0  # a synchronous tool may answer as late as the engine's result timeout
METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        _method("hello", HelloParams, HelloResult, 10),
        _method("call", CallParams, Receipt, _LONG),
        _method("answer", AnswerParams, Receipt, 900),
        _method("cancel", ReceiptParams, Receipt, 300),
        _method("accept", DecideParams, Receipt, 60),
        _method("reject", DecideParams, Receipt, 60),
        _method("reopen", ReceiptParams, Receipt, 60),
        _method("protocol.log", ProtocolLogParams, list[ProtocolMessage], 30),
        _method("receipt", ReceiptParams, Receipt, 60),
        _method("tools", ToolsParams, ToolsInfo, 120),
        _method("servers", NoParams, list[ServerStatus], 60),
        _method("reconcile", NoParams, ReconcileSummary, 900),
        _method("intent.retry", RetryParams, Receipt, _LONG),
        _method("intent.abandon", IntentParams, None, 60),
        _method("events.subscribe", SubscribeParams, SubscribeResult, 60),
        _method("events.unsubscribe", UnsubscribeParams, None, 30),
        _method("daemon.status", NoParams, DaemonStatus, 30),
        _method("daemon.stop", NoParams, None, 30),
    )
}
"""Every method the daemon serves (a future ``mcp.forward`` joins here: docs/daemon.md)."""


# --------------------------------------------------------------------------- frames


class Frame(BaseModel):
    """Any JSON-RPC 2.0 message (request, notification, response), loosely typed."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    jsonrpc: Literal["2.0"] = "2.0"
    id: int | str | None = None
    method: str | None = None
    params: dict[str, Any] | None = None
    result: Any = None
    error: dict[str, Any] | None = None


def encode(message: dict[str, Any]) -> bytes:
    """One frame: compact JSON and a newline.

    Raises:
        ValueError: the frame is larger than :data:`MAX_FRAME`.
    """
    data = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if len(data) > MAX_FRAME:
        raise ValueError(f"frame of {len(data)} bytes exceeds the {MAX_FRAME}-byte limit")
    return data + b"\n"


def decode(line: bytes) -> Frame:
    """Parse one frame.

    Raises:
        ValueError: not JSON, or not a JSON-RPC 2.0 object.
    """
    try:
        raw = json.loads(line)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    except RecursionError:  # '[' * 1_000_000 fits in a frame; it must not kill the reader
        raise ValueError("not JSON: nested too deeply") from None
    if not isinstance(raw, dict):
        raise ValueError("a frame must be a JSON object")
    if _plain(raw):
        # Already what validation would give (every proxied call crosses two decodes).
        return Frame.model_construct(**raw)
    return Frame.model_validate(raw)


_FIELDS = frozenset({"jsonrpc", "id", "method", "params", "result", "error"})


def _plain(raw: dict[str, Any]) -> bool:
    """Whether ``raw``'s fields have exactly the types :class:`Frame` declares."""
    rid = raw.get("id")
    return (
        raw.keys() <= _FIELDS
        and raw.get("jsonrpc", "2.0") == "2.0"
        and (rid is None or (type(rid) is int) or isinstance(rid, str))
        and isinstance(raw.get("method", ""), str | None)
        and isinstance(raw.get("params"), dict | None)
        and isinstance(raw.get("error"), dict | None)
    )


def request(id_: int, method: str, params: BaseModel) -> dict[str, Any]:
    """A request frame."""
    return {
        "jsonrpc": "2.0",
        "id": id_,
        "method": method,
        "params": params.model_dump(mode="json", exclude_defaults=True),
    }


class Raw:
    """A handler's result already in its JSON form: sent as it is, not serialised again.

    ``chit proxy``'s forwarded answers are the server's JSON, parsed once; walking them
    through the method's result model again was measurable on every proxied call.
    """

    __slots__ = ("body",)

    def __init__(self, body: Any) -> None:
        """Send ``body`` (JSON-ready: dicts, lists, strings, numbers, None)."""
        self.body = body


def result(id_: int | str | None, method: Method, value: Any) -> dict[str, Any]:
    """A successful response frame."""
    body = value.body if isinstance(value, Raw) else method.result.dump_python(value, mode="json")
    return {"jsonrpc": "2.0", "id": id_, "result": body}


def error(id_: int | str | None, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """An error response frame."""
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": id_, "error": body}


def chit_error(id_: int | str | None, exc: ChitError) -> dict[str, Any]:
    """A ChitError as an error response; the exit code travels along."""
    data: dict[str, Any] = {"exit_code": int(exc.exit_code), "type": type(exc).__name__}
    if exc.details:
        data["details"] = list(exc.details)
    return error(id_, CHIT_ERROR, exc.message, data)


_BY_CODE: dict[int, type[ChitError]] = {
    int(ExitCode.USAGE): UsageError,
    int(ExitCode.NOT_FOUND): NotFound,
    int(ExitCode.CONFLICT): Conflict,
}


def raise_error(body: dict[str, Any]) -> None:
    """Raise the ChitError an error response stands for (same message, same exit code)."""
    message = str(body.get("message") or "the daemon refused the request")
    data = body.get("data") if isinstance(body.get("data"), dict) else {}
    assert isinstance(data, dict)
    code = data.get("exit_code")
    exit_code = ExitCode(code) if code in {int(c) for c in ExitCode} else ExitCode.INTERNAL
    cls = _BY_CODE.get(int(exit_code), ChitError)
    listed = data.get("details")
    details = [str(d) for d in listed[:50]] if isinstance(listed, list) else []
    raise cls(message, exit_code=exit_code, details=details)
