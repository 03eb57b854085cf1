"""chit's daemon: started on demand, one per home, its socket private, stopped cleanly."""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import pytest

from chit.engine import rpc
from chit.engine.paths import SUN_PATH_MAX, DaemonPaths
from chit.engine.remote import ProtocolMismatch, RemoteEngine
from chit.engine.start import lock_is_held
from chit.home import Home
from tests.daemon_support import (
    children,
    chit,
    daemon_env,
    daemon_home,
    daemon_pid,
    demo_daemon_home,
    stray_daemons,
    wait_gone,
    wait_serving,
)

pytestmark = [pytest.mark.timeout(180)]


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    with demo_daemon_home(tmp_path) as h:
        yield h


def _status(home: Path) -> dict[str, object]:
    ran = chit("daemon", "status", "--json", env=daemon_env(home))
    doc: dict[str, object] = json.loads(ran.out)
    return doc


def test_started_on_demand_reused_and_stopped(home: Path) -> None:
    env = daemon_env(home)
    assert chit("daemon", "status", env=env).code == 3  # not running yet
    ran = chit("call", "demo", "slow_compute", "--arg", "seconds=30", "--json", env=env)
    assert ran.code == 0, ran.err
    pid = daemon_pid(home)
    assert pid is not None
    paths = DaemonPaths(Home(home))
    assert stat.S_IMODE(paths.socket.stat().st_mode) == 0o600
    assert stat.S_ISSOCK(paths.socket.stat().st_mode)
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    status = _status(home)
    assert status["running"] and status["pid"] == pid and status["socket"] == str(paths.socket)
    servers = {s["name"]: s for s in status["servers"]}  # type: ignore[attr-defined]
    assert servers["demo"]["connected"] and servers["demo"]["live_receipts"] == 1
    # A second command is served by the same daemon: its server session is shared.
    assert chit("tools", "demo", env=env).code == 0
    assert daemon_pid(home) == pid
    servers_before = children(pid)
    ran = chit("daemon", "stop", env=env)
    assert ran.code == 0 and "stopped" in ran.err
    assert not wait_gone([pid, *servers_before], 10)
    assert not paths.socket.exists() and not paths.info.exists()
    assert chit("daemon", "status", env=env).code == 3


def test_no_daemon_runs_in_process(home: Path) -> None:
    ran = chit("--no-daemon", "call", "demo", "greet", "--arg", "name=Ada", env=daemon_env(home))
    assert ran.code == 0, ran.err
    assert "Hello, Ada!" in ran.out
    assert daemon_pid(home) is None
    ran = chit(
        "call", "demo", "greet", "--arg", "name=Ada", env=daemon_env(home, CHIT_NO_DAEMON="1")
    )
    assert ran.code == 0 and daemon_pid(home) is None


def test_racing_starters_leave_exactly_one_daemon(home: Path) -> None:
    env = daemon_env(home)
    with ThreadPoolExecutor(6) as pool:
        runs = list(pool.map(lambda _: chit("daemon", "start", env=env), range(6)))
    assert all(r.code == 0 for r in runs), [r.err for r in runs]
    pids = {r.err.split("pid ")[1].rstrip(")\n") for r in runs}
    assert len(pids) == 1
    assert stray_daemons(home) == [int(pids.pop())]


def test_racing_starters_on_a_home_that_does_not_exist_yet(tmp_path: Path) -> None:
    """Six processes at once on a fresh home: one creates it, one daemon serves them all."""
    from tests.daemon_support import stop_daemon

    home = tmp_path / "fresh" / "home"  # nothing there yet, not even its parent
    env = daemon_env(home)
    commands = [("daemon", "start"), ("reconcile", "--once", "--json")] * 3
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "chit", *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for args in commands
    ]
    try:
        ends = [proc.communicate(timeout=120) for proc in procs]
        assert [p.returncode for p in procs] == [0] * 6, [err for _out, err in ends]
        daemons = stray_daemons(tmp_path)
        assert len(daemons) == 1 and daemon_pid(home) == daemons[0]
        named = {err.split("pid ")[1].rstrip(")\n") for _out, err in ends if "pid " in err}
        assert named == {str(daemons[0])}
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert not stop_daemon(home)


def test_stale_socket_is_replaced_live_one_never_stolen(home: Path) -> None:
    env = daemon_env(home)
    paths = DaemonPaths(Home(home))
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(paths.socket))
    stale.close()  # a socket file nobody listens on: a dead daemon's
    paths.lock.write_text("999999\n")
    assert chit("daemon", "start", env=env).code == 0
    pid = daemon_pid(home)
    assert pid is not None and pid != 999999
    # A second daemon of the same home refuses and leaves the live one alone.
    ran = chit("daemon", env=env, timeout=30)
    assert ran.code == 8 and "already runs" in ran.err and str(pid) in ran.err
    assert daemon_pid(home) == pid
    assert chit("daemon", "status", env=env).code == 0


