"""What CLI commands share: the resolved home and a store opened on it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from chit.home import Home, resolve_home

if TYPE_CHECKING:
    from chit.store import Store


def home_of(ctx: click.Context) -> Home:
    """The home chosen by ``--home`` / ``$CHIT_HOME`` / the user data dir."""
    obj = ctx.find_root().obj or {}
    return resolve_home(obj.get("home"))


@contextmanager
def open_store(ctx: click.Context, *, readonly: bool = False) -> Iterator[Store]:
    """Open the store under the home, and close it afterwards.

    Args:
        ctx: The command's context.
        readonly: Read only: create, migrate or change nothing (``Store.open_readonly``),
            so the command works on a home it cannot write. Otherwise the home and the
            store are created if needed.
    """
    from chit.store import Store  # sqlite-utils and the models: only when a store is used

    home = home_of(ctx)
    store = Store.open_readonly(home) if readonly else Store.open(home.ensure())
    try:
        yield store
    finally:
        store.close()


@contextmanager
def read_store(ctx: click.Context) -> Iterator[Store | None]:
    """Open the store to read only (``open_store(readonly=True)``); ``None`` without one.

    A home with no store yet has no receipts, and answering that needs neither a
    database (not even the empty in-memory one ``Store.open_readonly`` would build) nor
    the modules that open one: a cold ``chit receipts`` on a fresh home imports no
    sqlite-utils and no pydantic model (tests/test_cold_start.py).

    Raises:
        UnsafeHome: the home exists and is not private.
    """
    home = home_of(ctx).check()
    if not home.db_path.exists() and not home.db_path.is_symlink():
        yield None
        return
    with open_store(ctx, readonly=True) as store:
        yield store
