"""chit.tui — the supervisor TUI (Textual). Only this package and ``chit.cli`` import Textual.

Start at :func:`chit.tui.launch.build_app`; the app is :class:`chit.tui.app.ChitApp`.
"""
