"""JSON-path lookup and comparison for acceptance checks (``json PATH OP VALUE``).

Private helpers of :mod:`chit.receipts.acceptance`: where the JSON of a tool result comes
from, how a parsed path is rendered and looked up, and how JSON values compare.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeAlias

PathStep: TypeAlias = str | int

MISSING: Final = object()
"""The sentinel for "no such value" (distinct from JSON ``null``)."""
_SHOW: Final = 60
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
"""A path segment that renders bare (``.name``) rather than quoted (``["odd key"]``)."""


def reject_constant(name: str) -> Any:
    """``parse_constant`` hook: ``NaN``/``Infinity`` are not JSON."""
    raise ValueError(f"{name} is not JSON")


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("number out of range")
    return value


DECODER: Final = json.JSONDecoder(
    parse_constant=reject_constant,
    parse_float=lambda text: _finite(float(text)),
)
"""Decodes the JSON literals of an expression: finite numbers only, no ``NaN``."""


def depth(value: Any) -> int:
    """How deeply ``value`` nests (a scalar is 1), computed without recursion."""
    depth, level = 0, [(value, 1)]
    while level:
        item, d = level.pop()
        depth = max(depth, d)
        if isinstance(item, list | dict):
            level.extend((v, d + 1) for v in (item.values() if isinstance(item, dict) else item))
    return depth


def dumps(value: Any) -> str:
    """Compact, key-sorted JSON, non-ASCII kept as is."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def show(value: Any) -> str:
    """``value`` as JSON, cut to a readable length."""
    text = dumps(value)
    return text if len(text) <= _SHOW else text[: _SHOW - 1] + "…"


def render_path(path: Sequence[PathStep]) -> str:
    """Render a parsed path in its normalized ``$``-form, e.g. ``$.items[0]["a b"]``."""
    out = ["$"]
    for step in path:
        if isinstance(step, int):
            out.append(f"[{step}]")
        elif NAME.fullmatch(step):
            out.append(f".{step}")
        else:
            out.append(f"[{dumps(step)}]")
    return "".join(out)


def json_source(result: Mapping[str, Any]) -> tuple[Any, str]:
    """The JSON a path is looked up in, and where it came from (or ``MISSING`` and why)."""
    structured = result.get("structuredContent")
    if structured is not None:
        return structured, "structuredContent"
    content = result.get("content")
    for block in content if isinstance(content, list) else ():
        if isinstance(block, Mapping) and block.get("type") == "text":
            try:
                return json.loads(str(block.get("text")), parse_constant=reject_constant), (
                    "the JSON text block"
                )
            except (ValueError, RecursionError):
                continue
    return MISSING, "no structuredContent and no JSON text block"


def lookup(root: Any, path: tuple[PathStep, ...]) -> tuple[Any, str]:
    """The value at ``path`` in ``root``, or ``MISSING`` and which step is missing."""
    node = root
    for n, step in enumerate(path):
        where = render_path(path[: n + 1])
        if isinstance(node, Mapping):
            key = str(step)
            if key not in node:
                return MISSING, f"{where} is missing"
            node = node[key]
        elif isinstance(node, list) and isinstance(step, int):
            if not -len(node) <= step < len(node):
                return MISSING, f"{where} is missing (list length {len(node)})"
            node = node[step]
        else:
            return MISSING, f"{where} is missing ({render_path(path[:n])} is {show(node)})"
    return node, ""


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_json_equal, a, b))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


def compare(found: Any, op: str, value: Any) -> bool | None:
    """``found op value`` with JSON semantics; ``None`` if the two cannot be ordered."""
    if op in ("==", "!="):
        return _json_equal(found, value) == (op == "==")
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (found, value))
    strings = isinstance(found, str) and isinstance(value, str)
    if not (numbers or strings):
        return None
    if numbers and not all(math.isfinite(v) for v in (found, value)):
        return None
    return bool(
        {"<": found < value, "<=": found <= value, ">": found > value, ">=": found >= value}[op]
    )
