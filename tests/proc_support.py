"""Starting and stopping server subprocesses in tests (no tests here)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

CREATOR = "PYTEST_CHIT_CREATOR"
"""The environment variable that names the test process a process descends from.

tests/conftest.py sets it to the pid of each test process (each xdist worker), so every
process a test starts inherits it, and a daemon carries it in ``/proc/PID/environ`` for
as long as it runs. A run killed from outside (SIGKILL, a CI timeout) runs no finalizer:
the next session stops the chit daemons whose creator is gone
(``tests.daemon_support.end_orphaned_daemons``). Not a ``CHIT_`` name: tests build their
commands' environments without chit's own variables, and this one must stay.
"""

# Under pytest-xdist each worker hands out ports from its own block, below the kernel's
# ephemeral range (32768-60999 on Linux): a port the kernel picked for ``bind(0)`` is free
# again once we close it, so in the second or more before the server we start binds it,
# another worker's ``bind(0)`` or any outgoing connection's source port could take it
# (the server then fails "address in use", or a client reaches the wrong server). Blocks
# are disjoint between the workers of one run; the run's id moves them, so two runs side
# by side on one machine rarely share a block, and each candidate is still bind-checked.
_BLOCK = 256
_FIRST, _LAST = 16384, 32768
_handed: list[int] = []


def _worker_block() -> range | None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or not worker[2:].isdigit():
        return None
    blocks = (_LAST - _FIRST) // _BLOCK
    run = zlib.crc32(os.environ.get("PYTEST_XDIST_TESTRUNUID", "").encode())
    index = (run + int(worker[2:])) % blocks
    start = _FIRST + index * _BLOCK
    return range(start, start + _BLOCK)


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """Return a TCP port that was free a moment ago on 127.0.0.1.

    Alone, the kernel picks one (``bind(0)``). In an xdist worker, the next bindable port
    of the worker's own block (see ``_BLOCK``), never one handed out recently: another
    worker, or an outgoing connection, cannot take it before the caller binds it.
    """
    block = _worker_block()
    if block is None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
            return port
    start = (_handed[-1] + 1 - block.start) % len(block) if _handed else 0
    for step in range(len(block)):
        port = block.start + (start + step) % len(block)
        if port not in _handed and _bindable(port):
            _handed.append(port)
            # Cycle through the whole block before a port comes back (a restarted
            # server's port stays with the test that asked for it).
            del _handed[: -(len(block) // 2)]
            return port
    raise RuntimeError(f"no free port in {block.start}-{block.stop - 1} (this worker's block)")


def start_chit_http(
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    log_dir: Path,
    log_name: str,
    what: str,
    python: str = sys.executable,
    stdin: int | None = None,
    timeout: float = 90,
) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``python -m chit ARGS --http 127.0.0.1:PORT`` on a free port.

    Output goes to ``log_dir/<log_name>-http-PORT.log``; ``what`` names the server in errors.
    The wait ends as soon as the port accepts; ``timeout`` only bounds a hang. It is long
    because ``chit proxy --http`` listens after it has started a daemon and that daemon has
    reached the server: three interpreters start in turn, which took over 20 s at load 11
    on 2 cores (the proxy conformance fixture failed there).

    Returns:
        (process, ``/mcp`` URL) once the port accepts connections.

    Raises:
        RuntimeError: the process exited (with its log) or did not listen in ``timeout``.
    """
    port = free_port()
    log_path = log_dir / f"{log_name}-http-{port}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - lives as long as the process
    from chit.tasks.client.deathsig import die_with_parent

    proc = subprocess.Popen(
        [python, "-m", "chit", *args, "--http", f"127.0.0.1:{port}"],
        env=dict(env),
        stdin=stdin,
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=die_with_parent(),  # ends with a SIGKILLed test process
    )
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited: {log_path.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    return proc, f"http://127.0.0.1:{port}/mcp"
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{what} did not listen within {timeout:g} s")
    except BaseException:
        # Also a test's timeout (pytest-timeout raises here) or ctrl-c while waiting:
        # the caller never got the process, so nobody else would stop it.
        stop(proc)
        raise


def stop(proc: subprocess.Popen[Any]) -> None:
    """Terminate a subprocess we started, then kill it if needed (5 s each)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
