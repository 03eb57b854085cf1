"""A real crash of the TUI, as a person meets it: a process in a terminal that ends.

A bug outside any worker (those become toasts: ``test_tui_robust.py``) ends Textual's
app. Then ``chit`` must exit 1 (INTERNAL, docs/cli.md), say in one line where the log is,
and ``chit demo`` must keep its throwaway home — the evidence — and print its path.
The bug is injected with the documented test-only ``CHIT_TUI_FAULT=tick`` (the first
clock tick after the first load raises, unhandled), in a real ``chit`` process whose
standard streams are a pseudo-terminal (without one chit prints its help instead;
Textual draws on stderr, and the lines after the crash come there too).
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pytest

from chit.errors import ExitCode
from tests.tui.seed import seed

pytestmark = pytest.mark.timeout(240)

LOG_LINE = re.compile(r"chit: the TUI stopped on an unexpected error; log: (\S+)")


ANSI = re.compile(r"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")
"""Terminal control sequences (what is left is the text a person reads)."""


def _run_in_a_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``chit ARGS`` in a 120×40 pty until it ends: exit code, and the text it wrote."""
    main, sub = pty.openpty()
    fcntl.ioctl(sub, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "chit", *args],
        stdin=sub,
        stdout=sub,
        stderr=sub,
        env=env,
        start_new_session=True,
    )
    os.close(sub)
    drawn = bytearray()

    def drain() -> None:  # an unread pty fills up and blocks the app's writes
        try:
            while chunk := os.read(main, 65536):
                drawn.extend(chunk)
        except OSError:  # EIO: every process on the terminal is gone
            return

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout=180)  # the event: it ends (the limit is only a limit)
        reader.join(30)  # what it wrote last is read before the terminal reports EIO
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        os.close(main)
    return code, ANSI.sub("", drawn.decode(errors="replace")).replace("\r", "")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHIT_")}
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    env.update(TERM="xterm-256color", TMPDIR=str(tmp_path), CHIT_TUI_FAULT="tick", **extra)
    return env


def test_a_crash_of_the_demo_exits_1_names_the_log_and_keeps_the_home(tmp_path: Path) -> None:
    code, err = _run_in_a_terminal(["demo"], _env(tmp_path))
    assert code == ExitCode.INTERNAL and ExitCode.INTERNAL.value == 1, err
    assert "in-memory key store" in err  # the TUI was up (its banner) before it crashed
    kept = re.search(r"demo home kept at (\S+)", err)
    assert kept is not None, err
    home = Path(kept.group(1))
    assert home.is_dir() and home.parent == tmp_path  # not deleted: the evidence
    assert (home / "chit.db").exists() or any(home.rglob("chit.db"))
    log = LOG_LINE.search(err)
    assert log is not None, err
    assert Path(log.group(1)).is_file() and Path(log.group(1)).is_relative_to(home)
    assert "CHIT_TUI_FAULT=tick" in err  # the error itself is shown once the terminal is back


def test_a_crash_of_chit_exits_1_and_names_the_log(tmp_path: Path) -> None:
    home = seed(tmp_path / "home")
    env = _env(tmp_path, CHIT_HOME=str(home.root), CHIT_NO_DAEMON="1", CHIT_KEY_STORE="memory")
    code, err = _run_in_a_terminal([], env)
    assert code == 1, err
    log = LOG_LINE.search(err)
    assert log is not None, err
    assert Path(log.group(1)).is_file() and Path(log.group(1)).is_relative_to(home.root)
    assert "demo home" not in err
    drew = err.split("chit: the TUI stopped")[0]
    assert f"chit {home.root}" in drew  # the TUI was up (its title line) before it crashed
