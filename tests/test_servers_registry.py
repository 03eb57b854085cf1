"""The server registry: round trip, foreign tables, atomic 0600 writes, sealed secrets."""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from chit.errors import Conflict, NotFound, UsageError
from chit.servers import ConfigError, Registry, ServerSpec, is_secret_env, toml_io
from chit.vault import HandleDecryptError, KeyStoreUnavailable, MemoryKeyStore, Vault

SECRET = "ghp_VERYsecretTOKEN42"


@pytest.fixture
def vault() -> Vault:
    return Vault.unlock(MemoryKeyStore(), None)


@pytest.fixture
def registry(tmp_path: Path, vault: Vault) -> Registry:
    return Registry(tmp_path / "home" / "config.toml", lambda: vault)


def _unavailable() -> Any:
    raise KeyStoreUnavailable("no keyring in this test")


def stdio(name: str = "fs", **kw: Any) -> ServerSpec:
    return ServerSpec(name=name, transport="stdio", command="npx", args=("-y", "pkg"), **kw)


def http(name: str = "remote", **kw: Any) -> ServerSpec:
    return ServerSpec(name=name, transport="http", url="https://mcp.example.com/mcp", **kw)


def test_round_trip(registry: Registry) -> None:
    registry.add(stdio(env={"LOG_LEVEL": "debug"}, cwd="/srv"))
    registry.add(http())
    servers = registry.servers()
    assert list(servers) == ["fs", "remote"]
    assert servers["fs"].args == ("-y", "pkg")
    assert servers["fs"].env == {"LOG_LEVEL": "debug"}
    assert servers["fs"].cwd == "/srv"
    assert servers["remote"].url == "https://mcp.example.com/mcp"
    # A second registry over the same file sees the same thing.
    assert Registry(registry.path, _unavailable).servers() == servers


def test_unknown_tables_preserved(registry: Registry) -> None:
    registry.path.parent.mkdir(parents=True, mode=0o700)
    registry.path.write_text(
        'version = 1\n[settings]\ntheme = "dark"\npoll = { floor = 0.5, ceiling = 30 }\n'
        '[[future.hooks]]\nname = "a"\n[[future.hooks]]\nname = "b"\n'
        '[servers.old]\ntransport = "http"\nurl = "https://old.example/mcp"\n'
    )
    registry.add(stdio())
    registry.remove("old")
    doc = tomllib.loads(registry.path.read_text())
    assert doc["version"] == 1
    assert doc["settings"] == {"theme": "dark", "poll": {"floor": 0.5, "ceiling": 30}}
    assert doc["future"] == {"hooks": [{"name": "a"}, {"name": "b"}]}
    assert list(doc["servers"]) == ["fs"]


