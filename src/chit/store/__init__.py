"""chit.store — the SQLite receipt store (receipts, timeline, intents, work records, meta).

Open it with ``Store.open(home)``; every write is one ``BEGIN IMMEDIATE`` transaction and
every read fetches its rows and returns. See ``chit.store.db`` for the SQLite settings and
``docs/reliability.md`` ("SQLite durability") for the guarantees.
"""

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
from chit.store.receipt_repo import ReceiptRepository
from chit.store.store import Store, ThreadLocalStore
from chit.store.work_repo import Presence, WorkNote, WorkRecord, WorkRepository

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
    "StoreTooNew",
    "ThreadLocalStore",
    "WorkNote",
    "WorkRecord",
    "WorkRepository",
    "immediate",
]
