"""Importing ``mcpServers`` JSON from Claude Desktop, Claude Code and Cursor."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from chit.errors import UsageError
from chit.servers import Registry, ServerSpec, import_mcp_servers
from chit.vault import KeyStoreUnavailable, MemoryKeyStore, Vault

FIXTURES = Path(__file__).parent / "fixtures" / "mcp-configs"
PLAINTEXT_SECRETS = [
    b"ghp_desktopSECRET123",
    b"codeSECRET456",
    b"cursorSECRET789",
    b"envfileSECRET000",
]


@pytest.fixture
def vault() -> Vault:
    return Vault.unlock(MemoryKeyStore(), None)


@pytest.fixture
def registry(tmp_path: Path, vault: Vault) -> Registry:
    return Registry(tmp_path / "home" / "config.toml", lambda: vault)


def _skips(report: Any) -> dict[str, str]:
    return {s.name: s.reason for s in report.skipped}


def test_claude_desktop(registry: Registry) -> None:
    report = import_mcp_servers(FIXTURES / "claude_desktop_config.json", registry)
    assert [i.name for i in report.imported] == ["filesystem", "github"]
    skips = _skips(report)
    assert set(skips) == {"broken", "my server"}
    assert "missing command" in skips["broken"]
    assert "invalid name" in skips["my server"]
    servers = registry.servers()
    assert servers["filesystem"].args[-1] == "/Users/me/Desktop"
    github = registry.resolve("github")
    assert github.env == {
        "GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_desktopSECRET123",
        "LOG_LEVEL": "info",
        "CHIT_HOME": str(registry.path.parent),
    }
    assert servers["github"].env["LOG_LEVEL"] == "info"  # not secret: stored as written


def test_claude_code(registry: Registry) -> None:
    report = import_mcp_servers(FIXTURES / "claude_code.mcp.json", registry)
    assert {i.name: i.transport for i in report.imported} == {"local": "stdio", "remote": "http"}
    skips = _skips(report)
    assert "unsupported transport sse" in skips["legacy-sse"]
    assert "unknown transport type 'websocket'" in skips["weird"]
    local = next(i for i in report.imported if i.name == "local")
    assert any("${HOME}" in n and "${MY_API_KEY}" in n and "${PORT}" in n for n in local.notes)
    # References are kept verbatim and expanded only when connecting.
    spec = registry.get("local")
    assert spec.command == "${HOME}/bin/server"
    resolved = registry.resolve("local", {"HOME": "/h", "MY_API_KEY": "k"})
    assert resolved.command == "/h/bin/server"
    assert resolved.args == ("--port", "8080")
    assert resolved.env == {"API_KEY": "k", "CHIT_HOME": str(registry.path.parent)}
    assert registry.resolve("remote").headers == {"Authorization": "Bearer codeSECRET456"}


def test_cursor_with_env_file(registry: Registry) -> None:
    report = import_mcp_servers(FIXTURES / "cursor-project" / ".cursor" / "mcp.json", registry)
    assert {i.name for i in report.imported} == {"docs", "db"}
    assert "cannot be read" in _skips(report)["missing-env-file"]
    db = next(i for i in report.imported if i.name == "db")
    assert any("3 variable(s) from envFile" in n for n in db.notes)
    assert "ignored: autoApprove" in db.notes
    env = registry.resolve("db").env
    assert env["DB_HOST"] == "localhost"  # explicit env wins over the file
    assert env["DATABASE_URL"] == "postgres://app:envfileSECRET000@db/app"
    assert env["PLAIN"] == "1"
    assert registry.get("db").env["PLAIN"] == "1"
    assert registry.resolve("docs").headers == {"X-Api-Key": "cursorSECRET789"}


def test_no_plaintext_secret_reaches_config(registry: Registry) -> None:
    for source in [
        FIXTURES / "claude_desktop_config.json",
        FIXTURES / "claude_code.mcp.json",
        FIXTURES / "cursor-project" / ".cursor" / "mcp.json",
    ]:
        import_mcp_servers(source, registry)
    raw = registry.path.read_bytes()
    for secret in PLAINTEXT_SECRETS:
        assert secret not in raw


def test_name_clash_skipped_unless_replace(registry: Registry) -> None:
    registry.add(ServerSpec(name="filesystem", transport="stdio", command="mine"))
    report = import_mcp_servers(FIXTURES / "claude_desktop_config.json", registry)
    assert "already registered" in _skips(report)["filesystem"]
    assert registry.get("filesystem").command == "mine"
    report = import_mcp_servers(FIXTURES / "claude_desktop_config.json", registry, replace=True)
    assert {i.name: i.replaced for i in report.imported} == {"filesystem": True, "github": True}
    assert registry.get("filesystem").command == "npx"


def test_vault_unavailable_writes_nothing(tmp_path: Path) -> None:
    def unavailable() -> Any:
        raise KeyStoreUnavailable("no keyring in this test")

    registry = Registry(tmp_path / "config.toml", unavailable)
    registry.add(ServerSpec(name="keep", transport="stdio", command="x"))
    before = registry.path.read_bytes()
    # github has a token to seal: the whole import fails, filesystem is not written either.
    with pytest.raises(KeyStoreUnavailable):
        import_mcp_servers(FIXTURES / "claude_desktop_config.json", registry)
    assert registry.path.read_bytes() == before


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"servers": {}}', 'no "mcpServers" object'),
        ('{"mcpServers": []}', 'no "mcpServers" object'),
        ("[1, 2]", 'no "mcpServers" object'),
    ],
)
def test_bad_files(registry: Registry, tmp_path: Path, content: str, message: str) -> None:
    source = tmp_path / "bad.json"
    source.write_text(content)
    with pytest.raises(UsageError, match=message):
        import_mcp_servers(source, registry)
    assert not registry.path.exists()


def test_missing_file(registry: Registry, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read"):
        import_mcp_servers(tmp_path / "absent.json", registry)


def test_entry_shape_errors(registry: Registry, tmp_path: Path) -> None:
    source = tmp_path / "mcp.json"
    source.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "a": "npx",
                    "b": {"command": "x", "args": "not-a-list"},
                    "c": {"command": "x", "env": {"K": {"nested": 1}}},
                    "d": {"type": "http"},
                    "e": {"url": "ftp://x"},
                    "f": {"command": "x", "env": {"N": 3, "B": True}},
                    "g": {"type": "streamable-http", "url": "https://g.example/mcp"},
                }
            }
        )
    )
    report = import_mcp_servers(source, registry)
    skips = _skips(report)
    assert skips["a"] == "entry is not an object"
    assert "args must be a list of strings" in skips["b"]
    assert "env.K must be a string" in skips["c"]
    assert "missing url" in skips["d"]
    assert "http:// or https://" in skips["e"]
    assert registry.get("f").env == {"N": "3", "B": "true"}
    assert registry.get("g").transport == "http"


def test_only_skips_leaves_config_untouched(registry: Registry, tmp_path: Path) -> None:
    registry.path.parent.mkdir(parents=True, mode=0o700)
    registry.path.write_text("# my comment\n[settings]\nx = 1\n")
    before = registry.path.read_bytes()
    source = tmp_path / "mcp.json"
    source.write_text('{"mcpServers": {"s": {"type": "sse", "url": "https://x/sse"}}}')
    report = import_mcp_servers(source, registry)
    assert report.imported == [] and len(report.skipped) == 1
    assert registry.path.read_bytes() == before


def test_env_file_relative_to_plain_folder(registry: Registry, tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "cursor-project" / ".env", tmp_path / "vars.env")
    source = tmp_path / "mcp.json"
    source.write_text('{"mcpServers": {"db": {"command": "x", "envFile": "vars.env"}}}')
    import_mcp_servers(source, registry)
    assert registry.resolve("db").env["DB_HOST"] == "remote"
