"""Strict parsing of task replies into client value objects.

The wire models in :mod:`chit.tasks.wire` are deliberately lenient (servers share them);
a client keeping receipts must refuse replies it cannot trust, so everything here
raises :class:`ProtocolViolation` on: a non-object reply, a wrong field type, an unknown
status, a date that is not ISO 8601, a negative TTL or poll interval, a task id that
differs from the one asked about, or a field far larger than any sane server sends.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from mcp_types import CallToolResult, InputRequest, InputRequests
from pydantic import TypeAdapter, ValidationError

from chit.tasks import wire
from chit.tasks.client.errors import ProtocolViolation, classify
from chit.tasks.client.models import TaskHandle, TaskSnapshot

MAX_TASK_ID_CHARS = 1024
"""Task ids are opaque but short; a megabyte "id" is an attack or a bug."""
MAX_STATUS_MESSAGE_CHARS = 64 * 1024
"""A status line is for humans; anything longer is refused rather than stored."""

_INPUT_REQUESTS: TypeAdapter[InputRequests] = TypeAdapter(InputRequests)


def _violation(method: str, why: str) -> ProtocolViolation:
    return ProtocolViolation(f"malformed reply: {why}", method=method)


def as_object(raw: object, method: str) -> dict[str, Any]:
    """Return ``raw`` if it is a JSON object, else raise :class:`ProtocolViolation`."""
    if not isinstance(raw, dict):
        raise _violation(method, f"expected an object, got {type(raw).__name__}")
    return raw


def parse_time(value: str, method: str, name: str) -> datetime:
    """Parse an ISO 8601 timestamp; a naive one is taken as UTC."""
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise _violation(method, f"{name} is not an ISO 8601 timestamp") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _checked_snapshot(
    task: wire.Task2025 | wire.Task2026,
    generation: wire.Generation,
    ttl: int | None,
    poll: int | None,
    method: str,
    expected_id: str | None,
) -> TaskSnapshot:
    """Check the fields every task object has; return them as a snapshot."""
    if not task.task_id or len(task.task_id) > MAX_TASK_ID_CHARS:
        raise _violation(method, "taskId is empty or too long")
    if expected_id is not None and task.task_id != expected_id:
        raise _violation(method, "taskId differs from the one requested")
    if task.status_message is not None and len(task.status_message) > MAX_STATUS_MESSAGE_CHARS:
        raise _violation(method, "statusMessage is too long")
    if ttl is not None and ttl < 0:
        raise _violation(method, "ttl is negative")
    if poll is not None and poll < 0:
        raise _violation(method, "poll interval is negative")
    return TaskSnapshot(
        generation=generation,
        task_id=task.task_id,
        status=task.status,
        status_message=task.status_message,
        created_at=parse_time(task.created_at, method, "createdAt"),
        updated_at=parse_time(task.last_updated_at, method, "lastUpdatedAt"),
        ttl_ms=ttl,
        poll_interval_ms=poll,
    )


def _validate(model: type[wire.WireModel], raw: dict[str, Any], method: str) -> Any:
    try:
        # strict: "5" is not a poll interval and 1 is not a status message.
        return model.model_validate(raw, strict=True)
    except ValidationError as exc:
        raise classify(exc, method) from exc


def parse_task_2025(
    raw: object, method: str, expected_id: str | None = None, *, seen: frozenset[str] = frozenset()
) -> TaskSnapshot:
    """Parse a 2025 ``Task`` (``tasks/get`` / ``tasks/cancel`` result or notification)."""
    del seen  # 2025 has no input requests in task objects; kept for a uniform signature
    task: wire.Task2025 = _validate(wire.Task2025, as_object(raw, method), method)
    return _checked_snapshot(
        task, wire.PROTOCOL_2025, task.ttl, task.poll_interval, method, expected_id
    )


def parse_create_2025(raw: object, method: str = "tools/call") -> TaskHandle:
    """Parse the nested 2025 ``CreateTaskResult`` (``{"task": {...}, "_meta"?}``)."""
    obj = as_object(raw, method)
    snap = parse_task_2025(obj.get("task"), method)
    return _handle(snap, _immediate(obj.get("_meta")))


def parse_detailed_2026(
    raw: object, method: str, expected_id: str | None = None, *, seen: frozenset[str] = frozenset()
) -> TaskSnapshot:
    """Parse a 2026 ``DetailedTask`` (``tasks/get`` result or ``notifications/tasks``).

    Args:
        raw: The reply object.
        method: The method (for error reporting).
        expected_id: The task id asked about; a different id is a violation.
        seen: Input-request keys the caller already saw or answered (for dedupe).
    """
    obj = as_object(raw, method)
    task: wire.DetailedTask2026 = _validate(wire.DetailedTask2026, obj, method)
    base = _checked_snapshot(
        task, wire.PROTOCOL_2026, task.ttl_ms, task.poll_interval_ms, method, expected_id
    )
    inputs: dict[str, InputRequest] = {}
    result: CallToolResult | None = None
    if task.status == "input_required" and task.input_requests:
        try:
            inputs = dict(_INPUT_REQUESTS.validate_python(task.input_requests, by_name=False))
        except ValidationError as exc:
            raise classify(exc, method) from exc
    if task.status == "completed":
        if task.result is None:
            raise _violation(method, "completed task without result")
        result = parse_call_result(task.result, method)
    if task.status == "failed" and task.error is None:
        raise _violation(method, "failed task without error")
    return replace(
        base,
        input_requests=inputs,
        new_input_keys=frozenset(inputs) - seen,
        result=result,
        error=task.error if task.status == "failed" else None,
    )


def parse_create_2026(raw: object, method: str = "tools/call") -> TaskHandle:
    """Parse the flat 2026 ``CreateTaskResult`` (``resultType: "task"``)."""
    obj = as_object(raw, method)
    if obj.get("resultType") != "task":
        raise _violation(method, "create reply without resultType 'task'")
    body = {k: v for k, v in obj.items() if k not in ("resultType", "_meta")}
    task: wire.Task2026 = _validate(wire.Task2026, body, method)
    snap = _checked_snapshot(
        task, wire.PROTOCOL_2026, task.ttl_ms, task.poll_interval_ms, method, None
    )
    return _handle(snap, _immediate(obj.get("_meta")))


def _immediate(meta: object) -> str | None:
    if isinstance(meta, dict):
        text = meta.get(wire.META_MODEL_IMMEDIATE_RESPONSE)
        if isinstance(text, str):
            return text
    return None


def _handle(snap: TaskSnapshot, immediate: str | None) -> TaskHandle:
    return TaskHandle(
        generation=snap.generation,
        task_id=snap.task_id,
        status=snap.status,
        status_message=snap.status_message,
        created_at=snap.created_at,
        updated_at=snap.updated_at,
        ttl_ms=snap.ttl_ms,
        poll_interval_ms=snap.poll_interval_ms,
        model_immediate_response=immediate,
    )


def parse_call_result(raw: object, method: str) -> CallToolResult:
    """Validate a ``CallToolResult`` (e.g. a 2025 ``tasks/result`` payload)."""
    obj = as_object(raw, method)
    try:
        return CallToolResult.model_validate(obj, by_name=False)
    except ValidationError as exc:
        raise classify(exc, method) from exc


__all__ = [
    "MAX_STATUS_MESSAGE_CHARS",
    "MAX_TASK_ID_CHARS",
    "as_object",
    "parse_call_result",
    "parse_create_2025",
    "parse_create_2026",
    "parse_detailed_2026",
    "parse_task_2025",
    "parse_time",
]
