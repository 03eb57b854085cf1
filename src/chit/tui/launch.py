"""Build the app for a home: key store and Supervisor are resolved BEFORE Textual starts.

Asking the OS keyring can prompt, block or print; doing it while Textual owns the
terminal would garble the screen or hang it. So the launcher decides the mode first
(read-only with a banner when the key store is unavailable) and only then builds the app.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chit.errors import ChitError
from chit.home import Home, ensure_private_dir, ensure_private_file
from chit.tui.backend import Backend, Mode
from chit.tui.config import load_settings

log = logging.getLogger(__name__)


def key_store_mode(home: Home, readonly: bool, environ: Mapping[str, str]) -> Mode:
    """Decide read-only, banner and note from ``--readonly`` and the key store."""
    from chit.runtime.keys import diagnose_home_key

    # Told what the home holds sealed: a deleted key over sealed values is "missing"
    # (read-only banner), never "no key yet" followed by a failing Supervisor.
    report = diagnose_home_key(home, environ)
    if not report["usable"]:
        problem = f"Key store unavailable: {report['why']}."
        if report.get("fix"):
            problem += f" Fix: {report['fix']}."
        return Mode(readonly=True, banner=problem + " Read-only until then.")
    note: str | None = None
    if report["kind"] == "memory":
        note = "key store: memory (demo: handles vanish on exit)"
    banner = "Read-only: --readonly" if readonly else None
    return Mode(readonly=readonly, banner=banner, note=note)


def start_engine(
    home: Home, mode: Mode, *, use_daemon: bool = True, options: Any = None
) -> tuple[Any | None, Mode]:
    """Open the home's engine for the TUI: the daemon's (started on demand) by default.

    With ``use_daemon=False`` (``--no-daemon``) the engine runs in this process, and only
    watches when another process (a ``chit daemon``) holds the reconciler's lease. When
    no engine can be had, the TUI still shows the store, read-only, and says why.
    """
    if mode.readonly:
        return None, mode
    from chit.tui.engine_host import EngineHost

    try:
        host = EngineHost.start(home, use_daemon=use_daemon, options=options)
    except Exception as exc:  # the TUI still shows the store; say why nothing reconciles
        # The banner says it: an expected ChitError is only logged (no terminal line, no
        # traceback); anything else is a bug and is logged with its traceback.
        if isinstance(exc, ChitError):
            log.info("engine did not start: %s", exc.message)
        else:
            log.warning("engine did not start: %s", exc, exc_info=True)
        why = exc.message if isinstance(exc, ChitError) else f"{type(exc).__name__}: {exc}"
        return None, Mode(True, f"Not reconciling: {why}. Read-only.", mode.note, mode.viewer)
    if host.is_viewer:
        banner = "Viewer: another chit (e.g. chit daemon) holds the lease and reconciles."
        return host, Mode(mode.readonly, banner, mode.note, viewer=True)
    return host, mode


def build_app(
    home: Home,
    *,
    readonly: bool = False,
    environ: Mapping[str, str] | None = None,
    supervisor: Any | None = None,
    use_daemon: bool = True,
    options: Any = None,
) -> Any:
    """Return a ready ``ChitApp`` for ``home`` (Textual is imported only here).

    Args:
        supervisor: a host already open (tests); None opens the home's engine.
        use_daemon: be the daemon's client (default); False runs the engine here.
        options: ``SupervisorOptions`` for an engine in this process.
    """
    env = os.environ if environ is None else environ
    home.ensure()
    mode = key_store_mode(home, readonly, env)
    if supervisor is None:
        supervisor, mode = start_engine(home, mode, use_daemon=use_daemon, options=options)
    from chit.tui.app import ChitApp

    settings = load_settings(home)
    return ChitApp(Backend(home, mode, supervisor), settings, tick=settings.tick)


LOG_BYTES = 1_000_000
"""The TUI's log file is rotated at this size (three old files are kept)."""


def log_path(home: Home) -> Path:
    """Where the TUI writes its log lines: ``logs/tui.log`` in the home."""
    return home.root / "logs" / "tui.log"


def install_log(home: Home) -> Path:
    """Send chit's log lines (warnings and errors) to the home's ``logs/tui.log``.

    Nothing may write to the terminal while Textual owns it, so unexpected errors are
    told in a toast and written here with their traceback.
    """
    path = log_path(home)
    ensure_private_dir(path.parent)
    ensure_private_file(path)
    handler = logging.handlers.RotatingFileHandler(
        path, maxBytes=LOG_BYTES, backupCount=3, encoding="utf-8"
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    root = logging.getLogger("chit")
    root.addHandler(handler)
    root.setLevel(min(root.level or logging.INFO, logging.INFO))
    return path


def run(app: Any, home: Home) -> int:
    """Run ``app`` until it ends; the process exit code (non-zero after a crash).

    Textual ends the app on an unhandled exception and prints its traceback once the
    terminal is back; this adds one line saying where the log is.
    """
    path = install_log(home)
    app.run()
    code = int(app.return_code or 0)
    if code:
        import sys

        print(f"chit: the TUI stopped on an unexpected error; log: {path}", file=sys.stderr)
    return code
