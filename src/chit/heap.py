"""A service process's long-lived heap, moved out of the garbage collector's sight.

A full (generation 2) collection walks every object the collector tracks. In chit's
daemon, and in ``chit demo-server``, nearly all of them are the imported modules' (mcp,
pydantic, sqlite-utils, chit: about 100,000 and 84,000 objects), which live as long as
the process. A full collection over them cost 70-80 ms of CPU on the loaded test machine
and stopped the event loop and the writer thread alike (the GIL): one landing in a burst
of pushed task ends held every end in it — the client stops reading, so even the
server's "change -> notification received" grows (docs/performance.md, 2026-12-02).
Frozen (:func:`gc.freeze`), they are never walked again; what the process makes later is
collected as before.
"""

from __future__ import annotations

import gc


def settle() -> int:
    """Collect once, then freeze every object alive now; the number frozen in all.

    For a process's entry point, once its modules are imported and before it serves (the
    daemon, ``chit demo-server``). The collection first: garbage frozen would never be
    freed. Objects frozen here that die later are still freed by reference counting; only
    a cycle among them would stay (import-time objects do not die).
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
