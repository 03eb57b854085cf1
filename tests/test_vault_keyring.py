"""The keyring key store accepts only trusted backends, and never leaves a key elsewhere.

In-process cases use ``keyring.set_keyring``; the ``PYTHON_KEYRING_BACKEND`` cases run
in a fresh interpreter with no session bus, exactly as a user's shell would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import keyring
import keyring.backend
import keyring.core
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import chainer, fail, null

from chit.home import Home
from chit.vault import (
    KeyringKeyStore,
    KeyStoreUnavailable,
    Vault,
    aad_for,
    select_key_store,
)
from tests.support_vault import (
    AAD_PARTS,
    HANDLE,
    BrokenKeyring,
    FakePlaintextKeyring,
    LoudPlaintextKeyring,
    MemoryKeyring,
    qualname,
    run_cycle,
)

SERVICE = "chit-test-vault"
UseKeyring = Callable[[KeyringBackend], None]


@pytest.fixture
def use_keyring() -> Iterator[UseKeyring]:
    saved = keyring.core._keyring_backend
    yield keyring.set_keyring
    keyring.core._keyring_backend = saved


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    monkeypatch.setenv("HOME", str(tmp_path))  # the plaintext fake writes under $HOME
    return Home(tmp_path / "chit")


def env(*trusted: type) -> dict[str, str]:
    return {
        "CHIT_KEYRING_SERVICE": SERVICE,
        "CHIT_TRUSTED_KEYRING_BACKENDS": ",".join(qualname(cls) for cls in trusted),
    }


def assert_nothing_written(home: Home) -> None:
    assert not home.key_file.exists()
    assert not home.root.exists() or not any(home.root.iterdir())
    assert not (Path.home() / "fake_plaintext_keyring.json").exists()


def test_trusted_memory_keyring_end_to_end(home: Home, use_keyring: UseKeyring) -> None:
    backend = MemoryKeyring()
    use_keyring(backend)
    store = select_key_store(home, env(MemoryKeyring))
    assert isinstance(store, KeyringKeyStore) and store.kind == "keyring"
    assert store.backend == qualname(MemoryKeyring) and SERVICE in store.name
    vault = Vault.unlock(store, None)
    blob = vault.seal(HANDLE, aad_for(*AAD_PARTS))
    assert set(backend.items) == {(SERVICE, "data-key-v1")}
    again = Vault.unlock(select_key_store(home, env(MemoryKeyring)), vault.kid)
    assert again.open(blob, aad_for(*AAD_PARTS)) == HANDLE
    assert_nothing_written(home)


def test_service_name_separates_keys(home: Home, use_keyring: UseKeyring) -> None:
    use_keyring(MemoryKeyring())
    first = Vault.unlock(select_key_store(home, env(MemoryKeyring)), None)
    other_env = {**env(MemoryKeyring), "CHIT_KEYRING_SERVICE": "chit-other"}
    second = Vault.unlock(select_key_store(home, other_env), None)
    assert first.kid != second.kid
    default = select_key_store(home, {"CHIT_TRUSTED_KEYRING_BACKENDS": qualname(MemoryKeyring)})
    assert isinstance(default, KeyringKeyStore) and default.service == "chit"


@pytest.mark.parametrize(
    ("backend", "reason"),
    [
        (MemoryKeyring(), "not a trusted OS key store"),  # good backend, but not allowlisted
        (FakePlaintextKeyring(), "FakePlaintextKeyring"),
        (null.Keyring(), "keyring.backends.null.Keyring"),
        (fail.Keyring(), "no OS key store is reachable"),
    ],
    ids=["untrusted-memory", "plaintext", "null", "fail"],
)
def test_untrusted_backends_are_refused(
    home: Home, use_keyring: UseKeyring, backend: KeyringBackend, reason: str
) -> None:
    use_keyring(backend)
    with pytest.raises(KeyStoreUnavailable, match=reason) as info:
        select_key_store(home, env())
    assert info.value.backend == qualname(type(backend))
    assert "CHIT_KEY_STORE=file" in info.value.message  # the fixes are named
    assert_nothing_written(home)


def test_fail_backend_names_the_missing_bus(
    home: Home, use_keyring: UseKeyring, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    monkeypatch.setattr("sys.platform", "linux")
    use_keyring(fail.Keyring())
    with pytest.raises(KeyStoreUnavailable, match="DBUS_SESSION_BUS_ADDRESS is unset"):
        select_key_store(home, env())


def test_null_backend_even_if_trusted_fails_read_back(home: Home, use_keyring: UseKeyring) -> None:
    use_keyring(null.Keyring())
    store = select_key_store(home, env(null.Keyring))
    with pytest.raises(KeyStoreUnavailable, match="did not return it"):
        Vault.unlock(store, None)
    assert_nothing_written(home)


def test_backend_errors_become_unavailable(home: Home, use_keyring: UseKeyring) -> None:
    use_keyring(BrokenKeyring())
    store = select_key_store(home, env(BrokenKeyring))
    with pytest.raises(KeyStoreUnavailable, match="RuntimeError: collection is locked"):
        Vault.unlock(store, None)
    with pytest.raises(KeyStoreUnavailable, match="collection is locked"):
        store.put(b"k" * 32)
    assert_nothing_written(home)


def test_malformed_keyring_item(home: Home, use_keyring: UseKeyring) -> None:
    backend = MemoryKeyring()
    backend.set_password(SERVICE, "data-key-v1", "not base64 !!")
    use_keyring(backend)
    with pytest.raises(KeyStoreUnavailable, match="is not a chit data key"):
        Vault.unlock(select_key_store(home, env(MemoryKeyring)), None)
    assert backend.get_password(SERVICE, "data-key-v1") == "not base64 !!"


def test_chainer_with_untrusted_top_is_refused(
    home: Home, use_keyring: UseKeyring, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        keyring.backend, "get_all_keyring", lambda: [MemoryKeyring(), LoudPlaintextKeyring()]
    )
    use_keyring(chainer.ChainerBackend())
    with pytest.raises(KeyStoreUnavailable, match=r"top of keyring's chainer") as info:
        select_key_store(home, env(MemoryKeyring))
    assert info.value.backend == qualname(LoudPlaintextKeyring)
    assert_nothing_written(home)


def test_chainer_uses_its_top_backend_only(
    home: Home, use_keyring: UseKeyring, monkeypatch: pytest.MonkeyPatch
) -> None:
    top, plain = MemoryKeyring(), FakePlaintextKeyring()
    plain.set_password(SERVICE, "data-key-v1", "QUFBQQ==")  # a planted plaintext "key"
    monkeypatch.setattr(keyring.backend, "get_all_keyring", lambda: [plain, top])
    use_keyring(chainer.ChainerBackend())
    store = select_key_store(home, env(MemoryKeyring))
    assert isinstance(store, KeyringKeyStore) and store.backend == qualname(MemoryKeyring)
    assert store.get() is None  # the chainer would have fallen through to the plaintext one
    vault = Vault.unlock(store, None)
    assert top.items and Vault.unlock(store, vault.kid).kid == vault.kid
    assert plain.get_password(SERVICE, "data-key-v1") == "QUFBQQ=="


# --- PYTHON_KEYRING_BACKEND in a fresh interpreter, no session bus -----------------------


@pytest.mark.parametrize(
    ("backend", "reason"),
    [
        ("keyring.backends.fail.Keyring", "no OS key store is reachable"),
        ("keyring.backends.null.Keyring", "keyring.backends.null.Keyring"),
        (qualname(FakePlaintextKeyring), "FakePlaintextKeyring"),
        ("keyring.backends.SecretService.Keyring", "could not load a backend"),
        ("no.such.Backend", "could not load a backend"),
    ],
    ids=["fail", "null", "plaintext", "secretservice-without-bus", "missing"],
)
def test_subprocess_backend_refused(tmp_path: Path, backend: str, reason: str) -> None:
    chit_home = tmp_path / "chit"
    result = run_cycle(
        tmp_path, chit_home, "-", PYTHON_KEYRING_BACKEND=backend, CHIT_KEYRING_SERVICE=SERVICE
    )
    assert result["ok"] is False, result
    assert result["error"] == "KeyStoreUnavailable"
    assert reason in result["why"]
    assert "CHIT_KEY_STORE=file" in result["message"]
    assert not chit_home.exists()  # no key file, not even the home directory
    assert not (tmp_path / "fake_plaintext_keyring.json").exists()
    assert not (tmp_path / ".local" / "share" / "python_keyring").exists()


def test_subprocess_default_without_bus_is_refused(tmp_path: Path) -> None:
    result = run_cycle(tmp_path, tmp_path / "chit", "-")
    assert result["ok"] is False and result["backend"] == "keyring.backends.fail.Keyring"
    assert "DBUS_SESSION_BUS_ADDRESS is unset" in result["why"]
    assert not (tmp_path / "chit").exists()


def test_subprocess_trusted_memory_backend_works(tmp_path: Path) -> None:
    result = run_cycle(
        tmp_path,
        tmp_path / "chit",
        "-",
        PYTHON_KEYRING_BACKEND=qualname(MemoryKeyring),
        CHIT_TRUSTED_KEYRING_BACKENDS=f"some.Other, {qualname(MemoryKeyring)}",
    )
    assert result["ok"] is True, result
    assert result["backend"] == qualname(MemoryKeyring)
    assert HANDLE not in result["stderr"]
    assert not (tmp_path / "chit").exists()
