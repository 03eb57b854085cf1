"""``chit demo`` ends the same way whatever ends it: its daemon, servers and home go too.

Python's default SIGTERM and SIGHUP (a closed terminal) end the process at once, so the
demo's ``finally`` — stop the daemon and every server it runs, delete the throwaway
home — never ran: the daemon followed a second later (``CHIT_DAEMON_EXIT_WITH``) but the
home stayed behind. Here those signals become an orderly exit: with the TUI up, the app
is asked to quit (Textual owns the loop; an exception raised into it would leave the
terminal raw); otherwise ``SystemExit(128 + signal)`` unwinds through the ``finally``.
SIGINT stays Python's ``KeyboardInterrupt`` outside the TUI (the CLI reports it as 130);
while the TUI runs a ``kill -INT`` is treated like SIGTERM (Ctrl-C there is a key).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, Protocol

__all__ = ["DemoSignals", "orderly_exit"]


class _App(Protocol):
    def exit(self, result: Any = None, return_code: int = 0, message: Any = None) -> None: ...

    def call_from_thread(self, callback: Any, *args: Any, **kwargs: Any) -> Any: ...


_ORDERLY = (signal.SIGTERM, signal.SIGHUP)


class DemoSignals:
    """The demo's signal handling; ``received`` is the first signal that ended it."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.app: _App | None = None
        #: Set once the clean-up has begun: a signal then only records itself, so an
        #: exception never cuts the stopping of the daemon or the deletion short.
        self.cleaning = False
        self._deferred = False

    def handle(self, signum: int, _frame: FrameType | None) -> None:
        """Quit the TUI, or unwind through the demo's ``finally`` blocks."""
        if self.received is not None:
            return  # already ending: let the clean-up finish (it is bounded)
        self.received = signum
        if self.cleaning or self._deferred:
            return
        app = self.app
        if app is not None:
            # call_from_thread refuses the app's own thread, and a handler runs there.
            threading.Thread(
                target=app.call_from_thread, args=(app.exit,), name="chit-demo-signal"
            ).start()
            return
        _raise(signum)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Hold any signal (SIGINT too) until the block is done; then call :meth:`check`.

        Starting the demo spawns its daemon and opens an engine thread; an exception in
        the middle would leave both half made, with nothing to stop them by.
        """
        self._deferred = True
        previous = signal.signal(signal.SIGINT, self.handle)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)
            self._deferred = False

    def check(self) -> None:
        """Raise now for a signal that arrived while held (see :meth:`deferred`)."""
        if self.received is not None and not self.cleaning:
            _raise(self.received)

    @contextmanager
    def tui(self, app: _App) -> Iterator[None]:
        """While ``app`` runs, SIGINT from ``kill`` ends it too (Ctrl-C is a key there)."""
        self.app = app
        previous = signal.signal(signal.SIGINT, self.handle)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)
            self.app = None

    def exit_code(self) -> int | None:
        """The shell's code for the signal that ended the demo (None: none did)."""
        return None if self.received is None else 128 + self.received


def _raise(signum: int) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt  # the CLI's "chit: interrupted", exit 130
    raise SystemExit(128 + signum)


@contextmanager
def orderly_exit() -> Iterator[DemoSignals]:
    """Turn SIGTERM and SIGHUP into an orderly end for the duration of the block."""
    signals = DemoSignals()
    previous = {sig: signal.signal(sig, signals.handle) for sig in _ORDERLY}
    try:
        yield signals
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
