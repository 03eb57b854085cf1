"""``chit servers ...`` and ``chit tools`` through click's CliRunner."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from chit.cli.main import cli
from chit.errors import ExitCode

FIXTURES = Path(__file__).parent / "fixtures" / "mcp-configs"
SECRET = "Bearer cliSECRETvalue99"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def run(home: Path, *args: str, key_store: str = "memory") -> Result:
    env = {"CHIT_HOME": str(home), "CHIT_KEY_STORE": key_store, "CHIT_DEBUG": ""}
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def test_add_list_remove(home: Path) -> None:
    r = run(
        home,
        "servers",
        "add",
        "remote",
        "--url",
        "https://x.example/mcp",
        "--header",
        f"Authorization={SECRET}",
    )
    assert r.exit_code == 0, r.output
    assert r.stdout == ""  # confirmations go to stderr
    r = run(
        home,
        "servers",
        "add",
        "fs",
        "--command",
        "npx",
        "--arg",
        "-y",
        "--env",
        "LOG=1",
        "--",
        "@mcp/fs",
        "/tmp",
    )
    assert r.exit_code == 0, r.output
    config = home / "config.toml"
    assert SECRET.encode() not in config.read_bytes()
    assert stat.S_IMODE(config.stat().st_mode) == 0o600

    listing = json.loads(run(home, "servers", "list", "--json").stdout)
    by_name = {s["name"]: s for s in listing}
    assert by_name["fs"]["args"] == ["-y", "@mcp/fs", "/tmp"]
    assert by_name["remote"]["headers"]["Authorization"]["sealed"] is True
    assert len(by_name["remote"]["headers"]["Authorization"]["fingerprint"]) == 12
    table = run(home, "servers", "list").stdout
    assert "headers.Authorization=" in table and SECRET not in table

    assert run(home, "servers", "remove", "fs").exit_code == 0
    assert [s["name"] for s in json.loads(run(home, "servers", "list", "--json").stdout)] == [
        "remote"
    ]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["servers", "add", "x"], ExitCode.USAGE, "exactly one of --command"),
        (
            ["servers", "add", "x", "--command", "a", "--url", "https://b"],
            ExitCode.USAGE,
            "exactly one",
        ),
        (["servers", "add", "bad name", "--command", "a"], ExitCode.USAGE, "invalid server name"),
        (["servers", "add", "x", "--url", "ftp://b"], ExitCode.USAGE, "http:// or https://"),
        (
            ["servers", "add", "x", "--url", "https://b", "--header", "nokey"],
            ExitCode.USAGE,
            "KEY=VALUE",
        ),
        (
            ["servers", "add", "x", "--command", "a", "--header", "A=b"],
            ExitCode.USAGE,
            "--url servers only",
        ),
        (["servers", "remove", "ghost"], ExitCode.NOT_FOUND, "no server named 'ghost'"),
        (["tools", "ghost"], ExitCode.NOT_FOUND, "no server named 'ghost'"),
        (["servers", "import", "/nonexistent.json"], ExitCode.USAGE, "cannot read"),
    ],
)
def test_bad_input_one_line_and_config_untouched(
    home: Path, args: list[str], code: ExitCode, message: str
) -> None:
    assert run(home, "servers", "add", "keep", "--command", "true").exit_code == 0
    before = (home / "config.toml").read_bytes()
    r = run(home, *args)
    assert r.exit_code == code, r.output
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert r.stdout == ""
    assert (home / "config.toml").read_bytes() == before


def test_duplicate_add_is_conflict(home: Path) -> None:
    assert run(home, "servers", "add", "a", "--command", "x").exit_code == 0
    r = run(home, "servers", "add", "a", "--command", "y")
    assert r.exit_code == ExitCode.CONFLICT
    assert run(home, "servers", "add", "a", "--command", "y", "--replace").exit_code == 0


def test_key_store_unavailable_is_clean(home: Path) -> None:
    r = run(
        home,
        "servers",
        "add",
        "r",
        "--url",
        "https://x/mcp",
        "--header",
        f"A={SECRET}",
        key_store="nonsense",
    )
    assert r.exit_code == ExitCode.KEY_STORE
    assert r.stderr.startswith("chit: key store unavailable")
    assert SECRET not in r.output
    assert not (home / "config.toml").exists()


def test_import_json_report(home: Path) -> None:
    r = run(home, "servers", "import", str(FIXTURES / "claude_code.mcp.json"), "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert [i["name"] for i in report["imported"]] == ["local", "remote"]
    assert {s["name"] for s in report["skipped"]} == {"legacy-sse", "weird"}
    text = run(home, "servers", "import", str(FIXTURES / "claude_code.mcp.json")).stdout
    assert "skipped local: already registered (use --replace to overwrite)" in text
    assert b"codeSECRET456" not in (home / "config.toml").read_bytes()


def test_import_not_json(home: Path, tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("nope")
    r = run(home, "servers", "import", str(bad))
    assert r.exit_code == ExitCode.USAGE and "not valid JSON" in r.stderr


def test_tools_unreachable(home: Path, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-server")
    assert run(home, "servers", "add", "gone", "--command", missing).exit_code == 0
    r = run(home, "tools", "gone", "--timeout", "10")
    assert r.exit_code == ExitCode.UNREACHABLE, r.output
    assert "gone" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_tools_http_unreachable(home: Path) -> None:
    # Port 9 (discard) on localhost: nothing listens there in CI.
    assert run(home, "servers", "add", "web", "--url", "http://127.0.0.1:9/mcp").exit_code == 0
    r = run(home, "tools", "web", "--timeout", "10")
    assert r.exit_code == ExitCode.UNREACHABLE, r.output


def _has_demo_server() -> bool:
    return (Path(__file__).parents[1] / "src/chit/cli/commands_demo_server.py").exists()


@pytest.mark.skipif(not _has_demo_server(), reason="chit demo-server not in the tree yet")
def test_tools_against_demo_server(home: Path, tmp_path: Path) -> None:
    r = run(
        home,
        "servers",
        "add",
        "demo",
        "--command",
        sys.executable,
        "--env",
        f"CHIT_HOME={tmp_path / 'demo-home'}",
        "--",
        "-m",
        "chit",
        "demo-server",
    )
    assert r.exit_code == 0, r.output
    r = run(home, "tools", "demo", "--json", "--timeout", "60")
    assert r.exit_code == 0, r.output
    listing = json.loads(r.stdout)
    support = {t["name"]: t["task_support"] for t in listing["tools"]}
    assert {"greet", "slow_compute", "failing_job"} <= set(support)
    assert set(support.values()) <= {"required", "optional", "forbidden"}
    if listing["generation"] == "2026-07-28":
        assert listing["extension_declared"] is True
    text = run(home, "tools", "demo", "--timeout", "60").stdout
    assert text.startswith("# demo:") and "slow_compute" in text


def test_file_key_store_records_kid_and_reopens(home: Path) -> None:
    from chit.home import Home
    from chit.servers import Registry
    from chit.servers._kid import recorded_kid

    r = run(
        home, "servers", "add", "fs", "--command", "x", "--env", "API_TOKEN=t0k", key_store="file"
    )
    assert r.exit_code == 0, r.output
    assert recorded_kid(Home(home)) is not None
    env = {"CHIT_KEY_STORE": "file"}
    resolved = Registry.for_home(Home(home), environ=env).resolve("fs")
    assert resolved.env == {"API_TOKEN": "t0k", "CHIT_HOME": str(home)}


def test_servers_add_and_remove_keep_a_hand_edited_config(home: Path) -> None:
    # config.toml is edited through tomlkit: comments and layout survive add and remove.
    home.mkdir(mode=0o700)
    original = (
        "# my chit settings\n"
        "[tui]\n"
        'theme = "nord"  # easier on the eyes\n'
        "\n"
        "# servers I use every day\n"
        "[servers.mine]\n"
        'transport = "stdio"\n'
        'command = "my-server"  # from ~/bin\n'
    )
    (home / "config.toml").write_text(original)
    assert run(home, "servers", "add", "extra", "--command", "echo").exit_code == 0
    after_add = (home / "config.toml").read_text()
    assert after_add.startswith(original)
    assert "[servers.extra]" in after_add
    assert run(home, "servers", "remove", "extra").exit_code == 0
    assert (home / "config.toml").read_text().rstrip("\n") == original.rstrip("\n")
