"""The Supervisor: store, vault, servers, connections, reconciler and events, wired.

Headless (no Textual): the CLI runs it for one command, ``chit daemon`` and the TUI host
it for as long as they run. Open it with ``async with Supervisor.open(home) as sup``.
Only one process per home reconciles (the lease); the others are viewers that still
call, answer and cancel — their writes meet the reconciler's through the store's
optimistic concurrency.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
from anyio.abc import TaskGroup

from chit import clock
from chit.errors import Conflict, NotFound, UsageError
from chit.home import Home
from chit.receipts import IntentState, ObservationSource, Receipt, RetrievalCondition
from chit.receipts.decisions import needs_user
from chit.reconcile import (
    ClientOptions,
    ConnectionPool,
    HandleBook,
    Lease,
    LegacyInbox,
    ReceiptWriter,
    Reconciler,
    SpecResolver,
)
from chit.runtime import owners
from chit.runtime.actions import Actions, check_expression
from chit.runtime.events import EventBus, IntentUnknown, Subscriber
from chit.runtime.keys import unlock_vault
from chit.runtime.servers import registry_resolver
from chit.runtime.sidecar_host import executor_hook
from chit.store import Store
from chit.store.errors import StoreError
from chit.store.intent_repo import RESTART_MESSAGE
from chit.vault import Vault

log = logging.getLogger("chit.runtime")

Executor = Callable[[anyio.Event], Coroutine[Any, Any, None]]
"""The sidecar executor hook: ``run(stop)``; started with the Supervisor's ``run``."""


@dataclass(frozen=True)
class SupervisorOptions:
    """Tuning of the engine (defaults suit the daemon; tests shorten them)."""

    client: ClientOptions = field(default_factory=ClientOptions)
    answer_wait_s: float = 300.0
    redeliver_wait_s: float = 10.0
    intent_grace_s: float = 60.0
    heartbeat_s: float = 2.0
    lease_stale_s: float = 10.0
    settle_s: float = 2.0


@dataclass(frozen=True)
class ReconcileReport:
    """What ``reconcile_once`` did."""

    viewer: bool
    holder: str | None
    checked: int
    intents_unknown: int
    by_state: dict[str, int]
    problems: int


