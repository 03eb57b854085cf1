"""A stdio server's death signal (``chit.tasks.client.deathsig``), on Linux.

The end-to-end case — a SIGKILLed daemon's servers end with it — is in
``test_daemon_crash.py``; these pin the two kernel facts the design rests on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from chit.tasks.client import deathsig
from chit.tasks.client.deathsig import ORPHANED_EXIT, die_with_parent

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's"),
    pytest.mark.timeout(60),
]


def test_the_child_gets_sigterm_when_the_thread_that_forked_it_ends() -> None:
    """Why servers are forked on the event loop's thread: a worker thread's end kills them."""
    started: list[subprocess.Popen[bytes]] = []

    def fork() -> None:
        started.append(subprocess.Popen(["sleep", "300"], preexec_fn=die_with_parent()))

    worker = threading.Thread(target=fork)
    worker.start()
    worker.join()
    (proc,) = started
    try:
        assert proc.wait(timeout=30) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_child_whose_parent_died_before_it_asked_exits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The race: the parent the child was forked for is gone, so it must not run on."""
    real = os.getpid()
    monkeypatch.setattr(os, "getpid", lambda: real + 1_000_000)  # another parent
    ask = die_with_parent()
    monkeypatch.undo()
    proc = subprocess.Popen(["sleep", "300"], preexec_fn=ask)
    try:
        assert proc.wait(timeout=30) == ORPHANED_EXIT
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_child_of_a_living_parent_runs() -> None:
    done = subprocess.run(["true"], preexec_fn=die_with_parent(), check=False)
    assert done.returncode == 0


def test_nothing_is_asked_off_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    deathsig._prctl.cache_clear()
    monkeypatch.setattr(sys, "platform", "darwin")
    try:
        assert die_with_parent() is None
    finally:
        deathsig._prctl.cache_clear()
