"""Server input requests as questions a person answers with a form.

chit's inbox answers with forms (``chit.receipts.forms``): the same form, the same
validation, in ``chit answer``, ``call --wait``/``follow`` and the TUI. An elicitation
is a form already; a server's ``sampling/createMessage`` or ``roots/list`` becomes one
wherever it is asked — inside a task (a 2025 task's request on ``tasks/result``, a 2026
task's ``inputRequests`` entry) or outside one (``chit proxy``):

* **sampling** — the message shows the conversation the server sent (system prompt and
  every message, by role; non-text content named, never shown raw); the form asks for
  the reply text and the model name to report (default :data:`PERSON_MODEL`). The
  answer becomes the ``CreateMessageResult`` the server gets: an assistant text message,
  ``stopReason: endTurn``;
* **roots** — the form asks for the ``file://`` roots to share (separated by spaces or
  new lines; empty shares none). The answer becomes a ``ListRootsResult``.

Declining (or cancelling) answers a server's request with an error: ``-1`` for
sampling (the spec's "user rejected sampling request"), ``-32600`` for roots. A 2026
task's ``inputResponses`` have no error form, so there the decline travels as the one
response that can say it, an ``ElicitResult`` with ``action: decline`` (or ``cancel``)
(:func:`task_response`). The server's text is stored as the receipt's prompt through
the writer, so it is redacted like any prompt; whoever shows it makes it printable (the
CLI) or literal (the TUI).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mcp_types import (
    INVALID_REQUEST,
    CreateMessageRequest,
    CreateMessageResult,
    ElicitRequest,
    ElicitResult,
    ErrorData,
    InputRequest,
    InputResponse,
    ListRootsResult,
    Root,
    TextContent,
)

from chit.receipts import InputKind
from chit.receipts.answers import answer_problems, root_uris, roots_problems
from chit.receipts.events import InputRequestSeen
from chit.receipts.models import MESSAGE_MAX

Redact = Callable[[str], str]
"""Replaces the secrets a server's text may hold (``Redactor.text``)."""

PART_MAX = 200
"""Characters of one part of a sampling conversation shown (system prompt, message)."""

PERSON_MODEL = "a person, through chit"
"""The model name reported to the server when the person does not give one."""

SENT_MAX = 512 * 1024
"""Largest sampling request (JSON characters) kept to be forwarded as sent
(:func:`sampling_params`)."""

USER_REJECTED = -1
"""The spec's error code for a sampling request the user rejected."""

SAMPLING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {
            "type": "string",
            "title": "Reply",
            "description": "the assistant's reply the server gets",
            "minLength": 1,
        },
        "model": {
            "type": "string",
            "title": "Model name",
            "description": "reported to the server as the model that answered",
            "default": PERSON_MODEL,
        },
    },
    "required": ["text"],
}

ROOTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "roots": {
            "type": "string",
            "title": "Roots",
            "description": "file:// URIs the server may use, separated by spaces; empty: none",
        },
    },
}


def seen(key: str, request: InputRequest, redact: Redact = str) -> InputRequestSeen:
    """The inbox entry for ``request``: an elicitation as it is, the others as a form.

    ``redact`` is applied to the server's text before it is cut to fit (the writer
    redacts the stored text again, fragments included).
    """
    if isinstance(request, ElicitRequest):
        params = request.params
        url = getattr(params, "url", None)
        schema = getattr(params, "requested_schema", None)
        return InputRequestSeen(
            key=key,
            kind=InputKind.URL if url else InputKind.ELICITATION,
            message=params.message,
            requested_schema=dict(schema) if schema is not None else None,
            url=url,
        )
    if isinstance(request, CreateMessageRequest):
        return InputRequestSeen(
            key=key,
            kind=InputKind.SAMPLING,
            message=transcript(request, redact),
            requested_schema=SAMPLING_SCHEMA,
        )
    return InputRequestSeen(
        key=key,
        kind=InputKind.ROOTS,
        message="the server asks which roots (directories, as file:// URIs) it may use",
        requested_schema=ROOTS_SCHEMA,
    )


