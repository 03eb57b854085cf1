"""The one clock of chit: wall time, monotonic time, sleeps and deadlines.

Code never calls ``datetime.now()``, ``time.time()`` or a bare ``anyio.sleep`` for a
*schedule*: it asks a :class:`Clock`. The engine's parts take one as a constructor
argument (``clock=``); everything else (the store's timestamps, the CLI's "5 s ago") reads
the process's current clock through the module functions :func:`now`, :func:`monotonic`,
:func:`iso` (and the engine's parts default to it: :func:`current_clock`). Two implementations:

* :class:`SystemClock` — the real one (the default). :func:`freeze` / :func:`advance`
  still move its ``now()`` and monotonic offset, for tests of pure code.
* :class:`ManualClock` — virtual time that only moves when a test says so
  (:meth:`ManualClock.advance`, :meth:`ManualClock.run_for`); its sleeps and deadlines
  fire as time passes them. Install it with :func:`use` so the store's timestamps follow
  it too, and pass it to the engine.

Deliberately *not* on the clock: timeouts that guard against a peer that never answers
(read timeouts, shutdown bounds). They bound real waits for real processes and stay on
anyio's real clock, so a virtual clock never makes a live connection time out, and a
test that forgets to advance never hangs on I/O.

``chit.tasks`` cannot import this module (it could ship alone): it takes a ``now``
callable (``chit/tasks/clock.py``), which ``SystemClock.now`` and ``ManualClock.now``
both are.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from anyio import CancelScope, CapacityLimiter, Event


class Clock(Protocol):
    """What the engine asks of time."""

    def now(self) -> datetime:
        """The current time as an aware UTC datetime."""
        ...

    def monotonic(self) -> float:
        """A monotonic reading in seconds (only differences mean anything)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time."""
        ...

    def move_on_after(self, seconds: float) -> AbstractContextManager[CancelScope]:
        """A cancel scope that cancels its block after ``seconds`` of this clock's time."""
        ...


# --- the real clock ---------------------------------------------------------------------

_frozen: datetime | None = None
_mono_offset: float = 0.0


class SystemClock:
    """The real clock (``now()`` honours :func:`freeze`, ``monotonic()`` :func:`advance`)."""

    def now(self) -> datetime:
        """The current time as an aware UTC datetime (frozen by :func:`freeze`)."""
        if _frozen is not None:
            return _frozen
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """``time.monotonic()``, shifted by :func:`advance`."""
        return time.monotonic() + _mono_offset

    async def sleep(self, seconds: float) -> None:
        """``anyio.sleep``."""
        import anyio

        await anyio.sleep(seconds)

    @contextmanager
    def move_on_after(self, seconds: float) -> Iterator[CancelScope]:
        """``anyio.move_on_after``."""
        import anyio

        with anyio.move_on_after(seconds) as scope:
            yield scope


# --- the manual clock -------------------------------------------------------------------

MANUAL_START = datetime(2026, 1, 1, tzinfo=UTC)
"""Where a :class:`ManualClock` starts unless told otherwise."""


