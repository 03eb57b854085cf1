"""A bounded Hypothesis fuzz of the command line: no input makes chit exit 1 or trace back.

Exit 1 means "a bug in chit" (docs/cli.md). Whatever a person types — unknown options,
control characters, lone surrogates (what non-UTF-8 argv bytes become), NaN, JSON nested
50,000 deep, paths to devices — must end in a documented code with at most one line on
stderr. Every command that finishes on its own is fuzzed (the long-running servers and
the TUI are left out), each example on a fresh home, in-process through click's runner.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from chit.cli.main import cli
from chit.errors import ExitCode

# Commands that serve, follow or draw until stopped: not for a fuzz loop.
LONG_RUNNING = {
    "daemon",
    "daemon start",
    "daemon restart",
    "demo",
    "demo-server",
    "open",
    "reconcile",
    "sidecar",
    "sidecar executor",
    "follow",
}


def _commands(command: click.Command, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [] if not path else [path]
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):  # chit's commands load on demand
            sub = command.get_command(ctx, name)
            assert sub is not None, (*path, name)
            found += _commands(sub, (*path, name))
    return found


COMMANDS = [p for p in _commands(cli) if " ".join(p) not in LONG_RUNNING]


def _options(path: tuple[str, ...]) -> list[str]:
    command = _command(path)
    return [opt for param in command.params for opt in getattr(param, "opts", []) if opt[:1] == "-"]


HOSTILE = [
    "x\n",
    "\x1b[31mred",
    "\ud800",
    "ab\udcff",
    '{"n": NaN}',
    "[" * 50_000,
    '{"a":' * 100 + "1" + "}" * 100,
    "--",
    "-",
    "/dev/zero",
    "/",
    "..",
    "",
    " ",
    "0",
    "-1",
    "1e999",
    "nan",
    "k=v",
    "=",
    "A:b=c",
    "A=b\r\nX: y",
    "01ARZ3NDEKTSV4RRFFQ69G5FAV",
    "sealed:v1:AAAA",
    "${HOME}",
    "é" * 70,
]

# Real argv never holds a NUL (the OS cannot pass one); everything else may appear.
_text = st.text(st.characters(blacklist_characters="\x00"), max_size=40)


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    path = draw(st.sampled_from(COMMANDS))
    options = _options(path)
    token = st.one_of(
        st.sampled_from(options) if options else st.nothing(),
        st.sampled_from(HOSTILE),
        _text,
        st.integers(-(10**20), 10**20).map(str),
    )
    return [*path, *draw(st.lists(token, max_size=6))]


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), name)  # loads it (lazy)
        assert found is not None, path
        command = found
    return command


_value = st.one_of(st.sampled_from(HOSTILE), _text)


@st.composite
def well_formed_lines(draw: st.DrawFn) -> list[str]:
    """A command with every argument filled and some options given, values hostile:
    past click's parser, into the command itself."""
    path = draw(st.sampled_from(COMMANDS))
    command = _command(path)
    argv = [*path]
    for param in command.params:
        if isinstance(param, click.Argument):
            count = draw(st.integers(0, 2)) if param.nargs == -1 else 1
            argv += [draw(_value) for _ in range(count)]
        elif isinstance(param, click.Option) and draw(st.booleans()):
            name = param.opts[0]
            if param.is_flag:
                argv.append(name)
            elif isinstance(param.type, click.Choice) and draw(st.booleans()):
                argv += [name, str(draw(st.sampled_from(list(param.type.choices))))]
            else:
                argv += [name, draw(_value)]
    return argv


def _check(result: Result, argv: list[str]) -> None:
    shown = repr(argv)[:300]
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{shown} raised {result.exception!r}") from result.exception
    assert result.exit_code != ExitCode.INTERNAL, f"{shown}: exit 1: {result.stderr}"
    assert "Traceback" not in result.output, f"{shown}: {result.output[-2000:]}"
    status_query = argv[:2] == ["daemon", "status"]  # its exit code *is* the answer
    if result.exit_code != 0 and not result.stderr.startswith("Usage:") and not status_query:
        # A usage error or a chit error: one line (warnings before it are one line each).
        lines = [ln for ln in result.stderr.splitlines() if not ln.startswith("chit: warning: ")]
        assert len(lines) == 1, (shown, result.stderr)


_counter = itertools.count()


@pytest.fixture(scope="module")
def homes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-homes")


def _env(home: Path) -> dict[str, Any]:
    return {
        "CHIT_HOME": str(home),
        "CHIT_KEY_STORE": "memory",
        "CHIT_NO_DAEMON": "1",
        "CHIT_READ_TIMEOUT": "2",
        "CHIT_DEBUG": "",
    }


@pytest.mark.timeout(900)
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(argv=command_lines())
@example(argv=["call", "srv", "tool", "--args", '{"n": NaN}'])
@example(argv=["call", "srv", "tool", "--args", "[" * 50_000])
@example(argv=["servers", "add", "x\n", "--command", "echo"])
@example(argv=["servers", "add", "h", "--url", "http://x/mcp", "--header", "A=b\r\nC: d"])
@example(argv=["servers", "import", "/dev/zero"])
@example(argv=["show", "\udcff"])
@example(argv=["receipts", "--limit", "x"])
@example(argv=["sidecar", "token", "add", "bob\n"])
@example(argv=["sidecar", "decide", "d", "--json", "\ud800"])
@example(argv=["prune", "--older-than", "1e999"])
@example(argv=["tools", "nosuch", "--timeout", "nan"])
def test_no_command_line_is_an_internal_error(homes: Path, argv: list[str]) -> None:
    home = homes / f"h{next(_counter)}"
    result = CliRunner().invoke(cli, argv, env=_env(home))
    _check(result, argv)


@pytest.mark.timeout(900)
@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(argv=well_formed_lines())
def test_no_well_formed_command_with_hostile_values_is_an_internal_error(
    homes: Path, argv: list[str]
) -> None:
    home = homes / f"w{next(_counter)}"
    result = CliRunner().invoke(cli, argv, env=_env(home))
    _check(result, argv)
