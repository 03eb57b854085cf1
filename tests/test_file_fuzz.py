"""A bounded fuzz of every file chit reads: no content makes a command exit 1 or hang.

``config.toml``, ``data-key.json``, an ``mcpServers`` import file, an ``envFile`` and the
SQLite files are all things a person (or another program) may have written. Whatever
they hold, the commands that read them end with a documented exit code and one line.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from chit.cli.main import cli
from chit.errors import ExitCode

_n = itertools.count()

SETTINGS = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("file-fuzz")


def _home(root: Path) -> Path:
    home = root / f"h{next(_n)}"
    home.mkdir(mode=0o700)
    return home


def _run(home: Path, *argv: str, key_store: str = "file") -> Result:
    env = {
        "CHIT_HOME": str(home),
        "CHIT_KEY_STORE": key_store,
        "CHIT_NO_DAEMON": "1",
        "CHIT_DEBUG": "",
    }
    return CliRunner().invoke(cli, list(argv), env=env)


def _ok_or_one_line(result: Result, argv: Any) -> None:
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{argv!r} raised {result.exception!r}") from result.exception
    assert result.exit_code != ExitCode.INTERNAL, (argv, result.stderr)
    assert "Traceback" not in result.output
    if result.exit_code:
        lines = [ln for ln in result.stderr.splitlines() if not ln.startswith("chit: warning:")]
        assert len(lines) == 1 and lines[0].startswith("chit: "), (argv, result.stderr)


_toml_scalars = st.one_of(
    st.text(max_size=20),
    st.integers(),
    st.booleans(),
    st.floats(),
    st.lists(st.text(max_size=5), max_size=3),
)
_server_tables = st.dictionaries(
    st.sampled_from(["transport", "command", "args", "env", "cwd", "url", "headers", "x"]),
    st.one_of(_toml_scalars, st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3)),
    max_size=6,
)


def _toml_text(doc: dict[str, Any]) -> str:
    import tomlkit

    return tomlkit.dumps(doc)


@SETTINGS
@given(
    raw=st.one_of(
        st.binary(max_size=300),
        st.dictionaries(
            st.sampled_from(["servers", "store", "tui", "keymap", "settings"]),
            st.dictionaries(st.text(min_size=1, max_size=10), _server_tables, max_size=3),
            max_size=3,
        )
        .map(_toml_text)
        .map(str.encode),
    )
)
@example(raw=b'[servers."x\\n"]\ntransport = "stdio"\ncommand = "x"\n')
@example(raw=b'[servers.h]\ntransport = "http"\nurl = "http://x/mcp"\nheaders = {"A:b" = "c"}\n')
@example(raw=b"[servers.s]\ntransport = 'stdio'\ncommand = 'a\\u0000b'\n")
@example(raw=b"[store]\ntasks = 5\n")
@example(raw=b"[tui]\ntick = nan\n")
@example(raw=b"\xff\xfe[servers]")
@example(raw=b"a = " + b"[" * 5000 + b"]" * 5000)
def test_any_config_toml(root: Path, raw: bytes) -> None:
    home = _home(root)
    (home / "config.toml").write_bytes(raw)
    for argv in (["servers", "list"], ["servers", "remove", "x"], ["doctor", "--json"]):
        result = _run(home, *argv)
        _ok_or_one_line(result, (argv, raw[:80]))
        if argv[0] == "doctor":
            assert result.exit_code == 0  # findings, never a failure


@SETTINGS
@given(
    raw=st.one_of(
        st.binary(max_size=200),
        st.fixed_dictionaries(
            {
                "format": st.sampled_from(["chit-data-key", "x"]),
                "version": st.one_of(st.just(1), st.integers(), st.text(max_size=3)),
                "wrap": st.sampled_from(["none", "scrypt-aesgcm", "?"]),
                "key": st.one_of(st.text(max_size=60), st.integers()),
                "kdf": st.one_of(
                    st.none(),
                    st.fixed_dictionaries(
                        {
                            "n": st.integers(-5, 2**40),
                            "r": st.one_of(st.integers(-1, 100), st.booleans()),
                            "p": st.integers(-1, 100),
                            "salt": st.text(max_size=30),
                        }
                    ),
                ),
                "nonce": st.text(max_size=20),
            }
        ).map(lambda d: json.dumps(d).encode()),
    )
)
@example(raw=b'{"format": "chit-data-key", "version": 1, "wrap": "none", "key": "AAAA"}')
@example(raw=b"[" * 100_000)
def test_any_key_file(root: Path, raw: bytes) -> None:
    home = _home(root)
    key = home / "data-key.json"
    key.write_bytes(raw)
    key.chmod(0o600)
    doctor = _run(home, "doctor", "--json")
    _ok_or_one_line(doctor, raw[:80])
    assert doctor.exit_code == 0
    add = _run(home, "servers", "add", "h", "--url", "http://x/mcp", "--header", "A=b")
    _ok_or_one_line(add, raw[:80])
    assert add.exit_code in (0, ExitCode.KEY_STORE)


_json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=15,
)


@SETTINGS
@given(
    servers=st.dictionaries(
        st.text(max_size=12),
        st.one_of(
            _json_values,
            st.fixed_dictionaries(
                {},
                optional={
                    "type": st.sampled_from(["stdio", "http", "sse", "streamable-http", "x"]),
                    "command": st.one_of(st.text(max_size=10), st.integers()),
                    "args": st.one_of(st.lists(st.text(max_size=5), max_size=3), st.text()),
                    "env": st.one_of(st.dictionaries(st.text(max_size=5), _json_values), st.text()),
                    "url": st.one_of(st.just("http://127.0.0.1:9/mcp"), st.text(max_size=10)),
                    "headers": st.dictionaries(st.text(max_size=6), st.text(max_size=6)),
                    "envFile": st.sampled_from(["vars.env", "/dev/zero", "/", "nope.env"]),
                    "cwd": st.one_of(st.text(max_size=5), st.integers()),
                },
            ),
        ),
        max_size=4,
    ),
    env_file=st.binary(max_size=200),
)
def test_any_import_file(root: Path, servers: dict[str, Any], env_file: bytes) -> None:
    home = _home(root)
    (root / "vars.env").write_bytes(env_file)
    source = root / f"mcp{next(_n)}.json"
    source.write_text(json.dumps({"mcpServers": servers}))
    result = _run(home, "servers", "import", str(source), "--json", key_store="memory")
    _ok_or_one_line(result, servers)
    assert result.exit_code in (0, ExitCode.USAGE)
    listed = _run(home, "servers", "list", "--json", key_store="memory")
    _ok_or_one_line(listed, servers)
    assert listed.exit_code == 0  # what import wrote, chit can read back


@SETTINGS
@given(raw=st.binary(max_size=4096), name=st.sampled_from(["chit.db", "sidecar.db"]))
@example(raw=b"SQLite format 3\x00" + b"\xff" * 200, name="chit.db")
@example(raw=b"", name="chit.db")
def test_any_database_file(root: Path, raw: bytes, name: str) -> None:
    home = _home(root)
    (home / name).write_bytes(raw)
    (home / name).chmod(0o600)
    commands = (
        [["receipts"], ["export"], ["doctor", "--json"], ["intents"]]
        if name == "chit.db"
        else [["sidecar", "token", "list"], ["sidecar", "decisions"], ["sidecar", "--stats"]]
    )
    for argv in commands:
        result = _run(home, *argv)
        _ok_or_one_line(result, (argv, raw[:40]))
