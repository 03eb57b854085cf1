"""``chit demo`` stops its daemon and every server, and deletes its home, however it ends.

A SIGTERM (a service manager, ``kill``), a SIGHUP (a closed terminal) or a SIGINT ends
the demo the way quitting does — before, the default SIGTERM left the throwaway home
behind (the daemon only followed through ``CHIT_DAEMON_EXIT_WITH``).
"""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from tests.daemon_support import stray_daemons, wait_gone
from tests.test_daemon_upkeep import _demo_servers

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not Path("/proc").is_dir(), reason="processes are found through /proc"),
]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHIT_")}
    env["TMPDIR"] = str(tmp_path)
    return env


def _running(tmp_path: Path, demo: subprocess.Popen[bytes]) -> tuple[int, list[int]]:
    """Wait until the demo's daemon and its demo server run; their pids."""
    deadline = time.monotonic() + 90
    while True:
        daemons, servers = stray_daemons(tmp_path), _demo_servers(tmp_path)
        if daemons and servers:
            return daemons[0], servers
        assert demo.poll() is None, f"the demo ended early ({demo.returncode})"
        assert time.monotonic() < deadline, "the demo's daemon or server never ran"
        time.sleep(0.1)


def _all_gone(tmp_path: Path, daemon: int, servers: list[int]) -> None:
    assert not wait_gone([daemon, *servers], 30), "the demo's daemon or a server outlived it"
    assert stray_daemons(tmp_path) == [] and _demo_servers(tmp_path) == []
    assert not any(tmp_path.glob("chit-demo-*")), "the throwaway home was left behind"


@pytest.mark.parametrize(
    ("sig", "code"),
    [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)],
)
def test_a_signalled_headless_demo_cleans_up(tmp_path: Path, sig: int, code: int) -> None:
    demo = subprocess.Popen(
        [sys.executable, "-m", "chit", "demo", "--headless-seconds", "600"],
        env=_env(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        daemon, servers = _running(tmp_path, demo)
        demo.send_signal(sig)
        _out, err = demo.communicate(timeout=60)
        assert demo.returncode == code, err
        assert b"Traceback" not in err
        _all_gone(tmp_path, daemon, servers)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()


def test_a_terminated_demo_tui_quits_and_cleans_up(tmp_path: Path) -> None:
    """The TUI owns the terminal: SIGTERM quits the app, then the clean-up runs."""
    main, sub = pty.openpty()
    fcntl.ioctl(sub, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    demo = subprocess.Popen(
        [sys.executable, "-m", "chit", "demo"],
        env={**_env(tmp_path), "TERM": "xterm-256color"},
        stdin=sub,
        stdout=sub,
        stderr=sub,
        start_new_session=True,  # the pty becomes its controlling terminal
    )
    os.close(sub)
    screen = bytearray()
    drained = threading.Thread(target=_drain, args=(main, screen), daemon=True)
    drained.start()  # an unread pty fills up and blocks the app's writes
    try:
        daemon, servers = _running(tmp_path, demo)
        deadline = time.monotonic() + 60
        while b"throwaway home" not in screen:  # the TUI is up: its banner is drawn
            assert demo.poll() is None and time.monotonic() < deadline, bytes(screen[-2000:])
            time.sleep(0.1)
        demo.send_signal(signal.SIGTERM)
        assert demo.wait(60) == 143
        _all_gone(tmp_path, daemon, servers)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        os.close(main)


def _drain(fd: int, screen: bytearray) -> None:
    try:
        while chunk := os.read(fd, 65536):
            screen.extend(chunk)
    except OSError:  # the other end closed (or the test closed ours)
        return
