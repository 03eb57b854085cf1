"""A stdio server ends with the process that started it (Linux).

A stdio server is a child of chit's daemon (or of the chit command that runs it). When
the daemon stops, it stops its servers; when it is SIGKILLed (or OOM-killed) nothing of
its own runs any more, and without help the servers would live on as orphans. On Linux
the child asks the kernel, between ``fork`` and ``exec``, to send it SIGTERM when its
parent ends (``prctl(PR_SET_PDEATHSIG)``); the setting survives ``exec``.

Two caveats shape how it is used:

* the kernel sends the signal when the *thread* that forked the child exits, not the
  process. :func:`chit.tasks.client.pipe_stdio.pipe_stdio` starts servers on the event
  loop's thread, which lives as long as the daemon (or the in-process engine's portal,
  which stops its servers before it ends) — never from a short-lived worker thread;
* the parent may die before the child ran ``prctl``: the child then compares its parent
  with the pid it was forked from and exits at once when they differ.

Elsewhere (macOS) there is nothing to ask. The signal reaches the server process only,
not processes it started; on Linux the next daemon's orphan sweep
(:func:`chit.daemon.upkeep.sweep_orphans`) remains the net for those.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable
from functools import cache

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
ORPHANED_EXIT = 128 + signal.SIGTERM
"""The exit code of a child whose parent died before it could ask (as if SIGTERMed)."""


@cache
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, looked up once in the parent (never between fork and exec)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        # The running process already has libc loaded; no library search (which may run
        # ldconfig) is needed to find it.
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
        return prctl
    except (OSError, AttributeError):
        return None


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get SIGTERM when this thread ends.

    Call it in the parent, on the thread whose lifetime the child should share, just
    before ``subprocess.Popen``; None where the platform has no such request.
    """
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def ask() -> None:
        # Runs in the child between fork and exec: no imports, no allocation of note.
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request was made
            os._exit(ORPHANED_EXIT)

    return ask


__all__ = ["ORPHANED_EXIT", "PR_SET_PDEATHSIG", "die_with_parent"]
