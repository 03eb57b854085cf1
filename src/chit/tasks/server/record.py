"""A stored task (:class:`TaskRecord`) and its row encoding, shared by both stores.

JSON-valued fields are stored as text columns (``*_json``) and booleans as integers, so
the same row layout serves SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

from chit.tasks.server.schema import TaskState


@dataclass
class TaskRecord:
    """One stored task (a row of ``tasks``); JSON columns are decoded."""

    id: str
    principal: str
    tool: str
    args: dict[str, Any]
    args_digest: str
    request_key: str | None
    status: str
    status_message: str | None
    created_at_ms: int
    updated_at_ms: int
    ttl_ms: int
    expires_at_ms: int
    poll_interval_ms: int
    protocol: str
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    input_responses: dict[str, dict[str, Any]] = field(default_factory=dict)
    cancel_requested: bool = False
    resumable: bool = False
    progress_token: str | int | None = None
    runs: int = 0
    owner_id: str | None = None
    """The runtime process running the task (``owners.owner_id``); ``None``: nobody."""

    @property
    def pending_inputs(self) -> dict[str, dict[str, Any]]:
        """Input requests that have no response yet."""
        return {k: v for k, v in self.input_requests.items() if k not in self.input_responses}


JSON_COLUMNS = {
    "args": "args_json",
    "result": "result_json",
    "error": "error_json",
    "input_requests": "input_requests_json",
    "input_responses": "input_responses_json",
    "progress_token": "progress_token_json",
}
BOOL_COLUMNS = {"cancel_requested", "resumable"}


def to_row(record: TaskRecord) -> dict[str, Any]:
    """Encode ``record`` as column values."""
    row: dict[str, Any] = {}
    for f in fields(record):
        value = getattr(record, f.name)
        if f.name in JSON_COLUMNS:
            row[JSON_COLUMNS[f.name]] = None if value is None else json.dumps(value)
        elif f.name in BOOL_COLUMNS:
            row[f.name] = int(bool(value))
        else:
            row[f.name] = value
    return row


def from_row(row: Any) -> TaskRecord:
    """Decode a row (``sqlite3.Row`` or a dict row) into a :class:`TaskRecord`."""
    values: dict[str, Any] = {}
    for f in fields(TaskRecord):
        if f.name in JSON_COLUMNS:
            raw = row[JSON_COLUMNS[f.name]]
            values[f.name] = None if raw is None else json.loads(raw)
        elif f.name in BOOL_COLUMNS:
            values[f.name] = bool(row[f.name])
        else:
            values[f.name] = row[f.name]
    values["input_requests"] = values["input_requests"] or {}
    values["input_responses"] = values["input_responses"] or {}
    return TaskRecord(**values)


def to_row_partial(changes: dict[str, Any]) -> dict[str, Any]:
    """Encode some ``TaskRecord`` fields (by name) as column values."""
    row: dict[str, Any] = {}
    for name, value in changes.items():
        if name in JSON_COLUMNS:
            row[JSON_COLUMNS[name]] = None if value is None else json.dumps(value)
        elif name in BOOL_COLUMNS:
            row[name] = int(bool(value))
        else:
            row[name] = value
    return row


def merge_answers(record: TaskRecord, responses: dict[str, dict[str, Any]]) -> bool:
    """Add the answers to ``record``'s *pending* input requests (others are ignored).

    Returns:
        True when ``record.input_responses`` changed (the caller stores it).
    """
    pending = record.pending_inputs
    accepted = {k: v for k, v in responses.items() if k in pending}
    if not accepted or record.status != "input_required":
        return False
    record.input_responses.update(accepted)
    return True


def task_state(row: Any) -> TaskState:
    """The polled columns of a ``states()`` row (id, status, cancel_requested, owner_id,
    input_responses_json)."""
    return TaskState(
        row["status"],
        bool(row["cancel_requested"]),
        row["owner_id"],
        len(json.loads(row["input_responses_json"] or "{}")),
    )
