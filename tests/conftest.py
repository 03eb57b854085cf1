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

import pytest

from tests.pg_support import pg_server, pg_url

__all__ = ["pg_server", "pg_url"]

os.environ["CHIT_NO_DAEMON"] = "1"


@pytest.fixture(scope="session", autouse=True)
def _no_daemon_left_behind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    yield
    from tests.daemon_support import stray_daemons

    root = tmp_path_factory.getbasetemp()
    strays = stray_daemons(root)
    for pid in strays:
        os.kill(pid, signal.SIGKILL)
    assert not strays, f"tests left chit daemons running (killed): {strays}"
