"""The daemon's housekeeping: server stderr in logs, idle stdio servers, service files."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chit.home import Home, ensure_private_dir
from chit.runtime.server_logs import rotate, server_log_path
from tests.daemon_support import alive, chit, daemon_env, daemon_home, wait_gone

pytestmark = [pytest.mark.timeout(180)]

NOISE = "hello-from-the-server-stderr"


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    with daemon_home(tmp_path / "home") as h:
        yield h


def _register_noisy(home: Path, name: str, db: Path) -> None:
    """A demo server that writes a line to stderr first (as many real servers do)."""
    script = f"echo {NOISE} pid $$ >&2; exec {sys.executable} -m chit demo-server --db {db}"
    ran = chit(
        "--no-daemon", "servers", "add", name, "--command", "sh", "--", "-c", script,
        env=daemon_env(home),
    )  # fmt: skip
    assert ran.code == 0, ran.err


def _status(home: Path, **extra: str) -> dict[str, dict[str, object]]:
    ran = chit("daemon", "status", "--json", env=daemon_env(home, **extra))
    assert ran.code == 0, ran.err
    return {s["name"]: s for s in json.loads(ran.out)["servers"]}


def test_server_stderr_goes_to_its_log_never_the_terminal(home: Path, tmp_path: Path) -> None:
    _register_noisy(home, "noisy", tmp_path / "t.db")
    env = daemon_env(home)
    commands = (
        ("call", "noisy", "greet", "--arg", "name=Ada"),
        ("tools", "noisy"),
        ("tools", "noisy", "greet"),  # one tool's schema: through the daemon's session too
        ("tools", "noisy", "greet", "--json"),
    )
    for args in commands:
        ran = chit(*args, env=env)
        assert ran.code == 0, ran.err
        assert NOISE not in ran.err and NOISE not in ran.out
    assert "name" in json.loads(ran.out)["input_schema"]["properties"]
    log = server_log_path(Home(home), "noisy")
    assert log.read_text().count(NOISE) == 1  # one server process served every command
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    shown = chit("logs", "noisy", env=env)
    assert shown.code == 0 and NOISE in shown.out
    status = _status(home)["noisy"]
    assert status["log_path"] == str(log) and isinstance(status["pid"], int)
    # --no-daemon too: the stderr of the server it starts goes to the same file.
    ran = chit("--no-daemon", "call", "noisy", "greet", "--arg", "name=Bo", env=env)
    assert ran.code == 0 and NOISE not in ran.err
    assert log.read_text().count(NOISE) == 2
    assert chit("logs", "nope", env=env).code == 3


def test_logs_follow_prints_new_lines_and_survives_rotation(home: Path, tmp_path: Path) -> None:
    _register_noisy(home, "noisy", tmp_path / "t.db")
    log = server_log_path(Home(home), "noisy")
    ensure_private_dir(log.parent.parent)
    ensure_private_dir(log.parent)
    log.write_text("first line\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "chit", "logs", "noisy", "-f"],
        env=daemon_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "first line\n"
        with open(log, "a") as out:
            out.write("second \x1b[31mline\n")  # control characters never reach the terminal
        assert proc.stdout.readline() == "second [31mline\n"
        with open(log, "r+") as out:
            out.truncate(0)  # what rotation does
        with open(log, "a") as out:
            out.write("after rotation\n")
        assert proc.stdout.readline() == "after rotation\n"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_rotation_keeps_generations_private(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    log.write_text("a" * 100)
    os.chmod(log, 0o600)
    assert not rotate(log, max_bytes=200)
    assert rotate(log, max_bytes=50)
    assert log.stat().st_size == 0 and (tmp_path / "s.log.1").read_text() == "a" * 100
    log.write_text("b" * 100)
    assert rotate(log, max_bytes=50, keep=2)
    assert (tmp_path / "s.log.2").read_text() == "a" * 100
    assert (tmp_path / "s.log.1").read_text() == "b" * 100
    assert stat.S_IMODE((tmp_path / "s.log.1").stat().st_mode) == 0o600


def _pids(home: Path, name: str) -> list[int]:
    """The pids of server ``name``'s processes so far, from the line each wrote first."""
    text = server_log_path(Home(home), name).read_text()
    return [int(line.rsplit(" ", 1)[1]) for line in text.splitlines() if NOISE in line]


