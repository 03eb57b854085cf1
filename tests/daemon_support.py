"""Helpers for tests that run chit's daemon: environments, processes, clean-up checks.

The suite runs with ``CHIT_NO_DAEMON=1`` (tests/conftest.py) so single-process tests keep
their in-process engine; daemon tests take it out of their environment. Every daemon a
test starts is stopped by :func:`stop_daemon` at the end, and any process it left behind
(the daemon, a stdio server) fails the test. A run killed from outside stops nothing;
the next session stops the daemons it left (:func:`end_orphaned_daemons`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from chit.engine.paths import DaemonPaths
from chit.engine.start import lock_is_held, lock_pid
from chit.home import Home
from chit.processes import pid_alive
from tests.proc_support import CREATOR


@dataclass
class Ran:
    """A finished chit process."""

    code: int
    out: str
    err: str


def daemon_env(home: Path, **extra: str) -> dict[str, str]:
    """An environment for chit commands on ``home`` that use the daemon."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHIT_")}
    env.update(
        {
            "CHIT_HOME": str(home),
            "CHIT_KEY_STORE": "file",
            "CHIT_READ_TIMEOUT": "10",
        }
    )
    # The npm peers' directory only when the run set one: an empty value would name the
    # current directory, and a host that passes env as KEY=VALUE pairs refuses it.
    if os.environ.get("CHIT_TOOLS_DIR"):
        env["CHIT_TOOLS_DIR"] = os.environ["CHIT_TOOLS_DIR"]
    env.update(extra)
    return env