def sampling_params(request: InputRequest) -> dict[str, Any] | None:
    """A sampling request's params as the server sent them, to forward to a host.

    Without ``_meta`` (the server's session's own: its related task names the server's
    handle); None for another kind of request, or one over :data:`SENT_MAX` (kept
    nowhere, it would not fit a control-socket frame: the host is asked from the stored
    copy). Not redacted: whoever hands it on redacts it.
    """
    if not isinstance(request, CreateMessageRequest):
        return None
    params = request.params.model_dump(by_alias=True, mode="json", exclude_none=True)
    params.pop("_meta", None)
    if len(json.dumps(params, separators=(",", ":"))) > SENT_MAX:
        return None
    return params


def transcript(request: CreateMessageRequest, redact: Redact = str) -> str:
    """The conversation a sampling request carries, one line per part, for a person.

    A receipt keeps a prompt's message bounded (``MESSAGE_MAX`` characters), so each part
    is cut to :data:`PART_MAX` and, when the whole is still too long, the earliest
    messages give way to a line saying how many are not shown: the newest message, the
    one a reply answers, is always there.
    """
    p = request.params
    head = ["the server asks for a model's reply to this conversation:"]
    if p.system_prompt:
        head.append(_cut(f"system: {redact(p.system_prompt)}"))
    parts: list[str] = []
    for message in p.messages:
        blocks = message.content if isinstance(message.content, list) else [message.content]
        for block in blocks:
            text = getattr(block, "text", None)
            shown = text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')}]"
            parts.append(_cut(f"{message.role}: {redact(shown)}"))
    tail = [f"(at most {p.max_tokens} tokens)"]
    dropped = 0
    while len(parts) > 1 and len("\n".join(head + parts + tail)) > MESSAGE_MAX - 40:
        parts.pop(0)
        dropped += 1
    if dropped:
        parts.insert(0, f"(… {dropped} earlier part(s) not shown)")
    return "\n".join(head + parts + tail)


def _cut(text: str) -> str:
    return text if len(text) <= PART_MAX else text[: PART_MAX - 1] + "…"


def host_result(request: InputRequest, raw: Any) -> Any:
    """A host's answer to ``request`` as the model the server session expects.

    Raises:
        ValidationError: it is not a well-formed answer to that request.
    """
    if isinstance(request, ElicitRequest):
        return ElicitResult.model_validate(raw)
    if isinstance(request, CreateMessageRequest):
        return CreateMessageResult.model_validate(raw)
    return ListRootsResult.model_validate(raw)


def task_response(kind: InputKind, reply: ElicitResult) -> InputResponse:
    """A 2026 task's ``inputResponses`` entry for a person's ``reply`` to a ``kind``.

    An accepted sampling or roots answer is its result; a decline (or cancel) is the
    ``ElicitResult`` itself: ``inputResponses`` carry no error (module docstring).
    """
    if kind not in (InputKind.SAMPLING, InputKind.ROOTS) or reply.action != "accept":
        return reply
    made = _made(kind is InputKind.SAMPLING, reply)
    assert not isinstance(made, ErrorData)  # accepted: a result, never an error
    return made


def response(request: InputRequest, reply: ElicitResult) -> Any:
    """What the server gets for a person's ``reply`` (an elicitation: the reply itself)."""
    if isinstance(request, ElicitRequest):
        return reply
    return _made(isinstance(request, CreateMessageRequest), reply)


def _made(sampling: bool, reply: ElicitResult) -> CreateMessageResult | ListRootsResult | ErrorData:
    """The sampling or roots result (or the error of a decline) for ``reply``."""
    if reply.action != "accept":
        if sampling:
            return ErrorData(code=USER_REJECTED, message="the person declined it in chit")
        return ErrorData(code=INVALID_REQUEST, message="the person declined to share roots")
    content = reply.content or {}
    if sampling:
        model = content.get("model")
        return CreateMessageResult(
            role="assistant",
            content=TextContent(type="text", text=str(content.get("text", ""))),
            model=model if isinstance(model, str) and model else PERSON_MODEL,
            stop_reason="endTurn",
        )
    return ListRootsResult(roots=[Root(uri=uri) for uri in root_uris(content)])


__all__ = [
    "PERSON_MODEL",
    "ROOTS_SCHEMA",
    "SAMPLING_SCHEMA",
    "answer_problems",
    "host_result",
    "response",
    "roots_problems",
    "sampling_params",
    "seen",
    "task_response",
    "transcript",
]
