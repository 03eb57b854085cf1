"""The vault's three user-facing failures and the fix text they carry.

All three exit with ``ExitCode.KEY_STORE``. Messages name what is missing and how to fix
it; they never contain a key or a handle (only key ids, which are public).
"""

from __future__ import annotations

from chit.errors import ChitError, ExitCode

#: The fixes for "no trusted key store", in the order a user should try them. One line,
#: because the CLI prints a ChitError as a single stderr line.
KEYRING_FIX = (
    "start a Secret Service (log in to a desktop session with GNOME Keyring or KWallet); "
    "headless or CI: apt install gnome-keyring dbus, then run chit inside "
    'dbus-run-session -- sh -c \'printf %s "$PASSWORD" | gnome-keyring-daemon --unlock '
    "--components=secrets >/dev/null; chit ...'; "
    "or opt in to a key file: CHIT_KEY_STORE=file (add CHIT_KEY_PASSPHRASE=... to wrap it "
    "with a passphrase)"
)


class KeyStoreUnavailable(ChitError):
    """No acceptable key store: the keyring is missing, untrusted, locked or failing.

    Attributes:
        why: What is wrong, e.g. the selected keyring backend and the error it raised.
        fix: How to fix it (shown after ``why``).
        backend: The keyring backend or store involved, when known (for ``chit doctor``).
    """

    exit_code = ExitCode.KEY_STORE

    def __init__(self, why: str, *, fix: str = KEYRING_FIX, backend: str | None = None) -> None:
        super().__init__(f"key store unavailable: {why}. To fix: {fix}")
        self.why = why
        self.fix = fix
        self.backend = backend


class DataKeyMissing(ChitError):
    """Sealed handles exist (their key id is recorded) but that key is gone or different.

    chit never mints a new key in this case: the old handles would become unreadable
    without anyone noticing.
    """

    exit_code = ExitCode.KEY_STORE


class HandleDecryptError(ChitError):
    """A sealed handle cannot be opened: tampered, moved to another row, or another key."""

    exit_code = ExitCode.KEY_STORE
