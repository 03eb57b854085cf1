"""The real thing: a Secret Service (gnome-keyring) on a private D-Bus session.

Each step runs ``dbus-run-session`` with a fresh bus and a gnome-keyring-daemon unlocked
from a password on stdin (the headless recipe in docs/reliability.md). The login keyring
lives in ``$HOME/.local/share/keyrings``, so a second session with the same HOME is a
real restart: new bus, new daemon, new Python process.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support_vault import HANDLE, run_cycle

pytestmark = pytest.mark.keyring

SECRET_SERVICE = "keyring.backends.SecretService.Keyring"
PASSWORD = "ci-pass"
APT = "apt-get install -y --no-install-recommends gnome-keyring dbus"


def session(password: str) -> tuple[str, ...]:
    """A command prefix: new session bus, keyring daemon unlocked, then exec the rest."""
    missing = [b for b in ("dbus-run-session", "gnome-keyring-daemon") if not shutil.which(b)]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}: {APT}")
    script = (
        'printf %s "$1" | gnome-keyring-daemon --unlock --components=secrets '
        '>/dev/null 2>&1; shift; exec "$@"'
    )
    return ("dbus-run-session", "--", "sh", "-c", script, "sh", password)


def step(home: Path, *args: str, password: str = PASSWORD, **env: str) -> dict[str, Any]:
    env.setdefault("CHIT_KEYRING_SERVICE", "chit-test")
    return run_cycle(home, home / "chit", *args, prefix=session(password), **env)


def test_secret_service_persists_the_key_across_sessions(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    first = step(home, "-")
    assert first["ok"] is True, first
    assert first["backend"] == SECRET_SERVICE
    assert (home / ".local" / "share" / "keyrings").is_dir()

    # Restart: another bus, daemon and process; the key must come back from disk.
    second = step(home, first["kid"], first["blob"])
    assert second["ok"] is True, second
    assert second["kid"] == first["kid"] and second["opened"] == HANDLE

    # Another service name is another key: with the recorded kid that is DataKeyMissing.
    other = step(home, first["kid"], CHIT_KEYRING_SERVICE="chit-test-other")
    assert other["ok"] is False and other["error"] == "DataKeyMissing", other
    assert first["kid"] in other["message"]

    # A wrong unlock password leaves the collection locked: refused with the reason.
    locked = step(home, first["kid"], password="wrong-pass")
    assert locked["ok"] is False and locked["error"] == "KeyStoreUnavailable", locked
    assert locked["backend"] == SECRET_SERVICE and "Locked" in locked["why"]

    for result in (first, second, other, locked):
        assert HANDLE not in result["stderr"]
    assert not (home / "chit").exists()  # the keyring path never writes a key file
