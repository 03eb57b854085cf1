"""Helpers for the vault tests: fake keyring backends and a subprocess runner.

The fake backends are real ``keyring.backend.KeyringBackend`` subclasses, so they go
through exactly the code path a third-party backend would (``keyring.set_keyring`` in
process, ``PYTHON_KEYRING_BACKEND`` in a subprocess).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from keyring.backend import KeyringBackend

ROOT = Path(__file__).resolve().parents[1]
HANDLE = "task-7f3a9c1e-SECRET-HANDLE-0042"
AAD_PARTS = ("receipt-1", "server-a", "principal-x")


def qualname(cls: type) -> str:
    """Return ``module.QualName`` as the vault's allowlist spells it."""
    return f"{cls.__module__}.{cls.__qualname__}"


class MemoryKeyring(KeyringBackend):
    """A dict-backed keyring, trusted only when named in CHIT_TRUSTED_KEYRING_BACKENDS."""

    priority = 1

    def __init__(self) -> None:
        # keyring leaves KeyringBackend.__init__ unannotated, and untyped_calls_exclude
        # does not reach a super() call.
        super().__init__()  # type: ignore[no-untyped-call]
        self.items: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.items.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.items[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.items.pop((service, username), None)


class FakePlaintextKeyring(KeyringBackend):
    """Like keyrings.alt's PlaintextKeyring: secrets in a plain file under $HOME."""

    priority = 0.5

    def __init__(self) -> None:
        # A typed constructor, so building one is a typed call (see MemoryKeyring).
        super().__init__()  # type: ignore[no-untyped-call]

    @property
    def path(self) -> Path:
        return Path(os.environ["HOME"]) / "fake_plaintext_keyring.json"

    def _load(self) -> dict[str, str]:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(f"{service}/{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        data = self._load()
        data[f"{service}/{username}"] = password
        self.path.write_text(json.dumps(data))

    def delete_password(self, service: str, username: str) -> None:
        raise NotImplementedError


class LoudPlaintextKeyring(FakePlaintextKeyring):
    """The plaintext fake, but ranked above MemoryKeyring (top of a chainer)."""

    priority = 5


class BrokenKeyring(MemoryKeyring):
    """A trusted-looking backend whose every call fails, like a locked collection."""

    def get_password(self, service: str, username: str) -> str | None:
        raise RuntimeError("collection is locked (simulated)")

    def set_password(self, service: str, username: str, password: str) -> None:
        raise RuntimeError("collection is locked (simulated)")


# keyring registers every KeyringBackend subclass for its own automatic selection. Take
# the fakes out, so importing this module cannot change what other tests' keyring picks;
# they stay usable explicitly (keyring.set_keyring, PYTHON_KEYRING_BACKEND).
for _fake in (MemoryKeyring, FakePlaintextKeyring, LoudPlaintextKeyring, BrokenKeyring):
    KeyringBackend._classes.discard(_fake)


def clean_env(home: Path, **overrides: str) -> dict[str, str]:
    """An environment with no session bus, keyring config or chit settings leaking in."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CHIT_", "XDG_", "DBUS_", "PYTHON_KEYRING"))
    }
    env["HOME"] = str(home)
    # tests.support_vault when tests/ is a package, support_vault when it is not.
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests")])
    env.update(overrides)
    return env


def run_cycle(
    home: Path, chit_home: Path, *args: str, prefix: tuple[str, ...] = (), **env: str
) -> dict[str, Any]:
    """Run ``cycle`` in a fresh interpreter (optionally under ``prefix``) and parse it."""
    cmd = [*prefix, sys.executable, "-c", CYCLE, str(chit_home), *args]
    proc = subprocess.run(
        cmd,
        env=clean_env(home, **env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no result (rc={proc.returncode}): {proc.stdout}\n{proc.stderr}"
    result: dict[str, Any] = json.loads(lines[-1])
    result["stderr"] = proc.stderr
    return result


# The subprocess body, as source: importing this module would register the fake backends
# above with keyring (it discovers every imported KeyringBackend subclass) and change what
# keyring's own default selection sees.
# argv: chit home, expected kid hex (or "-"), optional blob hex to open first.
CYCLE = f"""
import json, sys
from pathlib import Path
from chit.errors import ChitError
from chit.home import Home
from chit.vault import Vault, aad_for, select_key_store

home = Home(Path(sys.argv[1]))
kid = None if sys.argv[2] == "-" else bytes.fromhex(sys.argv[2])
out = {{}}
try:
    store = select_key_store(home)
    out.update(store=store.name, backend=getattr(store, "backend", store.kind))
    vault = Vault.unlock(store, kid)
    out["kid"] = vault.kid.hex()
    aad = aad_for(*{AAD_PARTS!r})
    if len(sys.argv) > 3:
        out["opened"] = vault.open(bytes.fromhex(sys.argv[3]), aad)
    out["blob"] = vault.seal({HANDLE!r}, aad).hex()
    out["ok"] = True
except ChitError as exc:
    out.update(
        ok=False,
        error=type(exc).__name__,
        message=exc.message,
        why=getattr(exc, "why", None),
        backend=getattr(exc, "backend", None) or out.get("backend"),
    )
print(json.dumps(out), flush=True)
"""
