"""Helpers for the store tests: model factories, a fault-injecting connection, writers.

Run as a module, it is the writer process the concurrency and crash tests start::

    python -m tests.store_support writer HOME PREFIX COUNT ACK_FILE   (COUNT 0 = forever)

Each iteration begins an intent, records the acceptance (receipt + intent + first
observation in one transaction) and then updates the receipt with a second observation.
An ack line is written to ACK_FILE with ``os.write`` only after each COMMIT returned:
``A <receipt_id>`` after the acceptance, ``U <receipt_id>`` after the update.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from chit.home import Home
from chit.receipts import (
    HandleRef,
    Intent,
    LifecycleState,
    Observation,
    ObservationKind,
    ObservationSource,
    Receipt,
    TaskProtocol,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def make_receipt(
    receipt_id: str,
    *,
    request_key: str | None = None,
    state: LifecycleState = LifecycleState.WORKING,
    server: str = "demo",
    tool: str = "slow_compute",
    purpose: str | None = "compute things",
    work_ref: str | None = None,
    status_at: datetime = T0,
    next_check_at: datetime | None = None,
    fingerprint: str | None = "fp0123456789",
) -> Receipt:
    """Return a valid receipt with sensible defaults."""
    handle = HandleRef(fingerprint=fingerprint, key_id="00" * 8) if fingerprint else None
    return Receipt(
        receipt_id=receipt_id,
        work_ref=work_ref,
        server=server,
        tool=tool,
        purpose=purpose,
        args_digest="sha256:abc",
        request_key=request_key or f"rk-{receipt_id}",
        protocol=TaskProtocol.EXTENSION,
        accepted_at=status_at,
        status_at=status_at,
        state=state,
        next_check_at=next_check_at,
        handle=handle,
    )


def make_intent(request_key: str, *, server: str = "demo", digest: str = "sha256:abc") -> Intent:
    """Return a ``sending`` intent."""
    return Intent(
        request_key=request_key,
        server=server,
        tool="slow_compute",
        args_digest=digest,
        purpose="compute things",
        created_at=T0,
        updated_at=T0,
    )


def make_obs(
    receipt_id: str,
    *,
    status: LifecycleState = LifecycleState.WORKING,
    source: ObservationSource = ObservationSource.POLL,
    message: str | None = None,
    at: datetime = T0,
) -> Observation:
    """Return a status observation."""
    return Observation(
        receipt_id=receipt_id,
        at=at,
        source=source,
        kind=ObservationKind.STATUS,
        status=status,
        message=message,
    )


class _Cursor:
    """A cursor proxy whose ``execute`` counts toward the owning connection's budget."""

    def __init__(self, owner: FaultyConnection, real: sqlite3.Cursor) -> None:
        self._owner = owner
        self._real = real

    def execute(self, sql: str, params: Any = ()) -> _Cursor:
        self._owner.tick(sql)
        self._real.execute(sql, params)
        return self

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("_owner", "_real"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._real, name, value)


class FaultyConnection:
    """Wraps a sqlite3 connection so that statement number ``fail_at`` raises an I/O error.

    ``fail_at=None`` only counts (``count``, ``statements``), to size the loop over k.
    Every statement counts — BEGIN and COMMIT included — since SQLite can fail at any of
    them; ROLLBACK is never failed, as SQLite itself rolls back on I/O errors.
    """

    def __init__(self, real: sqlite3.Connection, fail_at: int | None = None) -> None:
        self.real = real
        self.fail_at = fail_at
        self.count = 0
        self.statements: list[str] = []

    def tick(self, sql: str) -> None:
        if sql.strip().upper().startswith("ROLLBACK"):
            return
        self.count += 1
        self.statements.append(sql.strip().split()[0].upper())
        if self.fail_at is not None and self.count == self.fail_at:
            raise sqlite3.OperationalError("disk I/O error")

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        self.tick(sql)
        return self.real.execute(sql, params)

    def cursor(self) -> _Cursor:
        return _Cursor(self, self.real.cursor())

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def sealed(secret: str, aad: bytes) -> tuple[bytes, str]:
    """Seal ``secret`` with the real vault (memory key store); return (blob, fingerprint)."""
    from chit.vault import MemoryKeyStore, Vault

    vault = Vault.unlock(MemoryKeyStore(), None)
    return vault.seal(secret, aad), vault.fingerprint(secret)[:12]


def writer(home: Path, prefix: str, count: int, ack_file: Path) -> None:
    """The writer process loop (see the module docstring)."""
    from chit.store import Store

    store = Store.open(Home(home))
    fd = os.open(ack_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.write(fd, b"R ready\n")
    n = 0
    while count == 0 or n < count:
        rid = f"{prefix}-{n:06d}"
        at = T0 + timedelta(seconds=n)
        intent = make_intent(f"rk-{rid}")
        store.intents.begin(intent)
        receipt = make_receipt(rid, status_at=at, server=prefix)
        store.receipts.record_acceptance(
            intent,
            receipt,
            make_obs(rid, source=ObservationSource.CREATE, at=at),
            b"\x01sealed-" + rid.encode(),
            "fp0123456789",
        )
        os.write(fd, f"A {rid}\n".encode())
        done = receipt.model_copy(update={"state": LifecycleState.COMPLETED, "version": 2})
        store.receipts.update(done, [make_obs(rid, status=LifecycleState.COMPLETED)], 1)
        os.write(fd, f"U {rid}\n".encode())
        n += 1
    os.close(fd)
    store.close()


if __name__ == "__main__":  # pragma: no cover - exercised through subprocesses
    if sys.argv[1] == "writer":
        writer(Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), Path(sys.argv[5]))
