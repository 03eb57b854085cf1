"""Suite-wide settings and fixtures.

* The throwaway PostgreSQL cluster (``pg_support``).
* ``CHIT_NO_DAEMON=1`` keeps every ``chit`` subprocess a test starts on today's
  in-process engine (the same results for one process); the daemon's own tests take it
  out of their environment and stop what they start.
* SIGINT reaches the processes tests start: a suite run as a background job (``cmd &``
  in a script, ``nohup``; ``.ci/run`` under CI) inherits SIGINT *ignored*, every child
  inherits that too, and chit rightly keeps an inherited ignore — so each test that
  sends SIGINT to a ``chit`` waited for an exit that never came (ctrl-c tests failed
  only in CI). The suite puts Python's usual handler back; ``exec`` turns a handled
  signal into the default in each child, which then installs its own.
* Hypothesis keeps no example database in CI (a fresh clone has none to replay, and
  runs stay reproducible); elsewhere each pytest-xdist worker has its own
  (``.hypothesis/examples-gw0`` …), so workers never write one directory at once.
* No test may leave a process behind (a daemon, a server): after each test, and after
  the session, whatever still runs and refers to its temporary directory is reported as
  a failure and stopped.
* A run killed from outside (SIGKILL, a CI timeout) runs none of that: every process a
  test starts inherits ``PYTEST_CHIT_CREATOR`` (this process's pid; ``proc_support``),
  and each session (each xdist worker) first stops the chit daemons and ``chit
  demo-server`` processes (an HTTP one never ends by itself) whose creator is gone —
  never one whose creator runs, so workers and runs side by side are safe.
"""

from __future__ import annotations

import os
import signal
import warnings
from collections.abc import Iterator

import pytest
from hypothesis import settings
from hypothesis.database import DirectoryBasedExampleDatabase

from tests.pg_support import IN_CI, pg_server, pg_url
from tests.proc_support import CREATOR

__all__ = ["pg_server", "pg_url"]

os.environ["CHIT_NO_DAEMON"] = "1"
# Set at import in each process that runs tests (the xdist controller's value is
# replaced in each worker, which imports this module again).
os.environ[CREATOR] = str(os.getpid())

_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
settings.register_profile(
    "chit",
    database=None
    if IN_CI
    else DirectoryBasedExampleDatabase(
        f".hypothesis/examples-{_WORKER}" if _WORKER else ".hypothesis/examples"
    ),
)
settings.load_profile("chit")

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _no_process_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """No test leaves a process running that refers to its tmp_path: checked, then ended.

    A chit daemon of a home under it (spawned, or a foreground ``chit daemon``), a stdio
    server writing its stderr there, any process started with it in its command line,
    working directory or standard streams. Such a process gets 10 s to exit on its own
    (one that is ending is no leak), then is stopped (a daemon cleanly, with its
    servers) and the test fails, naming it.
    """
    from tests.daemon_support import boot_ticks, end_leftovers, leftovers, wait_gone

    # A second of margin: a start time is counted in ticks, and being early costs nothing.
    since = max(0, boot_ticks() - os.sysconf("SC_CLK_TCK"))
    root = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if root is None:
        return
    found = leftovers(root, since=since)
    if not found:
        return
    still = set(wait_gone([p.pid for p in found], 10))
    left = [p for p in found if p.pid in still]
    if left:
        pytest.fail(f"the test left processes running (stopped now): {end_leftovers(left)}")


@pytest.fixture(scope="session", autouse=True)
def _no_daemon_left_behind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    from tests.daemon_support import end_leftovers, end_orphaned_daemons, leftovers

    stopped = end_orphaned_daemons()
    if stopped:  # a killed run's; said once, not a failure of this one
        warnings.warn(f"stopped processes of a killed test run: {stopped}", stacklevel=1)
    yield
    found = leftovers(tmp_path_factory.getbasetemp())
    assert not found, f"tests left processes running (stopped now): {end_leftovers(found)}"
