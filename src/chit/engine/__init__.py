"""chit.engine — the one door between the faces (CLI, TUI) and chit's engine.

:class:`Engine` is the typed protocol; implementations:

* :class:`chit.engine.local.LocalEngine` — a Supervisor in this process (``--no-daemon``,
  tests, and the daemon itself);
* :class:`chit.engine.hosted.HostedEngine` — a LocalEngine on its own thread, for a caller
  on another event loop (an in-process TUI);
* the daemon's socket client (:mod:`chit.engine.remote`).

Importing this package loads nothing heavy (no pydantic models, no mcp, no Textual):
the implementations and :mod:`chit.engine.models` are imported where they are used.
"""

from chit.engine.api import Engine

__all__ = ["Engine"]