def chit(*args: str, env: dict[str, str], timeout: float = 120, stdin: str | None = None) -> Ran:
    """Run ``python -m chit ARGS`` to completion."""
    proc = subprocess.run(
        [sys.executable, "-m", "chit", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )
    return Ran(proc.returncode, proc.stdout, proc.stderr)


def children(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (Linux ``/proc``; empty elsewhere)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_gone(pids: Iterable[int], timeout: float) -> list[int]:
    """Wait until every pid has exited; return those still alive after ``timeout``."""
    deadline = time.monotonic() + timeout
    left = [p for p in pids if alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if alive(p)]
    return left


def daemon_pid(home: Path) -> int | None:
    """The pid of the daemon holding ``home``'s lock (None when none runs)."""
    paths = DaemonPaths(Home(home))
    if not lock_is_held(paths.lock):
        return None
    return lock_pid(paths.lock)


def wait_serving(home: Path, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    """Wait until ``proc`` (a foreground ``chit daemon``) holds ``home``'s lock and listens.

    A command started before that would rightly start a daemon of its own on demand, and
    the foreground one would then find the home taken: wait for the event, not a time.
    """
    paths = DaemonPaths(Home(home))
    deadline = time.monotonic() + timeout
    while not (daemon_pid(home) == proc.pid and paths.socket.exists()):
        code = proc.poll()
        assert code is None, f"chit daemon exited {code} before it served"
        assert time.monotonic() < deadline, "chit daemon never held the lock and listened"
        time.sleep(0.05)


def stop_daemon(home: Path) -> list[str]:
    """Stop ``home``'s daemon (SIGTERM, then SIGKILL) and its servers; return leftovers.

    Returns:
        Descriptions of processes that had to be killed: a daemon that ignored SIGTERM
        for 20 s, or a server process that outlived its daemon. Empty is clean.
    """
    pid = daemon_pid(home)
    return [] if pid is None else end_daemons([pid])


def end_daemons(pids: Iterable[int]) -> list[str]:
    """Stop daemons by pid (SIGTERM, then SIGKILL after 20 s) and what they started.

    All are signalled before any is waited for. A process that is already gone is no
    error (another worker's sweep may have stopped it a moment earlier).

    Returns:
        Descriptions of the processes that had to be killed (see :func:`stop_daemon`).
    """
    daemons = list(pids)
    tree = [child for pid in daemons for child in children(pid)]
    problems: list[str] = []
    for pid in daemons:
        _signal(pid, signal.SIGTERM)
    for pid in wait_gone(daemons, 20):
        problems.append(f"daemon {pid} ignored SIGTERM")
        _signal(pid, signal.SIGKILL)
    for left in wait_gone(tree, 10):
        problems.append(f"process {left} outlived its daemon: {_cmdline(left)}")
        _signal(left, signal.SIGKILL)
    return problems


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _is_daemon(argv: list[bytes]) -> bool:
    """True for the argv of a chit daemon: ``chit … daemon`` alone or ``--spawned``.

    Not a client of one (``chit daemon status``, ``stop``): those end on their own.
    """
    if b"chit" not in argv or b"daemon" not in argv:
        return False
    after = [arg for arg in argv[argv.index(b"daemon") + 1 :] if arg]
    return after in ([], [b"--spawned"])


def _is_demo_server(argv: list[bytes]) -> bool:
    """True for the argv of ``chit demo-server`` (stdio or ``--http``): a test's server
    left running when its test process was killed (nothing else ends an HTTP one)."""
    return b"chit" in argv and b"demo-server" in argv


def creator_of(pid: int) -> int | None:
    """The test process that started ``pid`` (its ``CREATOR`` variable), None if none."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:  # gone, or someone else's
        return None
    prefix = CREATOR.encode() + b"="
    for item in environ:
        if item.startswith(prefix):
            value = item[len(prefix) :]
            return int(value) if value.isdigit() and int(value) > 0 else None
    return None


def orphaned_daemons() -> list[int]:
    """Pids of chit daemons (and ``chit demo-server`` processes) started under a test
    process that no longer runs.

    Only processes that carry ``CREATOR`` (started by this suite): a daemon someone
    runs by hand, or one of a run still going beside this one (another worker's, another
    engineer's), is never among them.
    """
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not (_is_daemon(argv) or _is_demo_server(argv)):
            continue
        creator = creator_of(int(entry.name))
        if creator is not None and not pid_alive(creator) and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def end_orphaned_daemons() -> list[str]:
    """Stop the :func:`orphaned_daemons` and their servers; describe each one stopped.

    A daemon's home may be gone (pytest deletes old temporary directories), so the
    daemons are stopped by pid, not through their home's lock.
    """
    found = orphaned_daemons()
    described = [f"pid {pid}: {_cmdline(pid)}" for pid in found]
    if found:
        end_daemons(found)
    return described


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return "?"


def stray_daemons(root: Path) -> list[int]:
    """Pids of spawned chit daemons whose home lies under ``root``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--spawned" not in argv or b"daemon" not in argv or b"--home" not in argv:
            continue
        home = argv[argv.index(b"--home") + 1].decode(errors="replace")
        if home.startswith(str(root)) and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


@contextmanager
def daemon_home(home: Path) -> Iterator[Path]:
    """A home whose daemon (if any gets started) is stopped, cleanly, at the end."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        yield home
    finally:
        problems = stop_daemon(home)
        assert not problems, problems


@contextmanager
def demo_daemon_home(tmp_path: Path) -> Iterator[Path]:
    """``daemon_home`` under ``tmp_path`` with chit's demo server registered as ``demo``.

    The server runs over stdio on its own task store (``tmp_path / "tasks.db"``); the
    home's daemon, if a test starts one, is stopped at the end.
    """
    with daemon_home(tmp_path / "home") as h:
        demo = [sys.executable, "-m", "chit", "demo-server", "--db", str(tmp_path / "tasks.db")]
        ran = chit(
            "--no-daemon", "servers", "add", "demo", "--command", demo[0], "--", *demo[1:],
            env=daemon_env(h),
        )  # fmt: skip
        assert ran.code == 0, ran.err
        yield h


@dataclass(frozen=True)
class Leftover:
    """A process still running that refers to a test's directory."""

    pid: int
    cmdline: str
    home: Path | None  # a chit daemon's home (None: not a daemon)


def boot_ticks() -> int:
    """Now, in the clock ticks since boot that ``/proc/PID/stat`` start times use (0: no /proc)."""
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0
    return int(uptime * os.sysconf("SC_CLK_TCK"))


def _started_since(pid: int, since: int) -> bool:
    """True if ``pid`` lives (not a zombie) and started at or after tick ``since``."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    # After the command name: state is field 3 of stat(5), starttime field 22.
    return fields[0] != "Z" and int(fields[19]) >= since


def leftovers(root: Path, *, exclude: Iterable[int] = (), since: int = 0) -> list[Leftover]:
    """Live processes that refer to ``root``: a chit daemon of a home under it, or any
    process whose command line, working directory or standard streams lie under it (a
    stdio server writes its stderr to the home's ``logs/servers``).

    Linux ``/proc`` only (empty elsewhere). ``exclude`` is never reported (this process
    is always excluded). ``since`` (a :func:`boot_ticks` value) skips processes started
    before it: nothing older than a fresh ``root`` can refer to it, and one ``stat`` read
    per process is far cheaper than reading every command line and stream (the check
    runs after every test).
    """
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    skip = {os.getpid(), *exclude}
    prefix = str(root).rstrip("/") + "/"
    raw_prefix = os.fsencode(prefix)
    found: list[Leftover] = []
    for name in os.listdir(proc):
        if not name.isdigit() or int(name) in skip:
            continue
        pid = int(name)
        if not _started_since(pid, since):
            continue
        entry = proc / name
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        home = _daemon_home(entry, argv)
        if home is not None and not (str(home) + "/").startswith(prefix):
            home = None
        if home is None and not _refers_to(entry, argv, raw_prefix, prefix):
            continue
        line = b" ".join(argv).decode(errors="replace").strip()[:200]
        found.append(Leftover(pid, line, home))
    return found


def _daemon_home(entry: Path, argv: list[bytes]) -> Path | None:
    """The home of a ``python -m chit … daemon`` process (None: not one)."""
    if b"chit" not in argv or b"daemon" not in argv:
        return None
    if b"--home" in argv and argv.index(b"--home") + 1 < len(argv):
        return Path(os.fsdecode(argv[argv.index(b"--home") + 1]))
    try:  # the foreground `chit daemon` a test starts takes CHIT_HOME from its environment
        environ = (entry / "environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for item in environ:
        if item.startswith(b"CHIT_HOME="):
            return Path(os.fsdecode(item.split(b"=", 1)[1]))
    return None


def _refers_to(entry: Path, argv: list[bytes], raw_prefix: bytes, prefix: str) -> bool:
    if any(arg.startswith(raw_prefix) or raw_prefix in arg for arg in argv):
        return True
    for link in ("cwd", "fd/0", "fd/1", "fd/2"):
        try:
            target = os.readlink(entry / link)
        except OSError:
            continue
        if (target + "/").startswith(prefix):
            return True
    return False


def end_leftovers(found: list[Leftover]) -> list[str]:
    """Stop what :func:`leftovers` found — daemons by :func:`stop_daemon` (their servers
    with them), the rest by SIGKILL; return a description of each."""
    described = [f"pid {p.pid}: {p.cmdline}" for p in found]
    for p in found:
        if p.home is not None:
            stop_daemon(p.home)
    for p in found:
        if alive(p.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGKILL)
    wait_gone([p.pid for p in found], 10)
    return described
