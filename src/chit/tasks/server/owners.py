"""Which runtime process runs which task, when several share one task store.

Each stdio client spawns its own server process, and several chit processes (the
TUI, ``chit daemon``, the sidecar's gateway) may point theirs at the same database.
So "a task is ``working`` but nobody runs it" cannot be decided from the row alone.
Every runtime therefore takes an **owner identity** (random id) with a heartbeat row
in ``owners``; every task it runs records that ``owner_id``. A task is an orphan only
when its owner's heartbeat is stale (older than ``stale_s``), its owner row is gone,
or its owner is a process on this very host that no longer exists. Orphans are
failed, or resumed by whoever claims them first (compare-and-set on ``owner_id``).

The owner also *watches* the rows of the tasks it runs, because another process may
change them: a ``tasks/cancel`` answered elsewhere (the worker must stop), or input
answers stored elsewhere (the worker must wake up).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from chit.tasks.server.backend import StoreUnavailable
from chit.tasks.server.errors import task_ref
from chit.tasks.server.record import TaskRecord
from chit.tasks.server.schema import OwnerRow
from chit.tasks.wire import INTERNAL_ERROR, is_terminal

if TYPE_CHECKING:
    from chit.tasks.server.runtime import TaskRuntime

logger = logging.getLogger(__name__)

INTERRUPTED: dict[str, Any] = {
    "status": "failed",
    "status_message": "Interrupted: the server stopped while the task was running",
    "error": {"code": INTERNAL_ERROR, "message": "Task interrupted by a server restart"},
}
"""Column changes of a task whose process died or stopped under it."""


def host_identity() -> str:
    """Return an id of this host *and* PID namespace (pids are comparable within it)."""
    parts = [socket.gethostname()]
    try:
        parts.append(Path("/proc/sys/kernel/random/boot_id").read_text().strip())
    except OSError:
        parts.append("-")
    try:
        parts.append(os.readlink("/proc/self/ns/pid"))
    except OSError:
        parts.append("-")
    return "/".join(parts)


def pid_alive(pid: int) -> bool:
    """True unless ``pid`` certainly does not exist (a zombie still counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # e.g. EPERM: exists, belongs to someone else
    return True


class Ownership:
    """The owner identity, heartbeat and orphan sweep of one runtime."""

    def __init__(self, runtime: TaskRuntime, heartbeat_s: float, stale_s: float) -> None:
        """Configure; :meth:`renew` picks the identity when the runtime starts."""
        self._runtime = runtime
        self.heartbeat_s = heartbeat_s
        self.stale_s = stale_s
        self.pid = os.getpid()
        self.host = host_identity()
        self.owner_id = ""
        self.started_at_ms = 0
        self._poked = anyio.Event()
        self.renew()

    def poke(self) -> None:
        """Re-read this owner's task rows now (another process changed some row)."""
        self._poked.set()

    def renew(self) -> None:
        """Take a fresh owner id (each start of the runtime is a new owner)."""
        self.owner_id = secrets.token_hex(16)
        self.started_at_ms = self._runtime.now_ms()

    def row(self) -> OwnerRow:
        """This owner's heartbeat row, stamped now."""
        now = self._runtime.now_ms()
        return OwnerRow(self.owner_id, self.pid, self.host, self.started_at_ms, now)

    def is_dead(self, owner: OwnerRow | None, now_ms: int) -> bool:
        """True when ``owner`` cannot be running anything any more."""
        if owner is None:
            return True
        if owner.owner_id == self.owner_id:
            return False
        if now_ms - owner.heartbeat_at_ms > self.stale_s * 1000:
            return True
        # Same host and PID namespace: a vanished pid is dead now, no need to wait.
        return owner.host == self.host and owner.pid != self.pid and not pid_alive(owner.pid)

    def settle_orphans(self) -> list[str]:
        """Fail or claim every active task of a dead owner (blocking; run in a thread).

        Returns:
            Ids of resumable tasks this owner claimed; the caller starts their workers.
        """
        runtime = self._runtime
        store = runtime.store
        now = runtime.now_ms()
        owners = store.owners()
        dead = {o for o, row in owners.items() if self.is_dead(row, now)}
        resumed: list[str] = []
        for record in store.active():
            if record.owner_id == self.owner_id:
                continue
            if record.owner_id is not None and not self.is_dead(owners.get(record.owner_id), now):
                continue
            if self._settle(record, now):
                resumed.append(record.id)
        if dead:
            store.remove_owners(sorted(dead))
        return resumed

    def _settle(self, record: TaskRecord, now: int) -> bool:
        store = self._runtime.store
        if record.resumable and record.tool in self._runtime.tools:
            won = store.claim(
                record.id,
                record.owner_id,
                owner_id=self.owner_id,
                status="working",
                status_message="Resuming after a server restart",
                updated_at_ms=now,
            )
            if won:
                logger.info("resuming %s (%s)", task_ref(record.id), record.tool)
            return won
        store.claim(record.id, record.owner_id, updated_at_ms=now, **INTERRUPTED)
        return False

    async def run(self) -> None:
        """Heartbeat, sweep orphans and watch own tasks until cancelled."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._heartbeat_loop)
            tg.start_soon(self._watch_loop)

    async def _heartbeat_loop(self) -> None:
        runtime = self._runtime
        while True:
            await anyio.sleep(self.heartbeat_s)
            try:
                await runtime.write(runtime.store.heartbeat, self.row())
                for task_id in await runtime.write(self.settle_orphans):
                    runtime.start(task_id)
                    await runtime.changed(task_id)
            except StoreUnavailable as exc:  # an outage: one line, then keep beating
                logger.warning("task owner heartbeat failed: %s", exc.reason)
            except Exception:  # a locked or busy database must not end the heartbeat
                logger.warning("task owner heartbeat failed", exc_info=True)

    async def _watch_loop(self) -> None:
        runtime = self._runtime
        answers: dict[str, int] = {}
        stopped: set[str] = set()
        while True:
            with anyio.move_on_after(runtime.poll_s):
                await self._poked.wait()
            self._poked = anyio.Event()
            running = list(runtime.scopes)
            if not running:
                continue
            try:
                states = runtime.store.states(running)
            except StoreUnavailable as exc:
                logger.debug("task watch failed: %s", exc.reason)
                continue
            except Exception:
                logger.warning("task watch failed", exc_info=True)
                continue
            for task_id in running:
                state = states.get(task_id)
                foreign = state is None or state.owner_id != self.owner_id
                if foreign or state is None or is_terminal(state.status) or state.cancel_requested:
                    scope = runtime.scopes.get(task_id)
                    if scope is not None and task_id not in stopped:
                        # Changed by another process (cancel, take-over): stop the worker and
                        # push the new state to the sessions this process serves.
                        stopped.add(task_id)
                        scope.cancel()
                        await runtime.changed(task_id)
                elif answers.get(task_id, 0) != state.responses:
                    answers[task_id] = state.responses
                    runtime.wake(task_id)
            for gone in set(answers) - set(running):
                answers.pop(gone, None)
            stopped &= set(running)
