"""Shared helpers for interop tests against third-party npm MCP servers.

``everything_entry()`` installs ``@modelcontextprotocol/server-everything`` (pinned) into
``.tools/everything`` once (idempotent: skipped when the pinned version is present) and
returns its ``dist/index.js``. Tests call ``require_npm()`` first so a machine without
``npm`` skips with a clear reason instead of failing.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from tests.proc_support import free_port

REPO = Path(__file__).resolve().parents[1]
TOOLS = REPO / ".tools"
EVERYTHING_PKG = "@modelcontextprotocol/server-everything"
EVERYTHING_VERSION = "2026.8.31"
EVERYTHING_PREFIX = TOOLS / "everything"


def require_npm() -> None:
    """Skip the calling test when ``npm``/``node`` are not installed."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("npm/node not installed: interop tests need Node.js (see docs/tasks-client.md)")


def npm_install(package: str, version: str, prefix: Path) -> Path:
    """Install ``package@version`` under ``prefix`` unless that exact version is there.

    Returns:
        The package directory inside ``prefix/node_modules``.
    """
    require_npm()
    pkg_dir = prefix / "node_modules" / package
    manifest = pkg_dir / "package.json"
    if manifest.exists() and json.loads(manifest.read_text()).get("version") == version:
        return pkg_dir
    prefix.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [
            "npm",
            "install",
            "--prefix",
            str(prefix),
            "--no-audit",
            "--no-fund",
            f"{package}@{version}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"npm install {package}@{version} failed:\n{proc.stderr[-2000:]}")
    return pkg_dir


def everything_entry() -> Path:
    """Return server-everything's ``dist/index.js`` (installing it if needed)."""
    return npm_install(EVERYTHING_PKG, EVERYTHING_VERSION, EVERYTHING_PREFIX) / "dist" / "index.js"


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 180.0) -> None:
    """Block until something accepts TCP connections on ``port`` (or fail).

    Ends as soon as the port accepts (or the process exits); ``timeout`` only bounds a hang:
    a Python server's start alone takes 10+ s at load 12.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early with code {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on port {port} after {timeout}s")


@contextmanager
def http_server(
    argv: Sequence[str], port: int, env: Mapping[str, str] | None = None, log: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``argv`` as a background server, wait until ``port`` listens, kill it after.

    The child gets its own process group so the whole tree (``npx``/``node`` wrappers)
    is stopped by pid, never by name; it gets SIGTERM from the kernel if this process
    dies without stopping it (``chit.tasks.client.deathsig``).
    """
    from chit.tasks.client.deathsig import die_with_parent

    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        list(argv),
        env={**os.environ, **(env or {})},
        stdout=out,
        stderr=subprocess.STDOUT if log else subprocess.DEVNULL,
        start_new_session=True,
        # Its own session outlives a SIGKILLed test process (a CI timeout, a killed
        # worker), which runs no teardown: the kernel ends it then (Linux).
        preexec_fn=die_with_parent(),
    )
    try:
        wait_listening(port, proc)
        yield proc
    finally:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=5)
        if log:
            out.close()  # type: ignore[union-attr]


@contextmanager
def everything_http(log: Path | None = None) -> Iterator[str]:
    """Run server-everything over streamable HTTP on a free port; yield its ``/mcp`` URL."""
    entry = everything_entry()
    port = free_port()
    with http_server(["node", str(entry), "streamableHttp"], port, {"PORT": str(port)}, log):
        yield f"http://127.0.0.1:{port}/mcp"
