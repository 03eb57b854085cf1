"""The opt-in key file: private, atomic, optionally passphrase-wrapped, never implicit."""

from __future__ import annotations

import base64
import json
import os
import stat
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from chit.home import Home
from chit.vault import (
    DataKeyMissing,
    FileKeyStore,
    KeyStoreUnavailable,
    Vault,
    aad_for,
    select_key_store,
)
from tests.support_vault import AAD_PARTS, HANDLE

AAD = aad_for(*AAD_PARTS)
FILE = {"CHIT_KEY_STORE": "file"}
WRAPPED = {"CHIT_KEY_STORE": "file", "CHIT_KEY_PASSPHRASE": "correct horse"}

pytestmark = pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home(tmp_path / "chit")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_created_0600_in_a_0700_home_and_restart_gives_same_kid(home: Home) -> None:
    store = select_key_store(home, FILE)
    assert isinstance(store, FileKeyStore) and store.kind == "file"
    assert not home.root.exists()  # selecting creates nothing
    old_umask = os.umask(0o000)  # a careless umask must not widen the file
    try:
        vault = Vault.unlock(store, None)
    finally:
        os.umask(old_umask)
    assert mode(home.key_file) == 0o600 and mode(home.root) == 0o700
    assert sorted(p.name for p in home.root.iterdir()) == [home.key_file.name]  # no temp left
    blob = vault.seal(HANDLE, AAD)
    again = Vault.unlock(select_key_store(home, FILE), vault.kid)
    assert again.kid == vault.kid and again.open(blob, AAD) == HANDLE
    doc = json.loads(home.key_file.read_text())
    assert doc["wrap"] == "none" and len(base64.b64decode(doc["key"])) == 32


@pytest.mark.parametrize("bad_mode", [0o644, 0o640, 0o604, 0o660])
def test_group_or_world_access_is_refused(home: Home, bad_mode: int) -> None:
    Vault.unlock(select_key_store(home, FILE), None)
    os.chmod(home.key_file, bad_mode)
    with pytest.raises(KeyStoreUnavailable) as info:
        Vault.unlock(select_key_store(home, FILE), None)
    assert f"mode {bad_mode:04o}" in info.value.why
    assert f"chmod 600 {home.key_file}" in info.value.fix
    assert mode(home.key_file) == bad_mode  # reported, not silently "fixed"


def test_symlinked_key_file_is_refused(home: Home, tmp_path: Path) -> None:
    real = tmp_path / "elsewhere.json"
    FileKeyStore(real).put(b"k" * 32)
    home.root.mkdir(mode=0o700)
    home.key_file.symlink_to(real)
    with pytest.raises(KeyStoreUnavailable, match="symbolic link"):
        select_key_store(home, FILE).get()


def test_passphrase_wrap_round_trip(home: Home) -> None:
    vault = Vault.unlock(select_key_store(home, WRAPPED), None)
    doc = json.loads(home.key_file.read_text())
    assert doc["wrap"] == "scrypt-aesgcm" and doc["kdf"]["n"] == 2**15
    assert len(base64.b64decode(doc["key"])) == 32 + 16  # ciphertext + tag, not the key
    store = select_key_store(home, WRAPPED)
    assert "passphrase-wrapped" in store.name
    assert Vault.unlock(store, vault.kid).kid == vault.kid


def test_wrong_passphrase(home: Home) -> None:
    vault = Vault.unlock(select_key_store(home, WRAPPED), None)
    with pytest.raises(KeyStoreUnavailable, match="does not open the key file") as info:
        Vault.unlock(select_key_store(home, {**WRAPPED, "CHIT_KEY_PASSPHRASE": "wrong"}), vault.kid)
    assert "CHIT_KEY_PASSPHRASE" in info.value.fix
    assert "correct horse" not in info.value.message


