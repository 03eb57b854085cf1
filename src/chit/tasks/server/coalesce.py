"""A coalescing, transitions-first notification queue (one per client stream).

Task notifications are hints: the 2025 spec lets a server send
``notifications/tasks/status`` for only some transitions, and a 2026 client polls
``tasks/get`` anyway. A plain FIFO of every change makes a task's completion wait behind
everyone's progress chatter (hundreds of status-message changes per second), so this
queue keeps **at most one pending entry per key** (per task on a stream) and hands out:

1. *transitions* first, oldest first: the key's status differs from the last one sent
   for it (→ ``input_required``, → terminal, → ``working``);
2. then *message-only* updates (same status, new message or progress), by the time they
   become ready: each key may be throttled to one send per ``min_interval_s``, and the
   whole queue to ``max_chatter_per_s`` of them (a stream's budget: with 200 chatty tasks
   one a second each would still be 200 a second, each costing the client a wake-up, so
   past the budget the keys take turns, longest-waiting first, each still latest-wins).

The queue holds keys, not payloads: the consumer reads the task's row when it sends, so
a newer change replacing an unsent older one loses nothing, and, with one consumer per
stream sending in turn, a client never receives an older state after a newer one. The
consumer reports what it sent (:meth:`sent`), which both classifies later changes and
lets it skip a row older than the one already sent (:meth:`is_older`).
"""

from __future__ import annotations

import heapq
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import anyio

K = TypeVar("K", bound=Hashable)


class CoalescingQueue(Generic[K]):
    """At most one pending notification per key; transitions before message-only ones."""

    def __init__(
        self,
        min_interval_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        max_chatter_per_s: float | None = None,
    ) -> None:
        """Create an empty queue.

        Args:
            min_interval_s: Least time between two message-only sends of one key (0: no
                throttle). Transitions are never throttled.
            clock: Monotonic seconds (injectable for tests).
            max_chatter_per_s: Most message-only keys handed out per second over all keys
                (``None``: no budget). Transitions never count against it or wait for it.
        """
        self.min_interval_s = min_interval_s
        self._clock = clock
        self._chatter_gap = 0.0 if not max_chatter_per_s else 1.0 / max_chatter_per_s
        self._chatter_at = float("-inf")  # when the budget allows the next message-only key
        self._urgent: OrderedDict[K, None] = OrderedDict()
        self._chatter: dict[K, int] = {}  # key -> sequence number of its live heap entry
        self._heap: list[tuple[float, int, K]] = []  # (ready at, seq, key); stale entries skipped
        self._seq = 0
        self._offered: dict[K, str] = {}  # status of the latest change seen per key
        self._sent_status: dict[K, str] = {}
        self._sent_at: dict[K, float] = {}
        self._sent_version: dict[K, int] = {}
        self._event: anyio.Event | None = None

    def __len__(self) -> int:
        """Number of keys with a pending notification."""
        return len(self._urgent) + len(self._chatter)

    def offer(self, key: K, status: str | None = None, *, throttle: bool = True) -> None:
        """Record that ``key`` changed; replaces (coalesces with) an unsent pending entry.

        Args:
            key: What changed (e.g. a task id).
            status: The key's status after the change; ``None`` when the change left the
                status as it was (a status message or progress only).
            throttle: Whether a message-only entry obeys ``min_interval_s``.
        """
        if status is None:
            status = self._offered.get(key)
        else:
            self._offered[key] = status
        if key in self._urgent:
            pass  # already first in line; it will carry the newest row anyway
        elif status is not None and status != self._sent_status.get(key):
            self._chatter.pop(key, None)  # its heap entry goes stale
            self._urgent[key] = None
        elif key not in self._chatter:
            ready = self._clock()
            if throttle and key in self._sent_at:
                ready = max(ready, self._sent_at[key] + self.min_interval_s)
            self._seq += 1
            self._chatter[key] = self._seq
            heapq.heappush(self._heap, (ready, self._seq, key))
        self.wake()

    def pop(self) -> K | None:
        """Return the next key to send now, or ``None`` if nothing is ready yet."""
        if self._urgent:
            key, _ = self._urgent.popitem(last=False)
            return key
        now = self._clock()
        while self._heap:
            ready, seq, key = self._heap[0]
            if self._chatter.get(key) != seq:
                heapq.heappop(self._heap)  # superseded (became a transition or forgotten)
                continue
            if max(ready, self._chatter_at) > now:
                return None
            heapq.heappop(self._heap)
            del self._chatter[key]
            if self._chatter_gap:
                self._chatter_at = now + self._chatter_gap  # a pause never banks a burst
            return key
        return None

    def ready_in(self) -> float | None:
        """Seconds until :meth:`pop` returns a key (0: now), or ``None`` if nothing is pending."""
        if self._urgent:
            return 0.0
        while self._heap and self._chatter.get(self._heap[0][2]) != self._heap[0][1]:
            heapq.heappop(self._heap)
        if not self._heap:
            return None
        return max(0.0, self._heap[0][0] - self._clock(), self._chatter_at - self._clock())

    def sent(self, key: K, status: str, version: int | None = None) -> None:
        """Record what was sent (or, to seed, what the client already knows) for ``key``."""
        self._sent_status[key] = status
        self._offered.setdefault(key, status)
        self._sent_at[key] = self._clock()
        if version is not None:
            self._sent_version[key] = version

    def is_older(self, key: K, version: int) -> bool:
        """True if ``version`` precedes the one last sent for ``key`` (never go back)."""
        return version < self._sent_version.get(key, version)

    def sent_version(self, key: K) -> int | None:
        """The version last sent for ``key`` (``None``: none recorded)."""
        return self._sent_version.get(key)

    def forget(self, key: K) -> None:
        """Drop ``key``'s pending entry and history (e.g. after its terminal state went out)."""
        self._urgent.pop(key, None)
        self._chatter.pop(key, None)
        self._offered.pop(key, None)
        self._sent_status.pop(key, None)
        self._sent_at.pop(key, None)
        self._sent_version.pop(key, None)

    def wake(self) -> None:
        """Wake a :meth:`wait` (something was offered, or the consumer has other work)."""
        if self._event is not None:
            self._event.set()
            self._event = None

    async def wait(self, timeout: float | None = None) -> None:
        """Wait until a key is ready, something is offered or woken, or ``timeout`` passes."""
        delay = self.ready_in()
        if delay == 0.0:
            return
        if delay is None or (timeout is not None and timeout < delay):
            delay = timeout
        if self._event is None:
            self._event = anyio.Event()
        event = self._event
        with anyio.move_on_after(float("inf") if delay is None else delay):
            await event.wait()
