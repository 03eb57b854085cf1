"""The executor: applies sidecar intents to the library through ``store.work``.

The sidecar owns intent lifetime, the library owns user records (seed 000), so every
write goes through :class:`chit.store.WorkRepository` — the same repository the TUI uses —
never into library tables directly. The Supervisor hosts an :class:`Executor`; the
sidecar process can run one too (:class:`ExecutorThread`); leases keep two from applying
the same intent twice.

Failure classes, decided before any retry count:

* transient → ``retrying`` with exponential backoff, bounded by ``max_attempts`` —
  except waiting for the account (vault locked), which is never counted nor final;
* permanent → ``failed`` with a readable reason (contract violations, deleted target);
* blocked → stays pending as ``blocked`` until a user acts (the record belongs to
  another account);
* applied → terminal; an idempotent replay (the item already existed) is ``applied``
  with ``failure_class = "applied"``.
"""

from __future__ import annotations

import logging
import secrets
import threading
from pathlib import Path

import anyio

from chit import clock
from chit.home import Home
from chit.sidecar.anchors import SidecarStore
from chit.sidecar.contract import ContractError, validate_payload
from chit.sidecar.models import DEAD_REASON, Intent
from chit.sidecar.owner import OwnerResolver
from chit.sidecar.queue import (
    ACCOUNT_WAIT,
    Settle,
    claim,
    orphaned_provisionals,
    repair,
    settle,
    wake_account_waits,
)
from chit.store import AlreadyExists, Presence, RecordNotFound, Store, StoreError

log = logging.getLogger("chit.sidecar.executor")

START_STATUS = "planned"


