"""Choosing the key store, and the read-only report for ``chit doctor``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import keyring
import keyring.core
import pytest
from keyring.backends import fail

from chit.home import Home
from chit.vault import (
    KeyStoreUnavailable,
    MemoryKeyStore,
    Vault,
    diagnose_key_store,
    select_key_store,
)
from tests.support_vault import MemoryKeyring, qualname

KEYS = {
    "kind",
    "backend",
    "usable",
    "why",
    "fix",
    "file",
    "key_present",
    "kid",
    "expected_kid",
    "sealed",
}


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home(tmp_path / "chit")


@pytest.fixture
def failing_keyring() -> Iterator[None]:
    saved = keyring.core._keyring_backend
    keyring.set_keyring(fail.Keyring())
    yield
    keyring.core._keyring_backend = saved


def test_memory_store_says_keys_vanish(home: Home) -> None:
    store = select_key_store(home, {"CHIT_KEY_STORE": " Memory "})
    assert isinstance(store, MemoryKeyStore) and store.kind == "memory"
    assert "vanish when this process exits" in store.name
    Vault.unlock(store, None)
    assert store.get() is not None
    assert not home.root.exists()  # nothing on disk, not even the home


def test_invalid_choice(home: Home) -> None:
    with pytest.raises(KeyStoreUnavailable, match="'plaintext' is not one of") as info:
        select_key_store(home, {"CHIT_KEY_STORE": "plaintext"})
    assert "keyring (the default), file or memory" in info.value.fix


def test_diagnose_unavailable_keyring_creates_nothing(home: Home, failing_keyring: None) -> None:
    report = diagnose_key_store(home, {})
    assert set(report) == KEYS
    assert report["kind"] == "keyring" and report["usable"] is False
    assert report["backend"] == "keyring.backends.fail.Keyring"
    assert "no OS key store" in report["why"] and "CHIT_KEY_STORE=file" in report["fix"]
    assert report["file"] is None
    assert not home.root.exists()


def test_diagnose_file_store_before_and_after_first_use(home: Home) -> None:
    env = {"CHIT_KEY_STORE": "file"}
    report = diagnose_key_store(home, env)
    assert report["usable"] is True and report["key_present"] is False
    assert report["file"] == str(home.key_file) and "created on first use" in report["why"]
    assert not home.root.exists()  # doctor never creates the key file (or the home)
    vault = Vault.unlock(select_key_store(home, env), None)
    report = diagnose_key_store(home, env)
    assert report["key_present"] is True and report["kid"] == vault.kid.hex()
    assert report["fix"] is None


def test_diagnose_reports_file_problems(home: Home) -> None:
    Vault.unlock(select_key_store(home, {"CHIT_KEY_STORE": "file"}), None)
    home.key_file.chmod(0o644)
    report = diagnose_key_store(home, {"CHIT_KEY_STORE": "file"})
    assert report["usable"] is False and report["backend"] == "file"
    assert "chmod 600" in report["fix"]


def test_diagnose_trusted_keyring(home: Home) -> None:
    saved = keyring.core._keyring_backend
    keyring.set_keyring(MemoryKeyring())
    try:
        env = {"CHIT_TRUSTED_KEYRING_BACKENDS": qualname(MemoryKeyring)}
        report = diagnose_key_store(home, env)
        assert report["usable"] is True and report["backend"] == qualname(MemoryKeyring)
        assert report["key_present"] is False
        assert keyring.get_keyring().get_password("chit", "data-key-v1") is None
    finally:
        keyring.core._keyring_backend = saved


def test_diagnose_never_raises(home: Home) -> None:
    report = diagnose_key_store(home, {"CHIT_KEY_STORE": "bogus"})
    assert report["usable"] is False and report["kind"] == "bogus"
    assert "not one of" in report["why"]
    memory = diagnose_key_store(home, {"CHIT_KEY_STORE": "memory"})
    assert memory["usable"] is True and "vanish" in memory["why"]
