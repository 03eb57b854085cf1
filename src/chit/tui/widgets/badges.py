"""Rich text for states, freshness and work records (shared by the table and the detail)."""

from __future__ import annotations

from rich.text import Text

from chit.receipts import LifecycleState, Receipt, RetrievalCondition, is_success

STATE_STYLE: dict[LifecycleState, tuple[str, str]] = {
    LifecycleState.WORKING: ("working", "bold $accent"),
    LifecycleState.INPUT_REQUIRED: ("INPUT", "bold reverse $warning"),
    LifecycleState.COMPLETED: ("done", "bold $success"),
    LifecycleState.FAILED: ("failed", "bold $error"),
    LifecycleState.CANCELLED: ("cancelled", "$text-muted"),
}
"""Label and style of each lifecycle state (Textual theme variables)."""

CONDITION_STYLE: dict[RetrievalCondition, str] = {
    RetrievalCondition.FRESH: "$text-muted",
    RetrievalCondition.STALE: "bold $warning",
    RetrievalCondition.UNREACHABLE: "bold $error",
    RetrievalCondition.VANISHED: "bold $error",
    RetrievalCondition.EXPIRED: "$error",
    RetrievalCondition.INCOMPATIBLE: "bold $error",
}
"""Style of each retrieval condition."""


def _theme(style: str, variables: dict[str, str]) -> str:
    for name, value in variables.items():
        style = style.replace(f"${name}", value)
    return style


def state_badge(receipt: Receipt, variables: dict[str, str]) -> Text:
    """The state cell: a coloured word; ``done!`` marks a completed-with-error outcome."""
    label, style = STATE_STYLE[receipt.state]
    completed = receipt.state is LifecycleState.COMPLETED and receipt.outcome is not None
    if completed and not is_success(receipt):
        label, style = "done!", "bold $error"
    return Text(label, style=_theme(style, variables))


def styled(text: str, style: str, variables: dict[str, str]) -> Text:
    """``Text(text)`` in a style that may name theme variables."""
    return Text(text, style=_theme(style, variables))
