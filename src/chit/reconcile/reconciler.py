"""The reconciler: keeps every live receipt true by asking its server.

* **Schedule** — receipts are due at ``next_check_at`` (the server's poll interval within
  the policy's floor and ceiling, moved later by a little jitter; exponential backoff
  after failures). Terminal receipts whose result was not retrieved yet are due too.
* **Hints** — a status notification marks the task for an immediate ``tasks/get`` (for
  a 2025 task it says ended: the ``tasks/result`` that end implies, which confirms it
  and brings the result in one round trip; a 2026 one that says ended carries the whole
  DetailedTask, which the extension defines as the ``tasks/get`` answer, and is folded
  as that answer, checked the same way — ``TaskObserver.told``); hints arriving
  while a check is in flight coalesce into one more check. Every live receipt's handle
  is opened and its 2026 push subscribed as soon as the receipt is known (created here,
  or found live when reconciling starts), so no hint is dropped for want of a route.
* **Terminal** — the result is retrieved once (2025 ``tasks/result``, 2026 inline),
  digested and summarised, the acceptance check runs on it, and polling stops.
* **Failures** — recorded as the receipt's retrieval condition (never as a lifecycle
  state); lost and incompatible tasks are not checked again.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import anyio
from anyio.abc import TaskGroup

from chit.clock import Clock, current_clock
from chit.receipts import ObservationSource, Receipt
from chit.reconcile.check import ReceiptCheck
from chit.reconcile.connections import ConnectionPool
from chit.reconcile.handles import HandleBook, HandleUnavailable
from chit.reconcile.hints import HintRouting
from chit.reconcile.inbox import LegacyInbox
from chit.reconcile.observe import TaskObserver
from chit.reconcile.push import PushSubscriptions
from chit.reconcile.schedule import DueScan
from chit.reconcile.writer import ReceiptWriter
from chit.tasks.client.inputs import Hint

log = logging.getLogger("chit.reconcile")

HOLD_FLOOR_S = 1.0
HOLD_CEILING_S = 300.0
"""A check that failed without writing anything (the store itself failing) is not
polled again before this backoff (1 s, 2 s, … 300 s; in memory)."""

IDLE_WAIT_S = 1.0
"""Longest sleep between schedule scans: receipts written by other processes are seen
within this. The loop otherwise sleeps until the soonest scheduled check, and wakes at
once on a hint or on a receipt change committed in this process (a new receipt, a check
that rescheduled one), so an idle engine wakes about once a second, not 20 times."""

SCAN_TICK_S = 0.01
"""Shortest time between two reads of the schedule while checks are merely due (a hint
or a new receipt is acted on at once). With 1,000 live tasks polled every second a check
comes due every millisecond, and a scan per due time or per committed batch (two store
queries each) cost more CPU than the checks' own writes; the bare ``tasks/get`` loop the
benchmark compares with looks every 10 ms too."""


class Reconciler(HintRouting, ReceiptCheck):
    """Checks receipts against their servers and writes what it saw.

    Hints are routed by :class:`~chit.reconcile.hints.HintRouting`, one check is
    :class:`~chit.reconcile.check.ReceiptCheck`; this class holds their state, the
    routes and the schedule loop.
    """

    def __init__(
        self,
        writer: ReceiptWriter,
        handles: HandleBook,
        pool: ConnectionPool,
        inbox: LegacyInbox,
        tg: TaskGroup,
        *,
        clock: Clock | None = None,
    ) -> None:
        """Wire the parts; checks started by ``run``/``kick`` live in ``tg``.

        The schedule (due times, hint pulls, held-back receipts, the idle tick) runs on
        ``clock``.
        """
        self.clock = clock or current_clock()
        self.writer = writer
        self.store = writer.store
        self.handles = handles
        self.pool = pool
        self.inbox = inbox
        self.push = PushSubscriptions(pool, tg, clock=self.clock)
        self.digest_key = handles.vault.digest_key()
        self.observer = TaskObserver(self.digest_key, pool.options.read_timeout)
        self._tg = tg
        self._inflight: set[str] = set()
        self._settled = anyio.Event()  # set while nothing is in flight (see ``idle``)
        self._settled.set()
        self._queued: dict[str, str] = {}  # receipt id → server, while waiting for a slot
        self._again: set[str] = set()
        self._hinted: set[str] = set()
        self._wake = anyio.Event()
        self._pulled: dict[str, float] = {}  # receipt id → pulled-in check (monotonic)
        self._known: dict[str, Receipt] = {}  # receipt id → as last written by a check
        # (next check, rid) of receipts whose next check is held in memory, not yet in
        # the store (writer.behind): the loop kicks them itself.
        self._in_hand: list[tuple[datetime, str]] = []
        self._held: dict[str, tuple[float, int]] = {}  # rid → (until, failures): see _guarded
        self._running = False
        self.schedule = DueScan(self.store, self.clock)
        self._scan_at = 0.0  # monotonic: when the loop reads the schedule next
        self._scanned_at = 0.0  # monotonic: when it last did
        # A receipt created here, or rescheduled sooner than the loop's next look: look
        # again now (see ``_committed``).
        writer.follow(self._committed)
        self._ended: dict[str, Hint] = {}  # rid → a 2025 push saying it ended (observe.py)
        self.checks = 0
        self.message_hints = 0

    # --- routes -------------------------------------------------------------------------

    def adopt(self, receipt: Receipt, task_id: str) -> None:
        """A receipt was just created here: subscribe to its task's pushes at once (not
        at its first check, a poll interval later: a short task would end unheard)."""
        if self._running:  # only the process that reconciles listens for its tasks
            self.push.track(receipt.server, task_id, live=not receipt.is_terminal)

    def adopt_live(self) -> int:
        """Open every live receipt's handle and subscribe to its pushes; return how many.

        Run when reconciling starts: hints are routed by task id, so until its first
        check — seconds away after a restart with many live receipts — a receipt would
        have its hints dropped and its 2026 task no push.
        """
        adopted = 0
        for receipt_id, server, blob in self.store.receipts.live_handles():
            try:
                task_id = self.handles.open(receipt_id, server, blob)
            except HandleUnavailable:
                continue  # its check records why
            self.push.track(server, task_id, live=True)
            adopted += 1
        return adopted

    # --- schedule -----------------------------------------------------------------------

    def due_ids(self, limit: int = 1000, *, at: datetime | None = None) -> list[str]:
        """Receipts due now (or ``at``): live ones past ``next_check_at``, unretrieved results."""
        return self.store.receipts.due_ids(at or self.clock.now(), limit)

    def live_ids(self) -> list[str]:
        """Every receipt that still needs the server: live, or terminal without its result.

        Lost (vanished, expired) and incompatible receipts are left alone: asking again
        the same way cannot help, and a person decides what to do with them.
        """
        return self.store.receipts.live_ids()

    def kick(self, receipt_ids: Iterable[str], source: ObservationSource) -> None:
        """Start checks for ``receipt_ids`` in the background (coalescing repeats)."""
        starting = []
        for rid in receipt_ids:
            if source is ObservationSource.POLL and self._is_held(rid):
                continue
            if rid in self._inflight:
                # Only news coalesces into one more check; a due poll of a receipt
                # already being checked is that check (it sets the next due time).
                if source is not ObservationSource.POLL:
                    self._again.add(rid)
                continue
            if not self._inflight:
                self._settled = anyio.Event()
            self._inflight.add(rid)
            starting.append(rid)
        # The stored versions of the copies in hand, for all of them in one query rather
        # than one per check (``ReceiptCheck._read``): read now, each check starts at the
        # loop's next turn, as a check that read it itself would have.
        in_hand = [rid for rid in starting if rid in self._known]
        versions: dict[str, int] = {}
        if len(in_hand) > 1:
            try:
                versions = self.store.receipts.versions(in_hand)
            except Exception:  # each check reads its own (and fails there, held back)
                log.debug("reading %d versions failed", len(in_hand), exc_info=True)
        for rid in starting:
            self._tg.start_soon(self._check_loop, rid, source, versions.get(rid))

    async def run(self, stop: anyio.Event, *, keep_going: Any = None) -> None:
        """Reconcile until ``stop`` is set (or ``keep_going()`` returns False)."""
        self._running = True
        try:
            await self._run(stop, keep_going)
        finally:
            self._running = False
            # What the checks held in memory is written before anyone else reconciles.
            with anyio.CancelScope(shield=True):
                await self.writer.flush_behind()

    async def _run(self, stop: anyio.Event, keep_going: Any) -> None:
        self.adopt_live()

        async def wake_on_stop() -> None:
            await stop.wait()
            self._wake.set()  # stop now, not at the next tick

        async with anyio.create_task_group() as tg:
            tg.start_soon(wake_on_stop)
            while not stop.is_set():
                if keep_going is not None and not keep_going():
                    break
                if self._hinted:
                    hinted, self._hinted = self._hinted, set()
                    self.kick(hinted, ObservationSource.NOTIFICATION)
                now = self.clock.monotonic()
                if now >= self._scan_at:
                    self._scanned_at = now
                    behind = self.writer.behind
                    # Held receipts' stored next checks are old: they are not due then.
                    due = self.schedule.due(1000 + len(behind))
                    self.kick(self._not_ahead(due) if behind else due, ObservationSource.POLL)
                    self.kick(self._due_in_hand(), ObservationSource.POLL)
                    self.kick(self._due_pulls(), ObservationSource.POLL)
                    flush_at = behind.due_at()
                    if flush_at is not None and flush_at <= now and not behind.flushing:
                        self._tg.start_soon(self.writer.flush_behind)
                    self._scan_at = now + max(self._idle_wait(), SCAN_TICK_S)
                self._wake = anyio.Event()
                with self.clock.move_on_after(max(self._scan_at - now, 0.0)):
                    await self._wake.wait()
            tg.cancel_scope.cancel()

    def wake(self) -> None:
        """Scan the schedule now (a receipt changed: its next check may be sooner)."""
        self._scan_at = 0.0
        self._wake.set()

    def _committed(self, before: Receipt | None, after: Receipt) -> None:
        """A change committed in this process: keep the copy in hand (what a hint is
        judged against, without reading the store) and wake the loop when it must look
        at the schedule before it planned to.

        A new receipt is looked at once; a rescheduled one only when its next check
        comes before the loop's next look (within ``SCAN_TICK_S`` of the last one): a
        check that moved its receipt a poll interval on changes nothing the loop plans.
        """
        self._remember(after)
        if before is None:
            self.wake()
            return
        nxt = after.next_check_at
        if nxt is None or self._scan_at <= self._scanned_at:
            return
        due_in = (nxt - self.clock.now()).total_seconds()
        at = max(self.clock.monotonic() + due_in, self._scanned_at + SCAN_TICK_S)
        if at < self._scan_at:
            self._scan_at = at
            self._wake.set()

    def _idle_wait(self) -> float:
        """Seconds until the loop must look again: the soonest scheduled check, pull or
        end of a hold, at most ``IDLE_WAIT_S``."""
        wait = IDLE_WAIT_S
        nxt = self.store.receipts.next_due_after(self.clock.now())
        if nxt is not None:
            wait = min(wait, (nxt - self.clock.now()).total_seconds())
        if self._in_hand:
            wait = min(wait, (self._in_hand[0][0] - self.clock.now()).total_seconds())
        now = self.clock.monotonic()
        flush_at = self.writer.behind.due_at()
        if flush_at is not None:
            wait = min(wait, flush_at - now)
        for at in self._pulled.values():
            wait = min(wait, at - now)
        for until, _failures in self._held.values():
            if until > now:
                wait = min(wait, until - now)
        return max(wait, 0.0)

    def _not_ahead(self, due: list[str]) -> list[str]:
        """``due`` without the receipts whose next check, held in memory, is later."""
        now = self.clock.now()
        ahead = self.writer.behind.ahead
        kept = []
        for rid in due:
            held = ahead(rid)
            if held is None or held.next_check_at is None or held.next_check_at <= now:
                kept.append(rid)
        return kept

    def _due_in_hand(self) -> list[str]:
        """Receipts whose next check, known in memory only, has come."""
        heap = self._in_hand
        if not heap:
            return []
        now = self.clock.now()
        due = []
        while heap and heap[0][0] <= now:
            at, rid = heapq.heappop(heap)
            known = self._known.get(rid)
            if known is not None and known.next_check_at == at:  # not moved since
                due.append(rid)
        return due

    async def check_all(self, receipt_ids: Iterable[str], source: ObservationSource) -> None:
        """Check each receipt once and wait for every check to finish."""
        async with anyio.create_task_group() as tg:
            for rid in receipt_ids:
                tg.start_soon(self.check, rid, source)

    async def idle(self) -> None:
        """Wait until no background check is in flight."""
        while self._inflight:
            await self._settled.wait()

    # --- checks in the background ---------------------------------------------------------

    async def _check_loop(self, rid: str, source: ObservationSource, version: int | None) -> None:
        self._pulled.pop(rid, None)  # this check is the one the hint asked for
        try:
            await self._guarded(rid, source, version)
            while rid in self._again:
                self._again.discard(rid)
                await self._guarded(rid, ObservationSource.NOTIFICATION)
        finally:
            self._inflight.discard(rid)
            if not self._inflight:
                self._settled.set()

    async def _guarded(
        self, rid: str, source: ObservationSource, version: int | None = None
    ) -> None:
        try:
            await self.check(rid, source, version=version)
        except Exception:
            # One bad receipt (or a store hiccup) must never kill the reconciler. Nothing
            # was written, so the receipt is still due: hold its polls back (in memory,
            # exponential) instead of failing again every tick.
            _until, failures = self._held.get(rid, (0.0, 0))
            failures += 1
            delay = min(HOLD_CEILING_S, HOLD_FLOOR_S * 2 ** min(failures - 1, 10))
            self._held[rid] = (self.clock.monotonic() + delay, failures)
            log.exception("check of %s failed (next try in %.1f s)", rid, delay)
        else:
            self._held.pop(rid, None)

    def _is_held(self, rid: str) -> bool:
        held = self._held.get(rid)
        return held is not None and held[0] > self.clock.monotonic()
