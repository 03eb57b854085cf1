"""Fixtures for the conformance tests: npm peers and a running ``chit demo-server --http``.

Peers (Node 22 and the two pinned ``@modelcontextprotocol/conformance`` versions) are
installed idempotently under ``<repo>/.tools/`` with ``npm install --prefix`` by
``tests.peers``; without npm the tests skip with the reason.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import peers
from tests.tasks_server_support import start_http_server, stop


def conformance_bin(peer: peers.Peer) -> Path:
    """Return the ``conformance`` CLI of ``peer``, installing it (and Node 22) if needed."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not on the PATH: the conformance suite needs Node.js 22 from npm")
    try:
        peers.node22()
        return peers.bin_path(peer, "conformance")
    except (peers.PeerUnavailable, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot install {peer.spec}: {exc}")


def run_conformance(
    peer: peers.Peer, args: list[str], out: Path, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    """Run ``conformance <args>`` under Node 22 with results written below ``out``."""
    binary = conformance_bin(peer)
    return subprocess.run(
        [str(binary), *args, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=peers.node22_env(),
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="session")
def demo_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``chit demo-server --http 127.0.0.1:<free port>`` on a fresh store, for the session."""
    tmp = tmp_path_factory.mktemp("conformance-server")
    proc, url = start_http_server(tmp / "tasks.db", tmp)
    try:
        yield url
    finally:
        stop(proc)


@pytest.fixture(scope="session")
def pg_demo_url(pg_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A ``chit demo-server --http --store postgresql://…`` replica, a second one beside it.

    Both serve one fresh database for the session; the tests talk to the first.
    """
    import secrets

    from tests.pg_support import create_database, drop_database
    from tests.proc_support import start_chit_http
    from tests.tasks_server_support import PYTHON, demo_env

    tmp = tmp_path_factory.mktemp("conformance-pg")
    url = create_database(pg_server, f"conf_{secrets.token_hex(4)}")
    procs = []
    try:
        for _ in range(2):
            proc, endpoint = start_chit_http(
                ["demo-server", "--store", url],
                env=demo_env(tmp),
                log_dir=tmp,
                log_name="replica",
                what="demo replica",
                python=PYTHON,
            )
            procs.append((proc, endpoint))
        yield procs[0][1]
    finally:
        for proc, _ in procs:
            stop(proc)
        drop_database(pg_server, url)
