"""What CLI commands share: the resolved home and a store opened on it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click

from chit.home import Home, resolve_home
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
    home = home_of(ctx)
    store = Store.open_readonly(home) if readonly else Store.open(home.ensure())
    try:
        yield store
    finally:
        store.close()
