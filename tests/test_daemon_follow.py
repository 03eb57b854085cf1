"""``chit follow``: Ctrl-C detaches (130), says how to follow again; a dead daemon: one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.daemon_support import chit, daemon_env, daemon_pid, demo_daemon_home, wait_gone

pytestmark = [pytest.mark.timeout(180)]


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    with demo_daemon_home(tmp_path) as h:
        yield h


def _start(env: dict[str, str], seconds: int) -> str:
    ran = chit("call", "demo", "slow_compute", "--arg", f"seconds={seconds}", "--json", env=env)
    assert ran.code == 0, ran.err
    rid: str = json.loads(ran.out)["receipt_id"]
    return rid


def _following(env: dict[str, str], rid: str) -> subprocess.Popen[str]:
    """``chit follow RID``, returned once the daemon counts it among its clients."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "chit", "follow", rid],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while True:  # `daemon status` is a client too: two means the follower is connected
        status = json.loads(chit("daemon", "status", "--json", env=env).out)
        if status.get("clients", 0) >= 2:
            return proc
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)


def test_ctrl_c_on_follow_detaches_and_the_task_goes_on(home: Path) -> None:
    env = daemon_env(home)
    rid = _start(env, 15)
    proc = _following(env, rid)
    try:
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"chit follow {rid}" in err and "keeps running" in err
    assert json.loads(chit("show", rid, "--json", env=env).out)["state"] == "working"
    again = chit("follow", rid, "--json", env=env, timeout=120)
    assert again.code == 0 and json.loads(again.out)["state"] == "completed", again.err


def test_a_follower_whose_daemon_dies_says_so_in_one_line(home: Path) -> None:
    env = daemon_env(home)
    rid = _start(env, 600)
    pid = daemon_pid(home)
    assert pid is not None
    proc = _following(env, rid)
    try:
        os.kill(pid, signal.SIGKILL)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not wait_gone([pid], 10)
    assert proc.returncode == 6, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "daemon" in err and "again" in err, err
    # The next command starts a fresh daemon; the stdio task ended with the old one's
    # server, and its receipt says so instead of waiting for ever.
    ended = chit("follow", rid, "--json", env=env, timeout=120)
    assert ended.code in (11, 14), (ended.code, ended.err)
    assert daemon_pid(home) not in (None, pid)


def test_a_wait_prompt_answered_elsewhere_follows_on(home: Path) -> None:
    """``--wait`` asks on its terminal; ``chit answer`` from another process wins."""
    from tests.test_cli_forms import Terminal

    env = daemon_env(home)
    term = Terminal(env, "call", "demo", "confirm_delete", "--arg", "filename=a.txt", "--wait")
    try:
        term.expect("- confirm (yes/no, required)")
        term.expect(": ")  # the prompt waits for the person
        rows = json.loads(chit("receipts", "--json", env=env).out)
        (rid,) = [r["receipt_id"] for r in rows]
        ran = chit("answer", rid, "--json", '{"confirm": true}', env=env)
        assert ran.code == 0, ran.err
        # It gave up the prompt by itself (nothing typed) and followed the task to its end.
        assert term.wait() == 0, term.seen
    finally:
        term.proc.kill()
    assert "the request was answered elsewhere; following on" in term.seen
    assert "state    completed" in term.seen and "Deleted a.txt" in term.seen
