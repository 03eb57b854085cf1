"""Acceptance checks and answer validation, through ``chit.receipts`` when available.

``chit.receipts.acceptance`` (the acceptance language) and ``chit.receipts.answers``
(elicitation form validation) are written by another engineer; until they land this
module carries a minimal fallback with the same signatures, so the engine can run.
"""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass
from typing import Any, Protocol


class Verdict(Protocol):
    """What an acceptance evaluation returns."""

    @property
    def accepted(self) -> bool:
        """True when the result passes the check."""
        ...

    @property
    def why(self) -> str:
        """A readable reason."""
        ...


@dataclass(frozen=True)
class _Verdict:
    accepted: bool
    why: str


_CLAUSE = re.compile(
    r"""^\s*(?:
        (?P<not_error>not\s+isError)
      | text\s+contains\s+"(?P<text>(?:[^"\\]|\\.)*)"
      | json\s+(?P<path>[A-Za-z0-9_.\[\]-]+)\s+(?:(?P<exists>exists)|==\s*(?P<value>.+?))
    )\s*$""",
    re.VERBOSE,
)


def parse_check(text: str) -> object:
    """Parse an acceptance expression; raises ``ValueError`` with a readable message."""
    try:
        acceptance = importlib.import_module("chit.receipts.acceptance")
    except ImportError:
        return _fallback_parse(text)
    parsed: object = acceptance.parse_check(text)
    return parsed


def evaluate(check_text: str, result: dict[str, Any]) -> Verdict:
    """Evaluate the expression ``check_text`` against a result's JSON form."""
    try:
        acceptance = importlib.import_module("chit.receipts.acceptance")
    except ImportError:
        return _fallback_evaluate(_fallback_parse(check_text), result)
    verdict: Verdict = acceptance.evaluate(acceptance.parse_check(check_text), result)
    return verdict


def validate_answer(schema: dict[str, Any] | None, content: dict[str, Any]) -> list[str]:
    """Return readable errors for ``content`` against a restricted form schema."""
    try:
        answers = importlib.import_module("chit.receipts.answers")
    except ImportError:
        return _fallback_validate(schema or {}, content)
    errors: list[str] = answers.validate_answer(schema or {}, content)
    return errors


# --- fallbacks (removed once the real modules land) -------------------------------------


def _fallback_parse(text: str) -> list[re.Match[str]]:
    if not text.strip():
        raise ValueError("empty acceptance check")
    clauses = []
    for part in re.split(r"\s+and\s+", text.strip()):
        match = _CLAUSE.match(part)
        if match is None:
            raise ValueError(
                f"cannot read {part!r}: use 'not isError', 'text contains \"…\"', "
                "'json PATH exists' or 'json PATH == VALUE', joined with 'and'"
            )
        clauses.append(match)
    return clauses


def _lookup(data: Any, path: str) -> tuple[bool, Any]:
    for part in re.findall(r"[^.\[\]]+", path):
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return False, None
    return True, data


def _fallback_evaluate(clauses: list[re.Match[str]], result: dict[str, Any]) -> Verdict:
    text = " ".join(
        str(b.get("text", "")) for b in result.get("content") or [] if isinstance(b, dict)
    )
    structured = result.get("structuredContent")
    for m in clauses:
        if m.group("not_error") and result.get("isError"):
            return _Verdict(False, "the result has isError")
        if m.group("text") is not None and m.group("text") not in text:
            return _Verdict(False, f"the text does not contain {m.group('text')!r}")
        if m.group("path"):
            found, value = _lookup(structured, m.group("path"))
            if not found:
                return _Verdict(False, f"json {m.group('path')} does not exist")
            if m.group("value") is not None:
                raw = m.group("value").strip()
                try:
                    expected = json.loads(raw)
                except ValueError:
                    expected = raw
                if value != expected:
                    return _Verdict(False, f"json {m.group('path')} is {value!r}, not {expected!r}")
    return _Verdict(True, "every clause holds")


_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "boolean": bool,
    "integer": int,
    "number": (int, float),
}


def _fallback_validate(schema: dict[str, Any], content: dict[str, Any]) -> list[str]:
    errors = []
    props = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in content:
            errors.append(f"{name}: required")
    for name, value in content.items():
        prop = props.get(name)
        if prop is None:
            errors.append(f"{name}: not asked for")
            continue
        want = _TYPES.get(str(prop.get("type")))
        bad_bool = isinstance(value, bool) and prop.get("type") in ("integer", "number")
        if want is not None and (not isinstance(value, want) or bad_bool):
            errors.append(f"{name}: expected {prop.get('type')}")
        if "enum" in prop and value not in prop["enum"]:
            errors.append(f"{name}: must be one of {prop['enum']}")
    return errors
