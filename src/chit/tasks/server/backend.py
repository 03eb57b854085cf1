"""What the runtime needs from a task store, and how a store is chosen from a URL.

Two implementations: :class:`~chit.tasks.server.store.TaskStore` (one SQLite file, one
machine, the default) and :class:`~chit.tasks.server.pgstore.PostgresTaskStore` (several
replicas on several machines sharing one PostgreSQL database). Both keep the same rows
(:class:`~chit.tasks.server.record.TaskRecord`) with the same guarantees: a write is
committed before it returns, every conditional write (claim, owner-guarded update,
keyed insert) is decided by the database, never by a read followed by a write.

A store that can *push* changes made by other processes (PostgreSQL ``LISTEN/NOTIFY``)
says so with ``pushes_changes``; the runtime then reacts to them at once instead of
only on its ``poll_s`` re-reads.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from chit.tasks.server.errors import TaskError
from chit.tasks.server.record import TaskRecord
from chit.tasks.server.schema import OwnerRow, TaskState
from chit.tasks.wire import INTERNAL_ERROR

ChangeCallback = Callable[[str | None, str | None], None]
"""``(task_id, status)`` of a change made elsewhere; ``status`` is ``None`` when the change
kept the status; ``task_id`` is ``None`` for "anything may have changed" (after the feed
reconnected and may have missed changes)."""

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


class StoreUnavailable(TaskError):
    """The task store cannot be reached (JSON-RPC -32603 with a one-line reason)."""

    def __init__(self, reason: str) -> None:
        """Build the error from a (possibly multi-line) driver message."""
        line = " ".join(str(reason).split()) or "unknown error"
        super().__init__(code=INTERNAL_ERROR, message=f"Task store unavailable: {line}")
        self.reason = line


@runtime_checkable
class TaskBackend(Protocol):
    """The task store operations the runtime uses (see module docstring)."""

    kind: str
    """``"sqlite"`` or ``"postgresql"``."""
    pushes_changes: bool
    """True when :meth:`follow` reports changes made by other processes."""

    def describe(self) -> str:
        """Where the store is (a path, or a URL without its password)."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...

    def insert(self, record: TaskRecord) -> None:
        """Insert a new task row (durable on return)."""
        ...

    def insert_keyed(self, record: TaskRecord) -> TaskRecord | None:
        """Insert unless (principal, tool, request_key) exists; return the existing row."""
        ...

    def get(self, task_id: str) -> TaskRecord | None:
        """The task, or ``None``."""
        ...

    def update(
        self,
        task_id: str,
        *,
        only_if_active: bool = False,
        owner: str | None = None,
        durable: bool = True,
        **changes: Any,
    ) -> bool:
        """Set columns of one task (guarded); True when a row changed."""
        ...

    def claim(self, task_id: str, expected_owner: str | None, **changes: Any) -> bool:
        """Compare-and-set on the owner of an active task; True when this call won."""
        ...

    def add_responses(
        self, task_id: str, responses: dict[str, dict[str, Any]]
    ) -> TaskRecord | None:
        """Record answers to pending input requests; the row after, or ``None``."""
        ...

    def list_for(
        self, principal: str, now_ms: int, after: tuple[int, str] | None, limit: int
    ) -> list[TaskRecord]:
        """Visible tasks of ``principal`` by (created, id) after a cursor."""
        ...

    def active(self) -> list[TaskRecord]:
        """Every non-terminal task."""
        ...

    def states(self, task_ids: list[str]) -> dict[str, TaskState]:
        """The polled columns of ``task_ids``."""
        ...

    def purge_expired(self, now_ms: int) -> int:
        """Delete expired tasks without a request key; how many."""
        ...

    def heartbeat(self, owner: OwnerRow) -> None:
        """Insert or refresh ``owner``'s row."""
        ...

    def owners(self) -> dict[str, OwnerRow]:
        """Every owner row by id."""
        ...

    def remove_owners(self, owner_ids: list[str]) -> None:
        """Delete owner rows that hold no active task."""
        ...

    def release(self, owner_id: str, failure: dict[str, Any]) -> None:
        """Fail (or hand over, if resumable) ``owner_id``'s tasks; drop its row."""
        ...

    async def follow(self, on_change: ChangeCallback) -> None:
        """Report changes made by other processes until cancelled (no-op stores sleep)."""
        ...


def is_postgres_url(target: str | Path) -> bool:
    """True when ``target`` names a PostgreSQL database rather than a SQLite file."""
    return isinstance(target, str) and target.startswith(POSTGRES_SCHEMES)


def open_task_store(target: str | Path, **options: Any) -> TaskBackend:
    """Open the store named by ``target``: a ``postgresql://`` URL or a SQLite path.

    Args:
        target: ``postgresql://user@host:port/db[?pool_size=N]`` or a file path.
        **options: Passed to the PostgreSQL store (``pool_size``, ``connect_timeout_s``).

    Raises:
        StoreUnavailable: PostgreSQL cannot be reached, or psycopg is not installed.
    """
    if is_postgres_url(target):
        from chit.tasks.server.pgstore import PostgresTaskStore

        return PostgresTaskStore(str(target), **options)
    from chit.tasks.server.store import TaskStore

    return TaskStore(target)
