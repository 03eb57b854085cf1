"""What CLI commands share: the resolved home and a store opened on it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from chit.home import Home, resolve_home

if TYPE_CHECKING:
    import click

    from chit.store import Store
    from chit.store.reader import StoreReader


def home_option(ctx: click.Context) -> str | None:
    """The ``--home`` given to ``chit`` (or ``$CHIT_HOME``); None for the default."""
    obj = ctx.find_root().obj or {}
    home: str | None = obj.get("home")
    return home


def home_of(ctx: click.Context) -> Home:
    """The home chosen by ``--home`` / ``$CHIT_HOME`` / the user data dir."""
    return resolve_home(home_option(ctx))


@contextmanager
def open_store(ctx: click.Context, *, readonly: bool = False) -> Iterator[Store]:
    """Open the store under the command's home, and close it afterwards.

    Args:
        ctx: The command's context.
        readonly: Read only: create, migrate or change nothing (``Store.open_readonly``),
            so the command works on a home it cannot write. Otherwise the home and the
            store are created if needed.
    """
    with store_at(home_of(ctx), readonly=readonly) as store:
        yield store


@contextmanager
def store_at(home: Home, *, readonly: bool = False) -> Iterator[Store]:
    """Open the store under ``home`` (see :func:`open_store`), and close it afterwards."""
    from chit.cli import terminal_log
    from chit.store import Store  # sqlite-utils and the models: only when a store is used

    # The click group installs it for every command; the click-free entry
    # (chit.cli.entry) has no logging loaded until a store brings its libraries.
    terminal_log.install()
    store = Store.open_readonly(home) if readonly else Store.open(home.ensure())
    try:
        yield store
    finally:
        store.close()


@contextmanager
def read_store(home: Home) -> Iterator[StoreReader | Store | None]:
    """Open ``home``'s store to read only; ``None`` without one.

    A home with no store yet has no receipts, and answering that needs neither a
    database (not even the empty in-memory one ``Store.open_readonly`` would build) nor
    the modules that open one: a cold ``chit receipts`` on a fresh home imports no
    sqlite-utils and no pydantic model. A current store is read through a plain sqlite3
    connection (``StoreReader``: no sqlite-utils either); any other — older, newer,
    unreadable — is opened as ``store_at(readonly=True)`` opens it, which migrates or
    refuses it in one line (tests/test_cold_start.py checks what is imported).

    Raises:
        UnsafeHome: the home exists and is not private.
        StoreError: (or a subclass) the store cannot be read.
    """
    home = home.check()
    if not home.db_path.exists() and not home.db_path.is_symlink():
        yield None
        return
    _without_pydantic_plugins()
    from chit.store.reader import StoreReader

    reader = StoreReader.open(home.db_path)
    if reader is None:
        with store_at(home, readonly=True) as store:
            yield store
        return
    with reader:
        yield reader


def _without_pydantic_plugins() -> None:
    """Spare a read the search for pydantic plugins (unless the user asked for one).

    pydantic looks for plugins at the first model it builds by reading the entry points
    of every installed distribution: about 50 ms of a cold ``chit show`` (380 ms) on a
    venv of 80 packages, more with more. chit uses no plugin (they observe validation,
    they do not validate), and a read command starts no process that could want one.
    ``PYDANTIC_DISABLE_PLUGINS`` is pydantic's own switch; a value the user set is kept.
    """
    import os

    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
