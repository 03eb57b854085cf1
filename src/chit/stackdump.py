"""``kill -USR1 <pid>``: a chit process writes where it is waiting to its stderr.

A chit process that does not end (a CLI command, the daemon, a server) is otherwise a
black box: its event loop sits in ``select`` whatever it waits for. On SIGUSR1 it writes
every thread's stack and every asyncio task's await chain (the coroutine each one is
suspended in) to stderr — the daemon's goes to its log — and carries on. The test
helpers send it to a CLI process that outlives its bound, so a hang fails with the place
it hung, not only with "timed out".
"""

from __future__ import annotations

import signal
import sys
from types import FrameType

DUMP_SIGNAL = getattr(signal, "SIGUSR1", None)
"""The signal that asks for the dump (None where the platform has no SIGUSR1)."""


def install() -> None:
    """Dump stacks on SIGUSR1 from now on (main thread only; a no-op elsewhere)."""
    if DUMP_SIGNAL is None:
        return
    try:
        signal.signal(DUMP_SIGNAL, _on_signal)
    except ValueError:  # not the main thread: whoever owns the process decides
        return


def _on_signal(_signum: int, _frame: FrameType | None) -> None:
    try:
        sys.stderr.write(dump_text())
        sys.stderr.flush()
    except Exception:  # a diagnostic never takes the process down
        return


def dump_text() -> str:
    """Every thread's stack and every task of the main thread's running loop, as text."""
    import asyncio
    import threading
    import traceback

    names = {t.ident: t.name for t in threading.enumerate()}
    parts = ["chit: stack dump (SIGUSR1)\n"]
    for ident, frame in sys._current_frames().items():
        parts.append(f"--- thread {names.get(ident, ident)}\n")
        parts.extend(traceback.format_stack(frame))
    loop = asyncio._get_running_loop()  # the loop this (main) thread is running, if any
    if loop is not None:
        for task in asyncio.all_tasks(loop):
            parts.append(f"--- task {task.get_name()}\n")
            parts.extend(_await_chain(task.get_coro()))
    parts.append("chit: end of stack dump\n")
    return "".join(parts)


def _await_chain(awaitable: object) -> list[str]:
    """Where a suspended coroutine waits: its frame, then what it awaits, innermost last.

    ``Task.get_stack`` gives a coroutine's own frame only; the chain of ``cr_await`` (or a
    generator-based awaitable's ``gi_yieldfrom``) says which call it is stuck in.
    """
    import traceback

    lines: list[str] = []
    seen = 0
    while awaitable is not None and seen < 64:
        seen += 1
        frame = getattr(awaitable, "cr_frame", None) or getattr(awaitable, "gi_frame", None)
        if frame is not None:
            lines.extend(traceback.format_stack(frame, limit=1))
        awaitable = getattr(awaitable, "cr_await", None) or getattr(awaitable, "gi_yieldfrom", None)
    return lines
