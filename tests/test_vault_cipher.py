"""Vault: sealing, opening, key ids, unlock rules and what reaches the logs."""

from __future__ import annotations

import logging
import re

import pytest

from chit.errors import ExitCode
from chit.vault import (
    DataKeyMissing,
    HandleDecryptError,
    KeyStoreUnavailable,
    MemoryKeyStore,
    Vault,
    aad_for,
    kid_of,
)
from tests.support_vault import AAD_PARTS, HANDLE

AAD = aad_for(*AAD_PARTS)


class AcceptingStore:
    """A store that takes the key and forgets it (like keyring's null backend)."""

    name = "accepting store"
    kind = "memory"

    def __init__(self) -> None:
        self.puts = 0

    def get(self) -> bytes | None:
        return None

    def put(self, key: bytes) -> None:
        self.puts += 1


class RacingStore(MemoryKeyStore):
    """Another process's key lands between our put and our read-back."""

    def __init__(self, winner: bytes) -> None:
        super().__init__()
        self.winner = winner

    def put(self, key: bytes) -> None:
        super().put(self.winner)


@pytest.fixture
def vault() -> Vault:
    return Vault.unlock(MemoryKeyStore(), None)


def test_round_trip_and_fresh_nonce(vault: Vault) -> None:
    blob = vault.seal(HANDLE, AAD)
    assert vault.open(blob, AAD) == HANDLE
    assert vault.seal(HANDLE, AAD) != blob  # a new nonce every time
    assert blob[:1] == b"\x01" and blob[1:9] == vault.kid
    assert len(blob) == 1 + 8 + 12 + len(HANDLE) + 16
    assert HANDLE.encode() not in blob
    assert vault.open(vault.seal("tâche-ünïcode-✓", AAD), AAD) == "tâche-ünïcode-✓"
    assert vault.open(vault.seal("", AAD), AAD) == ""


@pytest.mark.parametrize(
    "other",
    [
        ("receipt-2", "server-a", "principal-x"),  # moved to another row
        ("receipt-1", "server-b", "principal-x"),  # another server
        ("receipt-1", "server-a", "principal-y"),  # another principal
        ("receipt-1", "server-a"),
    ],
)
def test_aad_mismatch_is_refused(vault: Vault, other: tuple[str, ...]) -> None:
    blob = vault.seal(HANDLE, AAD)
    with pytest.raises(HandleDecryptError, match="another row"):
        vault.open(blob, aad_for(*other))


def test_every_flipped_bit_is_refused(vault: Vault) -> None:
    blob = vault.seal(HANDLE, AAD)
    for index in range(len(blob)):
        for bit in (0x01, 0x80):
            tampered = bytearray(blob)
            tampered[index] ^= bit
            with pytest.raises(HandleDecryptError):
                vault.open(bytes(tampered), AAD)


def test_truncated_and_foreign_blobs(vault: Vault) -> None:
    blob = vault.seal(HANDLE, AAD)
    for bad in (b"", blob[:20], blob[:36], b"\x02" + blob[1:]):
        with pytest.raises(HandleDecryptError, match="malformed"):
            vault.open(bad, AAD)
    other = Vault.unlock(MemoryKeyStore(), None)
    with pytest.raises(HandleDecryptError, match=f"data key {vault.kid.hex()}"):
        other.open(blob, AAD)


def test_restart_with_same_store_reads_old_blobs() -> None:
    store = MemoryKeyStore()
    first = Vault.unlock(store, None)
    blob = first.seal(HANDLE, AAD)
    again = Vault.unlock(store, first.kid)
    assert again.kid == first.kid and again.open(blob, AAD) == HANDLE
    assert again.fingerprint(HANDLE) == first.fingerprint(HANDLE)


def test_data_key_missing_when_store_is_empty() -> None:
    store = MemoryKeyStore()
    with pytest.raises(DataKeyMissing, match="0011223344556677") as info:
        Vault.unlock(store, bytes.fromhex("0011223344556677"))
    assert store.get() is None  # never minted a new key
    assert info.value.exit_code == ExitCode.KEY_STORE


def test_data_key_missing_when_key_differs() -> None:
    old = Vault.unlock(MemoryKeyStore(), None)
    store = MemoryKeyStore()
    current = Vault.unlock(store, None)
    with pytest.raises(DataKeyMissing, match=current.kid.hex()) as info:
        Vault.unlock(store, old.kid)
    assert old.kid.hex() in info.value.message


