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

from chit.receipts import AcceptanceState, LifecycleState, Receipt, RetrievalCondition, is_success

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


def palette(variables: dict[str, str]) -> dict[str, str]:
    """The theme's variables with every text colour made legible (cached per theme)."""
    return _legible(tuple(sorted(variables.items())))


def resolve(style: str, variables: dict[str, str]) -> str:
    """``style`` with ``$name`` replaced by the theme's colour."""
    for name in sorted(variables, key=len, reverse=True):
        if f"${name}" in style:
            style = style.replace(f"${name}", variables[name])
    return style


def state_badge(receipt: Receipt, variables: dict[str, str]) -> Text:
    """The state cell: a coloured word; ``done!`` marks a completed-with-error outcome."""
    label, style = STATE_STYLE[receipt.state]
    completed = receipt.state is LifecycleState.COMPLETED and receipt.outcome is not None
    if completed and not is_success(receipt):
        label, style = ERROR_RESULT
    return Text(label, style=resolve(style, variables))


def verdict_kind(receipt: Receipt) -> str | None:
    """Which verdict a receipt shows (None while the task runs)."""
    if not receipt.is_terminal:
        return None
    a = receipt.acceptance
    by_person = a.decided_by in (None, "user")
    if a.state is AcceptanceState.ACCEPTED:
        return "accepted" if by_person else "checked_ok"
    if a.state is AcceptanceState.REJECTED:
        return "rejected" if by_person else "checked_bad"
    if a.state is AcceptanceState.NOT_REQUIRED:
        return "not_required"
    return "to_judge"


def verdict_badge(receipt: Receipt, variables: dict[str, str]) -> Text:
    """The verdict cell: empty while running, else what was decided (or that it waits)."""
    kind = verdict_kind(receipt)
    if kind is None:
        return Text("")
    label, style = VERDICT_STYLE[kind]
    return Text(label, style=resolve(style, variables))


def styled(text: str, style: str, variables: dict[str, str]) -> Text:
    """``Text(text)`` in a style that may name theme variables (never markup)."""
    return Text(text, style=resolve(style, variables))
