"""Reconciling under the lease: one pass (``chit reconcile``) or until stopped (the daemon).

Only one process per home reconciles (the lease); the others are viewers. A viewer's
``run`` takes over when the holder's lease goes stale.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import anyio

from chit import clock
from chit.errors import Conflict
from chit.receipts import ObservationSource, RetrievalCondition
from chit.reconcile import LegacyInbox, Reconciler
from chit.runtime.intents import IntentRecovery
from chit.runtime.lease_keeper import LeaseKeeper
from chit.runtime.retention import RetentionKeeper
from chit.store.errors import StoreError

log = logging.getLogger("chit.runtime")


@dataclass(frozen=True)
class ReconcileReport:
    """What ``reconcile_once`` did."""

    viewer: bool
    holder: str | None
    checked: int
    intents_unknown: int
    by_state: dict[str, int]
    problems: int


class ReconcileLoop:
    """Runs the reconciler while this process holds the lease."""

    def __init__(
        self,
        reconciler: Reconciler,
        inbox: LegacyInbox,
        keeper: LeaseKeeper,
        intents: IntentRecovery,
        *,
        settle_s: float,
        retention: RetentionKeeper | None = None,
    ) -> None:
        """Wire the parts; ``settle_s`` bounds a pass's wait for 2025 prompts.

        ``retention`` runs beside the reconciler while the lease is held (once a day).
        """
        self.retention = retention
        self.reconciler = reconciler
        self.store = reconciler.store
        self.inbox = inbox
        self.keeper = keeper
        self.intents = intents
        self.settle_s = settle_s

    async def once(self) -> ReconcileReport:
        """One pass: resume intents, check every live receipt, collect prompts.

        A viewer (another process holds the lease) does nothing and says who holds it.
        When the lease is already held here (``run`` is going, e.g. the TUI's
        "reconcile now"), the pass runs under it and the lease is kept.
        """
        owned = self.keeper.held
        if not owned and not self.keeper.try_acquire():
            holder = self.keeper.lease.holder()
            return ReconcileReport(True, _describe(holder), 0, 0, {}, 0)
        try:
            unknown = self.intents.resume()
            ids = self.reconciler.live_ids()
            before = self.reconciler.checks
            await self.reconciler.check_all(ids, ObservationSource.RESTART)
            await self.inbox.settle(self.settle_s)
            return self._report(self.reconciler.checks - before, unknown)
        finally:
            if not owned:
                self.keeper.release()

    def _report(self, checked: int, unknown: int) -> ReconcileReport:
        counts = {str(k): v for k, v in self.store.receipts.counts_by_state().items()}
        problems = sum(
            1
            for rid in self.reconciler.live_ids()
            if (r := self.store.receipts.get(rid)) is not None
            and r.retrieval is not RetrievalCondition.FRESH
        )
        return ReconcileReport(False, None, checked, unknown, counts, problems)

    async def run(self, stop: anyio.Event) -> None:
        """Reconcile until ``stop`` is set; as a viewer, take over when the lease goes stale."""
        keeper = self.keeper
        while not stop.is_set():
            if not keeper.try_acquire():
                with keeper.clock.move_on_after(keeper.heartbeat_s):
                    await stop.wait()
                continue
            log.info("reconciler lease acquired by %s", keeper.lease.owner)
            self.resume_safely()
            self.reconciler.kick(self.reconciler.live_ids(), ObservationSource.RESTART)
            async with anyio.create_task_group() as tg:
                tg.start_soon(keeper.heartbeat, stop, self.resume_safely)
                if self.retention is not None:
                    tg.start_soon(self.retention.run, stop, lambda: keeper.held)
                await self.reconciler.run(stop, keep_going=lambda: keeper.held)
                tg.cancel_scope.cancel()
        keeper.release()

    def resume_safely(self) -> None:
        """Resume intents; a busy store or a lost race only postpones it to the next beat."""
        try:
            self.intents.resume()
        except (StoreError, Conflict) as exc:
            log.warning("resuming intents skipped this time: %s", exc.message)


def _describe(holder: Any) -> str | None:
    if holder is None:
        return None
    return f"{holder.host} pid {holder.pid} (since {clock.iso(holder.acquired_at)})"
