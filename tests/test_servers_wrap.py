"""``chit servers wrap|unwrap``: host configs routed through ``chit proxy`` and back."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from chit.cli.main import cli
from chit.errors import UsageError
from chit.home import Home
from chit.servers import Registry, ServerSpec
from chit.servers.wrap import ProxyLaunch, record_path, unwrap_config, wrap_config
from chit.vault import MemoryKeyStore, Vault

FIXTURES = Path(__file__).parent / "fixtures" / "mcp-configs"
LAUNCH = ProxyLaunch("/opt/chit/bin/chit", env=(("CHIT_HOME", "/home/me/.chit"),))
SECRETS = [b"ghp_desktopSECRET123", b"codeSECRET456", b"cursorSECRET789", b"envfileSECRET000"]


@pytest.fixture
def vault() -> Vault:
    return Vault.unlock(MemoryKeyStore(), None)


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home(tmp_path / "home").ensure()


@pytest.fixture
def registry(home: Home, vault: Vault) -> Registry:
    return Registry(home.config_path, lambda: vault)


def _copies(tmp_path: Path) -> dict[str, Path]:
    """Copies of the three host formats (the Cursor one inside its project folder)."""
    work = tmp_path / "configs"
    work.mkdir()
    shutil.copy(FIXTURES / "claude_desktop_config.json", work / "claude_desktop_config.json")
    shutil.copy(FIXTURES / "claude_code.mcp.json", work / ".mcp.json")
    shutil.copytree(FIXTURES / "cursor-project", work / "cursor-project")
    return {
        "desktop": work / "claude_desktop_config.json",
        "code": work / ".mcp.json",
        "cursor": work / "cursor-project" / ".cursor" / "mcp.json",
    }


@pytest.mark.parametrize("fmt", ["desktop", "code", "cursor"])
def test_round_trip_is_byte_identical(
    fmt: str, tmp_path: Path, home: Home, registry: Registry
) -> None:
    config = _copies(tmp_path)[fmt]
    before = config.read_bytes()
    report = wrap_config(config, registry, home, LAUNCH)
    assert report.changed, report
    wrapped = config.read_bytes()
    assert wrapped != before
    for secret in SECRETS:
        assert secret not in wrapped
    assert report.backup is not None and Path(report.backup).read_bytes() == before

    again = wrap_config(config, registry, home, LAUNCH)
    assert again.changed == [] and again.backup is None
    assert config.read_bytes() == wrapped  # wrap twice changes nothing

    restored = unwrap_config(config, home)
    assert {c["name"] for c in restored.changed} == {c["name"] for c in report.changed}
    assert config.read_bytes() == before
    assert not record_path(home, config).exists()


def test_desktop_entries(tmp_path: Path, home: Home, registry: Registry) -> None:
    config = _copies(tmp_path)["desktop"]
    report = wrap_config(config, registry, home, LAUNCH)
    assert [c["name"] for c in report.changed] == ["filesystem", "github"]
    reasons = {s["name"]: s["reason"] for s in report.skipped}
    assert "missing command" in reasons["broken"]
    assert "invalid name" in reasons["my server"]
    doc = json.loads(config.read_text())
    assert doc["globalShortcut"] == "Ctrl+Space"
    assert doc["mcpServers"]["github"] == {
        "command": "/opt/chit/bin/chit",
        "args": ["proxy", "github"],
        "env": {"CHIT_HOME": "/home/me/.chit"},
    }
    assert doc["mcpServers"]["broken"] == {"args": ["x"]}  # left alone
    assert registry.resolve("github").env["GITHUB_PERSONAL_ACCESS_TOKEN"] == "ghp_desktopSECRET123"
    text = config.read_text()
    assert '    "github": {\n      "command": "/opt/chit/bin/chit",\n' in text


def test_code_and_cursor_keep_host_keys(tmp_path: Path, home: Home, registry: Registry) -> None:
    copies = _copies(tmp_path)
    wrap_config(copies["code"], registry, home, LAUNCH)
    code = json.loads(copies["code"].read_text())["mcpServers"]
    assert code["remote"]["type"] == "stdio"  # the host now starts chit, over stdio
    assert code["remote"]["args"] == ["proxy", "remote"]
    assert code["legacy-sse"] == {"type": "sse", "url": "https://mcp.example.com/sse"}
    assert registry.servers()["remote"].transport == "http"

    report = wrap_config(copies["cursor"], registry, home, LAUNCH)
    cursor = json.loads(copies["cursor"].read_text())["mcpServers"]
    assert cursor["db"]["autoApprove"] == ["query"]  # the host's own key is kept
    assert "envFile" not in cursor["db"]
    reasons = {s["name"]: s["reason"] for s in report.skipped}
    assert "cannot be read" in reasons["missing-env-file"]
    assert registry.resolve("db").env["DATABASE_URL"].endswith("@db/app")


def test_dry_run_changes_nothing(tmp_path: Path, home: Home, registry: Registry) -> None:
    config = _copies(tmp_path)["desktop"]
    before = config.read_bytes()
    report = wrap_config(config, registry, home, LAUNCH, dry_run=True)
    assert report.dry_run and '+      "command": "/opt/chit/bin/chit",' in report.diff
    assert config.read_bytes() == before
    assert registry.servers() == {}
    assert not record_path(home, config).exists()
    assert list(config.parent.glob("*.chit-backup-*")) == []


def test_name_taken_by_another_server(tmp_path: Path, home: Home, registry: Registry) -> None:
    config = _copies(tmp_path)["desktop"]
    registry.add(registry.seal(ServerSpec(name="github", transport="stdio", command="other")))
    report = wrap_config(config, registry, home, LAUNCH)
    reasons = {s["name"]: s["reason"] for s in report.skipped}
    assert "different server is registered" in reasons["github"]
    assert json.loads(config.read_text())["mcpServers"]["github"]["command"] == "npx"
    assert registry.servers()["github"].command == "other"
    forced = wrap_config(config, registry, home, LAUNCH, replace=True)
    assert [c["name"] for c in forced.changed] == ["github"]
    assert registry.servers()["github"].command == "npx"


def test_unwrap_leaves_entries_the_user_changed(
    tmp_path: Path, home: Home, registry: Registry
) -> None:
    config = _copies(tmp_path)["desktop"]
    wrap_config(config, registry, home, LAUNCH)
    doc = json.loads(config.read_text())
    doc["mcpServers"]["github"]["args"] = ["proxy", "github", "--extra"]
    doc["mcpServers"]["new"] = {"command": "echo"}
    config.write_text(json.dumps(doc, indent=4))  # the host re-formatted the file
    report = unwrap_config(config, home)
    assert [c["name"] for c in report.changed] == ["filesystem"]
    reasons = {s["name"]: s["reason"] for s in report.skipped}
    assert "changed since" in reasons["github"]
    after = json.loads(config.read_text())["mcpServers"]
    assert after["filesystem"]["command"] == "npx"
    assert after["new"] == {"command": "echo"}
    assert record_path(home, config).exists()  # github is still remembered


def test_not_an_mcp_servers_file(tmp_path: Path, home: Home, registry: Registry) -> None:
    bad = tmp_path / "x.json"
    bad.write_text('{"servers": {}}')
    with pytest.raises(UsageError, match="mcpServers"):
        wrap_config(bad, registry, home, LAUNCH)
    with pytest.raises(UsageError, match="cannot read"):
        wrap_config(tmp_path / "missing.json", registry, home, LAUNCH)


def test_compact_file_round_trip(tmp_path: Path, home: Home, registry: Registry) -> None:
    config = tmp_path / "c.json"
    original = '{"mcpServers":{"a":{"command":"x","args":["y"]},"b":{"url":"http://h/mcp"}}}'
    config.write_text(original)
    wrap_config(config, registry, home, LAUNCH)
    assert "\n" not in config.read_text()
    assert json.loads(config.read_text())["mcpServers"]["b"]["args"] == ["proxy", "b"]
    unwrap_config(config, home)
    assert config.read_text() == original


# --- through the CLI -------------------------------------------------------------------


def _run(home: Path, *args: str) -> Result:
    env = {"CHIT_HOME": str(home), "CHIT_KEY_STORE": "memory", "CHIT_DEBUG": ""}
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def test_cli_wrap_dry_run_then_wrap_then_unwrap(tmp_path: Path) -> None:
    config = _copies(tmp_path)["code"]
    before = config.read_bytes()
    home = tmp_path / "clihome"
    r = _run(home, "servers", "wrap", str(config), "--dry-run")
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("---") and '"proxy", "local"' in r.stdout
    assert "would wrap local" in r.stderr
    assert config.read_bytes() == before

    r = _run(home, "servers", "wrap", str(config), "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert {c["name"] for c in data["changed"]} == {"local", "remote"}
    entry = json.loads(config.read_text())["mcpServers"]["local"]
    assert entry["env"]["CHIT_HOME"] == str(home.resolve())
    assert entry["args"][-2:] == ["proxy", "local"]

    r = _run(home, "servers", "wrap", str(config))
    assert r.exit_code == 0 and "nothing to wrap" in r.stderr

    r = _run(home, "servers", "unwrap", str(config))
    assert r.exit_code == 0, r.output
    assert config.read_bytes() == before


def test_cli_bad_file_exits_2(tmp_path: Path) -> None:
    r = _run(tmp_path / "h", "servers", "wrap", str(tmp_path / "nope.json"))
    assert r.exit_code == 2
    assert r.stderr.startswith("chit: cannot read")
