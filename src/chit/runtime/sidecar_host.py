"""The Supervisor hosts the sidecar executor (seed 000: "the executor runs in the app").

The sidecar (``chit sidecar``) owns intent lifetime in ``sidecar.db``; the library owns
user records. Whichever long-lived process holds the Supervisor — ``chit daemon``, the
TUI, or the sidecar's own receipt gateway — applies the sidecar's intents to the library
through ``store.work`` (the repository the TUI writes with). The sidecar process keeps
its standalone executor for setups without a Supervisor; the intent leases make two
executors on one queue safe.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
from anyio.from_thread import BlockingPortal

from chit import clock
from chit.home import Home
from chit.receipts import ObservationSource, Receipt, freshness, next_safe_decision
from chit.sidecar.executor import Executor
from chit.sidecar.owner import StaticOwnerResolver, owner_of
from chit.sidecar.sql import exists as sidecar_exists
from chit.sidecar.sql import sidecar_target
from chit.vault import Vault

if TYPE_CHECKING:
    from chit.errors import ChitError

    # The Supervisor imports this module; the gateway opens it lazily.
    from chit.runtime.supervisor import Supervisor

ENV = "CHIT_SIDECAR_EXECUTOR"
"""``1`` hosts the executor even before ``sidecar.db`` exists, ``0`` never hosts it."""

_ON = ("1", "on", "yes", "true")
_OFF = ("0", "off", "no", "false")


def executor_wanted(home: Home, environ: Mapping[str, str] | None = None) -> bool:
    """Whether this home uses the sidecar: configured by :data:`ENV`, else ``sidecar.db`` exists.

    A home that never ran the sidecar gets no executor thread (and no ``sidecar.db``).
    """
    setting = (os.environ if environ is None else environ).get(ENV, "").strip().lower()
    if setting in _OFF:
        return False
    if setting in _ON:
        return True
    return sidecar_exists(sidecar_target(home))


def build_executor(
    home: Home, vault: Vault, environ: Mapping[str, str] | None = None
) -> Executor | None:
    """The executor a Supervisor hosts, or None when the home does not use the sidecar.

    The owner comes from the Supervisor's vault, which is unlocked by the time a
    Supervisor exists (``Supervisor.open`` fails with exit 4 otherwise): it is the same
    ``acct-`` fingerprint the sidecar process's :class:`~chit.sidecar.owner.
    VaultOwnerResolver` computes from the same key, so records both executors write
    have one owner.
    """
    if not executor_wanted(home, environ):
        return None
    owner = StaticOwnerResolver(owner_of(vault))
    return Executor(home, owner, sidecar_path=sidecar_target(home))


def executor_hook(
    home: Home, vault: Vault, environ: Mapping[str, str] | None = None
) -> Callable[[anyio.Event], Coroutine[Any, Any, None]] | None:
    """``Supervisor.executor``: the executor's ``run(stop)``, or None (no sidecar here)."""
    executor = build_executor(home, vault, environ)
    return None if executor is None else executor.run


class SupervisorGateway:
    """``chit.sidecar.gateway.ReceiptGateway`` over a Supervisor the sidecar process hosts.

    The Supervisor lives in its own event loop thread (a blocking portal), opened on the
    first receipt tool call, so a sidecar that is never asked for receipts never needs
    the vault for them. Once open it *runs*: it reconciles when no ``chit daemon`` (or
    TUI) holds the reconciler lease and stays a viewer otherwise, so receipts move on
    while the agent only polls. Errors become answers in the sidecar's vocabulary.

    Args:
        home: The chit home.
        host_executor: Let this Supervisor run the sidecar executor too. False when the
            sidecar process already runs its standalone executor (one per process does).
        environ: Settings for the Supervisor (default ``os.environ``).
    """

    def __init__(
        self,
        home: Home,
        *,
        host_executor: bool = False,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._home = home
        self._host_executor = host_executor
        self._environ = environ
        self._lock = threading.Lock()
        self._portal: BlockingPortal | None = None
        self._sup: Supervisor | None = None
        self._stop: anyio.Event | None = None
        self._running: Future[None] | None = None
        self._exits: list[Any] = []

    def _ensure(self) -> tuple[BlockingPortal, Supervisor]:
        from chit.runtime.supervisor import Supervisor

        with self._lock:
            if self._sup is None or self._portal is None:
                portal_cm = anyio.from_thread.start_blocking_portal()
                portal = portal_cm.__enter__()
                sup_cm = portal.wrap_async_context_manager(
                    Supervisor.open(self._home, environ=self._environ)
                )
                try:
                    sup = sup_cm.__enter__()
                except BaseException:
                    portal_cm.__exit__(None, None, None)
                    raise
                if not self._host_executor:
                    sup.executor = None
                self._stop = portal.call(anyio.Event)
                self._running = portal.start_task_soon(sup.run, self._stop)
                self._portal, self._sup = portal, sup
                self._exits = [sup_cm, portal_cm]
            return self._portal, self._sup

    def close(self) -> None:
        """Stop reconciling, close the Supervisor and its thread."""
        with self._lock:
            if self._portal is not None and self._stop is not None:
                self._portal.call(self._stop.set)
                if self._running is not None:
                    with contextlib.suppress(Exception):
                        self._running.result(timeout=10)
            for cm in self._exits:
                cm.__exit__(None, None, None)
            self._exits, self._sup, self._portal = [], None, None
            self._stop = self._running = None

    async def _run(
        self, fn: Callable[[Supervisor], Awaitable[dict[str, Any] | None]]
    ) -> dict[str, Any] | None:
        from chit.errors import ChitError, NotFound

        def go() -> dict[str, Any] | None:
            portal, sup = self._ensure()
            return portal.call(fn, sup)

        try:
            return await anyio.to_thread.run_sync(go)
        except NotFound:
            return None
        except ChitError as exc:
            return failure_answer(exc)

    async def start_call(
        self,
        *,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        purpose: str,
        work_ref: str | None,
        principal: str,
    ) -> dict[str, Any]:
        """Start the call through the Supervisor (intent first, receipt on acceptance)."""
        del principal  # bound by the sidecar's receipt_links, not by the library

        async def run(sup: Supervisor) -> dict[str, Any] | None:
            receipt = await sup.call(server, tool, arguments, purpose=purpose, work_ref=work_ref)
            return receipt_view(receipt)

        answer = await self._run(run)
        return answer if answer is not None else {"receipt_id": None, "state": "failed"}

    async def status(self, receipt_id: str) -> dict[str, Any] | None:
        """The stored view; checked once first when due and nobody reconciles it."""

        async def run(sup: Supervisor) -> dict[str, Any] | None:
            receipt = sup.store.receipts.get(receipt_id)
            if receipt is None:
                return None
            due = receipt.next_check_at is None or receipt.next_check_at <= clock.now()
            # While this Supervisor's own loop holds the lease it checks on schedule; a
            # try_acquire/release here would hand its lease away under it.
            if not receipt.is_terminal and due and not sup.lease.held and sup.lease.try_acquire():
                try:
                    await sup.reconciler.check(receipt_id, ObservationSource.POLL)
                finally:
                    sup.lease.release()
                receipt = sup.store.receipts.require(receipt_id)
            return receipt_view(receipt)

        return await self._run(run)

    async def result(self, receipt_id: str) -> dict[str, Any] | None:
        """The outcome when terminal (digest, bounded summary, error), else the state."""

        async def run(sup: Supervisor) -> dict[str, Any] | None:
            receipt = sup.store.receipts.get(receipt_id)
            if receipt is None:
                return None
            view = receipt_view(receipt)
            out = receipt.outcome
            view["outcome"] = None if out is None else out.model_dump(mode="json")
            return view

        return await self._run(run)

    async def cancel(self, receipt_id: str) -> dict[str, Any] | None:
        """Request cancellation; the view carries the cancellation posture."""

        async def run(sup: Supervisor) -> dict[str, Any] | None:
            if sup.store.receipts.get(receipt_id) is None:
                return None
            return receipt_view(await sup.cancel(receipt_id))

        return await self._run(run)

    async def origin(self, receipt_id: str) -> dict[str, Any] | None:
        """Whether a host started it through chit proxy, and the work item it named."""

        async def run(sup: Supervisor) -> dict[str, Any] | None:
            receipt = sup.store.receipts.get(receipt_id)
            return None if receipt is None else receipt_origin(receipt)

        return await self._run(run)


def receipt_origin(receipt: Receipt) -> dict[str, Any]:
    """``ReceiptGateway.origin``: started through chit proxy?, and its work item."""
    return {"proxied": receipt.host is not None, "work_ref": receipt.work_ref}


def failure_answer(exc: ChitError) -> dict[str, Any]:
    """A call chit could not make, in the sidecar's answer shape.

    Exit codes 4, 5 and 6 (key store, store, server unreachable) are conditions a retry can
    outlive, so the agent is told ``transient``; anything else will fail the same way again.
    """
    transient = int(exc.exit_code) in (4, 5, 6)
    return {
        "receipt_id": None,
        "state": "failed",
        "failure_class": "transient" if transient else "permanent",
        "reason": exc.message,
    }


def receipt_view(receipt: Receipt) -> dict[str, Any]:
    """A receipt in the sidecar's answer shape: state, freshness and the next decision."""
    now = clock.now()
    decision = next_safe_decision(receipt, now)
    return {
        "receipt_id": receipt.receipt_id,
        "state": str(receipt.state),
        "freshness": str(freshness(receipt, now)),
        "status_at": clock.iso(receipt.status_at),
        "cancellation": str(receipt.cancel.posture),
        "next": {
            "action": str(decision.action),
            "actor": str(decision.actor),
            "reason": decision.reason,
            "check_at": clock.iso(decision.check_at) if decision.check_at else None,
        },
    }
