"""A call's arguments checked against the tool's ``inputSchema`` before anything is written.

The check runs in the engine (``Calls.call``), so it holds for the CLI, the TUI and the
daemon's socket alike: arguments the schema refuses never become an intent, and the user
gets one line per problem naming the field. The schema is the server's, so it is treated
as hostile input:

* a schema that is not valid JSON Schema (or that the validator cannot follow: a remote
  ``$ref``, absurd nesting) is not held against the user — the server judges the call;
* ``pattern`` is not checked: Python's backtracking ``re`` on a server-chosen pattern could
  take minutes (the reason acceptance checks have no regexes either), and ``format`` is an
  annotation unless a format checker is given (none is);
* everything quoted back (field names, values, the validator's words) is made printable
  and cut short.
"""

from __future__ import annotations

import json
import logging
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

log = logging.getLogger("chit.runtime")

MAX_PROBLEMS = 10
"""At most this many problems are listed (then "and N more")."""

_REQUIRED = re.compile(r"^'(.{1,200})' is a required property$", re.S)


def argument_problems(schema: Any, arguments: Mapping[str, Any]) -> list[str]:
    """Every way ``arguments`` break ``schema``, one readable line each (empty: they fit).

    Args:
        schema: the tool's ``inputSchema`` as the server listed it.
        arguments: the arguments about to be sent.

    Returns:
        Lines like ``seconds: 'abc' is not of type 'number'`` or ``name: required``,
        ordered by field; at most ``MAX_PROBLEMS`` plus a count of the rest.
    """
    if not isinstance(schema, Mapping) or not schema:
        return []
    try:
        validator = _validator(schema)
        errors = list(validator.iter_errors(dict(arguments)))
    except Exception as exc:  # the server's schema, not the user's arguments, is at fault
        log.info("input schema not checked: %s", type(exc).__name__)
        return []
    lines = sorted(_line(e) for e in errors)  # by field name
    if len(lines) > MAX_PROBLEMS:
        rest = len(lines) - MAX_PROBLEMS
        lines = [*lines[:MAX_PROBLEMS], f"… and {rest} more"]
    return lines


_VALIDATORS: OrderedDict[str, Any] = OrderedDict()
"""Validators by their schema's canonical JSON (most recent last): building one — the
schema checked against its metaschema, a validator class made — cost ~25 ms of the
loop per call, more than the rest of the call; a tool's schema rarely changes."""

MAX_VALIDATORS = 64


def _validator(schema: Mapping[str, Any]) -> Any:
    key = json.dumps(schema, sort_keys=True, separators=(",", ":"))
    cached = _VALIDATORS.get(key)
    if cached is not None:
        _VALIDATORS.move_to_end(key)
        return cached
    from jsonschema import Draft202012Validator, validators

    base = validators.validator_for(schema, default=Draft202012Validator)
    base.check_schema(schema)
    unchecked = {"pattern": _skip, "format": _skip}
    validator = validators.extend(base, unchecked)(schema)
    _VALIDATORS[key] = validator
    while len(_VALIDATORS) > MAX_VALIDATORS:
        _VALIDATORS.popitem(last=False)
    return validator


def _skip(*_args: Any) -> Iterable[Any]:
    return ()


def _line(error: Any) -> str:
    path = _path(error.absolute_path)
    message = str(error.message)
    if error.validator == "required":
        missing = _REQUIRED.match(message)
        if missing:
            field = f"{path}.{missing.group(1)}" if path else missing.group(1)
            return f"{plain(field)}: required"
    return f"{plain(path or '(arguments)')}: {plain(message, 160)}"


def _path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def plain(text: str, limit: int = 80) -> str:
    """``text`` with control characters replaced and cut to ``limit`` characters."""
    shown = "".join(c if c.isprintable() else "?" for c in text)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"