class Supervisor(Actions):
    """Owns the engine for one home; see the module docstring."""

    def __init__(
        self,
        home: Home,
        store: Store,
        vault: Vault,
        resolve: SpecResolver,
        tg: TaskGroup,
        options: SupervisorOptions,
    ) -> None:
        """Wire an already opened store and unlocked vault (use ``Supervisor.open``)."""
        self.home = home
        self.store = store
        self.options = options
        self.bus = EventBus()
        self.writer = ReceiptWriter(store, self.bus.receipt_changed)
        self.handles = HandleBook(store, vault)
        self._tg = tg
        self.pool = ConnectionPool(resolve, tg, options.client, on_hint=self._on_hint)
        self.inbox = LegacyInbox(
            self.writer,
            self.pool,
            tg,
            answer_wait_s=options.answer_wait_s,
            redeliver_wait_s=options.redeliver_wait_s,
            digest_key=vault.digest_key(),
        )
        self.reconciler = Reconciler(self.writer, self.handles, self.pool, self.inbox, tg)
        self.lease = Lease(
            store, heartbeat_s=options.heartbeat_s, stale_after_s=options.lease_stale_s
        )
        self.executor: Executor | None = None  # the sidecar executor plugs in here
        self._sending: set[str] = set()
        self.intent_owner = owners.owner_id(self.lease.owner)
        owners.register(self.lease.owner)

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        home: Home,
        *,
        environ: Mapping[str, str] | None = None,
        options: SupervisorOptions | None = None,
        resolve: SpecResolver | None = None,
    ) -> AsyncIterator[Supervisor]:
        """Open the store, unlock the vault (exit 4 errors if it cannot) and start.

        Raises:
            KeyStoreUnavailable, DataKeyMissing: the vault cannot be unlocked.
        """
        store = Store.open(home)
        try:
            vault = unlock_vault(home, store, environ)
            resolver = resolve or registry_resolver(home, vault, environ)
            async with anyio.create_task_group() as tg:
                sup = cls(home, store, vault, resolver, tg, options or SupervisorOptions())
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
        self._release()

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Receive engine events; returns the unsubscribe function."""
        return self.bus.subscribe(callback)

    async def _on_hint(self, task_id: str) -> None:
        await self.reconciler.on_hint(task_id)

    # --- intents -----------------------------------------------------------------------

    def resume_intents(self) -> int:
        """Restart rule: ``sending`` intents of dead processes become ``unknown``.

        An intent is its sender's in-flight call while that process lives (a synchronous
        call may wait for its reply up to ``result_timeout``): it is resumed only once
        its recorded owner is gone (``chit.runtime.owners``), and never before
        ``intent_grace_s``. An intent that moved on meanwhile (a lost race) is skipped.
        """
        now = clock.now()
        count = 0
        senders = self.store.intents.owners(IntentState.SENDING)
        for intent in self.store.intents.list(IntentState.SENDING):
            if intent.request_key in self._sending:
                continue
            age = (now - intent.updated_at).total_seconds()
            if age < self.options.intent_grace_s:
                continue
            gone = owners.owner_gone(
                senders.get(intent.request_key),
                mine=self.lease.owner,
                age_s=age,
                remote_wait_s=self.options.client.result_timeout + self.options.intent_grace_s,
            )
            if not gone:
                continue
            try:
                marked = self.store.intents.mark(
                    intent.request_key,
                    IntentState.UNKNOWN,
                    error=RESTART_MESSAGE,
                    expected=IntentState.SENDING,
                )
            except Conflict:
                continue
            self.bus.publish(IntentUnknown(marked))
            count += 1
        return count

    async def retry_intent(
        self,
        request_key: str,
        arguments: dict[str, Any] | None = None,
        *,
        ttl_ms: int | None = None,
        accept_if: str | None = None,
    ) -> Receipt:
        """Re-send an ``unknown`` intent under the same request key.

        A server that honours request keys (chit's own) answers with the task it may
        already have created, so the retry cannot start the work twice. The arguments
        are not stored (only their digest): give them again; they must match.

        Raises:
            NotFound: no such intent. Conflict: the intent is not ``unknown`` (also
            when another process moved it first). UsageError: the arguments differ.
        """
        check_expression(accept_if)
        intent = self.store.intents.get(request_key)
        if intent is None:
            raise NotFound(f"no intent {request_key}")
        if intent.state is not IntentState.UNKNOWN:
            raise Conflict(f"intent {request_key} is {intent.state}; only unknown intents retry")
        args = dict(arguments or {})
        if not self.same_arguments(args, intent.args_digest):
            raise UsageError("the arguments differ from the original call (digest mismatch)")
        await self._client(intent.server)
        sending = self.store.intents.mark(
            request_key,
            IntentState.SENDING,
            bump_attempts=True,
            expected=IntentState.UNKNOWN,
            owner=self.intent_owner,
        )
        return await self.send_intent(sending, args, ttl_ms=ttl_ms, accept_if=accept_if)

    def abandon_intent(self, request_key: str) -> None:
        """Give up on an ``unknown`` intent (the work may or may not have started)."""
        intent = self.store.intents.get(request_key)
        if intent is None:
            raise NotFound(f"no intent {request_key}")
        if intent.state is not IntentState.UNKNOWN:
            raise Conflict(f"intent {request_key} is {intent.state}; only unknown intents abandon")
        self.store.intents.mark(
            request_key,
            IntentState.ABANDONED,
            error="abandoned by the user",
            expected=IntentState.UNKNOWN,
        )

    # --- reconciling -------------------------------------------------------------------

    async def reconcile_once(self) -> ReconcileReport:
        """One pass: resume intents, check every live receipt, collect prompts.

        A viewer (another process holds the lease) does nothing and says who holds it.
        When this Supervisor already holds the lease (``run`` is going, e.g. the TUI's
        "reconcile now"), the pass runs under it and the lease is kept.
        """
        owned = self.lease.held
        if not owned and not self._try_acquire():
            holder = self.lease.holder()
            return ReconcileReport(True, _describe(holder), 0, 0, {}, 0)
        try:
            unknown = self.resume_intents()
            ids = self.reconciler.live_ids()
            before = self.reconciler.checks
            await self.reconciler.check_all(ids, ObservationSource.RESTART)
            await self.inbox.settle(self.options.settle_s)
            return self._report(self.reconciler.checks - before, unknown)
        finally:
            if not owned:
                self._release()

    def _report(self, checked: int, unknown: int) -> ReconcileReport:
        counts = {str(k): v for k, v in self.store.receipts.counts_by_state().items()}
        problems = sum(
            1
            for rid in self.reconciler.live_ids()
            if (r := self.store.receipts.get(rid)) is not None
            and r.retrieval is not RetrievalCondition.FRESH
        )
        return ReconcileReport(False, None, checked, unknown, counts, problems)

    async def run(self, stop: anyio.Event | None = None) -> None:
        """Reconcile until ``stop`` is set; as a viewer, take over when the lease goes stale."""
        stop = stop or anyio.Event()
        if self.executor is not None:
            self._tg.start_soon(self.executor, stop)
        while not stop.is_set():
            if not self._try_acquire():
                with anyio.move_on_after(self.options.heartbeat_s):
                    await stop.wait()
                continue
            log.info("reconciler lease acquired by %s", self.lease.owner)
            self._resume_safely()
            self.reconciler.kick(self.reconciler.live_ids(), ObservationSource.RESTART)
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._heartbeat, stop)
                await self.reconciler.run(stop, keep_going=lambda: self.lease.held)
                tg.cancel_scope.cancel()
        self._release()

    # --- the lease, surviving a busy store --------------------------------------------
    # A store error here (another process holding the write lock past the busy timeout)
    # is logged and retried on the next beat: only a confirmed takeover loses the lease.
    # The store's connection is bound to this thread, so these calls stay on the loop.

    def _try_acquire(self) -> bool:
        try:
            return self.lease.try_acquire()
        except StoreError as exc:
            log.warning("reconciler lease not taken this time: %s", exc.message)
            return False

    def _beat(self) -> bool | None:
        """Refresh the lease: True held, False taken over, None the store failed."""
        try:
            return self.lease.beat()
        except StoreError as exc:
            log.warning("reconciler lease heartbeat skipped: %s", exc.message)
            return None

    def _release(self) -> None:
        try:
            self.lease.release()
        except StoreError as exc:
            log.warning("reconciler lease not released (it goes stale): %s", exc.message)

    def _resume_safely(self) -> None:
        try:
            self.resume_intents()
        except (StoreError, Conflict) as exc:
            log.warning("resuming intents skipped this time: %s", exc.message)

    async def _heartbeat(self, stop: anyio.Event, *, resume: bool = True) -> None:
        while not stop.is_set() and self.lease.held:
            with anyio.move_on_after(self.options.heartbeat_s):
                await stop.wait()
            if stop.is_set():
                return
            if self._beat() is False:
                log.warning("reconciler lease lost; attaching as a viewer")
                return
            if resume:
                self._resume_safely()

    async def follow(self, receipt_id: str, *, reconcile: bool = True) -> Receipt:
        """Follow one receipt until it ends, is lost, or waits for a person.

        Reconciles it here unless another process holds the lease (then only watches).
        Under a lease this Supervisor already holds (``run`` is going) it keeps it; a
        lease it took here is kept alive on schedule (even during a long check) and
        given back at the end; lost to a takeover, it goes on as a viewer.
        """
        rid = self.store.receipts.get_by_prefix(receipt_id).receipt_id
        owned = self.lease.held
        took = reconcile and not owned and self._try_acquire()
        active = reconcile and (owned or took)
        stop = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                if took:
                    tg.start_soon(partial(self._heartbeat, stop, resume=False))
                try:
                    followed = await self._follow(rid, active)
                finally:
                    stop.set()
        finally:
            if took:
                self._release()
        return followed

    async def _follow(self, rid: str, active: bool) -> Receipt:
        while True:
            r = self.store.receipts.require(rid)
            if _settled(r):
                return r
            due = r.next_check_at is None or r.next_check_at <= clock.now()
            if active and self.lease.held and due:
                await self.reconciler.check(rid, ObservationSource.POLL)
                continue
            await anyio.sleep(0.1)


def _settled(r: Receipt) -> bool:
    if r.retrieval in (
        RetrievalCondition.VANISHED,
        RetrievalCondition.EXPIRED,
        RetrievalCondition.INCOMPATIBLE,
    ):
        return True
    if r.is_terminal and (
        r.outcome is not None or r.next_check_at is None or r.state.value == "cancelled"
    ):
        return True
    # Whatever else waits for a person (input, a decision after many failed checks)
    # ends the follow too: chit cannot move it on alone.
    return bool(r.pending_inputs) or needs_user(r, clock.now())


def _describe(holder: Any) -> str | None:
    if holder is None:
        return None
    return f"{holder.host} pid {holder.pid} (since {clock.iso(holder.acquired_at)})"