def test_foreground_daemon_stops_on_sigterm(home: Path) -> None:
    env = daemon_env(home)
    proc = subprocess.Popen(
        [sys.executable, "-m", "chit", "daemon"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_serving(home, proc)
        assert chit("call", "demo", "slow_compute", "--arg", "seconds=30", env=env).code == 0
        assert daemon_pid(home) == proc.pid  # the command used it: no second daemon
        servers = children(proc.pid)
        assert servers, "the stdio server runs under the daemon"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert not wait_gone(servers, 10)
        assert not DaemonPaths(Home(home)).socket.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_daemon_that_cannot_start_says_why(tmp_path: Path) -> None:
    with daemon_home(tmp_path / "home") as home:
        env = daemon_env(home, PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring")
        del env["CHIT_KEY_STORE"]
        ran = chit("call", "demo", "greet", env=env)
        assert ran.code == 4, (ran.code, ran.err)
        assert ran.err.count("\n") == 1 and "key store" in ran.err.lower()
        assert "Traceback" not in ran.err
        assert daemon_pid(home) is None
        # The same words as without the daemon, the fix included (it was cut at 300).
        alone = chit("--no-daemon", "call", "demo", "greet", env=env)
        assert alone.code == 4 and alone.err.startswith("chit: ")
        assert ran.err == alone.err.rstrip("\n") + " (chit's daemon could not start)\n"
        assert "CHIT_KEY_STORE=file" in ran.err


def test_protocol_mismatch_says_restart(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert chit("daemon", "start", env=daemon_env(home)).code == 0
    monkeypatch.setattr(rpc, "PROTOCOL_VERSION", rpc.PROTOCOL_VERSION + 1)

    async def connect() -> None:
        async with RemoteEngine.open(Home(home), start=False):
            pass

    with pytest.raises(ProtocolMismatch) as info:
        anyio.run(connect)
    assert "chit daemon restart" in info.value.message


def _raw(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(10)
    sock.connect(str(path))
    return sock


def _reply(sock: socket.socket) -> dict[str, object]:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return json.loads(data) if data else {}


def test_socket_protocol_hostile_frames(home: Path) -> None:
    assert chit("daemon", "start", env=daemon_env(home)).code == 0
    path = DaemonPaths(Home(home)).socket
    with _raw(path) as sock:  # anything before hello is refused
        sock.sendall(b'{"jsonrpc":"2.0","id":1,"method":"servers","params":{}}\n')
        assert _reply(sock)["error"]["code"] == rpc.HELLO_REQUIRED  # type: ignore[index]
    with _raw(path) as sock:
        hello = {"protocol": rpc.PROTOCOL_VERSION, "chit_version": "test"}
        sock.sendall(
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "hello", "params": hello}).encode()
            + b"\n"
        )
        assert _reply(sock)["result"]["pid"] == daemon_pid(home)  # type: ignore[index]
        sock.sendall(b"not json\n")
        assert _reply(sock)["error"]["code"] == rpc.PARSE_ERROR  # type: ignore[index]
        sock.sendall(b'{"jsonrpc":"2.0","id":2,"method":"nope","params":{}}\n')
        assert _reply(sock)["error"]["code"] == rpc.METHOD_NOT_FOUND  # type: ignore[index]
        sock.sendall(b'{"jsonrpc":"2.0","id":3,"method":"cancel","params":{"x":1}}\n')
        assert _reply(sock)["error"]["code"] == rpc.INVALID_PARAMS  # type: ignore[index]
        sock.sendall(b'{"jsonrpc":"2.0","id":4,"method":"receipt","params":{"receipt_id":"zz"}}\n')
        err = _reply(sock)["error"]
        assert err["data"]["exit_code"] == 3  # type: ignore[index]
        sock.sendall(b"x" * (rpc.MAX_FRAME + 10))
        assert _reply(sock)["error"]["message"] == "frame too large"  # type: ignore[index]
        assert sock.recv(10) == b""  # and the connection is closed
    assert chit("daemon", "status", env=daemon_env(home)).code == 0  # the daemon lives on


def test_the_peer_is_the_kernels_word() -> None:
    """``peer_of`` reads the connecting process's credentials from the socket itself."""
    from chit.daemon.peer import Peer, peer_of

    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        peer = peer_of(left)
    expected_pid = os.getpid() if hasattr(socket, "SO_PEERCRED") else None
    assert peer == Peer(uid=os.getuid(), pid=expected_pid)


def _as_nobody() -> None:
    nobody = pwd.getpwnam("nobody")
    os.setgroups([])
    os.setgid(nobody.pw_gid)
    os.setuid(nobody.pw_uid)


_PROBE = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print(json.dumps({"connect": type(exc).__name__})); raise SystemExit
hello = {"protocol": 1, "chit_version": "x"}
frame = {"jsonrpc": "2.0", "id": 1, "method": "hello", "params": hello}
try:
    s.sendall(json.dumps(frame).encode() + b"\\n")
    reply = s.recv(65536).decode()
except OSError:
    reply = ""
print(json.dumps({"connect": "ok", "reply": reply}))
"""


def _python_for_nobody() -> str:
    """A Python another user may run (the suite's own may live in root's home)."""
    for candidate in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        try:
            subprocess.run(
                [candidate, "-c", "pass"],
                preexec_fn=_as_nobody,  # run as another user: the point
                capture_output=True,
                cwd="/",
                check=True,
            )
        except (OSError, subprocess.CalledProcessError):
            continue
        return candidate
    pytest.skip("no Python interpreter the 'nobody' user may run")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a process as another uid")
def test_another_uid_is_refused(home: Path) -> None:
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no 'nobody' user on this machine")
    python = _python_for_nobody()
    assert chit("daemon", "start", env=daemon_env(home)).code == 0
    path = DaemonPaths(Home(home)).socket

    def probe(target: Path) -> dict[str, str]:
        out = subprocess.run(
            [python, "-c", _PROBE, str(target)],
            preexec_fn=_as_nobody,  # run as another user: the point
            capture_output=True,
            text=True,
            timeout=30,
            cwd="/",
        )
        result: dict[str, str] = json.loads(out.stdout)
        return result

    # The 0700 home and the 0600 socket keep another user out at the file system ...
    assert probe(path)["connect"] == "PermissionError"
    # ... and were they opened (a hard link of the socket in a directory anyone may
    # enter, the inode made 0666), the daemon itself refuses a peer of another uid.
    opened = Path(tempfile.mkdtemp(prefix="chit-peer-", dir="/tmp"))
    try:
        opened.chmod(0o711)
        try:
            os.link(path, opened / "s.sock")
        except OSError as exc:
            pytest.skip(f"cannot link the socket where another user may reach it: {exc}")
        path.chmod(0o666)
        try:
            answer = probe(opened / "s.sock")
        finally:
            path.chmod(0o600)
    finally:
        shutil.rmtree(opened, ignore_errors=True)
    assert answer["connect"] == "ok" and answer["reply"] == ""
    log = DaemonPaths(Home(home)).log.read_text()
    assert f"refused a connection from uid {pwd.getpwnam('nobody').pw_uid}" in log


def test_long_home_puts_the_socket_in_a_short_runtime_dir(tmp_path: Path) -> None:
    deep = tmp_path / ("h" * 60) / ("o" * 60)
    with daemon_home(deep) as home:
        paths = DaemonPaths(Home(home))
        assert len(os.fsencode(str(home / "daemon.sock"))) > SUN_PATH_MAX
        assert chit("daemon", "start", env=daemon_env(home)).code == 0
        status = _status(home)
        assert status["socket"] == str(paths.socket) and not str(paths.socket).startswith(str(home))
        runtime = paths.socket.parent
        assert stat.S_IMODE(runtime.stat().st_mode) == 0o700
        assert stat.S_IMODE(paths.socket.stat().st_mode) == 0o600


def test_detach_on_ctrl_c_keeps_the_task(home: Path) -> None:
    env = daemon_env(home)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chit",
            "call",
            "demo",
            "slow_compute",
            "--arg",
            "seconds=20",
            "--wait",
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    rid = None
    while rid is None and time.monotonic() < deadline:  # wait for the receipt to exist
        listed = chit("receipts", "--json", env=env)
        rows = json.loads(listed.out or "[]")
        rid = rows[0]["receipt_id"] if rows else None
        time.sleep(0.1)
    assert rid is not None
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert f"chit follow {rid}" in err and "keeps running" in err
    shown = json.loads(chit("show", rid, "--json", env=env).out)
    assert shown["state"] == "working"
    ran = chit("follow", rid, env=env, timeout=90)
    assert ran.code == 0 and "completed" in ran.out


def test_restart_replaces_the_daemon_and_starts_one_when_none_runs(home: Path) -> None:
    env = daemon_env(home)
    ran = chit("daemon", "restart", env=env)  # none runs: it starts one
    assert ran.code == 0 and "restarted (pid" in ran.err, ran.err
    first = daemon_pid(home)
    assert first is not None
    assert chit("call", "demo", "slow_compute", "--arg", "seconds=600", env=env).code == 0
    servers = children(first)
    ran = chit("daemon", "restart", env=env)
    assert ran.code == 0, ran.err
    second = daemon_pid(home)
    assert second is not None and second != first and f"pid {second}" in ran.err
    assert not wait_gone([first, *servers], 10), "the old daemon or its server outlived it"
    assert _status(home)["pid"] == second


def test_a_stale_socket_is_left_alone_while_a_daemon_holds_the_lock(home: Path) -> None:
    """Clients never delete the socket; only a daemon holding ``daemon.lock`` replaces it."""
    env = daemon_env(home)
    paths = DaemonPaths(Home(home))
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(paths.socket))
    stale.close()
    before = (paths.socket.stat().st_ino, paths.socket.stat().st_mtime_ns)
    with open(paths.lock, "a+") as lock:  # a daemon starting: it holds the lock, no socket yet
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        client = subprocess.Popen(
            [sys.executable, "-m", "chit", "daemon", "start"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 60
            while not lock_is_held(paths.start_lock):  # the client now waits for "the daemon"
                assert client.poll() is None and time.monotonic() < deadline, client.stderr
                time.sleep(0.05)
            # Nothing may happen to the socket meanwhile: a window, not a wait for an event
            # (a negative check cannot flake; it could only miss a defect).
            time.sleep(1.0)
            assert (paths.socket.stat().st_ino, paths.socket.stat().st_mtime_ns) == before
            with pytest.raises(ConnectionRefusedError):
                _raw(paths.socket).close()  # still the dead one
            assert client.poll() is None and daemon_pid(home) is None
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)  # "the daemon" gave up: the client starts one
        _out, err = client.communicate(timeout=60)
    assert client.returncode == 0, err
    pid = daemon_pid(home)
    assert pid is not None and f"pid {pid}" in err
    _raw(paths.socket).close()  # replaced by the daemon, under its lock: it answers now


_FAKE_DAEMON = """
import json, socket, sys
server = socket.socket(socket.AF_UNIX)
server.bind(sys.argv[1])
server.listen()
print("ready", flush=True)
while True:
    conn, _ = server.accept()
    line = conn.makefile("rb").readline()
    frame = json.loads(line)
    hello = {"protocol": 999, "chit_version": "9.9", "pid": 4242, "home": "h", "socket": "s",
             "started_at": "2026-01-01T00:00:00.000Z", "cursor": 0}
    reply = {"jsonrpc": "2.0", "id": frame["id"], "result": hello}
    conn.sendall(json.dumps(reply).encode() + b"\\n")
    conn.close()
"""


def test_a_daemon_of_another_protocol_is_one_line_through_the_cli(home: Path) -> None:
    paths = DaemonPaths(Home(home))
    fake = subprocess.Popen(
        [sys.executable, "-c", _FAKE_DAEMON, str(paths.socket)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert fake.stdout is not None and fake.stdout.readline() == "ready\n"
        env = daemon_env(home)
        for args in (("call", "demo", "greet", "--arg", "name=Ada"), ("tools", "demo")):
            ran = chit(*args, env=env)
            assert ran.code == 6, (ran.code, ran.err)
            assert ran.err.count("\n") == 1 and "Traceback" not in ran.err, ran.err
            assert "chit 9.9, pid 4242" in ran.err and "protocol 999" in ran.err
            assert "chit daemon restart" in ran.err
        assert json.loads(chit("receipts", "--json", env=env).out) == []  # nothing recorded
    finally:
        fake.kill()
        fake.wait()


def test_the_suites_leftover_check_finds_what_a_test_could_leave(tmp_path: Path) -> None:
    """``tests/conftest.py`` fails any test that leaves these running (and stops them)."""
    from tests.daemon_support import boot_ticks, end_leftovers, leftovers

    since = boot_ticks() - os.sysconf("SC_CLK_TCK")  # as the check takes it, at test start
    log = tmp_path / "home" / "logs" / "servers" / "s.log"
    log.parent.mkdir(parents=True)
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    with open(log, "a") as stderr:
        server = subprocess.Popen(sleeper, stderr=stderr, stdin=subprocess.DEVNULL)
    env = {**os.environ, "CHIT_HOME": str(tmp_path / "home")}
    daemon = subprocess.Popen([*sleeper, "chit", "daemon"], env=env)  # a foreground daemon
    unrelated = subprocess.Popen(sleeper, stdin=subprocess.DEVNULL)
    try:
        found = {p.pid: p for p in leftovers(tmp_path)}
        assert set(found) == {server.pid, daemon.pid}
        # Only processes started since the test began are read: the same ones here.
        assert {p.pid for p in leftovers(tmp_path, since=since)} == set(found)
        later = boot_ticks() + 60 * os.sysconf("SC_CLK_TCK")
        assert leftovers(tmp_path, since=later) == []
        assert found[daemon.pid].home == tmp_path / "home" and found[server.pid].home is None
        described = end_leftovers(list(found.values()))
        assert len(described) == 2 and not wait_gone([server.pid, daemon.pid], 10)
        assert leftovers(tmp_path) == []
    finally:
        for proc in (server, daemon, unrelated):
            proc.kill()
            proc.wait()
