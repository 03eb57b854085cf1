"""Elicitation answers: check one completely before it is sent, and fill in defaults.

An answer to a form-mode elicitation is a flat object of primitives. chit never sends an
answer the ``requestedSchema`` would refuse: :func:`validate_answer` lists every problem
(missing required field, wrong type, out of bounds, bad format, not one of the options,
too few / many selections, unknown field), each naming the field it is about. A URL-mode
elicitation has no schema: :func:`url_request` reads the page the user must visit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from chit.receipts.forms import field_problems, form_from_schema, show

__all__ = [
    "UrlRequest",
    "answer_problems",
    "fill_defaults",
    "root_uris",
    "roots_problems",
    "url_request",
    "validate_answer",
]


@dataclass(frozen=True, slots=True)
class UrlRequest:
    """A URL-mode elicitation: the page the user must visit, shown with its host."""

    url: str
    host: str
    elicitation_id: str
    message: str | None


def validate_answer(schema: Any, content: Any) -> list[str]:
    """Every problem with ``content`` as the answer to ``schema``; empty means valid.

    Args:
        schema: the elicitation's ``requestedSchema``.
        content: the answer's ``content`` object.

    Returns:
        Readable messages, each starting with the field's name (``"age: must be at most
        120"``), in schema order; unknown fields last.
    """
    if not isinstance(content, Mapping):
        return ["the answer must be an object of field values"]
    form = form_from_schema(schema)
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    described = set(props) if isinstance(props, Mapping) else set()
    listed = schema.get("required") if isinstance(schema, Mapping) else None
    required = [r for r in listed if isinstance(r, str)] if isinstance(listed, list) else []
    known = {f.name for f in form.fields}
    problems: list[str] = []
    for field in form.fields:
        if field.name in content:
            problems += [f"{field.name}: {p}" for p in field_problems(field, content[field.name])]
        elif field.required:
            problems.append(f"{field.name}: required")
    for name in dict.fromkeys(required):
        if name not in known and name not in content:
            problems.append(f"{name}: required, but chit cannot build a field for it")
    for name in content:
        if name in known:
            continue
        if name in described:
            problems.append(f"{name}: its schema is not supported, so chit cannot check it")
        else:
            expected = ", ".join(sorted(known)) or "no fields"
            problems.append(f"{name}: unknown field (the form has {expected})")
    return problems


def fill_defaults(schema: Any, content: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of ``content`` with the schema's defaults for every absent field.

    Only valid defaults are used (``form_from_schema`` drops the others); fields the user
    answered are kept as they are, unknown ones too (``validate_answer`` reports them).

    Args:
        schema: the elicitation's ``requestedSchema``.
        content: the answer so far.

    Returns:
        A new dict; multi-select defaults are lists.
    """
    filled = dict(content)
    for field in form_from_schema(schema).fields:
        if field.name not in filled and field.default is not None:
            default = field.default
            filled[field.name] = list(default) if isinstance(default, tuple) else default
    return filled


def url_request(params: Mapping[str, Any]) -> UrlRequest | None:
    """Read a URL-mode elicitation (``mode: "url"``, ``url``, ``elicitationId``).

    Args:
        params: the ``elicitation/create`` params (or an extension input request).

    Returns:
        None for a form-mode request, else the URL to show with its host.

    Raises:
        ValueError: a URL-mode request without an http(s) URL with a host, or without
            an ``elicitationId``.
    """
    if params.get("mode") != "url":
        return None
    url, elicitation_id, message = (
        params.get("url"),
        params.get("elicitationId"),
        params.get("message"),
    )
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"URL-mode elicitation without an http(s) URL: {show(url)}")
    if not isinstance(elicitation_id, str) or not elicitation_id:
        raise ValueError("URL-mode elicitation without an elicitationId")
    return UrlRequest(
        str(url), parts.hostname, elicitation_id, message if isinstance(message, str) else None
    )


def answer_problems(kind: str, content: dict[str, Any] | None) -> list[str]:
    """Why an accepted answer to a prompt of ``kind`` (an ``InputKind``) cannot be sent,
    beyond what its form's schema says: a roots answer shares only ``file://`` URIs."""
    return roots_problems(content) if kind == "roots" else []


def roots_problems(content: dict[str, Any] | None) -> list[str]:
    """Why a roots answer cannot be sent (every URI must be ``file://`` with a path)."""
    uris = root_uris(content)
    return [f"roots: {uri!r} is not a file:// URI" for uri in uris if not _is_file(uri)]


def root_uris(content: dict[str, Any] | None) -> list[str]:
    """The URIs of a roots answer (its ``roots`` text, split on white space)."""
    text = (content or {}).get("roots")
    return text.split() if isinstance(text, str) else []


def _is_file(uri: str) -> bool:
    parts = urlsplit(uri)
    if parts.scheme != "file" or not parts.path or not uri.isprintable():
        return False
    from mcp_types import Root  # only here: the TUI's form imports this module
    from pydantic import ValidationError

    try:
        Root(uri=uri)  # pydantic reads the string as a FileUrl
    except ValidationError:
        return False
    return True