class ManualClock:
    """Virtual time for tests: it moves only when :meth:`advance` or :meth:`run_for` moves it.

    Sleeps and deadlines taken on it are timers; moving time past a timer fires it (a
    sleeper wakes, a cancel scope is cancelled). Use it on one event loop.
    """

    def __init__(self, start: datetime = MANUAL_START) -> None:
        """Start at ``start`` (an aware datetime); the monotonic reading starts at 0."""
        self._start = start.astimezone(UTC)
        self._elapsed = 0.0
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._live: set[int] = set()  # timers not cancelled yet (the heap drops the rest lazily)
        self._seq = itertools.count()
        self._threads = 0  # work running in threads through ``in_thread``
        self._threads_done: Event | None = None

    def now(self) -> datetime:
        """The virtual time as an aware UTC datetime."""
        return self._start + timedelta(seconds=self._elapsed)

    def monotonic(self) -> float:
        """Seconds of virtual time since the clock was made."""
        return self._elapsed

    @property
    def pending(self) -> int:
        """How many sleeps and deadlines are waiting for time to pass them."""
        return len(self._live)

    def next_deadline(self) -> float | None:
        """The monotonic reading at which the earliest timer fires (None: no timers)."""
        self._drop_cancelled()
        return self._timers[0][0] if self._timers else None

    async def sleep(self, seconds: float) -> None:
        """Wait until virtual time has moved ``seconds`` on (a checkpoint when ≤ 0)."""
        import anyio

        if seconds <= 0:
            await anyio.lowlevel.checkpoint()
            return
        woken = anyio.Event()
        timer = self._add(seconds, woken.set)
        try:
            await woken.wait()
        finally:
            self._cancel(timer)

    @contextmanager
    def move_on_after(self, seconds: float) -> Iterator[CancelScope]:
        """A cancel scope cancelled once virtual time has moved ``seconds`` on."""
        import anyio

        scope = anyio.CancelScope()
        timer = self._add(seconds, scope.cancel) if seconds != float("inf") else None
        try:
            if seconds <= 0:
                scope.cancel()
            with scope:
                yield scope
        finally:
            if timer is not None:
                self._cancel(timer)

    def advance(self, seconds: float) -> None:
        """Move time on by ``seconds`` and fire every timer it passes (in order).

        The woken tasks run at the caller's next checkpoint; to let each one react
        before time moves further (a loop that sleeps again), use :meth:`run_for`.
        """
        if seconds < 0:
            raise ValueError("time does not go backwards")
        target = self._elapsed + seconds
        while True:
            self._drop_cancelled()
            if not self._timers or self._timers[0][0] > target:
                break
            at, seq, fire = heapq.heappop(self._timers)
            self._live.discard(seq)
            self._elapsed = max(self._elapsed, at)
            fire()
        self._elapsed = target

    async def run_for(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass, one timer at a time.

        Before each step every other task runs until it waits for something (see
        :func:`settle`), so a loop woken by one timer sets its next one before time
        moves past it — ten 0.1 s ticks of a loop really are ten iterations.
        """
        target = self._elapsed + seconds
        while True:
            await self.settle()
            nxt = self.next_deadline()
            if nxt is None or nxt > target:
                break
            self.advance(max(0.0, nxt - self._elapsed))
        self.advance(max(0.0, target - self._elapsed))
        await self.settle()

    async def settle(self) -> None:
        """:func:`settle`, and also wait for work this clock's users run in threads.

        A task waiting on a thread counts as waiting for :func:`settle`; work started
        through :func:`in_thread` (the engine's store commits) is waited for here, so
        virtual time never passes a write that has not landed yet.
        """
        import anyio

        while True:
            await settle()
            if not self._threads:
                return
            if self._threads_done is None:
                self._threads_done = anyio.Event()
            await self._threads_done.wait()

    def _thread_started(self) -> None:
        self._threads += 1

    def _thread_ended(self) -> None:
        self._threads -= 1
        if not self._threads and self._threads_done is not None:
            self._threads_done.set()
            self._threads_done = None

    def _add(self, seconds: float, fire: Callable[[], None]) -> int:
        seq = next(self._seq)
        heapq.heappush(self._timers, (self._elapsed + max(0.0, seconds), seq, fire))
        self._live.add(seq)
        return seq

    def _cancel(self, seq: int) -> None:
        self._live.discard(seq)
        self._drop_cancelled()

    def _drop_cancelled(self) -> None:
        while self._timers and self._timers[0][1] not in self._live:
            heapq.heappop(self._timers)


async def settle(limit: int = 10_000) -> None:
    """Yield until every other task of the event loop waits for something.

    On asyncio it checks each task's pending future after every yield (anyio's own
    ``wait_all_tasks_blocked`` sleeps 0.1 s between looks); on other backends it is
    ``anyio.wait_all_tasks_blocked``. A task waiting on a thread counts as waiting.
    """
    import anyio

    try:
        import asyncio

        me = asyncio.current_task()
    except RuntimeError:
        me = None
    if me is None:
        await anyio.wait_all_tasks_blocked()
        return
    for _ in range(limit):
        await asyncio.sleep(0)
        if all(_blocked(task) for task in asyncio.all_tasks() if task is not me):
            return
    await anyio.wait_all_tasks_blocked()


T = TypeVar("T")


async def in_thread(
    clock: Clock, fn: Callable[..., T], *args: Any, limiter: CapacityLimiter | None = None
) -> T:
    """Run ``fn(*args)`` in a worker thread and wait for its result (uncancellable).

    On a :class:`ManualClock` the work is counted: :meth:`ManualClock.run_for` (and
    :meth:`ManualClock.settle`) wait for it before time moves on.
    """
    import anyio.to_thread

    manual = clock if isinstance(clock, ManualClock) else None
    if manual is not None:
        manual._thread_started()
    try:
        return await anyio.to_thread.run_sync(fn, *args, limiter=limiter)
    finally:
        if manual is not None:
            manual._thread_ended()


def _blocked(task: object) -> bool:
    waiter = getattr(task, "_fut_waiter", None)
    return waiter is not None and not waiter.done()


# --- the process's current clock ----------------------------------------------------------

_current: Clock = SystemClock()
C = TypeVar("C", bound=Clock)


def current_clock() -> Clock:
    """The clock this process reads (a :class:`SystemClock` unless :func:`use` says else)."""
    return _current


@contextmanager
def use(clock: C) -> Iterator[C]:
    """Make ``clock`` the process's clock for the block (the store's stamps follow it)."""
    global _current
    before, _current = _current, clock
    try:
        yield clock
    finally:
        _current = before


def now() -> datetime:
    """Return the current time as an aware UTC datetime (frozen in tests)."""
    return _current.now()


def monotonic() -> float:
    """Return a monotonic clock reading in seconds (shifted by ``advance`` when frozen)."""
    return _current.monotonic()


def wall() -> float:
    """Return the current time as a POSIX timestamp (frozen in tests)."""
    return now().timestamp()


_ISO_MEMO: dict[datetime, str] = {}
_ISO_MEMO_MAX = 1024


def iso(dt: datetime | None = None) -> str:
    """Format ``dt`` (default: now) as ISO 8601 UTC with milliseconds and a ``Z`` suffix."""
    if dt is None:
        return _format(now())
    # A receipt write formats the same instant several times (accepted and status time
    # of a new receipt, its first observation's time, a check's status time and its
    # timeline row): remembered by value — equal instants format the same in UTC.
    text = _ISO_MEMO.get(dt)
    if text is None:
        text = _format(dt)
        if len(_ISO_MEMO) >= _ISO_MEMO_MAX:
            _ISO_MEMO.clear()
        _ISO_MEMO[dt] = text
    return text


def _format(dt: datetime) -> str:
    value = dt if dt.tzinfo is UTC else dt.astimezone(UTC)
    # isoformat() is C and ~4x faster than strftime (and zero-pads the year, which
    # strftime does not on glibc); for UTC it ends in "+00:00".
    return value.isoformat(timespec="milliseconds")[:-6] + "Z"


def parse_iso(text: str) -> datetime:
    """Parse an ISO 8601 timestamp (``Z`` or offset) into an aware UTC datetime.

    Raises:
        ValueError: if ``text`` is not an ISO 8601 timestamp.
    """
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def freeze(at: datetime) -> None:
    """Freeze the real clock's ``now()`` at ``at`` until ``unfreeze()``."""
    global _frozen
    _frozen = at.astimezone(UTC)


def unfreeze() -> None:
    """Return the real clock to real time."""
    global _frozen, _mono_offset
    _frozen = None
    _mono_offset = 0.0


def advance(seconds: float) -> None:
    """Move a frozen real clock (and its monotonic offset) forward by ``seconds``."""
    global _frozen, _mono_offset
    if _frozen is not None:
        _frozen = _frozen + timedelta(seconds=seconds)
    _mono_offset += seconds


@contextmanager
def frozen(at: datetime) -> Iterator[None]:
    """Context manager: freeze the real clock at ``at`` for the block."""
    freeze(at)
    try:
        yield
    finally:
        unfreeze()