@pytest.mark.parametrize("missing", [{}, {"CHIT_KEY_PASSPHRASE": ""}])
def test_missing_passphrase(home: Home, missing: dict[str, str]) -> None:
    Vault.unlock(select_key_store(home, WRAPPED), None)
    before = home.key_file.read_bytes()
    with pytest.raises(KeyStoreUnavailable, match="CHIT_KEY_PASSPHRASE is not set"):
        Vault.unlock(select_key_store(home, {**FILE, **missing}), None)
    assert home.key_file.read_bytes() == before  # never replaced by a new key


def test_deleted_key_file_is_data_key_missing(home: Home) -> None:
    vault = Vault.unlock(select_key_store(home, FILE), None)
    home.key_file.unlink()
    with pytest.raises(DataKeyMissing, match=vault.kid.hex()):
        Vault.unlock(select_key_store(home, FILE), vault.kid)
    assert not home.key_file.exists()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"not json", "not JSON"),
        (b'{"format": "other"}', "not a chit data key file"),
        (b'{"format": "chit-data-key", "version": 9, "wrap": "none"}', "unsupported version"),
        (b'{"format": "chit-data-key", "version": 1, "wrap": "rot13"}', "unknown wrap"),
        (b'{"format": "chit-data-key", "version": 1, "wrap": "none", "key": "%%"}', "base64"),
    ],
)
def test_corrupt_key_file(home: Home, content: bytes, reason: str) -> None:
    home.root.mkdir(mode=0o700)
    fd = os.open(home.key_file, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, content)
    os.close(fd)
    with pytest.raises(KeyStoreUnavailable, match=reason):
        Vault.unlock(select_key_store(home, FILE), None)
    assert home.key_file.read_bytes() == content


def test_absurd_scrypt_cost_is_refused(home: Home) -> None:
    Vault.unlock(select_key_store(home, WRAPPED), None)
    doc = json.loads(home.key_file.read_text())
    doc["kdf"]["n"] = 2**30
    home.key_file.write_text(json.dumps(doc))
    with pytest.raises(KeyStoreUnavailable, match="kdf parameters are invalid"):
        select_key_store(home, WRAPPED).get()


def test_unwritable_home_is_unavailable(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")  # works as root too, unlike a read-only directory
    store = FileKeyStore(blocker / "data-key.json")
    with pytest.raises(KeyStoreUnavailable, match="cannot be read"):
        Vault.unlock(store, None)
    with pytest.raises(KeyStoreUnavailable, match="cannot write the key file") as info:
        store.put(b"k" * 32)
    assert "CHIT_HOME" in info.value.fix


def test_file_store_only_when_asked(home: Home) -> None:
    for environ in ({"CHIT_KEY_STORE": "memory"}, {"CHIT_KEY_STORE": "keyring"}, {}):
        try:
            store = select_key_store(home, environ)
        except KeyStoreUnavailable:
            continue
        assert store.kind != "file"
    assert not home.key_file.exists()


class LateFileKeyStore(FileKeyStore):
    """Its first read misses a key file another process creates right after."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.reads = 0

    def get(self) -> bytes | None:
        self.reads += 1
        return None if self.reads == 1 else super().get()


def test_first_key_race_keeps_the_winner(home: Home) -> None:
    late = LateFileKeyStore(home.key_file)
    winner = Vault.unlock(select_key_store(home, FILE), None)  # lands between late's get/put
    before = home.key_file.read_bytes()
    loser = Vault.unlock(late, None)
    assert loser.kid == winner.kid and late.reads == 2
    assert home.key_file.read_bytes() == before  # the winner's file was not overwritten
    assert sorted(p.name for p in home.root.iterdir()) == [home.key_file.name]


def test_concurrent_first_start_agrees_on_one_key(home: Home) -> None:
    barrier = threading.Barrier(6)

    def start() -> bytes:
        store = FileKeyStore(home.key_file)
        barrier.wait()
        return Vault.unlock(store, None).kid

    with ThreadPoolExecutor(6) as pool:
        kids = set(pool.map(lambda _: start(), range(6)))
    assert len(kids) == 1
