"""Suite-wide settings and fixtures.

* The throwaway PostgreSQL cluster (``pg_support``).
* ``CHIT_NO_DAEMON=1`` keeps every ``chit`` subprocess a test starts on today's
  in-process engine (the same results for one process); the daemon's own tests take it
  out of their environment and stop what they start. At the end of the session, any chit
  daemon still running on a test's home is killed and reported: no test may leave one
  behind.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pg_support import pg_server, pg_url

__all__ = ["pg_server", "pg_url"]

os.environ["CHIT_NO_DAEMON"] = "1"


@pytest.fixture(autouse=True)
def _stop_daemons_of_this_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that started chit's daemon on a home under its tmp_path gets it stopped.

    Tests that take ``CHIT_NO_DAEMON`` out of their environment without stopping what
    they start (or whose ``chit`` was killed, e.g. a terminal closed under it) would
    otherwise leave a daemon and its servers running.
    """
    root = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if root is None:
        return
    from tests.daemon_support import stop_daemon, stray_daemons

    for pid in stray_daemons(root):
        home = _home_of(pid)
        if home is not None:
            stop_daemon(home)
        else:
            os.kill(pid, signal.SIGKILL)


def _home_of(pid: int) -> Path | None:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if b"--home" not in argv:
        return None
    return Path(argv[argv.index(b"--home") + 1].decode())


@pytest.fixture(scope="session", autouse=True)
def _no_daemon_left_behind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    yield
    from tests.daemon_support import stray_daemons

    root = tmp_path_factory.getbasetemp()
    strays = stray_daemons(root)
    for pid in strays:
        os.kill(pid, signal.SIGKILL)
    assert not strays, f"tests left chit daemons running (killed): {strays}"
