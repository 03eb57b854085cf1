"""The Supervisor hosts the sidecar executor (seed 000: "the executor runs in the app").

The sidecar (``chit sidecar``) owns intent lifetime in ``sidecar.db``; the library owns
user records. Whichever long-lived process holds the Supervisor — ``chit daemon``, the
TUI, or the sidecar's own receipt gateway — applies the sidecar's intents to the library
through ``store.work`` (the repository the TUI writes with). The sidecar process keeps
its standalone executor for setups without a Supervisor; the intent leases make two
executors on one queue safe.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import anyio

from chit.home import Home
from chit.sidecar.executor import Executor
from chit.sidecar.owner import StaticOwnerResolver, owner_of
from chit.vault import Vault

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
    return home.sidecar_db_path.exists()


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
    return Executor(home, StaticOwnerResolver(owner_of(vault)))


def executor_hook(
    home: Home, vault: Vault, environ: Mapping[str, str] | None = None
) -> Callable[[anyio.Event], Coroutine[Any, Any, None]] | None:
    """``Supervisor.executor``: the executor's ``run(stop)``, or None (no sidecar here)."""
    executor = build_executor(home, vault, environ)
    return None if executor is None else executor.run