def test_read_back_failure_is_unavailable() -> None:
    store = AcceptingStore()
    with pytest.raises(KeyStoreUnavailable, match="accepted the data key but did not return"):
        Vault.unlock(store, None)
    assert store.puts == 1


def test_malformed_stored_key_is_not_replaced() -> None:
    store = MemoryKeyStore(b"short")
    with pytest.raises(KeyStoreUnavailable, match="malformed data key"):
        Vault.unlock(store, None)
    assert store.get() == b"short"


def test_concurrent_creation_adopts_the_stored_key() -> None:
    winner = Vault.unlock(MemoryKeyStore(), None)
    winner_key = b"\x07" * 32
    store = RacingStore(winner_key)
    vault = Vault.unlock(store, None)
    assert vault.kid == kid_of(winner_key)
    assert Vault.unlock(MemoryKeyStore(winner_key), vault.kid).kid == vault.kid
    assert winner.kid != vault.kid


def test_fingerprint_is_keyed_short_and_stable(vault: Vault) -> None:
    fp = vault.fingerprint(HANDLE)
    assert re.fullmatch(r"[0-9a-f]{12}", fp)
    assert vault.fingerprint(HANDLE) == fp
    assert vault.fingerprint(HANDLE + "x") != fp
    assert Vault.unlock(MemoryKeyStore(), None).fingerprint(HANDLE) != fp
    assert fp not in HANDLE


def test_kid_is_derived_not_the_key() -> None:
    key = bytes(range(32))
    vault = Vault.unlock(MemoryKeyStore(key), None)
    assert vault.kid == kid_of(key) and len(vault.kid) == 8
    assert vault.kid not in key
    assert key.hex() not in repr(vault) and vault.kid.hex() in repr(vault)
    assert not hasattr(vault, "__dict__")  # no stray attribute can carry the key


def test_aad_for_is_canonical_and_unambiguous() -> None:
    assert aad_for("a", "b") == b'["a","b"]'
    assert aad_for("ab", "c") != aad_for("a", "bc")
    assert aad_for("é") == '["é"]'.encode()
    with pytest.raises(TypeError):
        aad_for("a", 1)  # type: ignore[arg-type]


def test_errors_exit_with_key_store_code() -> None:
    for exc in (KeyStoreUnavailable("x"), DataKeyMissing("x"), HandleDecryptError("x")):
        assert exc.exit_code == ExitCode.KEY_STORE
    err = KeyStoreUnavailable("no bus")
    assert err.why == "no bus" and "CHIT_KEY_STORE=file" in err.message
    assert "dbus-run-session" in err.message and "\n" not in err.message


def test_handle_never_reaches_the_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    store = MemoryKeyStore()
    vault = Vault.unlock(store, None)
    blob = vault.seal(HANDLE, AAD)
    assert vault.open(blob, AAD) == HANDLE
    Vault.unlock(store, vault.kid)
    with pytest.raises(HandleDecryptError) as info:
        vault.open(blob, aad_for("elsewhere"))
    text = caplog.text + "".join(str(r.args) for r in caplog.records) + info.value.message
    assert HANDLE not in text
    assert vault.fingerprint(HANDLE) in caplog.text  # what logs carry instead
    assert vault.kid.hex() in caplog.text
    assert len(caplog.records) >= 4


def test_digest_key_is_a_stable_subkey_distinct_from_the_others() -> None:
    import hashlib
    import hmac

    key = bytes(range(32))
    vault = Vault.unlock(MemoryKeyStore(key), None)
    dk = vault.digest_key()
    assert len(dk) == 32 and dk == vault.digest_key()
    assert Vault.unlock(MemoryKeyStore(key), None).digest_key() == dk  # same key → same subkey
    assert Vault.unlock(MemoryKeyStore(), None).digest_key() != dk
    assert dk != key and vault.kid not in dk
    # not the fingerprint subkey: fingerprints are not digests under the same key
    fp_of = hmac.new(dk, HANDLE.encode(), hashlib.sha256).hexdigest()[:12]
    assert vault.fingerprint(HANDLE) != fp_of
    assert dk.hex() not in repr(vault)
