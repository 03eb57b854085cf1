"""Where chit keeps its state: one home directory (``CHIT_HOME``), private to the user.

Directories are created 0700 and files 0600, because the home holds the receipt store,
sealed handles and (when opted in) a file key store.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import platformdirs

DB_NAME = "chit.db"
CONFIG_NAME = "config.toml"


@dataclass(frozen=True)
class Home:
    """Resolved paths under one chit home."""

    root: Path

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
        """Create the home directory (0700) if needed and tighten its mode."""
        ensure_private_dir(self.root)
        return self


def resolve_home(explicit: str | os.PathLike[str] | None = None) -> Home:
    """Return the chit home: ``explicit``, else ``$CHIT_HOME``, else the user data dir."""
    if explicit is not None:
        return Home(Path(explicit).expanduser().resolve())
    env = os.environ.get("CHIT_HOME")
    if env:
        return Home(Path(env).expanduser().resolve())
    return Home(Path(platformdirs.user_data_dir("chit", appauthor=False)))


def ensure_private_dir(path: Path) -> None:
    """Create ``path`` (and parents) and make sure it is 0700."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode != 0o700:
        os.chmod(path, 0o700)


def ensure_private_file(path: Path) -> None:
    """Create ``path`` if missing and make sure it is 0600."""
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.close(fd)
    if stat.S_IMODE(path.stat().st_mode) != 0o600:
        os.chmod(path, 0o600)
