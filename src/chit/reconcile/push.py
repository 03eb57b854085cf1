"""2026 push: ``subscriptions/listen`` streams per server for the tasks still worth hearing about.

A 2026 server pushes nothing unasked: the client subscribes with ``TaskClient.watch``
naming the task ids. New live tasks gather for ``resubscribe_s`` and then get a stream
of their own, naming only them: re-subscribing *every* live task each time a few were
created cost the server two row reads per live task per subscription (its visibility
check and its baseline), at 2,000 live tasks and four subscriptions a second a large
share of its time while tasks were being created. A stream whose tasks all ended is
closed. Once no new task came for ``fold_after_s``, or past ``max_streams``, the open
streams are folded into one naming every live task (opened before the others close, so
no change falls between them): a server re-reads a stream's tasks after a short quiet
on it, so many small streams of slow tasks would cost it more than one. Tasks that end
need no re-subscription: the server stops pushing a task once it is terminal.

A push is a hint (``on_hint`` of the connection): it triggers an immediate, coalesced
``tasks/get`` — or, for an end that carries its DetailedTask, *is* that answer
(``TaskObserver.told``); polling stays the fallback, so a missed or refused subscription
costs latency, never correctness.
"""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from dataclasses import dataclass

import anyio
from anyio.abc import TaskGroup

from chit.clock import Clock, current_clock
from chit.reconcile.connections import ConnectionPool
from chit.tasks import wire
from chit.tasks.client import TaskClient, TaskError

log = logging.getLogger("chit.reconcile")

RESUBSCRIBE_S = 0.25
"""How long new live tasks gather before one subscription covers them all."""

RETRY_S = 2.0
"""Pause after a refused or failed subscription (the schedule keeps polling meanwhile)."""

STALE_CHECK_S = 1.0
"""How often the open subscriptions look whether their connection was replaced or some
of them cover only ended tasks."""

MAX_STREAMS = 16
"""Subscriptions open at once per server before they are folded into one."""

FOLD_AFTER_S = 2.0
"""Several streams open and no new live task for this long: they are folded into one."""


@dataclass(eq=False)
class _Stream:
    """One open ``subscriptions/listen`` stream."""

    ids: frozenset[str]
    accepted: frozenset[str]
    stack: AsyncExitStack


