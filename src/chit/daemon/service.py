"""The daemon's life: one per home, held by a lock, serving its socket until told to stop.

Start: take ``daemon.lock`` with ``flock`` (held for the whole life: a second daemon of
the same home finds it taken and leaves; the kernel drops it when the process dies, so
a crashed daemon never blocks the next), write the pid into it, open the engine
(store, vault, sessions, reconciler, sidecar executor), bind the socket — any socket
file found there is stale, since no live daemon can exist without the lock — and record
``daemon.json``. Readiness is the socket answering ``hello``.

Stop (SIGTERM, SIGINT, ``daemon.stop``): stop accepting, close the clients, close the
engine (every server session; stdio servers exit), remove the socket and ``daemon.json``,
release the lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import TextIO

import anyio

from chit import __version__, clock
from chit.daemon import proxy_methods
from chit.daemon.server import ControlServer
from chit.daemon.upkeep import TICK_S, housekeeping, idle_seconds, sweep_orphans
from chit.engine import rpc
from chit.engine.local import LocalEngine
from chit.engine.paths import DaemonPaths
from chit.errors import ChitError, Conflict, ExitCode
from chit.heap import settle
from chit.home import Home, ensure_private_dir
from chit.runtime import SupervisorOptions

log = logging.getLogger("chit.daemon")


class AlreadyRunning(Conflict):
    """Another daemon holds this home's lock."""


@contextlib.contextmanager
def hold_lock(path: Path) -> Iterator[TextIO]:
    """Hold ``path``'s exclusive ``flock`` for the block, or raise AlreadyRunning."""
    ensure_private_dir(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    handle = os.fdopen(fd, "r+", encoding="utf-8")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            pid = handle.read().strip() or "?"
            raise AlreadyRunning(
                f"chit's daemon already runs for this home (pid {pid}); "
                "`chit daemon stop` it first, or use `chit daemon status`"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        yield handle
    finally:
        handle.close()  # closing the descriptor releases the lock


def run(home: Home, options: SupervisorOptions, *, spawned: bool) -> int:
    """Run the daemon until stopped; return the process exit code.

    Args:
        spawned: started on demand by a client (detached, output in ``daemon.log``);
            finding another daemon running is then no error.
    """
    os.umask(0o077)  # the socket and every file the daemon makes: this user's only
    paths = DaemonPaths(home.ensure())
    _configure_logging(spawned)
    try:
        with hold_lock(paths.lock):
            log.info("chit %s daemon starting for %s (pid %d)", __version__, home.root, os.getpid())
            settle()  # the imported modules' objects: never walked by a full collection again
            try:
                anyio.run(_serve, home, paths, options)
            finally:
                paths.info.unlink(missing_ok=True)
    except AlreadyRunning as exc:
        if spawned:
            log.info("another daemon won the start: %s", exc.message)
            return int(ExitCode.OK)
        raise
    except ChitError as exc:
        # Readable for the starter too: it reports the last line of the log.
        print(f"chit: {exc.message}", file=sys.stderr, flush=True)
        return int(exc.exit_code)
    log.info("daemon stopped")
    return int(ExitCode.OK)


async def _serve(home: Home, paths: DaemonPaths, options: SupervisorOptions) -> None:
    stop = anyio.Event()
    started_at = clock.iso()
    idle_s = idle_seconds()
    # Housekeeping runs often enough to honour a short idle time (tests use 1 s).
    tick_s = min(TICK_S, max(0.25, idle_s / 4)) if idle_s > 0 else TICK_S
    swept = sweep_orphans(home)
    if swept:
        log.warning("terminated %d server process(es) a dead daemon left running", len(swept))
    async with LocalEngine.open(home, options=options, run=True) as engine:
        socket_path = paths.socket
        listener = await anyio.create_unix_listener(socket_path, mode=0o600)

        def hello() -> rpc.HelloResult:
            return rpc.HelloResult(
                protocol=rpc.PROTOCOL_VERSION,
                chit_version=__version__,
                pid=os.getpid(),
                home=str(home.root),
                socket=str(socket_path),
                started_at=started_at,
                cursor=engine.feed.current_cursor(),
            )

        async def status(clients: int) -> rpc.DaemonStatus:
            return rpc.DaemonStatus(
                pid=os.getpid(),
                home=str(home.root),
                socket=str(socket_path),
                started_at=started_at,
                chit_version=__version__,
                protocol=rpc.PROTOCOL_VERSION,
                clients=clients,
                reconciling=engine.supervisor.lease.held,
                log_path=str(paths.log),
                servers=tuple(await engine.servers()),
            )

        try:
            async with anyio.create_task_group() as actions:
                server = ControlServer(engine, hello, status, stop, actions)
                proxy_methods.install(server, engine)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(server.serve, listener)
                    tg.start_soon(_signals, stop)
                    owner = os.environ.get(EXIT_WITH_ENV, "")
                    if owner.isdigit():
                        tg.start_soon(_exit_with, int(owner), stop)
                    upkeep = partial(housekeeping, idle_s=idle_s, tick_s=tick_s)
                    tg.start_soon(upkeep, engine, home, stop)
                    _write_info(paths, hello())
                    log.info("listening on %s", socket_path)
                    await stop.wait()
                    log.info("stopping")
                    tg.cancel_scope.cancel()
                actions.cancel_scope.cancel()
        finally:
            with contextlib.suppress(OSError):
                socket_path.unlink()


EXIT_WITH_ENV = "CHIT_DAEMON_EXIT_WITH"
"""A pid: the daemon stops when that process is gone (``chit demo``'s own daemon)."""


async def _exit_with(pid: int, stop: anyio.Event) -> None:
    """Stop the daemon once process ``pid`` no longer exists (checked every second)."""
    while not stop.is_set():
        with anyio.move_on_after(1.0):
            await stop.wait()
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            log.info("process %d, which this daemon serves, is gone: stopping", pid)
            stop.set()
        except OSError:
            pass  # alive, not ours to signal


async def _signals(stop: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for sig in signals:
            log.info("signal %s received", signal.Signals(sig).name)
            stop.set()
            return


def _write_info(paths: DaemonPaths, hello: rpc.HelloResult) -> None:
    tmp = paths.info.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(hello.model_dump(mode="json"), indent=2), encoding="utf-8")
    os.replace(tmp, paths.info)


def _configure_logging(spawned: bool) -> None:
    level = os.environ.get("CHIT_DAEMON_LOG_LEVEL", "INFO").upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    del spawned
