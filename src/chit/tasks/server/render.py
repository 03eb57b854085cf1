"""Render stored task rows as the wire shapes of each generation."""

from __future__ import annotations

from typing import Any

from chit.tasks.clock import from_ms, iso
from chit.tasks.server.store import TaskRecord
from chit.tasks.wire import (
    CreateTaskResult2025,
    CreateTaskResult2026,
    ErrorObject,
    GetTaskResult2026,
    Task2025,
    Task2026,
)


def task_2025(record: TaskRecord) -> Task2025:
    """Return the 2025-11-25 ``Task`` for ``record``."""
    return Task2025(
        task_id=record.id,
        status=record.status,
        status_message=record.status_message,
        created_at=iso(from_ms(record.created_at_ms)),
        last_updated_at=iso(from_ms(record.updated_at_ms)),
        ttl=record.ttl_ms,
        poll_interval=record.poll_interval_ms,
    )


def task_2026(record: TaskRecord) -> Task2026:
    """Return the 2026 extension ``Task`` for ``record``."""
    return Task2026(
        task_id=record.id,
        status=record.status,
        status_message=record.status_message,
        created_at=iso(from_ms(record.created_at_ms)),
        last_updated_at=iso(from_ms(record.updated_at_ms)),
        ttl_ms=record.ttl_ms,
        poll_interval_ms=record.poll_interval_ms,
    )


def create_result_2025(record: TaskRecord, immediate: str | None = None) -> dict[str, Any]:
    """Return the nested 2025 ``CreateTaskResult`` as a wire dict."""
    meta = {"io.modelcontextprotocol/model-immediate-response": immediate} if immediate else None
    result = CreateTaskResult2025(task=task_2025(record), meta=meta).wire()
    result["task"].setdefault("ttl", None)
    return result


def create_result_2026(record: TaskRecord) -> CreateTaskResult2026:
    """Return the flat 2026 ``CreateTaskResult`` (``resultType: "task"``)."""
    return CreateTaskResult2026(**task_2026(record).model_dump())


def detailed_2026(record: TaskRecord) -> GetTaskResult2026:
    """Return the 2026 ``tasks/get`` result: the Task plus inline data for its status."""
    detailed = GetTaskResult2026(**task_2026(record).model_dump())
    if record.status == "input_required":
        detailed.input_requests = record.pending_inputs
    elif record.status == "completed":
        detailed.result = record.result or {"content": []}
    elif record.status == "failed":
        if record.error is not None:
            detailed.error = ErrorObject.model_validate(record.error)
        elif record.result is not None:  # a 2025-created task that failed by tool error
            detailed.error = ErrorObject(code=-32603, message="Tool reported an error")
    return detailed
