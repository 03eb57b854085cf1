"""The ``chit.work/1`` contract: the sidecar's vocabulary, enums, limits and validators.

Every tool argument is validated here *before* anything is stored (seed 000: "ToolSpec
validates required parameters, enums, and access annotations before dispatch"). A
violation is a :class:`ContractError` whose reason names the contract, so a caller on an
older or newer helper sees a versioned contract failure instead of a quiet drop. The
executor re-validates stored payloads with the same functions, because an intent may
have been written by another helper version.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

CONTRACT: Final = "chit.work/1"

#: The one status vocabulary of a work record (``work_status``).
STATUSES: Final = ("planned", "in_progress", "blocked", "review", "done")

#: Anchor states (provisional → live → dead).
ANCHOR_STATES: Final = ("provisional", "live", "dead")

#: Intent states as stored.
INTENT_STATES: Final = ("pending", "retrying", "applied", "failed", "blocked")

#: Failure classes (seed 000: classify before choosing a retry count).
FAILURE_CLASSES: Final = ("transient", "permanent", "blocked", "applied")

KINDS: Final = ("start", "note", "status", "complete", "ask")

MAX_FIELD_BYTES: Final = 64 * 1024
MAX_CALL_BYTES: Final = 1024 * 1024
MAX_KEY_CHARS: Final = 256
MAX_TITLE_CHARS: Final = 500


class ContractError(ValueError):
    """Arguments (or a stored payload) that break ``chit.work/1``; always permanent."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"{CONTRACT}: {reason}")
        self.reason = f"{CONTRACT}: {reason}"


@dataclass(frozen=True)
class Field:
    """One argument: its JSON type, whether required, and an optional enum."""

    name: str
    required: bool = False
    enum: tuple[str, ...] | None = None
    max_chars: int | None = None
    kind: str = "string"  # "string" or "object"


_ITEM = Field("item_id", required=True, max_chars=MAX_KEY_CHARS)
_IDEM = Field("idempotency_key", max_chars=MAX_KEY_CHARS)

#: Each tool's arguments; unknown arguments are rejected as well.
TOOL_FIELDS: Final[dict[str, tuple[Field, ...]]] = {
    "work_start": (
        Field("task_key", required=True, max_chars=MAX_KEY_CHARS),
        Field("title", required=True, max_chars=MAX_TITLE_CHARS),
        Field("purpose"),
        _IDEM,
    ),
    "work_note": (_ITEM, Field("text", required=True), _IDEM),
    "work_status": (_ITEM, Field("status", required=True, enum=STATUSES), _IDEM),
    "work_complete": (_ITEM, Field("summary"), _IDEM),
    "work_inspect": (_ITEM,),
    "work_ask": (_ITEM, Field("question", required=True), Field("schema", kind="object")),
    "work_stats": (),
    # Receipts for hosts without tasks (need the Supervisor's gateway).
    "task_call": (
        Field("server", required=True, max_chars=MAX_KEY_CHARS),
        Field("tool", required=True, max_chars=MAX_KEY_CHARS),
        Field("arguments", required=True, kind="object"),
        Field("purpose", required=True, max_chars=MAX_TITLE_CHARS),
        Field("item_id", max_chars=MAX_KEY_CHARS),
    ),
    "receipt_status": (Field("receipt_id", required=True, max_chars=MAX_KEY_CHARS),),
    "receipt_result": (Field("receipt_id", required=True, max_chars=MAX_KEY_CHARS),),
    "receipt_cancel": (Field("receipt_id", required=True, max_chars=MAX_KEY_CHARS),),
}

#: Which stored intent kind each mutating tool writes.
KIND_OF_TOOL: Final = {
    "work_start": "start",
    "work_note": "note",
    "work_status": "status",
    "work_complete": "complete",
    "work_ask": "ask",
}
TOOL_OF_KIND: Final = {kind: tool for tool, kind in KIND_OF_TOOL.items()}


# One encoder, built once: ``json.dumps`` with any keyword builds a new JSONEncoder per
# call, which was a fifth of the request hash's cost on every openWork.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


def canonical(value: Any) -> str:
    """Canonical JSON (sorted keys, no spaces): the bytes hashed and size-checked."""
    return _CANONICAL(value)


