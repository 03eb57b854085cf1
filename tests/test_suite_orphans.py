"""Daemons of a test run killed from outside are stopped by the next session (conftest).

A killed run (SIGKILL, a CI timeout) runs no finalizer, and a daemon one of its tests
started kept running (once for 45 minutes). Each process a test starts carries its test
process's pid (``PYTEST_CHIT_CREATOR``); a session first stops the chit daemons whose
creator is gone, and only those.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.daemon_support import (
    alive,
    chit,
    creator_of,
    daemon_env,
    daemon_home,
    daemon_pid,
    end_orphaned_daemons,
    orphaned_daemons,
)
from tests.proc_support import CREATOR

# A stand-in for a test process: it names itself the creator, starts a daemon the way a
# test does (``chit daemon start``: spawned and detached), says so and waits to be killed.
_CREATOR = """
import os, subprocess, sys
os.environ[sys.argv[1]] = str(os.getpid())
ran = subprocess.run([sys.executable, "-m", "chit", "daemon", "start"],
                     capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
print(ran.returncode, repr(ran.stderr[-300:]), flush=True)
sys.stdin.read()
"""


@pytest.mark.timeout(300)
def test_the_daemon_of_a_killed_creator_is_stopped_and_a_live_creators_kept(
    tmp_path: Path,
) -> None:
    with daemon_home(tmp_path / "orphan") as lost, daemon_home(tmp_path / "kept") as kept_home:
        creator = subprocess.Popen(
            [sys.executable, "-c", _CREATOR, CREATOR],
            env=daemon_env(lost),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert creator.stdout is not None
            started = creator.stdout.readline()
            assert started.startswith("0 "), started
            orphan = daemon_pid(lost)
            assert orphan is not None and creator_of(orphan) == creator.pid
            ran = chit("daemon", "start", env=daemon_env(kept_home))
            assert ran.code == 0, ran.err
            kept = daemon_pid(kept_home)
            assert kept is not None and creator_of(kept) == os.getpid()
            # While its creator runs, a daemon is nobody's orphan.
            assert orphan not in orphaned_daemons()
        finally:
            creator.kill()
            creator.wait(60)
        found = orphaned_daemons()
        assert orphan in found and kept not in found
        stopped = end_orphaned_daemons()
        assert any(line.startswith(f"pid {orphan}:") for line in stopped), stopped
        assert not alive(orphan)
        assert alive(kept) and daemon_pid(kept_home) == kept
