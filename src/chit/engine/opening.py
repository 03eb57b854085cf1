"""One way in for a face: the home's engine, through the daemon or in this process.

``async with open_engine(home) as engine`` yields a :class:`chit.engine.Engine`:

* by default the daemon's client (:class:`RemoteEngine`, the daemon started on demand);
* with ``use_daemon=False`` (``--no-daemon``) an engine in this process, reconciling —
  on its own thread (:class:`HostedEngine`) when ``own_thread`` is set, which a UI on an
  event loop of its own wants (the engine's SQLite work must not block its loop), else on
  the caller's loop (:class:`LocalEngine`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import anyio

from chit.engine.api import Engine
from chit.home import Home


@asynccontextmanager
async def open_engine(
    home: Home,
    *,
    use_daemon: bool = True,
    client: str = "cli",
    own_thread: bool = False,
    environ: Mapping[str, str] | None = None,
) -> AsyncIterator[Engine]:
    """Open the home's engine for the block (see the module docstring).

    Raises:
        DaemonUnavailable: no daemon answers and none could be started (exit 6).
        KeyStoreUnavailable, DataKeyMissing: in process, the vault cannot be unlocked.
        ChitError: the daemon could not start (its exit code and last log line).
    """
    if use_daemon:
        from chit.engine.remote import RemoteEngine

        async with RemoteEngine.open(home, client=client) as remote:
            yield remote
        return
    if own_thread:
        from chit.engine.hosted import HostedEngine

        hosted = await anyio.to_thread.run_sync(
            lambda: HostedEngine.start(home, environ=environ, run=True)
        )
        try:
            yield hosted
        finally:
            await anyio.to_thread.run_sync(hosted.close)
        return
    from chit.engine.local import LocalEngine

    async with LocalEngine.open(home, environ=environ, run=True) as local:
        yield local
