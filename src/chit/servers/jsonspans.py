"""Where the members of a JSON object sit in its text, so one value can be replaced alone.

``chit servers wrap`` rewrites single ``mcpServers`` entries of a host's config file and
``unwrap`` puts the original text back. Re-serialising the whole document would change
its formatting (key order, indentation, escapes); splicing one value's character span
keeps every other byte of the file as it was, so wrap followed by unwrap gives the
original file back byte for byte.

The scanner assumes text that ``json.loads`` has already accepted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

_WS = " \t\r\n"


@dataclass(frozen=True)
class Member:
    """One ``"key": value`` of an object: the decoded key and the value's span."""

    key: str
    line_start: int
    """Offset of the start of the line the key is on (for its indentation)."""
    value_start: int
    value_end: int

    def value_text(self, text: str) -> str:
        """The value exactly as written."""
        return text[self.value_start : self.value_end]

    def indent(self, text: str) -> str:
        """The whitespace before the key on its line."""
        line = text[self.line_start :]
        return line[: len(line) - len(line.lstrip(" \t"))]


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _string_end(text: str, i: int) -> int:
    """``text[i]`` is an opening quote; return the index after the closing one."""
    i += 1
    while True:
        c = text[i]
        if c == "\\":
            i += 2
        elif c == '"':
            return i + 1
        else:
            i += 1


def value_end(text: str, i: int) -> int:
    """Return the index just after the JSON value starting at ``text[i]``."""
    c = text[i]
    if c == '"':
        return _string_end(text, i)
    if c in "{[":
        depth = 0
        while True:
            c = text[i]
            if c == '"':
                i = _string_end(text, i)
                continue
            if c in "{[":
                depth += 1
            elif c in "}]":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
    # number, true, false, null: up to the next delimiter
    while i < len(text) and text[i] not in _WS + ",]}":
        i += 1
    return i


def members(text: str, start: int) -> list[Member]:
    """The members of the object whose ``{`` is at ``text[start]``, in order."""
    out: list[Member] = []
    i = _skip_ws(text, start + 1)
    if text[i] == "}":
        return out
    while True:
        key_start = i
        key_end = _string_end(text, i)
        key = json.loads(text[key_start:key_end])
        i = _skip_ws(text, key_end)  # at ':'
        v_start = _skip_ws(text, i + 1)
        v_end = value_end(text, v_start)
        line_start = text.rfind("\n", 0, key_start) + 1
        out.append(Member(key, line_start, v_start, v_end))
        i = _skip_ws(text, v_end)
        if text[i] == "}":
            return out
        i = _skip_ws(text, i + 1)  # past ','


def find_member(text: str, key: str, start: int | None = None) -> Member | None:
    """The last member called ``key`` of the object at ``start`` (the top level: None)."""
    begin = _skip_ws(text, 0) if start is None else start
    if begin >= len(text) or text[begin] != "{":
        return None
    found = [m for m in members(text, begin) if m.key == key]
    return found[-1] if found else None


def indent_unit(text: str, member: Member) -> str:
    """The indentation step the file uses (from the member's line; two spaces if flat)."""
    inner = members(text, member.value_start) if text[member.value_start] == "{" else []
    outer = member.indent(text)
    for child in inner:
        ind = child.indent(text)
        if text.rfind("\n", member.value_start, child.value_start) >= 0 and len(ind) > len(outer):
            return ind[len(outer) :]
    return "  "


def render(value: dict[str, object], *, indent: str, unit: str, multiline: bool) -> str:
    """The object ``value`` as JSON text to put where a member's value was.

    ``multiline`` follows the replaced value: a value written on one line stays on one
    line; otherwise each key goes on its own line, indented by ``unit`` below ``indent``
    (the key's own indentation), with nested values written compactly on that line.
    """
    if not multiline or not value:
        return json.dumps(value, ensure_ascii=False)
    lines = [
        f"{indent}{unit}{json.dumps(k, ensure_ascii=False)}: {json.dumps(v, ensure_ascii=False)}"
        for k, v in value.items()
    ]
    return "{\n" + ",\n".join(lines) + "\n" + indent + "}"


def splice(text: str, member: Member, replacement: str) -> str:
    """``text`` with the member's value replaced by ``replacement``."""
    return text[: member.value_start] + replacement + text[member.value_end :]
