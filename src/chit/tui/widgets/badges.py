"""Rich text for states, verdicts, freshness and work records (table and detail).

Every colour is a theme variable of the ``text-*`` family (or the foreground). Themes
do not promise those are legible on their own backgrounds (``textual-light``'s warning
text measured 2.7:1), so :func:`palette` lightens or darkens each until it reaches
:data:`MIN_CONTRAST` against every background chit paints text on;
``tests/tui/test_tui_contrast.py`` measures the result in a running app.
"""

from __future__ import annotations

from functools import lru_cache

from rich.text import Text
from textual.color import Color

from chit.receipts import LifecycleState, RetrievalCondition
from chit.tui.view import Row

STATE_STYLE: dict[LifecycleState, tuple[str, str]] = {
    LifecycleState.WORKING: ("working", "$text-primary"),
    LifecycleState.INPUT_REQUIRED: ("INPUT", "bold $text-warning"),
    LifecycleState.COMPLETED: ("done", "bold $text-success"),
    LifecycleState.FAILED: ("failed", "bold $text-error"),
    LifecycleState.CANCELLED: ("cancelled", "$foreground"),
}
"""Label and style of each lifecycle state (Textual theme variables)."""

ERROR_RESULT = ("done!", "bold $text-error")
"""A completed task whose result is an error (``isError`` or a JSON-RPC error)."""

CONDITION_STYLE: dict[RetrievalCondition, str] = {
    RetrievalCondition.FRESH: "$foreground",
    RetrievalCondition.STALE: "bold $text-warning",
    RetrievalCondition.UNREACHABLE: "bold $text-error",
    RetrievalCondition.VANISHED: "bold $text-error",
    RetrievalCondition.EXPIRED: "$text-error",
    RetrievalCondition.INCOMPATIBLE: "bold $text-error",
}
"""Style of each retrieval condition."""

VERDICT_STYLE: dict[str, tuple[str, str]] = {
    "accepted": ("✓ accepted", "$text-success"),
    "rejected": ("✗ rejected", "bold $text-error"),
    "checked_ok": ("✓ by check", "$text-success"),
    "checked_bad": ("✗ by check", "$text-error"),
    "to_judge": ("• to judge", "bold $text-warning"),
    "not_required": ("– none", "$foreground"),
}
"""Label and style of each verdict the table shows."""

RECORD_STYLE = "bold $text-secondary"
"""A work record's status on its group row."""


MIN_CONTRAST = 4.6
"""WCAG AA asks 4.5:1 for text; a little more covers the table's own tint."""

TEXT_VARIABLES = (
    "text-primary",
    "text-secondary",
    "text-warning",
    "text-error",
    "text-success",
    "foreground",
)
"""The colours badges and cells use."""

BACKGROUNDS = ("surface", "panel", "background", "surface-lighten-1", "surface-darken-1")
"""What text is painted on (the table sits on the surface, the status line on panel)."""


def _luminance(color: Color) -> float:
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(color.r) + 0.7152 * channel(color.g) + 0.0722 * channel(color.b)


def contrast(fg: Color, bg: Color) -> float:
    """The WCAG contrast ratio of two opaque colours (1 to 21)."""
    light, dark = sorted((_luminance(fg), _luminance(bg)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


@lru_cache(maxsize=16)
def _legible(items: tuple[tuple[str, str], ...]) -> dict[str, str]:
    variables = dict(items)
    backs = [Color.parse(variables[k]) for k in BACKGROUNDS if k in variables]
    if not backs:
        return variables
    dark = sum(_luminance(b) for b in backs) / len(backs) < 0.4
    for name in TEXT_VARIABLES:
        if name not in variables:
            continue
        color = Color.parse(variables[name])
        for _ in range(60):
            if min(contrast(color, b) for b in backs) >= MIN_CONTRAST:
                break
            color = color.lighten(0.02) if dark else color.darken(0.02)
        variables[name] = color.hex
    return variables


_PALETTES: dict[int, tuple[dict[str, str], dict[str, str]]] = {}
_RESOLVED: dict[tuple[str, int], tuple[dict[str, str], str]] = {}


def palette(variables: dict[str, str]) -> dict[str, str]:
    """The theme's variables with every text colour made legible (cached per theme).

    Called for every row the table draws: the cache is looked up by the dict's identity
    (a theme change makes a new dict) before its items are sorted into the key.
    """
    hit = _PALETTES.get(id(variables))
    if hit is not None and hit[0] is variables:
        return hit[1]
    result = _legible(tuple(sorted(variables.items())))
    if len(_PALETTES) >= 16:
        _PALETTES.clear()
    _PALETTES[id(variables)] = (variables, result)
    return result


def resolve(style: str, variables: dict[str, str]) -> str:
    """``style`` with ``$name`` replaced by the theme's colour (cached per style and theme)."""
    hit = _RESOLVED.get((style, id(variables)))
    if hit is not None and hit[0] is variables:
        return hit[1]
    resolved = style
    for name in sorted(variables, key=len, reverse=True):
        if f"${name}" in resolved:
            resolved = resolved.replace(f"${name}", variables[name])
    if len(_RESOLVED) >= 4096:
        _RESOLVED.clear()
    _RESOLVED[(style, id(variables))] = (variables, resolved)
    return resolved


def state_badge(row: Row, variables: dict[str, str]) -> Text:
    """The state cell: a coloured word; ``done!`` marks a completed-with-error outcome."""
    label, style = ERROR_RESULT if row.error else STATE_STYLE[row.state]
    return Text(label, style=resolve(style, variables))


def verdict_badge(row: Row, variables: dict[str, str]) -> Text:
    """The verdict cell: empty while running, else what was decided (or that it waits)."""
    if row.verdict is None:
        return Text("")
    label, style = VERDICT_STYLE[row.verdict]
    return Text(label, style=resolve(style, variables))


def styled(text: str, style: str, variables: dict[str, str]) -> Text:
    """``Text(text)`` in a style that may name theme variables (never markup)."""
    return Text(text, style=resolve(style, variables))
