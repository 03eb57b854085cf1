"""2026 push: one ``subscriptions/listen`` per server for the tasks still worth hearing about.

A 2026 server pushes nothing unasked: the client subscribes with ``TaskClient.watch``
naming the task ids. This keeps one such subscription per 2026 server covering the
non-terminal receipts the reconciler has checked, and re-subscribes when new live tasks
appear (debounced; the new subscription is open before the old one closes, so no change
falls between them). Tasks that end need no re-subscription: the server stops pushing
a task once it is terminal.

A push is only a hint (``on_hint`` of the connection): it triggers an immediate, coalesced
``tasks/get``; polling stays the source of truth, so a missed or refused subscription
costs latency, never correctness.
"""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack

import anyio
from anyio.abc import TaskGroup

from chit.clock import Clock, current_clock
from chit.reconcile.connections import ConnectionPool
from chit.tasks import wire
from chit.tasks.client import TaskClient, TaskError

log = logging.getLogger("chit.reconcile")

RESUBSCRIBE_S = 0.25
"""How long new live tasks gather before one re-subscription covers them all."""

RETRY_S = 2.0
"""Pause after a refused or failed subscription (the schedule keeps polling meanwhile)."""

STALE_CHECK_S = 1.0
"""How often an open subscription looks whether its connection was replaced."""


class PushSubscriptions:
    """Keeps each 2026 server's task subscription in step with its live receipts."""

    def __init__(
        self,
        pool: ConnectionPool,
        tg: TaskGroup,
        *,
        resubscribe_s: float = RESUBSCRIBE_S,
        retry_s: float = RETRY_S,
        clock: Clock | None = None,
    ) -> None:
        """Subscribe through ``pool``'s connections; the per-server loops run in ``tg``."""
        self._pool = pool
        self.clock = clock or current_clock()
        self._tg = tg
        self.resubscribe_s = resubscribe_s
        self.retry_s = retry_s
        self.enabled = pool.options.notifications
        self._wanted: dict[str, set[str]] = {}
        self._changed: dict[str, anyio.Event] = {}
        self._serving: set[str] = set()
        self._no_push: set[str] = set()
        self.subscribed: dict[str, frozenset[str]] = {}
        self.subscriptions = 0

    def track(self, server: str, task_id: str, *, live: bool) -> None:
        """Say whether ``task_id`` of ``server`` is still live (after every check)."""
        if not self.enabled or server in self._no_push:
            return
        wanted = self._wanted.setdefault(server, set())
        if not live:
            wanted.discard(task_id)
            return
        if task_id in wanted:
            return
        wanted.add(task_id)
        self._event(server).set()
        if server not in self._serving:
            self._serving.add(server)
            self._tg.start_soon(self._serve, server)

    def _event(self, server: str) -> anyio.Event:
        event = self._changed.get(server)
        if event is None:
            event = self._changed[server] = anyio.Event()
        return event

    async def _serve(self, server: str) -> None:
        try:
            await self._loop(server)
        except Exception:
            log.exception("task subscription loop for %s failed", server)
        finally:
            self._serving.discard(server)
            self.subscribed.pop(server, None)

    async def _loop(self, server: str) -> None:
        current: AsyncExitStack | None = None
        client: TaskClient | None = None
        try:
            while self._wanted.get(server):
                await self.clock.sleep(self.resubscribe_s)  # let a burst of new tasks gather
                self._changed[server] = anyio.Event()
                try:
                    client = await self._pool.get(server)
                except TaskError:
                    await self.clock.sleep(self.retry_s)
                    continue
                if client.generation != wire.PROTOCOL_2026:
                    # 2025 servers push status unasked; no subscription to keep.
                    self._no_push.add(server)
                    self._wanted.pop(server, None)
                    return
                ids = sorted(self._wanted.get(server, ()))
                fresh = AsyncExitStack()
                try:
                    accepted = await fresh.enter_async_context(client.watch(ids))
                except TaskError as exc:
                    await fresh.aclose()
                    log.info("task subscription on %s refused: %s", server, exc.failure_class)
                    await self.clock.sleep(self.retry_s)
                    continue
                if current is not None:
                    await _close(current)  # the new one is open: nothing falls between
                current = fresh
                self.subscriptions += 1
                self.subscribed[server] = accepted
                await self._until_stale(server, client, frozenset(ids))
        finally:
            if current is not None:
                with anyio.CancelScope(shield=True):
                    await _close(current)

    async def _until_stale(self, server: str, client: TaskClient, ids: frozenset[str]) -> None:
        """Return when the subscription no longer covers what is wanted."""
        while True:
            with self.clock.move_on_after(STALE_CHECK_S):
                await self._event(server).wait()
            if self._pool.current(server) is not client:
                return  # reconnected: the old stream died with its connection
            wanted = self._wanted.get(server, set())
            if not wanted or not wanted <= ids:
                return
            self._changed[server] = anyio.Event()


async def _close(stack: AsyncExitStack) -> None:
    try:
        await stack.aclose()
    except Exception as exc:  # its connection may be gone already; nothing to undo then
        log.debug("closing a task subscription: %s", type(exc).__name__)
