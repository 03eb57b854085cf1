"""A concurrency limit with two lanes: hint-triggered checks go before scheduled ones.

A server push means a task changed *now*; a scheduled poll only means time passed. With
16 requests in flight and hundreds of polls due, a FIFO limiter would queue the hinted
check behind all of them (that queueing was the notification → store p99), so urgent
waiters are always served first, and a queued ordinary waiter can be promoted when a
hint arrives for it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager

import anyio


class PriorityLimiter:
    """At most ``total`` holders at once; urgent waiters are served before ordinary ones."""

    def __init__(self, total: int) -> None:
        """Allow ``total`` concurrent holders."""
        if total < 1:
            raise ValueError("a limiter needs at least one slot")
        self.total = total
        self.held = 0
        self._urgent: OrderedDict[object, anyio.Event] = OrderedDict()
        self._ordinary: OrderedDict[object, anyio.Event] = OrderedDict()

    @property
    def waiting(self) -> int:
        """How many are queued for a slot."""
        return len(self._urgent) + len(self._ordinary)

    @asynccontextmanager
    async def hold(
        self, *, urgent: bool = False, key: Hashable | None = None
    ) -> AsyncIterator[None]:
        """Hold one slot for the block; ``key`` lets :meth:`promote` find this waiter."""
        await self.acquire(urgent, key)
        try:
            yield
        finally:
            self.release()

    def promote(self, key: Hashable) -> bool:
        """Move a queued ordinary waiter to the urgent lane; True when it is still queued."""
        if key in self._urgent:
            return True
        event = self._ordinary.pop(key, None)
        if event is None:
            return False
        self._urgent[key] = event
        return True

    async def acquire(self, urgent: bool, key: Hashable | None) -> None:
        """Wait for a slot (``hold`` without the context manager); pair with :meth:`release`."""
        lane_free = not self._urgent and (urgent or not self._ordinary)
        if self.held < self.total and lane_free:
            self.held += 1
            return
        token: object = key if key is not None else object()
        if token in self._urgent or token in self._ordinary:
            token = object()  # the same key twice: keep both waiters
        event = anyio.Event()
        (self._urgent if urgent else self._ordinary)[token] = event
        try:
            await event.wait()
        except BaseException:
            if event.is_set():
                self.release()  # the slot was handed to us as we were cancelled: pass it on
            else:
                self._urgent.pop(token, None)
                self._ordinary.pop(token, None)
            raise

    def release(self) -> None:
        """Give a slot back (to the next waiter, if any)."""
        # Hand the slot straight to the next waiter (``held`` stays), so a newcomer
        # arriving between release and wake-up cannot overtake the queue.
        for lane in (self._urgent, self._ordinary):
            if lane:
                _token, event = lane.popitem(last=False)
                event.set()
                return
        self.held -= 1
