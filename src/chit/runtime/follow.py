"""Following one receipt until it ends, is lost, or waits for a person (``--wait``)."""

from __future__ import annotations

from datetime import datetime

import anyio

from chit.clock import Clock, current_clock
from chit.receipts import ObservationSource, Receipt, RetrievalCondition, follow_done
from chit.reconcile import Reconciler
from chit.runtime.lease_keeper import LeaseKeeper

POLL_S = 0.1
"""How often a follower re-reads the store while nothing is due here."""


class Follower:
    """Follows receipts, checking them itself when it may hold the lease."""

    def __init__(
        self, reconciler: Reconciler, keeper: LeaseKeeper, *, clock: Clock | None = None
    ) -> None:
        """Wire the parts; due times and the re-read pace run on ``clock``."""
        self.clock = clock or current_clock()
        self.reconciler = reconciler
        self.store = reconciler.store
        self.keeper = keeper

    async def follow(self, receipt_id: str, *, reconcile: bool = True) -> Receipt:
        """Follow one receipt until it ends, is lost, or waits for a person.

        Reconciles it here unless another process holds the lease (then only watches).
        Under a lease already held here (``run`` is going) it keeps it; a lease taken
        here is kept alive on schedule (even during a long check) and given back at the
        end; lost to a takeover, it goes on as a viewer.
        """
        keeper = self.keeper
        rid = self.store.receipts.get_by_prefix(receipt_id).receipt_id
        owned = keeper.held
        took = reconcile and not owned and keeper.try_acquire()
        active = reconcile and (owned or took)
        stop = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                if took:
                    tg.start_soon(keeper.heartbeat, stop)
                try:
                    followed = await self._follow(rid, active, reconcile)
                finally:
                    stop.set()
        finally:
            if took:
                keeper.release()
        return followed

    async def _follow(self, rid: str, active: bool, reconcile: bool) -> Receipt:
        looked = False
        while True:
            r = self.store.receipts.require(rid)
            now = self.clock.now()
            # The lease may have been taken here since ``active`` was decided (a fresh
            # daemon's own loop takes it right after start): checking is this process's.
            if reconcile and self.keeper.held and not looked and _live(r):
                # Once, before trusting the store: what it says may be the last word of a
                # server process that is gone (a stdio server ended with the previous
                # daemon) — "input required" then sent the person to answer a task that no
                # longer exists, until the next scheduled check said it had vanished.
                looked = True
                await self.reconciler.check(rid, ObservationSource.POLL)
                continue
            if settled(r, now):
                return r
            due = r.next_check_at is None or r.next_check_at <= now
            if active and self.keeper.held and due:
                await self.reconciler.check(rid, ObservationSource.POLL)
                continue
            await self.clock.sleep(POLL_S)


_LOST = (RetrievalCondition.VANISHED, RetrievalCondition.EXPIRED, RetrievalCondition.INCOMPATIBLE)


def _live(r: Receipt) -> bool:
    """Still running as far as the store knows, and not known lost."""
    lost = (
        RetrievalCondition.VANISHED,
        RetrievalCondition.EXPIRED,
        RetrievalCondition.INCOMPATIBLE,
    )
    return not r.is_terminal and r.retrieval not in lost


def settled(r: Receipt, now: datetime) -> bool:
    """True when following ``r`` further cannot change anything without a person."""
    return follow_done(r, now)