class Executor:
    """Claims intents in order per item and applies them to the library.

    Args:
        home: The chit home: the library (``chit.db``) and ``sidecar.db`` live there.
        owner: Resolves the account; None while the vault is locked.
        sidecar_path: Override the sidecar store: a file, or a ``postgresql://`` URL.
        lease_s: How long a claim is held before another executor may take it over.
        base_backoff_s: First retry delay; doubled per counted attempt.
        max_backoff_s: Ceiling of the retry delay.
        account_wait_s: Re-check interval while waiting for the account.
    """

    def __init__(
        self,
        home: Home,
        owner: OwnerResolver,
        *,
        sidecar_path: Path | str | None = None,
        lease_s: float = 30.0,
        base_backoff_s: float = 0.5,
        max_backoff_s: float = 60.0,
        account_wait_s: float = 2.0,
    ) -> None:
        self.home = home
        self.owner = owner
        self.sidecar_path = sidecar_path or home.sidecar_db_path
        self.lease_s = lease_s
        self.base_backoff_s = base_backoff_s
        self.max_backoff_s = max_backoff_s
        self.account_wait_s = account_wait_s
        self.worker = "ex-" + secrets.token_hex(6)
        self._owner_seen = False
        # Connections are thread-bound: opened lazily in the thread that runs us.
        self._sidecar: SidecarStore | None = None
        self._library: Store | None = None

    # --- connections ------------------------------------------------------------------

    @property
    def sidecar(self) -> SidecarStore:
        """The sidecar store connection of the executing thread."""
        if self._sidecar is None:
            self._sidecar = SidecarStore.open(self.sidecar_path)
        return self._sidecar

    @property
    def library(self) -> Store:
        """The library connection of the executing thread."""
        if self._library is None:
            self._library = Store.open(self.home)
        return self._library

    def close(self) -> None:
        """Close both connections (call from the thread that used them)."""
        if self._sidecar is not None:
            self._sidecar.close()
            self._sidecar = None
        if self._library is not None:
            self._library.close()
            self._library = None

    # --- the loop ---------------------------------------------------------------------

    def run_once(self, limit: int = 1000) -> int:
        """Apply every due intent (up to ``limit``) and repair orphans; return how many."""
        owner = self.owner.resolve()
        if owner is not None and not self._owner_seen:
            # The account just became known: re-evaluate waiting intents now.
            self._owner_seen = True
            wake_account_waits(self.sidecar)
        done = 0
        while done < limit:
            intent = claim(self.sidecar, self.worker, self.lease_s)
            if intent is None:
                break
            result = self.apply(intent, owner)
            settle(self.sidecar, intent, self.worker, result)
            done += 1
        self.repair_orphans()
        return done

    async def run(self, stop: anyio.Event) -> None:
        """The Supervisor's executor hook: apply intents in a dedicated thread until ``stop``.

        One thread for the executor's whole life, because its SQLite connections are
        bound to the thread that opened them.
        """
        thread = ExecutorThread(self).start()
        try:
            await stop.wait()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(thread.stop)

    def repair_orphans(self) -> int:
        """Provisional anchors without a start intent: live if the item exists, else dead."""
        items = orphaned_provisionals(self.sidecar)
        for item_id in items:
            exists = self.library.work.presence(item_id) is Presence.LIVE
            repair(self.sidecar, item_id, exists=exists)
        return len(items)

    def sweep_deleted(self, limit: int = 500) -> int:
        """Mark live anchors whose library item was deleted dead; return how many."""
        killed = 0
        for anchor in self.sidecar.anchors(state="live", limit=limit):
            if self.library.work.presence(anchor.item_id) is not Presence.LIVE:
                self.sidecar.kill(anchor.item_id, DEAD_REASON)
                killed += 1
        return killed

    # --- one intent -------------------------------------------------------------------

    def _backoff(self, intent: Intent) -> float:
        return float(min(self.max_backoff_s, self.base_backoff_s * 2**intent.attempts))

    def apply(self, intent: Intent, owner: str | None) -> Settle:
        """Apply one claimed intent and say how it ended (never raises)."""
        try:
            return self._apply(intent, owner)
        except ContractError as exc:
            return Settle("failed", "permanent", exc.reason)
        except RecordNotFound:
            # Deleted between the presence check and the write.
            return Settle("failed", "permanent", DEAD_REASON, anchor="dead")
        except StoreError as exc:
            return Settle("retrying", "transient", exc.message, backoff_s=self._backoff(intent))
        except Exception as exc:  # unknown: bounded retries, readable type and message
            log.exception("intent %s failed unexpectedly", intent.kind)
            return Settle(
                "retrying",
                "transient",
                f"{type(exc).__name__}: {exc}",
                backoff_s=self._backoff(intent),
            )

    def _apply(self, intent: Intent, owner: str | None) -> Settle:
        payload = validate_payload(intent.kind, intent.payload)
        anchor = self.sidecar.anchor(intent.item_id)
        if anchor is None or anchor.state == "dead":
            reason = (anchor.dead_reason if anchor else None) or DEAD_REASON
            return Settle("failed", "permanent", reason)
        if owner is None:
            return Settle(
                "retrying",
                "transient",
                f"{ACCOUNT_WAIT}: {self.owner.why_unresolved}",
                count_attempt=False,
                backoff_s=self.account_wait_s,
            )
        work = self.library.work
        presence = work.presence(intent.item_id)
        if intent.kind == "start":
            return self._start(intent, payload, owner, presence)
        if presence is not Presence.LIVE:
            return Settle("failed", "permanent", DEAD_REASON, anchor="dead")
        record = work.get(intent.item_id)
        if record is not None and record.owner not in (None, owner):
            return Settle(
                "blocked",
                "blocked",
                "the record belongs to another account: restore that account, then retry "
                "(chit sidecar unblock)",
            )
        if intent.kind == "note":
            if intent.recovered and self._note_exists(intent, payload["text"]):
                return Settle("applied", "applied")
            work.add_note(intent.item_id, payload["text"])
        elif intent.kind == "status":
            work.set_status(intent.item_id, payload["status"])
        elif intent.kind == "complete":
            work.complete(intent.item_id, payload.get("summary"))
        else:  # "ask" intents are answered by a human, not applied to the library
            return Settle("failed", "permanent", f"intent kind {intent.kind} is not executable")
        return Settle("applied")

    def _start(
        self, intent: Intent, payload: dict[str, str], owner: str, presence: Presence
    ) -> Settle:
        work = self.library.work
        if presence is Presence.DELETED:
            return Settle("failed", "permanent", DEAD_REASON, anchor="dead")
        if presence is Presence.LIVE:
            # Repair path: an earlier attempt (or an older executor) created the item but
            # the anchor never moved. The item is the evidence; no duplicate is created.
            record = work.get(intent.item_id)
            if record is not None and record.owner not in (None, owner):
                return Settle("blocked", "blocked", "the record belongs to another account")
            return Settle("applied", "applied", anchor="live")
        try:
            work.create(
                intent.item_id,
                payload["title"],
                purpose=payload.get("purpose"),
                task_key=payload["task_key"],
                owner=owner,
                status=START_STATUS,
            )
        except AlreadyExists:
            return Settle("applied", "applied", anchor="live")
        return Settle("applied", anchor="live")

    def _note_exists(self, intent: Intent, text: str) -> bool:
        since = clock.parse_iso(intent.created_at)
        return any(
            n.text == text and n.at >= since for n in self.library.work.notes(intent.item_id)
        )


class ExecutorThread:
    """Runs an :class:`Executor` in a daemon thread until :meth:`stop`.

    Args:
        executor: The executor (its connections are opened in the thread).
        interval_s: Idle poll interval; :meth:`wake` cuts it short.
        sweep_every_s: How often live anchors are checked for deleted items.
    """

    def __init__(self, executor: Executor, interval_s: float = 0.2, sweep_every_s: float = 5.0):
        self.executor = executor
        self.interval_s = interval_s
        self.sweep_every_s = sweep_every_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chit-sidecar-executor", daemon=True)

    def start(self) -> ExecutorThread:
        """Start the thread."""
        from chit.receipts.schemas import build_all

        build_all()  # the thread validates models: build their schemas first (see there)
        self._thread.start()
        return self

    def wake(self) -> None:
        """Run a pass now (a new intent was queued)."""
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop and join the thread."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        last_sweep = clock.monotonic()
        try:
            while not self._stop.is_set():
                try:
                    self.executor.run_once()
                    if clock.monotonic() - last_sweep >= self.sweep_every_s:
                        last_sweep = clock.monotonic()
                        self.executor.sweep_deleted()
                except StoreError as exc:  # busy or I/O: the next pass retries
                    log.warning("executor pass failed: %s", exc.message)
                self._wake.wait(self.interval_s)
                self._wake.clear()
        finally:
            self.executor.close()
