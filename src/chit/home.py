"""Where chit keeps its state: one home directory (``CHIT_HOME``), private to the user.

Directories are created 0700 and files 0600, because the home holds the receipt store,
sealed handles and (when opted in) a file key store. A directory chit did not create is
never chmodded: if it is not private (owned by someone else, or open to group/other —
``--home /tmp`` is 1777) chit refuses it with one line instead of "repairing" a
directory that may be shared.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from chit.errors import ChitError, ExitCode

DB_NAME = "chit.db"
CONFIG_NAME = "config.toml"


class Home:
    """Resolved paths under one chit home (immutable, equal when the roots are).

    A plain class rather than a frozen dataclass: ``dataclasses`` imports ``inspect``,
    which was a tenth of a cold ``chit receipts`` once click was gone from it (issue 9).
    """

    __slots__ = ("_root",)

    def __init__(self, root: Path) -> None:
        self._root = root

    @property
    def root(self) -> Path:
        """The home directory."""
        return self._root

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Home):
            return NotImplemented
        return self._root == other._root

    def __hash__(self) -> int:
        return hash(self._root)

    def __repr__(self) -> str:
        return f"Home(root={self._root!r})"

    @property
    def db_path(self) -> Path:
        """The receipt store (SQLite)."""
        return self.root / DB_NAME

    @property
    def config_path(self) -> Path:
        """The server registry and settings (TOML)."""
        return self.root / CONFIG_NAME

    @property
    def key_file(self) -> Path:
        """The opt-in file key store (only used when ``CHIT_KEY_STORE=file``)."""
        return self.root / "data-key.json"

    @property
    def sidecar_db_path(self) -> Path:
        """The sidecar's own store (anchors and intents), separate from the library."""
        return self.root / "sidecar.db"

    @property
    def tasks_db_path(self) -> Path:
        """The demo server's persistent task store."""
        return self.root / "demo-tasks.db"

    def ensure(self) -> Home:
        """Create the home directory (0700) if needed, else check that it is private.

        Raises:
            UnsafeHome: the directory exists but is not private to this user.
        """
        ensure_private_dir(self.root)
        return self

    def check(self) -> Home:
        """For read-only use: check an existing home is private; create nothing.

        Raises:
            UnsafeHome: the directory exists but is not private to this user.
        """
        if self.root.exists():
            check_private_dir(self.root)
        return self


def resolve_home(explicit: str | os.PathLike[str] | None = None) -> Home:
    """Return the chit home: ``explicit``, else ``$CHIT_HOME``, else the user data dir."""
    if explicit is not None:
        return Home(Path(explicit).expanduser().resolve())
    env = os.environ.get("CHIT_HOME")
    if env:
        return Home(Path(env).expanduser().resolve())
    import platformdirs  # only when no home is given: ~30 ms of a cold command

    return Home(Path(platformdirs.user_data_dir("chit", appauthor=False)))


class UnsafeHome(ChitError):
    """The home (or a directory in it) exists but is not private; chit will not use it."""

    exit_code = ExitCode.USAGE


class HomeUnwritable(ChitError):
    """The home (or a directory in it) cannot be created (read-only file system, …)."""

    exit_code = ExitCode.STORE


def check_private_dir(path: Path) -> None:
    """Check that the existing directory ``path`` is this user's alone (never changes it).

    Raises:
        UnsafeHome: not a directory, owned by another user, or open to group/other.
    """
    try:
        st = path.stat()
    except OSError as exc:
        raise UnsafeHome(f"cannot use {path} as chit's home: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeHome(f"cannot use {path} as chit's home: it is not a directory")
    if os.name != "posix":  # no POSIX owner/mode to check (Windows ACLs)
        return
    if st.st_uid != os.geteuid():
        raise UnsafeHome(
            f"cannot use {path} as chit's home: it belongs to uid {st.st_uid}, not to you; "
            "choose a directory of your own (--home or CHIT_HOME)"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        raise UnsafeHome(
            f"cannot use {path} as chit's home: mode {mode:04o} lets others in; it holds "
            f"sealed handles, so make it private (chmod 700 {path}) or choose another home"
        )


def ensure_private_dir(path: Path) -> None:
    """Create ``path`` 0700 (parents as needed); an existing one must already be private.

    Only a directory created here is chmodded (to undo an unusual umask); an existing one
    is checked and never changed.

    Raises:
        UnsafeHome: ``path`` exists but is not private (see :func:`check_private_dir`).
        HomeUnwritable: ``path`` (or a parent) cannot be created.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            check_private_dir(path)
            return
        if stat.S_IMODE(path.stat().st_mode) != 0o700:
            os.chmod(path, 0o700)
    except OSError as exc:
        raise HomeUnwritable(f"cannot create {path}: {exc.strerror or exc}") from exc


def ensure_private_file(path: Path) -> None:
    """Create ``path`` if missing and make sure it is 0600 (files inside chit's home)."""
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.close(fd)
    if stat.S_IMODE(path.stat().st_mode) != 0o600:
        os.chmod(path, 0o600)
