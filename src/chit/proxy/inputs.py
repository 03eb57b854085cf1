"""A task's questions as the host is asked them, and the host's replies as chit's answers.

A server's question inside a task waits in the receipt as a form
(:mod:`chit.reconcile.questions`): an elicitation as it is, a ``sampling/createMessage``
as its conversation (redacted, bounded) with a form for the reply text and model, a
``roots/list`` with a form for ``file://`` roots. A host that declared the capability
is asked the real request:

* elicitation → ``elicitation/create`` with the stored message and schema (what a
  person sees in chit);
* sampling → the server's own ``sampling/createMessage`` as it sent it (its messages,
  system prompt, model preferences, temperature, stop sequences, ``maxTokens``,
  ``includeContext``, ``metadata``), handed over by the engine with only the task
  handle and the server's secrets redacted (``proxy.question``,
  :mod:`chit.proxy.sampled`). When the engine no longer has it (a restart before the
  server re-delivered it, too large to keep), from the stored copy: one user message
  carrying the redacted, bounded conversation, and the server's ``maxTokens``;
* roots → ``roots/list``.

The host's reply becomes the form answer a person would give (:func:`form_answer`):
sampling → ``{"text", "model"}`` from its text content and model; roots → the
space-separated URIs. A reply that is not one (not text, a URI with spaces) is refused
like a person's wrong answer; the answer path then checks it as it checks a person's
(a roots answer shares only ``file://`` URIs). A host's refusal — an ``ElicitResult``
``decline``/``cancel``, or for a 2025 task the JSON-RPC error stored as one — declines.
"""

from __future__ import annotations

import re
from typing import Any

from mcp_types import CreateMessageRequestParams, CreateMessageResult
from pydantic import ValidationError

from chit.errors import UsageError
from chit.proxy.models import ServerRequest
from chit.receipts import InputKind, InputRequest

CAPABILITY = {
    InputKind.ELICITATION: "elicitation",
    InputKind.SAMPLING: "sampling",
    InputKind.ROOTS: "roots",
}
"""The host capability each kind of question needs (URL elicitations: none forwarded)."""

SAMPLING = "sampling/createMessage"

DEFAULT_MAX_TOKENS = 1000
"""``maxTokens`` when the stored conversation does not say (it always does today)."""

_MAX_TOKENS = re.compile(r"\(at most (\d+) tokens\)\Z")


def host_request(q: InputRequest, sent: ServerRequest | None = None) -> dict[str, Any] | None:
    """The request the host is asked for ``q`` (``method``, ``params``); None: not forwarded.

    ``sent``: the server's own request behind a sampling question (``proxy.question``);
    used when it is a well-formed one, else the request is built from the stored copy.
    """
    if q.kind is InputKind.ELICITATION:
        schema = q.requested_schema or {"type": "object", "properties": {}}
        params = {"mode": "form", "message": q.message or "", "requestedSchema": schema}
        return {"method": "elicitation/create", "params": params}
    if q.kind is InputKind.SAMPLING:
        if sent is not None and sent.method == SAMPLING and _well_formed(sent.params):
            return {"method": SAMPLING, "params": dict(sent.params or {})}
        text = q.message or ""
        found = _MAX_TOKENS.search(text)
        message: dict[str, Any] = {"role": "user", "content": {"type": "text", "text": text}}
        tokens = int(found.group(1)) if found else DEFAULT_MAX_TOKENS
        body: dict[str, Any] = {"messages": [message], "maxTokens": tokens}
        return {"method": SAMPLING, "params": body}
    if q.kind is InputKind.ROOTS:
        return {"method": "roots/list", "params": {}}
    return None


def _well_formed(params: dict[str, Any] | None) -> bool:
    """The server's sampling params are ones a host's SDK takes (else: the stored copy)."""
    try:
        CreateMessageRequestParams.model_validate(params)
    except ValidationError:
        return False
    return True


def form_answer(kind: InputKind, reply: dict[str, Any]) -> dict[str, Any]:
    """The host's ``reply`` to a ``kind`` question as an ``ElicitResult``-shaped answer.

    An elicitation's reply is already one. Sampling and roots results become the form's
    content; a reply with an ``action`` (a decline, cancel, or a 2025 refusal stored as
    a decline) passes as that action.

    Raises:
        UsageError: the reply is not a result of its request (or not one a form holds).
    """
    if kind not in (InputKind.SAMPLING, InputKind.ROOTS) or "action" in reply:
        return reply
    if kind is InputKind.SAMPLING:
        try:
            result = CreateMessageResult.model_validate(reply)
        except ValidationError:
            raise UsageError("the host's reply is not a sampling result") from None
        text = getattr(result.content, "text", None)
        if not isinstance(text, str):
            raise UsageError(f"the host replied with {result.content.type} content, not text")
        return {"action": "accept", "content": {"text": text, "model": result.model}}
    # Read as sent, not through ListRootsResult: the SDK's model refuses a non-file://
    # URI outright, and such a root is refused the way a person's is, with its reason.
    listed = reply.get("roots")
    if not isinstance(listed, list):
        raise UsageError("the host's reply is not a roots list")
    uris: list[str] = []
    for root in listed:
        uri = root.get("uri") if isinstance(root, dict) else None
        if not isinstance(uri, str) or not uri or any(ch.isspace() for ch in uri):
            raise UsageError(f"roots: {uri!r} is not a file:// URI")
        uris.append(uri)
    return {"action": "accept", "content": {"roots": " ".join(uris)}}


__all__ = ["CAPABILITY", "SAMPLING", "form_answer", "host_request"]
