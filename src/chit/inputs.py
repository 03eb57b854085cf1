"""Checking what a person (or a file they point at) hands chit, before chit acts on it.

One validator per kind of input, used everywhere that kind enters:

* **names** — servers, sidecar tokens (principals): ``fullmatch``, never ``match`` with
  ``$``, which also accepts a trailing newline (``"x\\n"`` was once written to
  ``config.toml`` as ``[servers.x\\n]`` and broke every later command);
* **JSON** — standard JSON only (no ``NaN``/``Infinity``), bounded nesting, valid Unicode
  (no lone surrogates), so a bad ``--args`` is exit 2 at the door, not an internal error
  deep inside;
* **text** — valid Unicode (``argv`` bytes that are not UTF-8 arrive as lone surrogates).

Every failure is a ``UsageError``: one line, exit 2.
"""

from __future__ import annotations

import json
import re
from typing import Any

from chit.errors import UsageError

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""A name: safe as a TOML key, a CLI argument, a file name and inside associated data."""

NAME_RULE = "use 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit"

MAX_JSON_DEPTH = 64
"""Deeper JSON input is refused: no tool argument needs it, and recursion would."""


def valid_name(name: object) -> bool:
    """Return True when ``name`` is an acceptable server or token name (whole string)."""
    return isinstance(name, str) and NAME_PATTERN.fullmatch(name) is not None


def check_name(name: str, what: str) -> str:
    """Return ``name`` if valid.

    Raises:
        UsageError: ``invalid <what> name '…': use 1-64 letters …``.
    """
    if not valid_name(name):
        raise UsageError(f"invalid {what} name {name!r}: {NAME_RULE}")
    return name


def first_surrogate(text: str) -> str | None:
    """Return the first lone surrogate in ``text`` (not encodable as UTF-8), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return text[exc.start]
    return None


def check_text(text: str, what: str) -> str:
    """Return ``text`` if it is valid Unicode (no lone surrogates).

    Raises:
        UsageError: ``<what> is not valid UTF-8 …``.
    """
    bad = first_surrogate(text)
    if bad is not None:
        raise UsageError(f"{what} is not valid UTF-8 text (it contains {bad!r})")
    return text


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in JSON")


def parse_json(text: str | bytes, what: str) -> Any:
    """Parse standard JSON from a person or a file, refusing what chit cannot pass on.

    Refused (``UsageError``, naming ``what``): malformed JSON; ``NaN``/``Infinity``; more
    than :data:`MAX_JSON_DEPTH` levels of nesting; invalid UTF-8 bytes; strings or keys
    holding a lone surrogate (``"\\ud800"``).
    """
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise UsageError(f"{what} is nested more than {MAX_JSON_DEPTH} levels deep") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} is not valid UTF-8 ({exc.reason})") from None
    except ValueError as exc:
        raise UsageError(f"{what} is not valid JSON: {exc}") from None
    _check_tree(value, what)
    return value


def _check_tree(value: Any, what: str) -> None:
    # Iterative, so the depth check itself cannot recurse too deep.
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            check_text(item, what)
        elif isinstance(item, dict | list):
            if depth > MAX_JSON_DEPTH:
                raise UsageError(f"{what} is nested more than {MAX_JSON_DEPTH} levels deep")
            if isinstance(item, dict):
                for key, child in item.items():
                    check_text(key, what)
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)
