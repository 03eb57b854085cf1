"""The lease: one active reconciler per home; everyone else is a viewer.

The holder refreshes a heartbeat every ``heartbeat_s``; a lease whose heartbeat is older
than ``stale_after_s`` belongs to a dead process and may be taken over — and so may, at
once, a lease whose holder is a process of this host that no longer exists (a daemon
killed by SIGKILL: its successor need not wait out the window). A holder that
finds its lease taken (it was paused longer than the staleness window) stops
reconciling at once rather than competing.
"""

from __future__ import annotations

import os
import secrets
import socket

from chit.clock import Clock, current_clock
from chit.store import Store
from chit.store.lease_repo import LeaseRepository, LeaseRow

HEARTBEAT_S = 2.0
STALE_AFTER_S = 10.0


def holder_gone(row: LeaseRow) -> bool:
    """True when the holder is a process of this host that no longer exists."""
    if row.host != socket.gethostname() or row.pid == os.getpid() or row.pid <= 0:
        return False
    try:
        os.kill(row.pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive but not ours to signal
        return False
    return False


class Lease:
    """This process's view of the reconciler lease of one home."""

    def __init__(
        self,
        store: Store,
        *,
        owner: str | None = None,
        heartbeat_s: float = HEARTBEAT_S,
        stale_after_s: float = STALE_AFTER_S,
        clock: Clock | None = None,
    ) -> None:
        """Bind to ``store``; ``owner`` defaults to a fresh random id; time from ``clock``."""
        self._repo = LeaseRepository(store.db)
        self.clock = clock or current_clock()
        self.owner = owner or secrets.token_hex(8)
        self.heartbeat_s = heartbeat_s
        self.stale_after_s = stale_after_s
        self.held = False

    def try_acquire(self) -> bool:
        """Take the lease if it is free or stale; return whether this process holds it."""
        won, _row = self._repo.acquire(
            self.owner,
            host=socket.gethostname(),
            pid=os.getpid(),
            now=self.clock.now(),
            stale_after_s=self.stale_after_s,
            holder_gone=holder_gone,
        )
        self.held = won
        return won

    def holder(self) -> LeaseRow | None:
        """The current *live* holder (None when free or stale)."""
        row = self._repo.current()
        if row is None or row.is_stale(self.clock.now(), self.stale_after_s):
            return None
        return row

    def beat(self) -> bool:
        """Refresh the heartbeat; False (and ``held`` cleared) when it was taken over."""
        if not self.held:
            return False
        self.held = self._repo.heartbeat(self.owner, self.clock.now())
        return self.held

    def release(self) -> None:
        """Give the lease up if held."""
        if self.held:
            self._repo.release(self.owner)
            self.held = False
