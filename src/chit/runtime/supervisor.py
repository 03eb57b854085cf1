"""The Supervisor: the engine of one home, as one facade over parts with one job each.

Headless (no Textual): the CLI runs it for one command, ``chit daemon`` and the TUI host
it for as long as they run. Open it with ``async with Supervisor.open(home) as sup``.
Only one process per home reconciles (the lease); the others are viewers that still
call, answer and cancel — their writes meet the reconciler's through the store's
optimistic concurrency.

The parts (composed here, each usable and testable alone):

* :class:`~chit.runtime.calls.Calls` — intent first, then the request, then the receipt;
* :class:`~chit.runtime.answers.Answers` — replies to pending input requests;
* :class:`~chit.runtime.cancels.Cancels` — requested → acknowledged → observed;
* :func:`~chit.runtime.acceptance.decide_acceptance` — a person's verdict;
* :class:`~chit.runtime.intents.IntentRecovery` — unknown intents, retry, abandon;
* :class:`~chit.runtime.lease_keeper.LeaseKeeper` — the lease through a busy store;
* :class:`~chit.runtime.reconciling.ReconcileLoop` — one pass, or until stopped;
* :class:`~chit.runtime.follow.Follower` — one receipt until it settles.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.abc import TaskGroup

from chit.clock import Clock, current_clock
from chit.home import Home
from chit.receipts import AcceptanceState, Intent, Receipt
from chit.receipts.schemas import build_all
from chit.reconcile import (
    ConnectionPool,
    HandleBook,
    Lease,
    LegacyInbox,
    ReceiptWriter,
    Reconciler,
    SpecResolver,
)
from chit.runtime import owners
from chit.runtime.acceptance import decide_acceptance, reopen_acceptance
from chit.runtime.answers import Answers
from chit.runtime.calls import Calls
from chit.runtime.cancels import Cancels
from chit.runtime.events import EventBus, Subscriber
from chit.runtime.follow import Follower
from chit.runtime.intents import IntentRecovery
from chit.runtime.keys import unlock_vault
from chit.runtime.lease_keeper import LeaseKeeper
from chit.runtime.options import SupervisorOptions
from chit.runtime.reconciling import ReconcileLoop, ReconcileReport
from chit.runtime.retention import RetentionKeeper
from chit.runtime.servers import redact_older_rows, registry_resolver
from chit.runtime.sidecar_host import executor_hook
from chit.runtime.traffic import ServerTraffic
from chit.store import Store
from chit.vault import Vault

Executor = Callable[[anyio.Event], Coroutine[Any, Any, None]]
"""The sidecar executor hook: ``run(stop)``; started with the Supervisor's ``run``."""

__all__ = ["Executor", "ReconcileReport", "Supervisor", "SupervisorOptions"]


