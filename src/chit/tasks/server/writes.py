"""The store write queue: one write at a time, durable writes first, messages merged.

Store writes run in a worker thread, one at a time (they serialise on the database lock
anyway). A plain first-come-first-served queue makes a task's terminal write wait behind
everyone's status-message writes (the demo's 200 running tasks make ~800 a second), so
:class:`WriteQueue` orders the waiting writes:

1. *Durable* writes (creation, input, answers, cancellation, outcomes, and every write
   not marked as a message write) go first, in arrival order.
2. *Message* writes (a status message only, not fsynced) go after them, in the order
   their task first queued one. At most one is pending per task: a newer message write
   replaces the pending one (latest wins; the replaced caller gets :class:`Superseded`).

Per task, writes land in the order they were asked for: when a durable write of a task
is queued while that task has a pending message write, the message write is dropped if
the durable write sets the status message too (``replaces_message``, e.g. an outcome),
else it is moved into the durable line just ahead of it. A message write asked for after
a durable write is queued behind it (durable writes go first). Nothing is reordered once
it runs: the caller runs its own write when its turn is granted.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import TypeVar

import anyio

from chit.tasks.server.backend import StoreUnavailable

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Superseded(Exception):
    """A pending message write was replaced by a newer write of its task (not run)."""


class _Job:
    __slots__ = ("event", "granted", "key", "message", "superseded")

    def __init__(self, key: str | None, message: bool) -> None:
        self.key = key
        self.message = message
        self.granted = False
        self.superseded = False
        self.event = anyio.Event()


class WriteQueue:
    """A one-slot lock whose waiters are ordered durable-first, message writes merged."""

    def __init__(self) -> None:
        """Create an idle queue."""
        self._durable: deque[_Job] = deque()
        self._messages: OrderedDict[str, _Job] = OrderedDict()
        self._busy = False
        self.superseded = 0
        """Message writes replaced before they ran (for tests and diagnostics)."""

    def __len__(self) -> int:
        """Number of writes waiting for their turn (not counting the one running)."""
        return len(self._durable) + len(self._messages)

    async def run(
        self,
        fn: Callable[[], T],
        *,
        key: str | None = None,
        message: bool = False,
        replaces_message: bool = False,
        until_stored: bool = False,
        ref: str = "",
    ) -> T:
        """Wait for this write's turn, then run ``fn`` in a worker thread.

        Args:
            fn: The blocking store call.
            key: The task written (per-task ordering and merging); ``None``: no task.
            message: A message-only write (needs ``key``): merged, after durable writes.
            replaces_message: A durable write that also sets ``key``'s status message, so a
                pending message write of that task is dropped instead of run first.
            until_stored: Retry (backoff 0.2 s doubling to 5 s) while the store is
                unavailable instead of raising: a worker's writes, its outcome above all,
                must not be lost to an outage (its owner guard keeps a late write from
                landing on a task another process took over meanwhile).
            ref: How log lines name the task (never its id).

        Raises:
            Superseded: A newer write of the same task replaced this message write.
            StoreUnavailable: The store is unreachable (unless ``until_stored``).
        """
        delay = 0.2
        while True:
            try:
                return await self._run_once(fn, key, message, replaces_message)
            except StoreUnavailable as exc:
                if not until_stored:
                    raise  # a client's request: it gets the one-line error and may retry
                logger.warning("%s: %s; retrying", ref or "store write", exc.reason)
                await anyio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _run_once(
        self, fn: Callable[[], T], key: str | None, message: bool, replaces_message: bool
    ) -> T:
        if message and key is None:
            raise ValueError("a message write needs a key")
        job = _Job(key, message)
        self._enqueue(job, replaces_message)
        try:
            if not self._busy:
                self._grant_next()
            await job.event.wait()
        except BaseException:
            if job.granted:
                self._release()  # granted as we were cancelled: pass the turn on
            else:
                self._remove(job)
            raise
        if job.superseded:
            raise Superseded(key)
        try:
            return await anyio.to_thread.run_sync(fn)
        finally:
            self._release()

    def _enqueue(self, job: _Job, replaces_message: bool) -> None:
        if job.message:
            assert job.key is not None
            old = self._messages.get(job.key)
            self._messages[job.key] = job  # an existing key keeps its place in line
            if old is not None:
                self._drop(old)
            return
        if job.key is not None:
            pending = self._messages.pop(job.key, None)
            if pending is not None:
                if replaces_message:
                    self._drop(pending)
                else:
                    self._durable.append(pending)  # older: it must land first
        self._durable.append(job)

    def _drop(self, job: _Job) -> None:
        job.superseded = True
        self.superseded += 1
        job.event.set()

    def _remove(self, job: _Job) -> None:
        if job.message and job.key is not None and self._messages.get(job.key) is job:
            del self._messages[job.key]
        elif job in self._durable:
            self._durable.remove(job)

    def _grant_next(self) -> None:
        if self._durable:
            job = self._durable.popleft()
        elif self._messages:
            _, job = self._messages.popitem(last=False)
        else:
            self._busy = False
            return
        self._busy = True
        job.granted = True
        job.event.set()

    def _release(self) -> None:
        self._busy = False
        self._grant_next()

    def pending(self) -> list[tuple[str | None, bool]]:
        """The waiting writes in the order they would run: (key, is a message write)."""
        jobs = list(self._durable) + list(self._messages.values())
        return [(j.key, j.message) for j in jobs]