def test_idle_stdio_server_stops_and_starts_again(home: Path, tmp_path: Path) -> None:
    _register_noisy(home, "idle", tmp_path / "a.db")
    _register_noisy(home, "busy", tmp_path / "b.db")
    env = daemon_env(home, CHIT_STDIO_IDLE_S="1")
    assert chit("call", "busy", "slow_compute", "--arg", "seconds=600", env=env).code == 0
    assert chit("call", "idle", "greet", "--arg", "name=Ada", env=env).code == 0
    (idle_pid,), (busy_pid,) = _pids(home, "idle"), _pids(home, "busy")
    assert not wait_gone([idle_pid], 30), "the idle server was not stopped"
    after = _status(home)
    assert not after["idle"]["connected"] and after["idle"]["pid"] is None
    assert after["busy"]["connected"] and after["busy"]["pid"] == busy_pid  # a live receipt
    assert alive(busy_pid)
    # The next request starts it again.
    assert chit("tools", "idle", env=env).code == 0
    assert len(_pids(home, "idle")) == 2


def test_install_writes_the_unit_and_says_how_to_enable_it(home: Path, tmp_path: Path) -> None:
    user_home = tmp_path / "user"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    spy = tmp_path / "called"
    for tool in ("systemctl", "launchctl"):
        fake = bin_dir / tool
        fake.write_text(f"#!/bin/sh\necho $0 >> {spy}\n")
        fake.chmod(0o755)
    env = daemon_env(home, HOME=str(user_home), PATH=f"{bin_dir}:{os.environ['PATH']}")
    ran = chit("daemon", "install", "--platform", "linux", env=env)
    assert ran.code == 0, ran.err
    (unit,) = (user_home / ".config" / "systemd" / "user").glob("chit*.service")
    text = unit.read_text()
    assert text == ran.out
    assert f"--home {home} daemon" in text and "Restart=on-failure" in text
    assert f'Environment="CHIT_HOME={home}"' in text and "CHIT_KEY_STORE=file" in text
    assert str(unit) in ran.err and f"systemctl --user enable --now {unit.name}" in ran.err
    ran = chit("daemon", "install", "--platform", "darwin", env=env)
    assert ran.code == 0, ran.err
    (plist,) = (user_home / "Library" / "LaunchAgents").glob("dev.chit.*.plist")
    assert "<string>daemon</string>" in plist.read_text() and "launchctl bootstrap" in ran.err
    assert not spy.exists(), "install ran the service manager"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="orphans are found through /proc (Linux)")
def test_a_dead_daemons_orphaned_server_is_terminated(home: Path) -> None:
    log = server_log_path(Home(home), "stray")
    ensure_private_dir(log.parent.parent)
    ensure_private_dir(log.parent)
    # A server left behind: its own session, its stderr in the home's server logs, its
    # parent gone (the shell that started it exits at once).
    code = (
        f"import os, subprocess, sys\n"
        f"p = subprocess.Popen(['sleep', '300'], stderr=open({str(log)!r}, 'a'),"
        f" stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)\n"
        f"print(p.pid)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    stray = int(out.stdout)
    try:
        assert alive(stray)
        assert chit("daemon", "start", env=daemon_env(home)).code == 0
        assert not wait_gone([stray], 20), "the orphan survived the new daemon"
        assert "orphaned server process" in (home / "logs" / "daemon.log").read_text()
    finally:
        if alive(stray):
            os.kill(stray, signal.SIGKILL)


def test_the_demo_runs_its_own_daemon_and_stops_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHIT_")}
    env["TMPDIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "chit", "demo", "--headless-seconds", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    from tests.daemon_support import stray_daemons

    assert stray_daemons(tmp_path) == []
    assert not any(tmp_path.glob("chit-demo-*")), "the throwaway home is removed"
    deadline = time.monotonic() + 10
    while _demo_servers(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _demo_servers(tmp_path) == []


def _demo_servers(root: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"demo-server" in argv and str(root).encode() in argv and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def test_the_demos_daemon_ends_with_the_demo_however_it_ends(tmp_path: Path) -> None:
    from tests.daemon_support import stray_daemons

    env = {k: v for k, v in os.environ.items() if not k.startswith("CHIT_")}
    env["TMPDIR"] = str(tmp_path)
    demo = subprocess.Popen(
        [sys.executable, "-m", "chit", "demo", "--headless-seconds", "300"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not stray_daemons(tmp_path):
            assert demo.poll() is None and time.monotonic() < deadline, "no demo daemon"
            time.sleep(0.1)
        (daemon,) = stray_daemons(tmp_path)
        demo.kill()  # a closed terminal: no chance to stop anything
        demo.wait(10)
        assert not wait_gone([daemon], 30), "the demo's daemon outlived the demo"
        assert _demo_servers(tmp_path) == [] or not wait_gone(_demo_servers(tmp_path), 10)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
