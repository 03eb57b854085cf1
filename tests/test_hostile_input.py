"""Hostile and odd input (issue 11, cases 1, 8, 10, 11): refused at the door, one line.

Each test reproduces a case that once got through — a name ending in a newline, JSON
chit could not pass on, header injection, a token list that never showed a last use —
and checks it is now refused with exit 2 and one line, with nothing written.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner, Result

from chit import clock
from chit.cli.main import cli
from chit.errors import ExitCode, UsageError
from chit.home import Home
from chit.inputs import MAX_JSON_DEPTH, parse_json, valid_name
from chit.servers import Registry, ServerSpec
from chit.servers.importer import import_mcp_servers
from chit.sidecar.db import open_sidecar_db
from chit.sidecar.principals import SidecarTokenVerifier, add_token, list_tokens
from chit.vault import MemoryKeyStore, Vault


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def run(home: Path, *args: str) -> Result:
    env = {"CHIT_HOME": str(home), "CHIT_KEY_STORE": "memory", "CHIT_DEBUG": ""}
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def one_line_error(result: Result, code: ExitCode = ExitCode.USAGE) -> str:
    assert result.exit_code == code, (result.exit_code, result.output)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("chit: ")
    assert "Traceback" not in result.output
    return lines[0]


# --- case 1: one name validator (fullmatch) -------------------------------------------


@pytest.mark.parametrize("name", ["x\n", "x\r", "bob\n", "a b", "", "-x", "x" * 65, "é"])
def test_bad_names_are_refused_everywhere(name: str) -> None:
    assert not valid_name(name)
    with pytest.raises(ValueError, match="invalid server name"):
        ServerSpec(name=name, transport="stdio", command="echo")


def test_server_name_with_trailing_newline_is_refused(home: Path) -> None:
    line = one_line_error(run(home, "servers", "add", "x\n", "--command", "echo"))
    assert "invalid server name 'x\\n'" in line
    assert not (home / "config.toml").exists()
    assert run(home, "servers", "list").exit_code == 0


def test_imported_name_with_trailing_newline_is_skipped(tmp_path: Path) -> None:
    source = tmp_path / "mcp.json"
    source.write_text(
        json.dumps({"mcpServers": {"x\n": {"command": "echo"}, "ok": {"command": "echo"}}})
    )
    registry = Registry(
        tmp_path / "home" / "config.toml", lambda: Vault.unlock(MemoryKeyStore(), None)
    )
    report = import_mcp_servers(source, registry)
    assert [i.name for i in report.imported] == ["ok"]
    assert [s.name for s in report.skipped] == ["x\n"]
    assert list(registry.servers()) == ["ok"]


def test_token_name_with_trailing_newline_is_not_a_second_principal(tmp_path: Path) -> None:
    db = open_sidecar_db(Home(tmp_path / "home").ensure().sidecar_db_path)
    try:
        add_token(db, "bob")
        with pytest.raises(UsageError, match="invalid token name 'bob\\\\n'"):
            add_token(db, "bob\n")
        assert [t.name for t in list_tokens(db)] == ["bob"]
    finally:
        db.close()


def test_token_name_cli_one_line(home: Path) -> None:
    line = one_line_error(run(home, "sidecar", "token", "add", "bob\n"))
    assert "invalid token name" in line


def test_a_legacy_bad_server_table_can_be_removed(home: Path) -> None:
    # Written by an older chit (quoted here so that TOML can hold it at all).
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text(
        '# mine\n[servers."x\\n"]\ntransport = "stdio"\ncommand = "echo"\n'
        '[servers.ok]\ntransport = "stdio"\ncommand = "echo"\n'
    )
    assert run(home, "servers", "list").exit_code == ExitCode.STORE
    assert run(home, "servers", "remove", "x\n").exit_code == 0
    listed = run(home, "servers", "list", "--json")
    assert [s["name"] for s in json.loads(listed.stdout)] == ["ok"]
    assert (home / "config.toml").read_text().startswith("# mine\n")


# --- case 8: user-input errors are exit 2, one line -----------------------------------


@pytest.mark.parametrize(
    ("args_json", "says"),
    [
        ('{"n": NaN}', "NaN is not allowed"),
        ('{"n": Infinity}', "Infinity is not allowed"),
        ('{"n": -Infinity}', "Infinity is not allowed"),
        ("[" * 50_000 + "]" * 50_000, "nested more than"),
        ('{"a":' * 100 + "1" + "}" * 100, "nested more than"),
        ('{"s": "\\ud800"}', "not valid UTF-8"),
        ('{"\\udfff": 1}', "not valid UTF-8"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
    ],
    ids=[
        "nan",
        "inf",
        "-inf",
        "deep-50000",
        "deep-100",
        "surrogate",
        "surrogate-key",
        "bad",
        "array",
    ],
)
def test_bad_args_json_is_usage(home: Path, args_json: str, says: str) -> None:
    line = one_line_error(run(home, "call", "srv", "tool", "--args", args_json))
    assert says in line
    assert not home.exists(), "nothing is created for a refused command"


def test_arg_values_that_are_not_json_stay_text() -> None:
    from chit.cli.engine import parse_arguments

    parsed = parse_arguments(None, ("a=NaN", "b=3", "c=[1]", 'd="\\ud800"', "e=" + "[" * 100))
    assert parsed == {"a": "NaN", "b": 3, "c": [1], "d": '"\\ud800"', "e": "[" * 100}


def test_parse_json_depth_limit_is_exact() -> None:
    assert parse_json("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH, "x")
    with pytest.raises(UsageError):
        parse_json("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), "x")
    with pytest.raises(UsageError, match="not valid UTF-8"):
        parse_json(b'{"a": "\xff"}', "x")


def test_answer_and_decide_json_are_checked(home: Path) -> None:
    assert "NaN" in one_line_error(run(home, "answer", "01X", "--json", '{"a": NaN}'))
    assert "nested" in one_line_error(run(home, "sidecar", "decide", "d", "--json", "[" * 5000))


@pytest.mark.parametrize(
    "argv",
    [
        ["receipts", "--limit", "x"],
        ["nosuch"],
        ["--bogus"],
        ["servers", "add"],
        ["receipts", "--state", "nope"],
        ["call"],
        ["show"],
    ],
)
def test_click_usage_errors_are_one_line(home: Path, argv: list[str]) -> None:
    line = one_line_error(run(home, *argv))
    assert "--help" in line


def test_invalid_utf8_in_argv_is_usage(tmp_path: Path) -> None:
    # Real bytes through a real argv: Python hands them over as lone surrogates.
    proc = subprocess.run(
        [sys.executable.encode(), b"-m", b"chit", b"show", b"ab\xff"],
        env={"CHIT_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == ExitCode.USAGE
    assert proc.stderr.decode().splitlines() == [
        "chit: argument 2 is not valid UTF-8 (it holds byte 0xff); pass text in UTF-8"
    ]


def test_error_line_never_carries_control_characters() -> None:
    from chit.cli.main import one_line

    assert one_line("a\nb\r\n\tc") == "a b c"
    assert one_line("\x1b[31mred\x07") == "\\x1b[31mred\\x07"
    assert one_line("x\ud800") == "x\\ud800"


# --- case 10: header names and values validated on entry ------------------------------


@pytest.mark.parametrize(
    ("header", "says"),
    [
        ("A=b\r\nX-Injected: y", "cannot be sent"),
        ("A=b\nc", "cannot be sent"),
        ("A=b\x00c", "cannot be sent"),
        ("A:b=c", "invalid header name"),
        ("A b=c", "invalid header name"),
    ],
)
def test_bad_headers_are_refused_on_entry(home: Path, header: str, says: str) -> None:
    line = one_line_error(
        run(home, "servers", "add", "h", "--url", "http://127.0.0.1:9/mcp", "--header", header)
    )
    assert says in line
    assert "\r" not in line and "\x00" not in line
    assert not (home / "config.toml").exists()


def test_header_injected_through_a_variable_is_refused_at_connect(tmp_path: Path) -> None:
    vault = Vault.unlock(MemoryKeyStore(), None)
    registry = Registry(tmp_path / "home" / "config.toml", lambda: vault)
    registry.add(
        ServerSpec(
            name="h",
            transport="http",
            url="http://127.0.0.1:9/mcp",
            headers={"Authorization": "Bearer ${TOKEN}"},
        )
    )
    with pytest.raises(UsageError, match="cannot be sent"):
        registry.resolve("h", {"TOKEN": "x\r\nX-Evil: 1"})
    assert registry.resolve("h", {"TOKEN": "fine"}).headers == {"Authorization": "Bearer fine"}


def test_env_names_and_nul_values_are_refused() -> None:
    for env in ({"A=B": "x"}, {"": "x"}, {"A": "x\x00y"}):
        with pytest.raises(ValueError, match="environment variable"):
            ServerSpec(name="s", transport="stdio", command="echo", env=env)
    with pytest.raises(ValueError, match="NUL"):
        ServerSpec(name="s", transport="stdio", command="echo", args=("a\x00",))


# --- case 11: token list shows last use -----------------------------------------------


def test_token_list_shows_last_use(tmp_path: Path) -> None:
    home = Home(tmp_path / "home").ensure()
    db = open_sidecar_db(home.sidecar_db_path)
    try:
        token = add_token(db, "bob")
        assert list_tokens(db)[0].last_used_at is None
    finally:
        db.close()
    verifier = SidecarTokenVerifier(home.sidecar_db_path)
    with clock.frozen(clock.parse_iso("2026-03-01T10:00:00Z")):
        access = anyio.run(verifier.verify_token, token)
        assert access is not None and access.client_id == "bob"
        assert anyio.run(verifier.verify_token, "chit_sc_wrong") is None
    db = open_sidecar_db(home.sidecar_db_path)
    try:
        assert list_tokens(db)[0].last_used_at == "2026-03-01T10:00:00.000Z"
    finally:
        db.close()
    shown = run(home.root, "sidecar", "token", "list")
    assert shown.exit_code == 0
    assert "last used 2026-03-01T10:00:00.000Z" in shown.stdout


# --- the same class elsewhere: text others chose is printed inert ---------------------


def test_listings_print_control_characters_as_escapes(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from tests.cli_support import no_keyring_env, run_chit, seed_receipt

    evil_tool = "tool\x1b]0;owned\x07\x1b[2J\u202eexe.txt"
    receipt = seed_receipt(
        Home(tmp_path), handle="h" * 24, now=datetime(2026, 3, 1, tzinfo=UTC), tool=evil_tool
    )
    env = no_keyring_env(tmp_path)
    for argv in (["receipts"], ["show", receipt.receipt_id]):
        ran = run_chit(*argv, env=env)
        assert ran.code == 0, ran.err
        assert "\x1b" not in ran.out and "\x07" not in ran.out and "\u202e" not in ran.out
        assert "\\x1b" in ran.out
    as_json = run_chit("show", receipt.receipt_id, "--json", env=env)
    assert json.loads(as_json.out)["tool"] == evil_tool  # data stays exact in JSON


def test_an_imported_file_cannot_write_escapes_to_the_terminal(home: Path) -> None:
    source = home.parent / "mcp.json"
    source.write_text(
        json.dumps({"mcpServers": {"ok": {"command": "run\x1b[2Jme", "args": ["\x1b]0;x\x07"]}}})
    )
    imported = run(home, "servers", "import", str(source))
    assert imported.exit_code == 0, imported.output
    listed = run(home, "servers", "list")
    assert "\x1b" not in listed.stdout and "\x07" not in listed.stdout
    assert "run\\x1b[2Jme" in listed.stdout


def test_an_exception_group_is_classified_by_what_failed() -> None:
    import httpx2

    from chit.tasks.client.errors import classify

    group = BaseExceptionGroup("tg", [ExceptionGroup("inner", [httpx2.ConnectError("refused")])])
    err = classify(group, "initialize")
    assert err.failure_class == "transient"
    assert "ConnectError: refused" in str(err) and "ExceptionGroup" not in str(err)
