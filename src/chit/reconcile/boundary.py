"""Server text at the boundary: events are redacted before they touch a receipt.

Every event built from what a server said (status and error messages, input-request
messages, keys and schemas, result summaries and structured keys, cancel refusals) goes
through :func:`redact_event` with the receipt's :class:`~chit.redaction.Redactor` (its
task handle and its server's sealed secrets) before ``transitions.apply`` sees it. The
:class:`~chit.reconcile.writer.ReceiptWriter` does this for every write, so the receipt
document, its timeline rows and the change events the TUI renders never hold a handle.

Input-request keys are chosen by the server (2026 ``inputRequests``) and are sent back
with the answer, so they cannot just be rewritten: a key that holds a secret is replaced
by :func:`derived_key` - ``k-`` and a keyed HMAC of the server's key - which is stable
for the data key (across restarts), reveals nothing, and is mapped back to the server's
key (:func:`server_key`) when the answer leaves.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import re
from collections.abc import Iterable, Sequence
from typing import TypeVar

from chit.receipts import (
    AcceptanceDecided,
    CancelAcknowledged,
    CancelUnsupported,
    Event,
    InputRequested,
    InputRequestSeen,
    Receipt,
    ResultObserved,
    RetrievalFailed,
    StatusObserved,
)
from chit.redaction import NOTHING, Redactor

__all__ = [
    "carries_text",
    "derived_key",
    "is_derived_key",
    "redact_event",
    "redact_events",
    "redact_receipt",
    "redact_request",
    "server_key",
]

E = TypeVar("E", bound=Event)

_DERIVED = re.compile(r"k-[0-9a-f]{20}")
_KEY_LABEL = b"chit input key v1|"


def derived_key(server_key: str, digest_key: bytes) -> str:
    """chit's key for a server input-request key that holds a secret: ``k-<hmac>``."""
    mac = hmac.new(digest_key, _KEY_LABEL + server_key.encode("utf-8"), hashlib.sha256)
    return "k-" + mac.hexdigest()[:20]


def is_derived_key(key: str) -> bool:
    """True for a key made by :func:`derived_key`."""
    return _DERIVED.fullmatch(key) is not None


def server_key(stored: str, offered: Iterable[str], digest_key: bytes) -> str | None:
    """The server's key for a stored key: itself, or the offered key it was derived from."""
    offered = list(offered)
    if stored in offered or not is_derived_key(stored):
        return stored
    for key in offered:
        if hmac.compare_digest(derived_key(key, digest_key), stored):
            return key
    return None


def _key(key: str, redactor: Redactor, digest_key: bytes | None) -> str:
    if not redactor.finds(key):
        return key
    if digest_key is None:  # no vault at hand: the key is only shown, never sent back
        return redactor.text(key)
    return derived_key(key, digest_key)


def redact_request(
    request: InputRequestSeen, redactor: Redactor, digest_key: bytes | None = None
) -> InputRequestSeen:
    """One server input request with its key, message, URL and schema redacted."""
    schema = request.requested_schema
    return dataclasses.replace(
        request,
        key=_key(request.key, redactor, digest_key),
        message=redactor.optional(request.message),
        url=redactor.optional(request.url),
        requested_schema=redactor.value(schema) if schema is not None else None,
    )


def carries_text(event: Event) -> bool:
    """True when ``event`` holds text a server (or a result) supplied."""
    match event:
        case StatusObserved():
            return event.message is not None or bool(event.input_requests)
        case ResultObserved():
            return bool(event.summary or event.error_message or event.structured_keys)
        case CancelAcknowledged():
            return event.message is not None
        case CancelUnsupported():
            return event.reason is not None
        case RetrievalFailed():
            return event.message is not None
        case InputRequested():
            return True
        case AcceptanceDecided():
            return event.why is not None
    return False


def redact_event(event: E, redactor: Redactor, digest_key: bytes | None = None) -> E:
    """``event`` with every server-supplied string passed through ``redactor``."""
    if not redactor or not carries_text(event):
        return event
    r = redactor
    match event:
        case StatusObserved():
            message = r.optional(event.message)
            inputs = event.input_requests
            if inputs:
                inputs = tuple(redact_request(q, r, digest_key) for q in inputs)
            if message == event.message and inputs == event.input_requests:
                return event  # the common case: nothing to hide, nothing copied
            return dataclasses.replace(event, message=message, input_requests=inputs)
        case ResultObserved():
            keys = event.structured_keys
            return dataclasses.replace(
                event,
                summary=r.text(event.summary),
                error_message=r.optional(event.error_message),
                structured_keys=tuple(r.text(k) for k in keys) if keys is not None else None,
            )
        case CancelAcknowledged():
            return dataclasses.replace(event, message=r.optional(event.message))
        case CancelUnsupported():
            return dataclasses.replace(event, reason=r.optional(event.reason))
        case RetrievalFailed():
            return dataclasses.replace(event, message=r.optional(event.message))
        case InputRequested():
            return dataclasses.replace(event, request=redact_request(event.request, r, digest_key))
        case AcceptanceDecided():
            return dataclasses.replace(event, why=r.optional(event.why))
    return event


def redact_events(
    events: Sequence[Event], redactor: Redactor = NOTHING, digest_key: bytes | None = None
) -> list[Event]:
    """:func:`redact_event` for each event."""
    return [redact_event(e, redactor, digest_key) for e in events]


def redact_receipt(receipt: Receipt, redactor: Redactor, digest_key: bytes | None) -> Receipt:
    """A stored receipt with every server-supplied text redacted (the one-time sweep).

    The same fields events carry: status message, retrieval error, input requests (key,
    message, URL, schema), outcome summary, error and structured keys, the cancel
    refusal and the verdict's reason. Returns ``receipt`` itself when nothing changed.
    """
    if not redactor:
        return receipt
    r = redactor
    update: dict[str, object] = {
        "status_message": r.optional(receipt.status_message),
        "retrieval_error": r.optional(receipt.retrieval_error),
        "input_requests": tuple(
            q.model_copy(
                update={
                    "key": _key(q.key, r, digest_key),
                    "message": r.optional(q.message),
                    "url": r.optional(q.url),
                    "requested_schema": (
                        r.value(q.requested_schema) if q.requested_schema is not None else None
                    ),
                }
            )
            for q in receipt.input_requests
        ),
        "cancel": receipt.cancel.model_copy(update={"reason": r.optional(receipt.cancel.reason)}),
        "acceptance": receipt.acceptance.model_copy(
            update={"why": r.optional(receipt.acceptance.why)}
        ),
    }
    if receipt.outcome is not None:
        o = receipt.outcome
        keys = o.structured_keys
        update["outcome"] = o.model_copy(
            update={
                "summary": r.text(o.summary),
                "error_message": r.optional(o.error_message),
                "structured_keys": tuple(r.text(k) for k in keys) if keys is not None else None,
            }
        )
    new = receipt.model_copy(update=update)
    return receipt if new == receipt else new
