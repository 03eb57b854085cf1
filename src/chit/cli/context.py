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
def open_store(ctx: click.Context) -> Iterator[Store]:
    """Open (creating if needed) the store under the home, and close it afterwards."""
    home = home_of(ctx).ensure()
    store = Store.open(home)
    try:
        yield store
    finally:
        store.close()
