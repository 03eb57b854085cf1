"""Keeping the reconciler lease through a busy store.

A store error here (another process holding the write lock past the busy timeout) is
logged and retried on the next beat: only a confirmed takeover loses the lease. The
store's connection is bound to its thread, so every call stays on the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio

from chit.clock import Clock, current_clock
from chit.reconcile import Lease
from chit.store.errors import StoreError

log = logging.getLogger("chit.runtime")


class LeaseKeeper:
    """Takes, refreshes and gives back one :class:`Lease`, surviving store errors."""

    def __init__(self, lease: Lease, *, heartbeat_s: float, clock: Clock | None = None) -> None:
        """Keep ``lease``, beating every ``heartbeat_s`` of ``clock`` while held."""
        self.lease = lease
        self.heartbeat_s = heartbeat_s
        self.clock = clock or current_clock()

    @property
    def held(self) -> bool:
        """True while this process holds the lease (as last confirmed)."""
        return self.lease.held

    def try_acquire(self) -> bool:
        """Take the lease if free or stale; False also when the store failed this time."""
        try:
            return self.lease.try_acquire()
        except StoreError as exc:
            log.warning("reconciler lease not taken this time: %s", exc.message)
            return False

    def beat(self) -> bool | None:
        """Refresh the lease: True held, False taken over, None the store failed."""
        try:
            return self.lease.beat()
        except StoreError as exc:
            log.warning("reconciler lease heartbeat skipped: %s", exc.message)
            return None

    def release(self) -> None:
        """Give the lease up (a store failure leaves it to go stale)."""
        try:
            self.lease.release()
        except StoreError as exc:
            log.warning("reconciler lease not released (it goes stale): %s", exc.message)

    async def heartbeat(self, stop: anyio.Event, on_beat: Callable[[], None] | None = None) -> None:
        """Beat until ``stop`` is set or the lease is taken over; ``on_beat`` after each."""
        while not stop.is_set() and self.lease.held:
            with self.clock.move_on_after(self.heartbeat_s):
                await stop.wait()
            if stop.is_set():
                return
            if self.beat() is False:
                log.warning("reconciler lease lost; attaching as a viewer")
                return
            if on_beat is not None:
                on_beat()