class PushSubscriptions:
    """Keeps each 2026 server's task subscriptions in step with its live receipts."""

    def __init__(
        self,
        pool: ConnectionPool,
        tg: TaskGroup,
        *,
        resubscribe_s: float = RESUBSCRIBE_S,
        retry_s: float = RETRY_S,
        max_streams: int = MAX_STREAMS,
        fold_after_s: float = FOLD_AFTER_S,
        clock: Clock | None = None,
    ) -> None:
        """Subscribe through ``pool``'s connections; the per-server loops run in ``tg``."""
        self._pool = pool
        self.clock = clock or current_clock()
        self._tg = tg
        self.resubscribe_s = resubscribe_s
        self.retry_s = retry_s
        self.max_streams = max_streams
        self.fold_after_s = fold_after_s
        self._fresh_at: dict[str, float] = {}  # per server: when a new live task came
        self.enabled = pool.options.notifications
        self._wanted: dict[str, set[str]] = {}
        self._changed: dict[str, anyio.Event] = {}
        self._serving: set[str] = set()
        self._no_push: set[str] = set()
        self._single: set[str] = set()  # servers that refused a second stream
        self.subscribed: dict[str, frozenset[str]] = {}
        self.subscriptions = 0
        self._open: dict[str, list[_Stream]] = {}  # per server, while its loop runs

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
        self._fresh_at[server] = self.clock.monotonic()
        self._event(server).set()
        if server not in self._serving:
            self._serving.add(server)
            self._tg.start_soon(self._serve, server)

    def streams(self, server: str) -> list[frozenset[str]]:
        """The task ids each open subscription of ``server`` names, oldest first."""
        return [s.ids for s in self._open.get(server, [])]

    def _quiet(self, server: str) -> bool:
        """True when no new live task of ``server`` came for ``fold_after_s``."""
        return self.clock.monotonic() - self._fresh_at.get(server, 0.0) >= self.fold_after_s

    def _event(self, server: str) -> anyio.Event:
        event = self._changed.get(server)
        if event is None:
            event = self._changed[server] = anyio.Event()
        return event

    async def _serve(self, server: str) -> None:
        streams: list[_Stream] = self._open.setdefault(server, [])
        try:
            await self._loop(server, streams)
        except Exception:
            log.exception("task subscription loop for %s failed", server)
        finally:
            self._serving.discard(server)
            self.subscribed.pop(server, None)
            self._open.pop(server, None)
            with anyio.CancelScope(shield=True):
                for stream in streams:
                    await _close(stream.stack)

    async def _loop(self, server: str, streams: list[_Stream]) -> None:
        client: TaskClient | None = None
        quiet = False
        while self._wanted.get(server):
            await self.clock.sleep(self.resubscribe_s)  # let a burst of new tasks gather
            self._changed[server] = anyio.Event()
            try:
                current = await self._pool.get(server)
            except TaskError:
                await self.clock.sleep(self.retry_s)
                continue
            if current.generation != wire.PROTOCOL_2026:
                # 2025 servers push status unasked; no subscription to keep.
                self._no_push.add(server)
                self._wanted.pop(server, None)
                return
            if current is not client:  # (re)connected: the old streams died with theirs
                await _close_all(list(streams), streams)
                client = current
            if not await self._cover(server, client, streams, fold=quiet):
                await self.clock.sleep(self.retry_s)
                continue
            wanted = self._wanted.get(server, set())
            ended = [s for s in streams if s.ids.isdisjoint(wanted)]
            await _close_all(ended, streams)
            self.subscribed[server] = frozenset().union(*(s.accepted for s in streams))
            quiet = await self._until_stale(server, client, streams)

    async def _cover(
        self, server: str, client: TaskClient, streams: list[_Stream], *, fold: bool = False
    ) -> bool:
        """Open a stream for the wanted tasks no open stream names; False if refused.

        With ``fold`` (several streams open and no new task for a while), or past
        ``max_streams`` (one, for a server that refused a second), the new stream names
        every wanted task and replaces the others once it is open.
        """
        wanted = self._wanted.get(server, set())
        covered: set[str] = set().union(*(s.ids for s in streams))
        fresh = wanted - covered
        fold = fold and len(streams) > 1
        if not fresh and not fold:
            return True
        limit = 1 if server in self._single else self.max_streams
        fold = fold or len(streams) >= limit
        ids = frozenset(wanted if fold else fresh)
        stack = AsyncExitStack()
        try:
            accepted = await stack.enter_async_context(client.watch(sorted(ids)))
        except TaskError as exc:
            await stack.aclose()
            log.info("task subscription on %s refused: %s", server, exc.failure_class)
            if streams:
                self._single.add(server)  # the next try folds into one
            return False
        self.subscriptions += 1
        if fold:  # the new one is open: no change falls between it and the old ones
            await _close_all(list(streams), streams)
        streams.append(_Stream(ids, accepted, stack))
        return True

    async def _until_stale(self, server: str, client: TaskClient, streams: list[_Stream]) -> bool:
        """Return when new tasks want a stream, the connection was replaced, or a stream
        covers only ended tasks; True when no new task came for ``fold_after_s`` while
        several streams are open (then they are folded into one).

        A server re-reads each stream's tasks after a short quiet on it, so many small
        streams of slow-changing tasks cost it more than one big one: streams are many
        only while tasks are being created.
        """
        while True:
            with self.clock.move_on_after(STALE_CHECK_S):
                await self._event(server).wait()
            if self._pool.current(server) is not client:
                return False  # reconnected: the old streams died with their connection
            wanted = self._wanted.get(server, set())
            if not wanted or any(s.ids.isdisjoint(wanted) for s in streams):
                return False
            if not wanted <= set().union(*(s.ids for s in streams)):
                return False
            if len(streams) > 1 and self._quiet(server):
                return True
            self._changed[server] = anyio.Event()


async def _close_all(closing: list[_Stream], streams: list[_Stream]) -> None:
    """Take each of ``closing`` out of ``streams`` and close it."""
    for stream in closing:
        if stream in streams:
            streams.remove(stream)
        await _close(stream.stack)


async def _close(stack: AsyncExitStack) -> None:
    try:
        await stack.aclose()
    except Exception as exc:  # its connection may be gone already; nothing to undo then
        log.debug("closing a task subscription: %s", type(exc).__name__)