def test_config_is_0600_in_a_0700_dir(registry: Registry) -> None:
    registry.add(stdio())
    assert stat.S_IMODE(registry.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(registry.path.parent.stat().st_mode) == 0o700


def test_failed_write_leaves_old_config(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry.add(stdio())
    before = registry.path.read_bytes()

    def broken_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("chit.servers.toml_io.os.fsync", broken_fsync)
    with pytest.raises(ConfigError, match="No space left"):
        registry.add(http())
    assert registry.path.read_bytes() == before
    assert sorted(p.name for p in registry.path.parent.iterdir() if p.name.endswith(".tmp")) == []


def test_failed_rename_leaves_old_config(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry.add(stdio())
    before = registry.path.read_bytes()

    def broken_replace(src: Any, dst: Any) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("chit.servers.toml_io.os.replace", broken_replace)
    with pytest.raises(ConfigError):
        registry.remove("fs")
    assert registry.path.read_bytes() == before
    assert not [p for p in registry.path.parent.iterdir() if p.name.endswith(".tmp")]


def test_secrets_never_in_plaintext(registry: Registry, vault: Vault) -> None:
    stored = registry.add(stdio(env={"GITHUB_TOKEN": SECRET, "LOG_LEVEL": "info"}))
    registry.add(http(headers={"Authorization": f"Bearer {SECRET}"}))
    raw = registry.path.read_bytes()
    assert SECRET.encode() not in raw
    assert b"sealed:v1:" in raw and b'LOG_LEVEL = "info"' in raw
    assert stored.fingerprints == {"env.GITHUB_TOKEN": vault.fingerprint(SECRET)}
    view = registry.get("fs").public_view()
    assert view["env"]["GITHUB_TOKEN"] == {"sealed": True, "fingerprint": vault.fingerprint(SECRET)}
    assert SECRET not in repr(registry.resolve("fs"))
    assert registry.resolve("fs").env["GITHUB_TOKEN"] == SECRET
    assert registry.resolve("remote").headers == {"Authorization": f"Bearer {SECRET}"}


def test_sealed_value_is_bound_to_its_server_and_key(registry: Registry) -> None:
    registry.add(stdio(env={"API_KEY": SECRET}))
    sealed = registry.get("fs").env["API_KEY"]
    # Copy the ciphertext to another server (and to another variable): neither opens.
    registry.add(stdio("other", env={"API_KEY": sealed}))
    with pytest.raises(HandleDecryptError, match="other"):
        registry.resolve("other")
    registry.add(stdio("fs2", env={"OTHER_KEY": sealed}))
    with pytest.raises(HandleDecryptError):
        registry.resolve("fs2")


def test_vault_unavailable_is_clear_and_writes_nothing(tmp_path: Path) -> None:
    registry = Registry(tmp_path / "config.toml", _unavailable)
    registry.add(stdio(env={"LOG_LEVEL": "x"}))  # nothing to seal: no vault needed
    before = registry.path.read_bytes()
    with pytest.raises(KeyStoreUnavailable):
        registry.add(http(headers={"Authorization": SECRET}))
    assert registry.path.read_bytes() == before
    # Listing and resolving servers without secrets still work.
    assert list(registry.servers()) == ["fs"]
    assert registry.resolve("fs").command == "npx"


def test_conflict_replace_and_not_found(registry: Registry) -> None:
    registry.add(stdio())
    with pytest.raises(Conflict):
        registry.add(stdio())
    registry.add(stdio(cwd="/x"), replace=True)
    assert registry.get("fs").cwd == "/x"
    with pytest.raises(NotFound):
        registry.get("nope")
    with pytest.raises(NotFound):
        registry.remove("nope")


def test_env_references_expand_at_resolve(registry: Registry) -> None:
    registry.add(stdio(env={"API_KEY": "${MY_KEY}", "PORT": "${PORT:-8080}"}, cwd="${HOME_DIR}"))
    assert "${MY_KEY}" not in registry.path.read_text()  # sealed (name looks secret)
    resolved = registry.resolve("fs", {"MY_KEY": "k1", "HOME_DIR": "/h"})
    assert resolved.env == {
        "API_KEY": "k1",
        "PORT": "8080",
        "CHIT_HOME": str(registry.path.parent),  # a stdio child learns its home
    }
    assert resolved.cwd == "/h"
    with pytest.raises(UsageError, match=r"\$\{MY_KEY\}"):
        registry.resolve("fs", {"HOME_DIR": "/h"})


def test_invalid_config_is_a_config_error(registry: Registry) -> None:
    registry.path.parent.mkdir(parents=True, mode=0o700)
    registry.path.write_text('[servers.x]\ntransport = "stdio"\n')
    with pytest.raises(ConfigError, match=r"servers\.x.*needs a command"):
        registry.servers()
    registry.path.write_text("not toml [")
    with pytest.raises(ConfigError, match="not valid TOML"):
        registry.servers()


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("GITHUB_PERSONAL_ACCESS_TOKEN", True),
        ("OPENAI_API_KEY", True),
        ("DB_PASSWORD", True),
        ("CLIENT_SECRET", True),
        ("GITLAB_PAT", True),
        ("X_AUTH", True),
        ("PATH", False),
        ("LOG_LEVEL", False),
        ("HOME", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_env(name) is secret


def test_url_with_password_is_secret() -> None:
    assert is_secret_env("DATABASE_URL", "postgres://app:pw@db/app")
    assert not is_secret_env("DATABASE_URL", "postgres://db/app")


def test_invalid_names_rejected() -> None:
    for bad in ["", "has space", "-dash", "a/b", "x" * 65]:
        with pytest.raises(ValueError):
            stdio(bad)


_keys = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=8)
_scalars = (
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
    | st.integers(-(2**63), 2**63 - 1)
    | st.booleans()
    | st.floats(allow_nan=False)
)
_values = st.recursive(
    _scalars | st.lists(_scalars, max_size=3),
    lambda inner: st.dictionaries(_keys, inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(_keys, _values, max_size=4))
# Once written unquoted (a `$`-anchored bare-key regex matched before the "\n"), after
# which the file no longer parsed; CI found it only by chance.
@example({"0\n": ""})
@example({"servers": {"x\n": {"transport": "stdio"}}})
def test_emitter_round_trips(document: dict[str, Any]) -> None:
    assert tomllib.loads(toml_io.dumps(document)) == document


COMMENTED = """# chit config — edited by hand
version = 1  # keep

[settings]
# the theme I like
theme = "dark"

# production servers below
[servers.old]  # retiring soon
transport = "http"
url = "https://old.example/mcp"

[servers.keep]
# do not touch
transport = "stdio"
command = "x"   # aligned on purpose
"""


def test_commented_config_keeps_its_comments(registry: Registry) -> None:
    registry.path.parent.mkdir(parents=True, mode=0o700)
    registry.path.write_text(COMMENTED)
    registry.add(stdio())
    text = registry.path.read_text()
    assert text.startswith(COMMENTED), text  # everything before is byte for byte intact
    assert tomllib.loads(text)["servers"]["fs"]["command"] == "npx"
    registry.remove("old")
    text = registry.path.read_text()
    for kept in [
        "# chit config — edited by hand",
        "version = 1  # keep",
        "# the theme I like",
        "# do not touch",
        'command = "x"   # aligned on purpose',
    ]:
        assert kept in text
    assert "retiring soon" not in text and "old.example" not in text
    assert list(tomllib.loads(text)["servers"]) == ["keep", "fs"]


def test_emitter_arrays_of_tables() -> None:
    doc = {"a": [{"x": 1, "sub": {"y": 2}}, {"x": 3}], "b": {}, "c": {"d": {"e": []}}}
    assert tomllib.loads(toml_io.dumps(doc)) == doc


def test_home_dir_created_private(tmp_path: Path, vault: Vault) -> None:
    path = tmp_path / "deep" / "home" / "config.toml"
    Registry(path, lambda: vault).add(stdio())
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert os.access(path, os.R_OK)
