"""The reconciler lease of a dead local holder is taken at once (a SIGKILLed daemon)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from chit import clock
from chit.home import Home
from chit.reconcile.lease import Lease
from chit.store import Store
from chit.store.lease_repo import LeaseRepository


def _hold(store: Store, pid: int, host: str | None = None) -> None:
    won, _row = LeaseRepository(store.db).acquire(
        "old-holder", host=host or socket.gethostname(), pid=pid, now=clock.now(),
        stale_after_s=10,
    )  # fmt: skip
    assert won


def test_a_dead_local_holder_is_replaced_at_once(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    with Store.open(Home(tmp_path / "home").ensure()) as store:
        _hold(store, int(gone.stdout))  # its heartbeat is fresh, its process is gone
        assert Lease(store).try_acquire()


def test_a_live_or_remote_holder_is_not(tmp_path: Path) -> None:
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with Store.open(Home(tmp_path / "home").ensure()) as store:
            _hold(store, alive.pid)
            assert not Lease(store).try_acquire()  # alive: wait for its heartbeat to stop
            LeaseRepository(store.db).release("old-holder")
            _hold(store, 999_999_999, host="another-host")
            assert not Lease(store).try_acquire()  # cannot be probed: the window decides
    finally:
        alive.kill()
        alive.wait()
