"""Typed task-client errors and the one function that classifies raw failures.

Every failure the adapter raises is a :class:`TaskError` whose ``failure_class`` tells the
reconciler what it may do next:

* ``transient`` - the connection closed (-32000) or a reply did not arrive in time
  (-32001). The *outcome is unknown*: the request may have been applied. Reconcile with
  ``tasks/get`` (or retry a create with the same request key) rather than resend blindly.
* ``permanent`` - the server refused the call (-32601 on ``tools/call``, -32602 on create,
  any other error on a create). Retrying the same request will not help.
* ``lost`` - the server does not know the task id (-32602 on ``tasks/get|result|cancel|
  update``): deleted, expired, or never ours.
* ``incompatible`` - the server does not speak the task protocol we use (-32021, or
  -32601 on ``tasks/*``).
* ``protocol_violation`` - the server answered something that is not a valid reply
  (pydantic ``ValidationError``, wrong shapes, bad enums, unparsable dates).
"""

from __future__ import annotations

from typing import ClassVar, Literal

import anyio
import httpx2
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import ValidationError

from chit.tasks import wire

FailureClass = Literal["transient", "permanent", "lost", "incompatible", "protocol_violation"]
"""The reconciler-facing category of a failure."""


class TaskError(Exception):
    """Base of every task-client failure.

    Attributes:
        failure_class: What the caller may do next (see the module docstring).
        method: The JSON-RPC method that failed (``tools/call``, ``tasks/get``, ...).
        code: The JSON-RPC error code when the server (or the SDK) supplied one.
        data: The JSON-RPC error ``data`` member, if any.
    """

    failure_class: ClassVar[FailureClass]

    def __init__(
        self, message: str, *, method: str = "", code: int | None = None, data: object = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.method = method
        self.code = code
        self.data = data

    def __str__(self) -> str:
        where = f" [{self.method}]" if self.method else ""
        code = f" ({self.code})" if self.code is not None else ""
        return f"{self.failure_class}{where}{code}: {self.message}"


class TransientError(TaskError):
    """Connection closed or timed out; the request's outcome is unknown."""

    failure_class = "transient"


class PermanentError(TaskError):
    """The server refused the request; retrying the same request will not help."""

    failure_class = "permanent"


class LostError(TaskError):
    """The server does not know this task id (expired, deleted, or not ours)."""

    failure_class = "lost"


class IncompatibleError(TaskError):
    """The server does not speak the task protocol (or this operation of it)."""

    failure_class = "incompatible"


class ProtocolViolation(TaskError):
    """The server's reply is malformed (wrong shape, bad enum, bad date, ...)."""

    failure_class = "protocol_violation"


_TASK_ID_METHODS = frozenset(
    {wire.TASKS_GET, wire.TASKS_RESULT, wire.TASKS_CANCEL, wire.TASKS_UPDATE}
)


def classify(exc: BaseException, method: str) -> TaskError:
    """Map any exception raised while sending ``method`` to a typed :class:`TaskError`.

    Args:
        exc: The exception caught around the request.
        method: The JSON-RPC method that was being sent.

    Returns:
        The matching :class:`TaskError` subclass instance (``exc`` itself when it already
        is one), with ``exc`` as its ``__cause__``.
    """
    if isinstance(exc, TaskError):
        return exc
    err = _classify(exc, method)
    err.__cause__ = exc
    return err


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups: task groups wrap what failed."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _classify(exc: BaseException, method: str) -> TaskError:
    exc = _leaf(exc)
    if isinstance(exc, TaskError):
        return exc
    if isinstance(exc, MCPError):
        return _from_code(exc.code, exc.message, exc.data, method)
    if isinstance(exc, ValidationError):
        # Only the error count and first location: pydantic's full text echoes the input,
        # which may contain task ids or tool output we must not spread into logs.
        details = exc.errors()
        where = ".".join(str(p) for p in details[0]["loc"]) if details else "?"
        msg = f"malformed reply: {exc.error_count()} validation error(s), first at {where}"
        return ProtocolViolation(msg, method=method)
    if isinstance(exc, (ValueError, TypeError, KeyError)):
        return ProtocolViolation(f"malformed reply: {type(exc).__name__}", method=method)
    if isinstance(exc, TimeoutError):
        return TransientError("timed out", method=method, code=REQUEST_TIMEOUT)
    if isinstance(
        exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError)
    ):
        return TransientError(f"connection lost: {type(exc).__name__}", method=method)
    if isinstance(exc, httpx2.TransportError):
        # "All connection attempts failed", "Connection refused": the kind and httpx2's own
        # short text (never the request, which carries headers), one line, bounded.
        text = " ".join(str(exc).split())[:200]
        return TransientError(
            f"connection failed: {type(exc).__name__}" + (f": {text}" if text else ""),
            method=method,
        )
    # Anything else happened somewhere between us and the server: we cannot tell whether
    # the request was applied, which is exactly what "transient" means to the reconciler.
    return TransientError(f"unexpected failure: {type(exc).__name__}", method=method)


def _from_code(code: int, message: str, data: object, method: str) -> TaskError:
    cls: type[TaskError] = PermanentError
    if code in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
        cls = TransientError
    elif code == wire.MISSING_REQUIRED_CLIENT_CAPABILITY:
        cls = IncompatibleError
    elif code == wire.METHOD_NOT_FOUND:
        # On tools/call -32601 is a per-tool refusal (2025 taskSupport); on tasks/* it
        # means the whole task protocol is absent for the negotiated generation.
        if method.startswith("tasks/") or method == wire.SUBSCRIPTIONS_LISTEN:
            cls = IncompatibleError
    elif code == wire.INVALID_PARAMS and method in _TASK_ID_METHODS:
        cls = LostError
    return cls(message, method=method, code=code, data=data)


__all__ = [
    "FailureClass",
    "IncompatibleError",
    "LostError",
    "PermanentError",
    "ProtocolViolation",
    "TaskError",
    "TransientError",
    "classify",
]