# The few kinds' canonical text, encoded once (a kind is a JSON string in the hash).
_KIND_TEXT: Final = {kind: canonical(kind) for kind in TOOL_OF_KIND}


def request_hash(kind: str, payload: Mapping[str, Any]) -> str:
    """SHA-256 of (kind, payload): what an idempotency key is bound to."""
    return hashed(kind, payload)[0]


def hashed(kind: str, payload: Mapping[str, Any]) -> tuple[str, str]:
    """The request hash of (kind, payload) and the payload's canonical JSON, encoded once.

    The hash covers ``canonical([kind, payload])``, which is ``[`` + kind + ``,`` +
    payload's canonical text + ``]`` (no spaces): a caller that stores the payload too
    (openWork) reuses that text instead of encoding the payload a second time.
    """
    text = canonical(dict(payload))
    quoted = _KIND_TEXT.get(kind)
    if quoted is None:  # not one of the contract's kinds: encoded, not remembered
        quoted = canonical(kind)
    whole = f"[{quoted},{text}]"
    return hashlib.sha256(whole.encode("utf-8")).hexdigest(), text


def check_call_size(arguments: Any) -> None:
    """Reject a call whose arguments exceed :data:`MAX_CALL_BYTES` as JSON.

    Raises:
        ContractError: the call is too large (checked before any database work).
    """
    size = len(canonical(arguments).encode("utf-8"))
    if size > MAX_CALL_BYTES:
        raise ContractError(
            f"payload too large: the arguments are {size} bytes, the limit is "
            f"{MAX_CALL_BYTES} bytes per call"
        )


def _check_field(spec: Field, value: Any) -> None:
    if spec.kind == "object":
        if not isinstance(value, dict):
            raise ContractError(f"'{spec.name}' must be a JSON object")
        if len(canonical(value).encode("utf-8")) > MAX_FIELD_BYTES:
            raise ContractError(f"'{spec.name}' is larger than {MAX_FIELD_BYTES} bytes")
        return
    if not isinstance(value, str):
        raise ContractError(f"'{spec.name}' must be a string, got {type(value).__name__}")
    if len(value.encode("utf-8")) > MAX_FIELD_BYTES:
        raise ContractError(
            f"payload too large: '{spec.name}' is longer than {MAX_FIELD_BYTES} bytes"
        )
    if spec.max_chars is not None and len(value) > spec.max_chars:
        raise ContractError(f"'{spec.name}' is longer than {spec.max_chars} characters")
    if spec.required and not value.strip():
        raise ContractError(f"'{spec.name}' must not be empty")
    if spec.enum is not None and value not in spec.enum:
        # Named in full so the caller can see both contracts disagree, and how.
        raise ContractError(
            f"unknown {spec.name} {value!r}; accepted values: {', '.join(spec.enum)}"
        )


def validate(tool: str, arguments: Any) -> dict[str, Any]:
    """Validate ``arguments`` of ``tool`` and return them without ``None`` values.

    Raises:
        ContractError: unknown tool, not an object, missing or unknown fields, wrong
            types, enum values outside the contract, or fields over the size caps.
    """
    fields = TOOL_FIELDS.get(tool)
    if fields is None:
        raise ContractError(f"unknown tool {tool!r}")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ContractError("arguments must be a JSON object")
    check_call_size(arguments)
    known = {f.name for f in fields}
    extra = sorted(set(arguments) - known)
    if extra:
        raise ContractError(f"unknown argument(s) {', '.join(extra)} for {tool}")
    clean: dict[str, Any] = {}
    for spec in fields:
        value = arguments.get(spec.name)
        if value is None:
            if spec.required:
                raise ContractError(f"missing required argument '{spec.name}' for {tool}")
            continue
        _check_field(spec, value)
        clean[spec.name] = value
    return clean


def validate_payload(kind: str, payload: Any) -> dict[str, Any]:
    """Re-validate a stored intent payload (written, perhaps, by another helper version).

    Raises:
        ContractError: the kind is unknown or the payload breaks the contract.
    """
    tool = TOOL_OF_KIND.get(kind)
    if tool is None:
        raise ContractError(f"unknown intent kind {kind!r}")
    if not isinstance(payload, dict):
        raise ContractError("stored payload is not a JSON object")
    args = dict(payload)
    if kind != "start":
        args.setdefault("item_id", "stored")
    return validate(tool, args)
