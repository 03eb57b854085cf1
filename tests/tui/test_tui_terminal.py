"""A real terminal: tmux runs ``chit demo``; we press keys and read the pane like a person."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


# A tmux server of the test's own: nothing else's sessions (a developer's tmux, another
# run's clean-up) can end it, and its socket goes with the test.
_SOCKET = f"chit-test-{uuid.uuid4().hex[:8]}"
#: Printed by the pane's shell once ``chit demo`` ends, with its exit code. The shell then
#: stays, so the pane (and a crash's last words) can still be read.
_EXITED = "[chit demo exited with "


def _tmux(*args: str) -> str:
    result = subprocess.run(["tmux", "-L", _SOCKET, *args], capture_output=True, text=True)
    if result.returncode:
        raise AssertionError(f"tmux {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


@pytest.fixture
def session() -> Iterator[str]:
    name = f"chit-test-{uuid.uuid4().hex[:8]}"
    # env -u: a COLUMNS/LINES inherited from the test process would pin the size at 80×24.
    command = (
        f"env -u COLUMNS -u LINES {sys.executable} -m chit demo; "
        f"echo '{_EXITED}'$?']'; exec sleep 600"
    )
    _tmux(
        "new-session",
        "-d",
        "-s",
        name,
        "-x",
        "140",
        "-y",
        "40",
        "-e",
        "TERM=xterm-256color",
        command,
    )
    # Detached sessions may ignore -x/-y (tmux's default-size wins): size it explicitly.
    subprocess.run(
        ["tmux", "-L", _SOCKET, "resize-window", "-t", name, "-x", "140", "-y", "40"],
        capture_output=True,
    )
    try:
        yield name
    finally:
        subprocess.run(["tmux", "-L", _SOCKET, "kill-server"], capture_output=True)
        # kill-server leaves the socket file behind.
        tmpdir = os.environ.get("TMUX_TMPDIR") or "/tmp"
        Path(tmpdir, f"tmux-{os.getuid()}", _SOCKET).unlink(missing_ok=True)


def _wait_for(session: str, text: str, timeout: float = 40.0) -> str:
    deadline = time.monotonic() + timeout
    pane = ""
    while time.monotonic() < deadline:
        pane = _tmux("capture-pane", "-p", "-t", session)
        if text in pane:
            return pane
        if _EXITED in pane:
            break  # the demo ended: the text can no longer come
        time.sleep(0.3)
    raise AssertionError(f"{text!r} never appeared; the pane showed:\n{pane}")


def _wait_gone(session: str, text: str, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    pane = text
    while time.monotonic() < deadline:
        pane = _tmux("capture-pane", "-p", "-t", session)
        if text not in pane:
            return
        time.sleep(0.1)
    raise AssertionError(f"{text!r} never went away; the pane showed:\n{pane}")


def test_demo_shows_live_receipts_and_the_inbox(session: str) -> None:
    _wait_for(session, "in-memory key store")  # the demo says so in a banner
    _wait_for(session, "Quarterly report")  # a work record the agent opened via the sidecar
    pane = _wait_for(session, "INPUT")  # confirm_delete asks before deleting
    assert "demo/confirm" in pane  # the tool column is 12 to 18 wide
    _tmux("send-keys", "-t", session, "i")
    pane = _wait_for(session, "Inbox: input required")
    assert "confirm_delete" in pane
    _tmux("send-keys", "-t", session, "Enter")
    pane = _wait_for(session, "Decline")
    # One key at a time, each after the screen showed the last one's effect: ESC followed
    # at once by a key reads as Alt+key in a terminal.
    _tmux("send-keys", "-t", session, "Escape")  # closes the answer form
    _wait_gone(session, "Decline")
    _tmux("send-keys", "-t", session, "Escape")  # closes the inbox
    _wait_gone(session, "Inbox: input required")
    _tmux("send-keys", "-t", session, "q")
    pane = _wait_for(session, _EXITED)
    assert f"{_EXITED}0]" in pane, pane  # q is an orderly end: exit code 0
