"""From what the task client saw to receipt events, within the data boundary.

A result is digested and summarised here and then dropped: the receipt keeps the digest,
a bounded redacted summary and the structured keys, never the raw payload. The raw
payload lives only as long as the acceptance check needs it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from mcp_types import CallToolResult, InputRequest

from chit.receipts import (
    AcceptanceDecided,
    AcceptanceState,
    FailureClass,
    InputRequestSeen,
    LifecycleState,
    ObservationSource,
    Receipt,
    ResultObserved,
    RetrievalCondition,
    RetrievalFailed,
    StatusObserved,
    classify_rpc_error,
    result_digest,
    structured_keys,
    summarize_result,
)
from chit.receipts.acceptance import evaluate, parse_check
from chit.reconcile import questions
from chit.tasks import wire
from chit.tasks.client import TaskError, TaskHandle, TaskOutcome, TaskSnapshot


def result_json(result: CallToolResult) -> dict[str, Any]:
    """The JSON form of a tool result (what digests and acceptance checks read)."""
    data: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    data.setdefault("isError", bool(result.is_error))
    return data


def seen_request(key: str, request: InputRequest) -> InputRequestSeen:
    """Describe one server input request: an elicitation, or a sampling or roots
    request as the form a person answers it with (:mod:`chit.reconcile.questions`)."""
    return questions.seen(key, request)


def legacy_input_key(request: InputRequest, digest_key: bytes | None = None) -> str:
    """A stable key for a 2025 elicitation (the wire carries none).

    Derived from the message and schema, so the same prompt re-delivered on a new
    ``tasks/result`` after a restart maps to the same inbox entry. With ``digest_key``
    (the vault's) it is a keyed HMAC: a prompt's text can hold the task handle, and a
    plain hash of it could be checked against a guessed handle. Without, the plain
    SHA-256 keys of receipts written before keys were keyed.
    """
    body = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    params = dict(body.get("params") or {})
    params.pop("_meta", None)
    text = json.dumps(params, sort_keys=True, separators=(",", ":")).encode("utf-8")
    if digest_key is None:
        return "e-" + hashlib.sha256(text).hexdigest()[:12]
    mac = hmac.new(digest_key, b"chit elicitation key v1|" + text, "sha256")
    return "e-" + mac.hexdigest()[:16]


def status_event(snap: TaskSnapshot | TaskHandle, source: ObservationSource) -> StatusObserved:
    """The status part of a snapshot (2026 snapshots also carry the inputRequests set)."""
    inputs: tuple[InputRequestSeen, ...] | None = None
    if isinstance(snap, TaskSnapshot) and snap.generation == wire.PROTOCOL_2026:
        inputs = tuple(seen_request(k, r) for k, r in sorted(snap.input_requests.items()))
    return StatusObserved(
        status=LifecycleState(snap.status),
        source=source,
        message=snap.status_message,
        server_created_at=snap.created_at,
        server_updated_at=snap.updated_at,
        poll_interval_ms=_sane_ms(snap.poll_interval_ms),
        ttl_ms=_sane_ms(snap.ttl_ms),
        input_requests=inputs,
    )


def _sane_ms(value: int | None) -> int | None:
    # A negative hint is a broken server; treat it as "not reported".
    return value if value is not None and value >= 0 else None


def result_event(
    result: CallToolResult | None,
    error: wire.ErrorObject | None,
    *,
    status: LifecycleState | None = None,
    source: ObservationSource = ObservationSource.RESULT,
    digest_key: bytes | None = None,
) -> ResultObserved:
    """Digest and summarise a result (or a JSON-RPC error) into a ``ResultObserved``.

    ``digest_key`` (the vault's ``digest_key()``) makes the digest a keyed HMAC, which
    cannot be checked against guessed results without the key.
    """
    if error is not None:
        payload = error.model_dump(mode="json", exclude_none=True)
        return ResultObserved(
            is_error=True,
            result_digest=result_digest(payload, key=digest_key),
            summary=summarize_result(error.message),
            error_code=error.code,
            error_message=error.message,
            failure_class=classify_rpc_error(error.code),
            status=status,
            source=source,
        )
    data = result_json(result) if result is not None else {"content": []}
    return ResultObserved(
        is_error=bool(data.get("isError")),
        result_digest=result_digest(data, key=digest_key),
        summary=summarize_result(data),
        structured_keys=structured_keys(data),
        status=status,
        source=source,
    )


def outcome_event(outcome: TaskOutcome, digest_key: bytes | None = None) -> ResultObserved:
    """A ``ResultObserved`` for a 2025 ``tasks/result`` outcome (status included)."""
    return result_event(
        outcome.result,
        outcome.error,
        status=LifecycleState(outcome.status),
        digest_key=digest_key,
    )


def failure_class_of(code: int) -> FailureClass:
    """Re-export of the receipt policy's failure classes for JSON-RPC error codes."""
    return classify_rpc_error(code)


_CONDITIONS = {
    "transient": RetrievalCondition.UNREACHABLE,
    "lost": RetrievalCondition.VANISHED,  # the transition tells vanished from expired by TTL
    "incompatible": RetrievalCondition.INCOMPATIBLE,
    "protocol_violation": RetrievalCondition.UNREACHABLE,
    "permanent": RetrievalCondition.UNREACHABLE,
}


def failure_event(err: TaskError, source: ObservationSource) -> RetrievalFailed:
    """The retrieval condition a task-client failure amounts to."""
    return RetrievalFailed(
        condition=_CONDITIONS[err.failure_class],
        message=f"{err.failure_class}: {err.message}"[:300],
        error_code=err.code,
        source=source,
    )


def acceptance_event(receipt: Receipt, result: dict[str, Any] | None) -> AcceptanceDecided | None:
    """Run the receipt's acceptance check on a just-retrieved result (None: nothing to do)."""
    check = receipt.acceptance.check
    if check is None or receipt.acceptance.state is not AcceptanceState.PENDING:
        return None
    if result is None:
        return AcceptanceDecided(
            state=AcceptanceState.REJECTED,
            check=check,
            why="the task ended with a JSON-RPC error, not a result",
            decided_by="chit:auto",
            automatic=True,
            source=ObservationSource.RESULT,
        )
    verdict = evaluate(parse_check(check), result)
    return AcceptanceDecided(
        state=AcceptanceState.ACCEPTED if verdict.accepted else AcceptanceState.REJECTED,
        check=check,
        why=verdict.why,
        decided_by="chit:auto",
        automatic=True,
        source=ObservationSource.RESULT,
    )
