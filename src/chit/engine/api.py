"""The one typed door between chit's faces (CLI, TUI) and its engine.

Two implementations: :class:`chit.engine.local.LocalEngine` runs the Supervisor in this
process (tests, ``--no-daemon``, the daemon itself), and the socket client
(:mod:`chit.engine.remote`) asks the home's daemon, which owns every server session.
Both raise the same ``chit.errors.ChitError`` subclasses with the same exit codes, and
both deliver the same events (:mod:`chit.engine.models`).

Everything here is imported for typing only, so ``import chit.engine`` stays cheap.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from anyio.abc import ObjectReceiveStream

    from chit.engine.models import (
        EngineEvent,
        ProtocolMessage,
        ReconcileSummary,
        ServerStatus,
        ToolsInfo,
    )
    from chit.receipts import Receipt


@runtime_checkable
class Engine(Protocol):
    """What a person (or an agent) can do with chit's engine; every method is async.

    Errors are ``ChitError`` subclasses (``UsageError`` exit 2, ``NotFound`` 3,
    ``ServerUnreachable`` 6, ``ServerProtocolError`` 7, ``Conflict`` 8, ...), the same
    whichever implementation raised them.
    """

    async def call(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        purpose: str | None = None,
        work_ref: str | None = None,
        ttl_ms: int | None = None,
        accept_if: str | None = None,
    ) -> Receipt:
        """Call ``tool`` on ``server`` as a task (intent first); return its receipt."""
        ...

    async def answer(
        self,
        receipt_id: str,
        key: str | None = None,
        content: dict[str, Any] | None = None,
        *,
        decline: bool = False,
        cancel: bool = False,
    ) -> Receipt:
        """Answer (or decline / cancel) a pending input request of a receipt."""
        ...

    async def cancel(self, receipt_id: str) -> Receipt:
        """Ask the server to cancel the task; the receipt carries the posture."""
        ...

    async def accept(self, receipt_id: str, why: str | None = None) -> Receipt:
        """Record a person's acceptance of a finished task's outcome."""
        ...

    async def reject(self, receipt_id: str, why: str) -> Receipt:
        """Record a person's rejection (``why`` is required)."""
        ...

    async def reopen(self, receipt_id: str) -> Receipt:
        """Take back a verdict (undo): the outcome waits for judgment again."""
        ...

    async def protocol_log(self, server: str, *, limit: int = 100) -> list[ProtocolMessage]:
        """The last JSON-RPC messages exchanged with ``server``, oldest first, redacted."""
        ...

    async def receipt(self, receipt_id: str) -> Receipt:
        """The receipt as stored now (any unique prefix of its id)."""
        ...

    async def follow(self, receipt_id: str) -> Receipt:
        """Wait until the receipt ends, is lost, or waits for a person; return it."""
        ...

    async def tools(self, server: str, *, timeout: float | None = None) -> ToolsInfo:
        """Connect (or reuse the session) and describe ``server``'s tools."""
        ...

    async def servers(self) -> list[ServerStatus]:
        """Every registered server with the state of its session."""
        ...

    async def reconcile_now(self) -> ReconcileSummary:
        """One pass over every live receipt (resumes interrupted intents first)."""
        ...

    async def retry_intent(
        self,
        request_key: str,
        arguments: dict[str, Any] | None = None,
        *,
        ttl_ms: int | None = None,
        accept_if: str | None = None,
    ) -> Receipt:
        """Re-send an ``unknown`` call under the same request key (same arguments)."""
        ...

    async def abandon_intent(self, request_key: str) -> None:
        """Give up on an ``unknown`` call."""
        ...

    def events(
        self, *, receipt_id: str | None = None, since: int | None = None
    ) -> AbstractAsyncContextManager[ObjectReceiveStream[EngineEvent]]:
        """Subscribe to changes: ``async with engine.events() as stream: async for e in stream``.

        Args:
            receipt_id: only this receipt's changes (a full id); None: everything.
            since: a change cursor from an earlier event: every receipt changed after it
                is delivered first (as it is now), so a reconnecting client misses
                nothing. None: only changes from now on.
        """
        ...
