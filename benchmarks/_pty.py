"""An open TUI for the benchmarks: ``chit`` in a pseudo-terminal, its output drained.

Shared by ``benchmarks/daemon.py`` and ``benchmarks/tui.py``, which measure the CPU an
open TUI uses while nothing changes.
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def open_tui(
    env: dict[str, str], *, drawn: bytes, timeout: float, rows: int = 48, cols: int = 160
) -> Iterator[tuple[subprocess.Popen[bytes], bool]]:
    """Run ``chit`` (the TUI) in a ``rows``×``cols`` pty until ``drawn`` appears on it.

    Yields the TUI's process and whether ``drawn`` appeared within ``timeout`` seconds;
    the TUI is terminated afterwards. A thread reads the pty all along: an unread pty
    fills up and blocks the app's writes.
    """
    main, sub = pty.openpty()
    fcntl.ioctl(sub, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    tui = subprocess.Popen(
        [sys.executable, "-m", "chit"],
        env=env,
        stdin=sub,
        stdout=sub,
        stderr=sub,
        start_new_session=True,
    )
    os.close(sub)
    screen = bytearray()

    def drain() -> None:
        try:
            while chunk := os.read(main, 65536):
                screen.extend(chunk)
        except OSError:
            return

    threading.Thread(target=drain, daemon=True).start()
    try:
        deadline = time.monotonic() + timeout
        while drawn not in screen and time.monotonic() < deadline:
            time.sleep(0.1)
        yield tui, drawn in screen
    finally:
        tui.terminate()
        tui.wait(30)
        os.close(main)


def load() -> str:
    """The load average, as ``uptime`` shows it."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} cores)"
