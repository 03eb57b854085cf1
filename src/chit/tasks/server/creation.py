"""Task creation: validate, store durably (deduplicating keyed retries), start."""

from __future__ import annotations

import json
import secrets
from typing import TYPE_CHECKING, Any

from chit.tasks.server.errors import TaskError, args_digest
from chit.tasks.server.record import TaskRecord
from chit.tasks.server.tools import TaskTool
from chit.tasks.wire import INVALID_PARAMS

if TYPE_CHECKING:
    from chit.tasks.server.runtime import TaskRuntime


def clamp_ttl(runtime: TaskRuntime, requested: int | None) -> int:
    """Clamp a requested TTL to the runtime's [min, max]; ``None`` gives the default."""
    if requested is None:
        return runtime.default_ttl_ms
    return max(runtime.min_ttl_ms, min(runtime.max_ttl_ms, int(requested)))


def check_size(limit: int, arguments: dict[str, Any] | None) -> None:
    """Reject arguments whose JSON is larger than ``limit`` (before anything is stored)."""
    size = len(json.dumps(arguments or {}, separators=(",", ":")).encode())
    if size > limit:
        raise TaskError(
            code=INVALID_PARAMS, message=f"Arguments too large: {size} bytes (limit {limit})"
        )


async def create_task(
    runtime: TaskRuntime,
    tool: TaskTool,
    arguments: dict[str, Any] | None,
    *,
    principal: str,
    protocol: str,
    ttl_ms: int | None = None,
    request_key: str | None = None,
    progress_token: str | int | None = None,
    gathered: dict[str, dict[str, Any]] | None = None,
    session: Any = None,
) -> TaskRecord:
    """The body of :meth:`TaskRuntime.create <chit.tasks.server.runtime.TaskRuntime.create>`."""
    check_size(runtime.max_argument_bytes, arguments)
    try:
        args = tool.validate(arguments)
    except Exception as exc:
        raise TaskError(code=INVALID_PARAMS, message=str(exc)) from exc
    now = runtime.now_ms()
    ttl = clamp_ttl(runtime, ttl_ms)
    record = TaskRecord(
        id=secrets.token_urlsafe(24),
        principal=principal,
        tool=tool.name,
        args=args,
        args_digest=args_digest(tool.name, args),
        request_key=request_key,
        status="working",
        status_message="Queued",
        created_at_ms=now,
        updated_at_ms=now,
        ttl_ms=ttl,
        expires_at_ms=now + ttl,
        poll_interval_ms=runtime.poll_interval_ms,
        protocol=protocol,
        input_responses=dict(gathered or {}),
        resumable=tool.resumable,
        progress_token=progress_token,
        owner_id=runtime.owner_id,
    )
    if request_key is None:
        await runtime.write(runtime.store.purge_expired, now)
        await runtime.write(runtime.store.insert, record)
    else:
        existing = await runtime.write(runtime.store.insert_keyed, record)
        if existing is not None:
            return await _retry(runtime, existing, record)
    runtime.notifier.bind(record.id, session, progress_token)
    runtime.start(record.id)
    return record


async def _retry(runtime: TaskRuntime, existing: TaskRecord, attempt: TaskRecord) -> TaskRecord:
    """Answer a keyed retry with the earlier task, renewing its visibility if expired."""
    if existing.args_digest != attempt.args_digest:
        raise TaskError(
            code=INVALID_PARAMS,
            message=(
                f"Request key already used for a different call of tool {attempt.tool!r}: "
                "the arguments differ; use a new key for a new request"
            ),
        )
    now = attempt.created_at_ms
    if existing.expires_at_ms <= now:
        # Renew the polling window; report the lifetime from the original creation.
        expires = now + attempt.ttl_ms
        ttl = expires - existing.created_at_ms
        await runtime.write(runtime.store.update, existing.id, expires_at_ms=expires, ttl_ms=ttl)
        existing.expires_at_ms, existing.ttl_ms = expires, ttl
    return existing
