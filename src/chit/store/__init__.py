"""chit.store — the SQLite receipt store (receipts, timeline, intents, work records, meta).

Open it with ``Store.open(home)``; every write is one ``BEGIN IMMEDIATE`` transaction and
every read fetches its rows and returns. See ``chit.store.db`` for the SQLite settings and
``docs/reliability.md`` ("SQLite durability") for the guarantees.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chit.store.db import BUSY_TIMEOUT_S, immediate
    from chit.store.errors import (
        AlreadyExists,
        AmbiguousPrefix,
        RecordNotFound,
        StaleWrite,
        StoreBusy,
        StoreCorrupt,
        StoreError,
        StoreIOError,
        StoreTooNew,
    )
    from chit.store.intent_repo import IntentRepository
    from chit.store.meta_repo import VAULT_KEY_ID, MetaRepository
    from chit.store.migrations import SCHEMA_VERSION
    from chit.store.observation_repo import ObservationRepository
    from chit.store.paging import Page
    from chit.store.reader import StoreReader
    from chit.store.receipt_repo import ReceiptRepository
    from chit.store.store import Store, ThreadLocalStore
    from chit.store.work_repo import Presence, WorkNote, WorkRecord, WorkRepository

# Exports load on first use: importing one name (an error type, a constant) does not
# import sqlite-utils and every repository with it; read-only commands stay light.
_LAZY: dict[str, str] = {
    "AlreadyExists": "chit.store.errors",
    "AmbiguousPrefix": "chit.store.errors",
    "BUSY_TIMEOUT_S": "chit.store.db",
    "IntentRepository": "chit.store.intent_repo",
    "MetaRepository": "chit.store.meta_repo",
    "ObservationRepository": "chit.store.observation_repo",
    "Page": "chit.store.paging",
    "Presence": "chit.store.work_repo",
    "ReceiptRepository": "chit.store.receipt_repo",
    "RecordNotFound": "chit.store.errors",
    "SCHEMA_VERSION": "chit.store.migrations",
    "StaleWrite": "chit.store.errors",
    "Store": "chit.store.store",
    "StoreBusy": "chit.store.errors",
    "StoreCorrupt": "chit.store.errors",
    "StoreError": "chit.store.errors",
    "StoreIOError": "chit.store.errors",
    "StoreReader": "chit.store.reader",
    "StoreTooNew": "chit.store.errors",
    "ThreadLocalStore": "chit.store.store",
    "VAULT_KEY_ID": "chit.store.meta_repo",
    "WorkNote": "chit.store.work_repo",
    "WorkRecord": "chit.store.work_repo",
    "WorkRepository": "chit.store.work_repo",
    "immediate": "chit.store.db",
}


def __getattr__(name: str) -> Any:
    """Load an exported name from its module on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "BUSY_TIMEOUT_S",
    "SCHEMA_VERSION",
    "VAULT_KEY_ID",
    "AlreadyExists",
    "AmbiguousPrefix",
    "IntentRepository",
    "MetaRepository",
    "ObservationRepository",
    "Page",
    "Presence",
    "ReceiptRepository",
    "RecordNotFound",
    "StaleWrite",
    "Store",
    "StoreBusy",
    "StoreCorrupt",
    "StoreError",
    "StoreIOError",
    "StoreReader",
    "StoreTooNew",
    "ThreadLocalStore",
    "WorkNote",
    "WorkRecord",
    "WorkRepository",
    "immediate",
]
