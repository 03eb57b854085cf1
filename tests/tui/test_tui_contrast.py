"""Contrast ≥ 4.5:1 (WCAG AA) for text and badges in the default themes, computed.

Each badge style is resolved against the theme's variables exactly as the table does,
and measured against the background the table really paints, in a running app.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.style import Style
from textual.color import Color

from chit.receipts import RetrievalCondition
from chit.tui.app import ChitApp
from chit.tui.widgets.badges import (
    CONDITION_STYLE,
    ERROR_RESULT,
    RECORD_STYLE,
    STATE_STYLE,
    VERDICT_STYLE,
    contrast,
    palette,
    resolve,
)
from chit.tui.widgets.receipt_table import ReceiptTable
from tests.tui.conftest import FakeSupervisor, make_app
from tests.tui.helpers import settle

pytestmark = pytest.mark.anyio

THEMES = ["textual-dark", "textual-light"]
"""The default themes (dark is chit's default; light is Textual's other built-in)."""

MINIMUM = 4.5


def badge_styles() -> dict[str, str]:
    styles = {f"state {s.value}": style for s, (_, style) in STATE_STYLE.items()}
    styles["done!"] = ERROR_RESULT[1]
    styles |= {f"verdict {k}": style for k, (_, style) in VERDICT_STYLE.items()}
    styles |= {f"condition {c.value}": CONDITION_STYLE[c] for c in RetrievalCondition}
    styles["work record"] = RECORD_STYLE
    styles["near expiry"] = "bold $text-warning"
    return styles


@pytest.mark.parametrize("theme", THEMES)
async def test_badges_and_text_are_legible(tmp_path: Path, theme: str) -> None:
    app: ChitApp = make_app(tmp_path / "home", supervisor=FakeSupervisor())
    async with app.run_test(size=(120, 30)) as pilot:
        app.theme = theme
        await settle(pilot)
        variables = palette(app.theme_variables)  # what the table paints with
        table = app.screen.query_one(ReceiptTable)
        background = table.background_colors[1]
        low: dict[str, float] = {}
        for name, style in badge_styles().items():
            rich = Style.parse(resolve(style, variables))
            assert rich.color is not None, name
            fg = background + Color.from_rich_color(rich.color)
            ratio = contrast(fg, background)
            if ratio < MINIMUM:
                low[name] = round(ratio, 2)
        assert not low, f"{theme}: below {MINIMUM}:1 — {low}"
        status = app.screen.query_one("#status")
        bg, fg = status.background_colors[1], status.colors[1]
        assert contrast(fg, bg) >= MINIMUM, "status line"


@pytest.mark.parametrize("theme", THEMES)
async def test_form_errors_are_legible_on_the_dialog(tmp_path: Path, theme: str) -> None:
    from tests.tui.helpers import select
    from tests.tui.seed import rid

    app: ChitApp = make_app(tmp_path / "home", supervisor=FakeSupervisor())
    async with app.run_test(size=(120, 40)) as pilot:
        app.theme = theme
        await settle(pilot)
        await select(pilot, rid(2))
        await pilot.press("r")
        await settle(pilot)
        await pilot.press("ctrl+s")
        await settle(pilot)
        for widget in (app.screen.query_one("#error-0"), app.screen.query_one("#form-error")):
            bg, fg = widget.background_colors[1], widget.colors[1]
            assert contrast(fg, bg) >= MINIMUM, f"{theme}: {widget.id} {contrast(fg, bg):.2f}"


@pytest.mark.parametrize("theme", THEMES)
async def test_protocol_log_styles_are_legible(tmp_path: Path, theme: str) -> None:
    """Every style of the protocol log, on every background it is painted on, ≥ 4.5:1."""
    from textual.widgets import DataTable

    from chit.tui.screens.protocol_log import LOG_STYLE, ProtocolLogScreen
    from tests.tui.helpers import select
    from tests.tui.seed import rid
    from tests.tui.test_tui_protocol_log import LogBackend

    app: ChitApp = make_app(tmp_path / "home", supervisor=FakeSupervisor(), backend=LogBackend)
    async with app.run_test(size=(120, 40)) as pilot:
        app.theme = theme
        await settle(pilot)
        await select(pilot, rid(6))
        await pilot.press("l")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ProtocolLogScreen)
        styles = screen.styles_of
        assert styles.keys() == LOG_STYLE.keys()
        table = screen.query_one("#messages", DataTable)
        # What is painted is these styles: a sent row, a received row, an error row.
        sent, received, error = (table.get_row_at(i) for i in range(3))
        assert str(sent[1].style) == styles["sent"] and str(received[1].style) == styles["received"]
        assert str(error[2].style) == styles["error"] and str(sent[3].style) == styles["json"]
        assert str(sent[0].style) == styles["time"]
        backgrounds = {
            "the table": table.background_colors[1],
            "the message pane": screen.query_one("#message").background_colors[1],
            "the note": screen.query_one("#log-note").background_colors[1],
        }
        low: dict[str, float] = {}
        for name, style in styles.items():
            rich = Style.parse(style)
            assert rich.color is not None, name
            for where, background in backgrounds.items():
                ratio = contrast(background + Color.from_rich_color(rich.color), background)
                if ratio < MINIMUM:
                    low[f"{name} on {where}"] = round(ratio, 2)
        header = table.get_component_rich_style("datatable--header")
        assert header.color is not None and header.bgcolor is not None
        header_bg = Color.from_rich_color(header.bgcolor)
        ratio = contrast(header_bg + Color.from_rich_color(header.color), header_bg)
        if ratio < MINIMUM:
            low["the table's header"] = round(ratio, 2)
        assert not low, f"{theme}: below {MINIMUM}:1 — {low}"
