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

The young generation's threshold is raised too (:data:`YOUNG_THRESHOLD`). A young
collection runs when 700 more container objects were made than freed; in the engine's
steady state nearly everything a check makes dies by reference counting (no cyclic
garbage at all in a 3 s sample of 1,000 live tasks), yet the count crossed 700 ~30
times a second, each collection promoting what the checks in flight held, so the middle
generation filled and full collections followed: together 8-10 % of the engine's CPU
(``benchmarks/reconcile.py`` phase 4, 1,000 live tasks, loaded machine). With 10,000:
0-2 young collections in 10 s, ~1 %. Cyclic garbage still goes, a little later.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000
"""Net container allocations between two young collections (CPython's default: 700)."""


def settle() -> int:
    """Collect once, then freeze every object alive now; the number frozen in all. The
    young generation's threshold is raised to :data:`YOUNG_THRESHOLD` (never lowered).

    For a process's entry point, once its modules are imported and before it serves (the
    daemon, ``chit demo-server``). The collection first: garbage frozen would never be
    freed. Objects frozen here that die later are still freed by reference counting; only
    a cycle among them would stay (import-time objects do not die).
    """
    gc.collect()
    gc.freeze()
    young, *older = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_THRESHOLD), *older)
    return gc.get_freeze_count()
