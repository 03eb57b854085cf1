"""Starting and stopping server subprocesses in tests (no tests here)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def free_port() -> int:
    """Return a TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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
    proc = subprocess.Popen(
        [python, "-m", "chit", *args, "--http", f"127.0.0.1:{port}"],
        env=dict(env),
        stdin=stdin,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited: {log_path.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            time.sleep(0.1)
    stop(proc)
    raise RuntimeError(f"{what} did not listen within {timeout:g} s")


def stop(proc: subprocess.Popen[Any]) -> None:
    """Terminate a subprocess we started, then kill it if needed (5 s each)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
