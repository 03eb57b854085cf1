"""TUI settings from ``CHIT_HOME/config.toml``: ``[tui]`` and ``[keymap]``.

``[keymap]`` maps binding ids to keys, e.g. ``"chit.cancel" = "ctrl+k"``; Textual's
``App.set_keymap`` applies it (ids are listed in ``docs/tui.md`` and on the ``?`` screen).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from chit.home import Home

DEFAULT_THEME = "textual-dark"


@dataclass(frozen=True)
class TuiSettings:
    """What the user may configure.

    Attributes:
        theme: a Textual theme name.
        bell: ring the terminal bell on input required / completed / failed / near expiry.
        tick: seconds between refreshes of the freshness and countdown columns.
        keymap: binding id → keys.
    """

    theme: str = DEFAULT_THEME
    bell: bool = True
    tick: float = 1.0
    keymap: dict[str, str] = field(default_factory=dict)


def load_settings(home: Home) -> TuiSettings:
    """Read ``[tui]`` and ``[keymap]``; a missing or broken file yields the defaults."""
    from chit.servers.toml_io import ConfigError, read

    try:
        # Non-blocking, type-checked, size-capped: a FIFO here must not hang the TUI.
        doc = read(home.config_path)
    except ConfigError:
        return TuiSettings()
    tui: dict[str, object] = doc["tui"] if isinstance(doc.get("tui"), dict) else {}
    keymap: dict[str, object] = doc["keymap"] if isinstance(doc.get("keymap"), dict) else {}
    return TuiSettings(
        theme=str(tui.get("theme", DEFAULT_THEME)),
        bell=bool(tui.get("bell", True)),
        tick=_tick(tui.get("tick", 1.0)),
        keymap={str(k): str(v) for k, v in keymap.items()},
    )


def _tick(value: object) -> float:
    """``[tui] tick`` as seconds in [0.25, 60]; anything else (text, nan, inf) is 1.0."""
    try:
        seconds = float(str(value))
    except ValueError:
        return 1.0
    if not math.isfinite(seconds):
        return 1.0
    return min(60.0, max(0.25, seconds))
