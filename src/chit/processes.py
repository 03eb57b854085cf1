"""Whether a process still runs: one check for every place that asks (no chit imports).

Signal 0 asks the kernel whether ``pid`` exists and may be signalled, without sending
anything. ``EPERM`` means it exists and belongs to someone else: alive. A zombie (ended,
not yet reaped by its parent) also counts as alive here; a caller that can reap its own
child does so first (``chit.engine.start``).
"""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """True unless no process ``pid`` exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True