class Supervisor:
    """Owns the engine for one home; see the module docstring."""

    def __init__(
        self,
        home: Home,
        store: Store,
        vault: Vault,
        resolve: SpecResolver,
        tg: TaskGroup,
        options: SupervisorOptions,
        clock: Clock | None = None,
    ) -> None:
        """Wire an already opened store and unlocked vault (use ``Supervisor.open``)."""
        build_all()  # before any worker thread validates a model (chit.receipts.schemas)
        self.home = home
        self.store = store
        self.options = options
        self.clock = clock = clock or current_clock()
        self.bus = EventBus()
        self.handles = HandleBook(store, vault)
        self.writer = ReceiptWriter(
            store,
            self.bus.receipt_changed,
            redactor=self.handles.redactor,
            digest_key=vault.digest_key(),
            clock=clock,
            # The checks' batches commit on a connection of their own, in a worker
            # thread: an fsync no longer holds the loop (see chit.reconcile.writer).
            batch_store=(
                Store.open_path(store.path, check_same_thread=False)
                if options.write_thread
                else None
            ),
        )
        self._tg = tg
        self.traffic = ServerTraffic()
        self.pool = ConnectionPool(
            resolve,
            tg,
            options.client,
            on_hint=self._on_hint,
            clock=clock,
            server_input=self.traffic.on_input,
            on_message=self.traffic.on_message,
        )
        self.inbox = LegacyInbox(
            self.writer,
            self.pool,
            tg,
            answer_wait_s=options.answer_wait_s,
            redeliver_wait_s=options.redeliver_wait_s,
            digest_key=vault.digest_key(),
            clock=clock,
        )
        self.reconciler = Reconciler(
            self.writer, self.handles, self.pool, self.inbox, tg, clock=clock
        )
        self.lease = Lease(
            store,
            heartbeat_s=options.heartbeat_s,
            stale_after_s=options.lease_stale_s,
            clock=clock,
        )
        self.executor: Executor | None = None  # the sidecar executor plugs in here
        self.intent_owner = owners.owner_id(self.lease.owner)
        owners.register(self.lease.owner)
        self.calls = Calls(
            store,
            self.pool,
            self.handles,
            self.writer,
            owner=self.intent_owner,
            sending=set(),
            clock=clock,
            on_task=self.reconciler.adopt,
        )
        self.intents = IntentRecovery(
            store,
            self.calls,
            self.bus,
            token=self.lease.owner,
            grace_s=options.intent_grace_s,
            remote_wait_s=options.client.result_timeout + options.intent_grace_s,
            clock=clock,
        )
        self.answers = Answers(
            self.writer, self.handles, self.pool, self.inbox, self.reconciler, clock=clock
        )
        self.cancels = Cancels(self.writer, self.handles, self.pool, self.reconciler)
        self.keeper = LeaseKeeper(self.lease, heartbeat_s=options.heartbeat_s, clock=clock)
        self.retention = RetentionKeeper(home, clock=clock)
        self.loop = ReconcileLoop(
            self.reconciler,
            self.inbox,
            self.keeper,
            self.intents,
            settle_s=options.settle_s,
            retention=self.retention,
        )
        self.follower = Follower(self.reconciler, self.keeper, clock=clock)

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        home: Home,
        *,
        environ: Mapping[str, str] | None = None,
        options: SupervisorOptions | None = None,
        resolve: SpecResolver | None = None,
        clock: Clock | None = None,
    ) -> AsyncIterator[Supervisor]:
        """Open the store, unlock the vault (exit 4 errors if it cannot) and start.

        ``clock`` (default: the process's, :func:`chit.clock.current_clock`) drives every
        schedule of the engine; a test passes a :class:`chit.clock.ManualClock` (installed
        with :func:`chit.clock.use`, so the store's timestamps follow it too).

        Raises:
            KeyStoreUnavailable, DataKeyMissing: the vault cannot be unlocked.
        """
        store = Store.open(home)
        try:
            vault = unlock_vault(home, store, environ)
            resolver = resolve or registry_resolver(home, vault, environ)
            async with anyio.create_task_group() as tg:
                sup = cls(home, store, vault, resolver, tg, options or SupervisorOptions(), clock)
                redact_older_rows(home, store, sup.handles, resolver)
                # The sidecar's executor runs here when the home uses the sidecar.
                sup.executor = executor_hook(home, vault, environ)
                try:
                    yield sup
                finally:
                    with anyio.CancelScope(shield=True):
                        await sup.close()
                    tg.cancel_scope.cancel()
        finally:
            store.close()

    async def close(self) -> None:
        """Stop watchers, close connections and release the lease."""
        owners.unregister(self.lease.owner)
        self.inbox.close()
        await self.pool.aclose()
        await self.writer.aclose()
        self.keeper.release()

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Receive engine events; returns the unsubscribe function."""
        return self.bus.subscribe(callback)

    async def _on_hint(self, task_id: str) -> None:
        await self.reconciler.on_hint(task_id)

    # --- calls -------------------------------------------------------------------------

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
        """Call ``tool`` on ``server`` as a task; return its receipt (see :class:`Calls`).

        Raises:
            UsageError: bad acceptance expression. NotFound: unknown server.
            ServerUnreachable: no connection, or the outcome is unknown (intent kept).
            ServerProtocolError: the server refused the call.
        """
        return await self.calls.call(
            server,
            tool,
            arguments,
            purpose=purpose,
            work_ref=work_ref,
            ttl_ms=ttl_ms,
            accept_if=accept_if,
        )

    async def send_intent(
        self,
        intent: Intent,
        arguments: dict[str, Any],
        *,
        ttl_ms: int | None,
        accept_if: str | None,
    ) -> Receipt:
        """Send a stored ``sending`` intent and record what the server answered."""
        return await self.calls.send(intent, arguments, ttl_ms=ttl_ms, accept_if=accept_if)

    def arguments_digest(self, arguments: dict[str, Any]) -> str:
        """The keyed digest a call's arguments are recorded under (never the values)."""
        return self.calls.arguments_digest(arguments)

    def same_arguments(self, arguments: dict[str, Any], recorded: str) -> bool:
        """True when ``arguments`` are the ones a stored digest was made of."""
        return self.calls.same_arguments(arguments, recorded)

    # --- intents -----------------------------------------------------------------------

    def resume_intents(self) -> int:
        """Restart rule: ``sending`` intents of dead processes become ``unknown``."""
        return self.intents.resume()

    async def retry_intent(
        self,
        request_key: str,
        arguments: dict[str, Any] | None = None,
        *,
        ttl_ms: int | None = None,
        accept_if: str | None = None,
    ) -> Receipt:
        """Re-send an ``unknown`` intent under the same request key (see ``IntentRecovery``).

        Raises:
            NotFound: no such intent. Conflict: the intent is not ``unknown``.
            UsageError: the arguments differ.
        """
        return await self.intents.retry(request_key, arguments, ttl_ms=ttl_ms, accept_if=accept_if)

    def abandon_intent(self, request_key: str) -> None:
        """Give up on an ``unknown`` intent (the work may or may not have started)."""
        self.intents.abandon(request_key)

    # --- answers, cancels, verdicts ----------------------------------------------------

    async def answer(
        self,
        receipt_id: str,
        key: str | None = None,
        content: dict[str, Any] | None = None,
        *,
        decline: bool = False,
        cancel: bool = False,
    ) -> Receipt:
        """Answer (or decline / cancel) a pending input request.

        Raises:
            UsageError: the answer does not fit the request's schema, or the key is ambiguous.
            Conflict: nothing pending under that key, or the prompt was lost.
        """
        return await self.answers.answer(receipt_id, key, content, decline=decline, cancel=cancel)

    async def cancel(self, receipt_id: str) -> Receipt:
        """Ask the server to cancel; record requested → acknowledged → observed."""
        return await self.cancels.cancel(receipt_id)

    def accept(self, receipt_id: str, why: str | None = None) -> Receipt:
        """Record a person's acceptance of a terminal receipt's outcome."""
        return decide_acceptance(self.writer, receipt_id, AcceptanceState.ACCEPTED, why)

    def reject(self, receipt_id: str, why: str) -> Receipt:
        """Record a person's rejection (``why`` is required)."""
        return decide_acceptance(self.writer, receipt_id, AcceptanceState.REJECTED, why)

    def reopen(self, receipt_id: str) -> Receipt:
        """Take back a verdict: the outcome waits for judgment again."""
        return reopen_acceptance(self.writer, receipt_id)

    # --- reconciling and following -----------------------------------------------------

    async def reconcile_once(self) -> ReconcileReport:
        """One pass: resume intents, check every live receipt, collect prompts."""
        return await self.loop.once()

    async def run(self, stop: anyio.Event | None = None) -> None:
        """Reconcile until ``stop`` is set; as a viewer, take over when the lease goes stale.

        The sidecar executor (when the home uses the sidecar) runs alongside.
        """
        stop = stop or anyio.Event()
        if self.executor is not None:
            self._tg.start_soon(self.executor, stop)
        await self.loop.run(stop)

    async def follow(self, receipt_id: str, *, reconcile: bool = True) -> Receipt:
        """Follow one receipt until it ends, is lost, or waits for a person."""
        return await self.follower.follow(receipt_id, reconcile=reconcile)
