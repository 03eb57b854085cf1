"""The daemon's housekeeping: idle stdio servers stop, server logs stay small, orphans go.

* **Idle stdio servers.** A stdio server whose session has not been used for
  ``CHIT_STDIO_IDLE_S`` seconds (300 by default; ``0`` never stops them), with no live
  receipt, no call in flight and no host attached through ``chit proxy``, is stopped:
  its process exits and the next request starts it again. HTTP sessions cost nothing
  idle and are kept.
* **Server logs** (``logs/servers/NAME.log``, the stdio servers' stderr) are rotated past
  5 MB by copy-and-truncate: the server keeps writing (``O_APPEND``) into the same file,
  which starts again from empty; one older generation is kept per step.
* **Orphans.** At start, a stdio server left running by a daemon that died (its stderr
  still points into this home's ``logs/servers/``, its parent gone) is terminated, so a
  task never runs on in a process nobody can reach (Linux; elsewhere such servers exit
  when their stdin closes, as the ones tested do).
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path

import anyio
from anyio.abc import TaskGroup

from chit.engine.local import LocalEngine
from chit.engine.models import ServerStatus
from chit.home import Home
from chit.runtime.server_logs import rotate_logs, server_log_path
from chit.store.db import fetch_all

log = logging.getLogger("chit.daemon")

IDLE_ENV = "CHIT_STDIO_IDLE_S"
DEFAULT_IDLE_S = 300.0
TICK_S = 15.0
"""How often the housekeeping runs (it only reads a few rows and stats a few files)."""


def idle_seconds(environ: dict[str, str] | None = None) -> float:
    """The idle time after which a stdio server is stopped (0: never).

    Raises:
        UsageError: the setting is not a number of seconds.
    """
    from chit.errors import UsageError

    raw = (environ if environ is not None else dict(os.environ)).get(IDLE_ENV, "").strip()
    if not raw:
        return DEFAULT_IDLE_S
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{IDLE_ENV} must be a number of seconds, not {raw!r}") from None
    if value < 0 or value != value or value == float("inf"):
        raise UsageError(f"{IDLE_ENV} must be 0 (never) or a positive number of seconds")
    return value


def busy_servers(engine: LocalEngine) -> set[str]:
    """Servers with a live receipt, a call in flight (an intent still ``sending``), or a
    host attached through ``chit proxy`` (its session is the host's session too)."""
    rows = fetch_all(
        engine.supervisor.store.db,
        "SELECT DISTINCT server FROM receipts WHERE active = 1"
        " UNION SELECT DISTINCT server FROM intents WHERE state = 'sending'",
    )
    traffic = engine.supervisor.traffic
    hosted = {name for name in engine.supervisor.pool.servers() if traffic.connected_hosts(name)}
    return {str(r[0]) for r in rows} | hosted


def stop_idle(
    engine: LocalEngine, idle_s: float, notify: Callable[[ServerStatus, str], None]
) -> list[str]:
    """Stop every stdio session idle for ``idle_s``; return the servers stopped."""
    if idle_s <= 0:
        return []
    pool = engine.supervisor.pool
    busy = busy_servers(engine)
    stopped = []
    for name in pool.servers():
        state = pool.state(name)
        if not state.connected or not state.stdio or name in busy:
            continue
        if state.idle_s < idle_s:
            continue
        pool.broken(name)  # closes the session: the server's process exits
        stopped.append(name)
        log.info("stopped stdio server %s: idle for %.0f s", name, state.idle_s)
        notify(
            ServerStatus(name=name, transport="stdio", connected=False),
            f"stopped after {state.idle_s:.0f} s idle; the next request starts it again",
        )
    return stopped


def start_executor(engine: LocalEngine, tg: TaskGroup, stop: anyio.Event) -> bool:
    """Start the sidecar executor once the home uses the sidecar (True when started now).

    The Supervisor starts it at open when ``sidecar.db`` exists; a daemon that started
    before the first ``chit sidecar`` ran picks it up here instead of needing a restart.
    """
    from chit.runtime.sidecar_host import executor_hook

    sup = engine.supervisor
    if sup.executor is not None:
        return False
    hook = executor_hook(sup.home, sup.handles.vault)
    if hook is None:
        return False
    sup.executor = hook
    tg.start_soon(hook, stop)
    log.info("the home uses the sidecar now: its executor runs here")
    return True


async def housekeeping(
    engine: LocalEngine,
    home: Home,
    stop: anyio.Event,
    *,
    idle_s: float,
    tick_s: float = TICK_S,
) -> None:
    """Run the housekeeping every ``tick_s`` until ``stop``."""
    async with anyio.create_task_group() as tg:
        while not stop.is_set():
            with anyio.move_on_after(tick_s):
                await stop.wait()
            if stop.is_set():
                break
            try:
                stop_idle(engine, idle_s, engine.feed.server_changed)
                rotate_logs(home)
                start_executor(engine, tg, stop)
            except Exception:  # housekeeping must never take the daemon down
                log.warning("housekeeping failed this time", exc_info=True)


def sweep_orphans(home: Home) -> list[int]:
    """Terminate stdio servers of a dead daemon of this home (Linux); return their pids."""
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    logs = str(server_log_path(home, "x").parent) + os.sep
    swept = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            target = os.readlink(entry / "fd" / "2")
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if not target.startswith(logs) or _parent_is_chit(ppid):
            continue
        pid = int(entry.name)
        try:
            os.killpg(pid, signal.SIGTERM)  # a session leader (mcp starts servers so)
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                continue
        log.warning("terminated orphaned server process %d (stderr %s)", pid, target)
        swept.append(pid)
    return swept


def _parent_is_chit(ppid: int) -> bool:
    if ppid <= 1:
        return False
    try:
        argv = Path(f"/proc/{ppid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(b"chit" in part for part in argv[:3])
