"""Find the home's daemon, else start one: connect, lock, check again, spawn, wait.

1. Connect to the socket. A daemon answers: done.
2. Take ``daemon-start.lock`` (another starter may be at step 3: wait for it, bounded).
3. Connect again: another starter may have won meanwhile.
4. If ``daemon.lock`` is held, a daemon lives but does not listen yet: wait for it.
   Otherwise spawn ``chit daemon --spawned`` detached (a new session, stdin from
   ``/dev/null``, its output appended to ``logs/daemon.log``) and wait until it answers,
   or until it exits — then its last log line is the error the user sees.

Clients never delete a socket file: the daemon replaces a stale one while holding its
lock, and a live one is never touched.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

import anyio
from anyio.abc import SocketStream

from chit.engine.paths import LOG_KEEP, LOG_MAX_BYTES, DaemonPaths
from chit.errors import ChitError, ExitCode
from chit.files import NotRegularFile, check_regular, open_regular, read_regular
from chit.home import Home, ensure_private_dir
from chit.processes import pid_alive

START_WAIT_S = 30.0
"""How long a client waits for a daemon it started (or saw starting) to answer."""


class DaemonUnavailable(ChitError):
    """No daemon answers and none could be started (or it went away)."""

    exit_code = ExitCode.UNREACHABLE


async def try_connect(path: Path) -> SocketStream | None:
    """Connect to the socket at ``path``; None when nobody listens there."""
    try:
        return await anyio.connect_unix(path)
    except (FileNotFoundError, ConnectionRefusedError, ConnectionResetError):
        return None
    except OSError as exc:
        if exc.errno in (2, 111, 61, 104):  # ENOENT, ECONNREFUSED (Linux, macOS), ECONNRESET
            return None
        raise DaemonUnavailable(f"cannot connect to chit's daemon at {path}: {exc}") from exc


def lock_is_held(path: Path) -> bool:
    """True when a live process holds ``path``'s flock (a daemon runs or is starting).

    Raises:
        DaemonUnavailable: ``path`` is not a regular file (opening a FIFO here would
            block until someone reads it: forever).
    """
    if not path.exists():
        return False
    try:
        check_regular(path)
    except NotRegularFile as exc:
        raise DaemonUnavailable(f"cannot use {path}: {exc.strerror}") from None
    with open(path, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def lock_pid(path: Path) -> int | None:
    """The pid written into a lock file (None when absent or unreadable)."""
    try:  # non-blocking and bounded: a FIFO or a huge file here is "unreadable"
        text = read_regular(path, limit=64).decode("utf-8", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


async def connect_or_start(home: Home, *, start: bool = True) -> SocketStream:
    """A connection to the home's daemon, starting one when none answers.

    Raises:
        DaemonUnavailable: none answers and ``start`` is False, or the one started did
            not answer in time. ChitError: the daemon exited at start (its exit code and
            last log line, e.g. the key store is unavailable: exit 4).
    """
    paths = DaemonPaths(home)
    stream = await try_connect(paths.socket)
    if stream is not None:
        return stream
    if not start:
        raise DaemonUnavailable("chit's daemon is not running for this home")
    ensure_private_dir(home.root)
    handle = await _take_start_lock(paths)
    try:
        stream = await try_connect(paths.socket)
        if stream is not None:
            return stream
        process = None if lock_is_held(paths.lock) else spawn(home)
        return await _wait_for(paths, process)
    finally:
        handle.close()


async def _take_start_lock(paths: DaemonPaths) -> TextIO:
    fd = os.open(paths.start_lock, os.O_RDWR | os.O_CREAT, 0o600)
    handle = os.fdopen(fd, "r+", encoding="utf-8")
    deadline = anyio.current_time() + START_WAIT_S
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if anyio.current_time() > deadline:
                handle.close()
                raise DaemonUnavailable(
                    "another chit has been starting the daemon for too long; see logs/daemon.log"
                ) from None
            await anyio.sleep(0.05)


def spawn(home: Home) -> subprocess.Popen[bytes]:
    """Start ``chit daemon --spawned`` for ``home``, detached, output to ``daemon.log``."""
    paths = DaemonPaths(home)
    ensure_private_dir(paths.logs)
    rotate(paths.log)
    env = {k: v for k, v in os.environ.items() if k != "CHIT_NO_DAEMON"}
    env["CHIT_HOME"] = str(home.root)
    fd = os.open(paths.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "chit", "--home", str(home.root), "daemon", "--spawned"],
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            cwd=str(home.root),
            env=env,
            start_new_session=True,  # no terminal signals (Ctrl-C of the client) reach it
            close_fds=True,
        )
    finally:
        os.close(fd)
    # The daemon is this process's child until this process exits: reap it when it ends,
    # so a long-lived client (the TUI, the sidecar) never keeps a zombie that looks alive.
    threading.Thread(target=process.wait, name="chit-daemon-reaper", daemon=True).start()
    return process


async def _wait_for(paths: DaemonPaths, process: subprocess.Popen[bytes] | None) -> SocketStream:
    deadline = anyio.current_time() + START_WAIT_S
    delay = 0.01
    while anyio.current_time() < deadline:
        stream = await try_connect(paths.socket)
        if stream is not None:
            return stream
        if process is not None and process.poll() is not None:
            _raise_start_failure(paths, process.returncode)
        if process is None and not lock_is_held(paths.lock):
            # The daemon we saw starting gave up; start one ourselves.
            process = spawn(paths.home)
        await anyio.sleep(delay)
        delay = min(delay * 2, 0.1)
    raise DaemonUnavailable(
        f"chit's daemon did not answer within {START_WAIT_S:g} s; see {paths.log}"
    )


def _raise_start_failure(paths: DaemonPaths, code: int | None) -> None:
    if code == 0:
        # It found another daemon holding the lock: that one will answer soon.
        return
    if code is not None and code < 0:
        raise DaemonUnavailable(
            f"chit's daemon was killed (signal {-code}) while starting; see {paths.log}"
        )
    last = last_line(paths.log)
    message = last.removeprefix("chit: ") if last else f"chit's daemon exited with code {code}"
    try:
        exit_code = ExitCode(code) if code is not None else ExitCode.UNREACHABLE
    except ValueError:
        exit_code = ExitCode.UNREACHABLE
    raise ChitError(f"{message} (chit's daemon could not start)", exit_code=exit_code)


LAST_LINE_MAX = 2000
"""How much of the daemon's last log line a client repeats (chit's own one-line errors
run to ~600 characters: the key store's names the fix for each platform; cut at 300, the
client ended on "headless or CI: " with the fix itself missing)."""


def last_line(path: Path) -> str:
    """The last non-empty line of a log file ("" when none), at most :data:`LAST_LINE_MAX`."""
    try:
        with open_regular(path) as (fd, st):  # a FIFO here must not hang the client
            os.lseek(fd, max(0, st.st_size - 2 * LAST_LINE_MAX), os.SEEK_SET)
            tail = os.read(fd, 2 * LAST_LINE_MAX).decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return lines[-1][:LAST_LINE_MAX] if lines else ""


def rotate(path: Path, max_bytes: int = LOG_MAX_BYTES, keep: int = LOG_KEEP) -> None:
    """Move ``path`` to ``path.1`` (and older ones along) once it passed ``max_bytes``."""
    try:
        if path.stat().st_size <= max_bytes:
            return
    except OSError:
        return
    for n in range(keep, 0, -1):
        older = path.with_name(f"{path.name}.{n}")
        newer = path.with_name(f"{path.name}.{n - 1}") if n > 1 else path
        if newer.exists():
            os.replace(newer, older)


def wait_until_gone(paths: DaemonPaths, timeout: float, pid: int | None = None) -> bool:
    """Block until no daemon holds the lock and ``pid`` (if given) has exited.

    Returns:
        True when it is gone, False when ``timeout`` passed first.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not lock_is_held(paths.lock) and (pid is None or not _running(pid)):
            return True
        time.sleep(0.05)
    return not lock_is_held(paths.lock) and (pid is None or not _running(pid))


def _running(pid: int) -> bool:
    """True while ``pid`` runs (a child of ours that exited is reaped here)."""
    try:
        done, _status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass  # not our child: ask the kernel
    return pid_alive(pid)
