"""A tool's input schema as text a person reads (``chit tools SERVER TOOL``).

Works on plain data — the tool's name, texts, task support and ``inputSchema`` dict — so it
renders the in-process listing and the daemon's alike. The schema is the server's: every
text is made printable and cut short, nesting and the number of lines are bounded, and
``$ref`` is shown, not followed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

MAX_DEPTH = 4
"""Nested objects and arrays shown this deep (then "…")."""

MAX_LINES = 200
"""Lines of one schema (then "… N more lines")."""

MAX_CHOICES = 20
"""Enum values / oneOf choices listed per property."""


class ToolLike(Protocol):
    """What :func:`tool_lines` reads of a tool (``ToolRow`` and the engine's ``ToolInfo``)."""

    name: str
    title: str | None
    description: str | None
    task_support: str
    input_schema: dict[str, Any]


def plain(text: Any, limit: int = 120) -> str:
    """A value as one printable line, cut to ``limit`` characters."""
    flat = " ".join(str(text).split())
    shown = "".join(c if c.isprintable() else "?" for c in flat)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def tool_lines(server: str, tool: ToolLike) -> list[str]:
    """The tool: its name and title, description, task support, then its arguments."""
    head = f"{plain(server, 60)}/{plain(tool.name, 80)}"
    if tool.title and tool.title != tool.name:
        head += f" — {plain(tool.title)}"
    lines = [head]
    if tool.description:
        lines += [f"  {plain(line, 200)}" for line in tool.description.strip().splitlines()[:20]]
    lines.append(f"tasks: {plain(tool.task_support, 20)}")
    lines.append("arguments:")
    lines += schema_lines(tool.input_schema, indent="  ")
    return lines


def schema_lines(schema: Any, indent: str = "") -> list[str]:
    """An object schema's properties, one line each (nested ones indented under them)."""
    out: list[str] = []
    _object(schema, indent, 0, out)
    if not out:
        out.append(f"{indent}(none)")
    if len(out) > MAX_LINES:
        out = [*out[:MAX_LINES], f"{indent}… {len(out) - MAX_LINES} more lines"]
    return out


def _object(schema: Any, indent: str, depth: int, out: list[str]) -> None:
    if not isinstance(schema, Mapping):
        out.append(f"{indent}(the schema is not an object: {plain(json.dumps(schema), 60)})")
        return
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return
    listed = schema.get("required")
    required = {r for r in listed if isinstance(r, str)} if isinstance(listed, list) else set()
    width = min(24, max((len(plain(n, 40)) for n in props), default=0))
    for name, prop in props.items():
        if len(out) > MAX_LINES:
            return
        label = plain(name, 40).ljust(width)
        out.append(f"{indent}{label}  {describe(prop, name in required)}")
        if depth + 1 >= MAX_DEPTH:
            continue
        nested = _nested(prop)
        if nested is not None:
            _object(nested, indent + "  ", depth + 1, out)
    if schema.get("additionalProperties") is False:
        out.append(f"{indent}(no other arguments)")


def _nested(prop: Any) -> Any:
    if not isinstance(prop, Mapping):
        return None
    if isinstance(prop.get("properties"), Mapping):
        return prop
    items = prop.get("items")
    if isinstance(items, Mapping) and isinstance(items.get("properties"), Mapping):
        return items
    return None


def describe(prop: Any, required: bool) -> str:
    """One property: type, required, choices (with titles), bounds, default, then its text."""
    if not isinstance(prop, Mapping):
        return "(not a schema)"
    parts = [_type(prop), "required" if required else "optional"]
    parts += _bounds(prop)
    if "default" in prop:
        parts.append(f"default {plain(json.dumps(prop['default']), 40)}")
    text = " — ".join(
        plain(prop[k]) for k in ("title", "description") if isinstance(prop.get(k), str)
    )
    choices = _choices(prop)
    line = ", ".join(parts)
    if choices:
        line += f"; one of {choices}"
    return f"{line}: {text}" if text else line


def _type(prop: Mapping[str, Any]) -> str:
    if "$ref" in prop:
        return f"see {plain(prop['$ref'], 60)}"
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = " or ".join(plain(k, 20) for k in kind)
    elif kind is None:
        kind = "any" if not _choices(prop) else "choice"
    else:
        kind = plain(kind, 20)
    if kind == "array":
        items = prop.get("items")
        if isinstance(items, Mapping):
            inner = items.get("type")
            kind = f"array of {plain(inner, 20)}" if isinstance(inner, str) else "array"
    fmt = prop.get("format")
    return f"{kind} ({plain(fmt, 20)})" if isinstance(fmt, str) else kind


def _choices(prop: Mapping[str, Any]) -> str:
    values: list[str] = []
    if isinstance(prop.get("enum"), list):
        names = prop.get("enumNames")
        titles = names if isinstance(names, list) and len(names) == len(prop["enum"]) else None
        for i, value in enumerate(prop["enum"]):
            shown = plain(json.dumps(value), 40)
            if titles is not None and isinstance(titles[i], str) and titles[i] != value:
                shown += f" ({plain(titles[i], 40)})"
            values.append(shown)
    else:
        options = prop.get("oneOf", prop.get("anyOf"))
        if isinstance(options, list) and all(
            isinstance(o, Mapping) and "const" in o for o in options
        ):
            for option in options:
                shown = plain(json.dumps(option["const"]), 40)
                title = option.get("title")
                if isinstance(title, str) and title != option["const"]:
                    shown += f" ({plain(title, 40)})"
                values.append(shown)
    if len(values) > MAX_CHOICES:
        values = [*values[:MAX_CHOICES], f"… {len(values) - MAX_CHOICES} more"]
    return ", ".join(values)


def _bounds(prop: Mapping[str, Any]) -> list[str]:
    out = []
    for key, word in (
        ("minimum", ">="),
        ("exclusiveMinimum", ">"),
        ("maximum", "<="),
        ("exclusiveMaximum", "<"),
        ("minLength", "length >="),
        ("maxLength", "length <="),
        ("minItems", "items >="),
        ("maxItems", "items <="),
    ):
        value = prop.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out.append(f"{word} {plain(value, 20)}")
    return out
