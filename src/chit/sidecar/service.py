"""The sidecar's operations, transport-free: validated arguments in, shared shapes out.

Tool handlers run in worker threads (the SDK runs sync tools with ``to_thread``), and
SQLite connections are thread-bound, so each thread opens its own sidecar and library
connection lazily. Every answer carries ``contract: "chit.work/1"``; an unknown item and
another principal's item get the same answer, byte for byte.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chit.home import Home
from chit.sidecar import stats
from chit.sidecar.anchors import SidecarStore, UnknownItem
from chit.sidecar.contract import CONTRACT, ContractError
from chit.sidecar.models import UNKNOWN_ITEM, Outcome
from chit.store import Store, StoreError

Answer = tuple[dict[str, Any], bool]
"""(structured content, is_error)."""


def failure(reason: str, failure_class: str = "permanent") -> dict[str, Any]:
    """The shape of a refused call (nothing was stored)."""
    return {
        "contract": CONTRACT,
        "state": "failed",
        "failure_class": failure_class,
        "reason": reason,
    }


UNKNOWN_ANSWER = failure(UNKNOWN_ITEM)


class SidecarService:
    """The work_* operations over the sidecar store.

    Args:
        home: The chit home.
        sidecar_path: Override the sidecar store: a file, or a ``postgresql://`` URL.
        check_library: Ask the library whether a live anchor's item still exists, so a
            deleted item is reported dead at once (otherwise the executor finds out).
        on_queued: Called after an intent was stored (wakes an in-process executor).
    """

    def __init__(
        self,
        home: Home,
        *,
        sidecar_path: Path | str | None = None,
        check_library: bool = True,
        on_queued: Callable[[], None] | None = None,
    ) -> None:
        self.home = home
        self.path: Path | str = sidecar_path or home.sidecar_db_path
        self.check_library = check_library
        self.on_queued = on_queued
        self._local = threading.local()
        self._opened: list[SidecarStore | Store] = []
        self._lock = threading.Lock()

    # --- per-thread connections ---------------------------------------------------------

    @property
    def store(self) -> SidecarStore:
        """This thread's sidecar store."""
        store: SidecarStore | None = getattr(self._local, "store", None)
        if store is None:
            store = SidecarStore.open(self.path)
            self._local.store = store
            with self._lock:
                self._opened.append(store)
        return store

    def _library(self) -> Store:
        library: Store | None = getattr(self._local, "library", None)
        if library is None:
            library = Store.open(self.home)
            self._local.library = library
            with self._lock:
                self._opened.append(library)
        return library

    def presence(self, item_id: str) -> str | None:
        """The library's view of an item, or None when it cannot tell (never raises)."""
        try:
            return str(self._library().work.presence(item_id).value)
        except (StoreError, OSError):
            return None

    def close(self) -> None:
        """Forget every thread's connections (closing them is the owning threads' job)."""
        with self._lock:
            self._opened.clear()
        self._local = threading.local()

    # --- operations ---------------------------------------------------------------------

    def _answer(self, outcome: Outcome) -> Answer:
        if outcome.state in ("queued", "retrying") and not outcome.replayed and self.on_queued:
            self.on_queued()
        return outcome.to_dict(), outcome.state in ("failed", "dead")

    def _guarded(self, fn: Callable[[], Outcome | dict[str, Any]]) -> Answer:
        try:
            result = fn()
        except UnknownItem:
            return dict(UNKNOWN_ANSWER), True
        except ContractError as exc:
            return failure(exc.reason), True
        except StoreError as exc:
            reason = f"{exc.message}; nothing was stored, retry with the same idempotency key"
            return failure(reason, "transient" if exc.transient else "permanent"), True
        if isinstance(result, Outcome):
            return self._answer(result)
        return result, False

    def start(self, principal: str, args: dict[str, Any]) -> Answer:
        """``work_start``: issue (or return) the item id for ``args["task_key"]``."""
        presence = self.presence if self.check_library else None
        return self._guarded(
            lambda: self.store.open_work(
                principal,
                args["task_key"],
                args["title"],
                purpose=args.get("purpose"),
                idempotency_key=args.get("idempotency_key"),
                presence=presence,
            )
        )

    def follow(self, principal: str, kind: str, args: dict[str, Any]) -> Answer:
        """``work_note`` / ``work_status`` / ``work_complete``: queue behind earlier intents."""
        payload = {k: v for k, v in args.items() if k not in ("item_id", "idempotency_key")}
        presence = self.presence if self.check_library else None
        return self._guarded(
            lambda: self.store.enqueue(
                principal,
                args["item_id"],
                kind,
                payload,
                idempotency_key=args.get("idempotency_key"),
                presence=presence,
            )
        )

    def inspect(self, principal: str, item_id: str) -> Answer:
        """``work_inspect``: anchor state, pending intents, last failure and its class."""

        def run() -> dict[str, Any]:
            return {"contract": CONTRACT, **self.store.inspect(principal, item_id)}

        return self._guarded(run)

    def stats(self) -> dict[str, Any]:
        """Counters by anchor state, intent state and failure class."""
        return stats.collect(self.store.db)
