"""A call is checked before anything is recorded: the server, the tool, the arguments.

The checks live in the engine (``Calls.call``), so the CLI, the TUI and the daemon's
socket all get them: an unknown server is "not found" (exit 3), an unknown tool is "not
found" naming the tools the server does have, and arguments the tool's ``inputSchema``
refuses are a usage error (exit 2) with one line per problem. None of them leaves an
intent or a receipt behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chit.errors import ExitCode, NotFound, UsageError
from chit.runtime import Supervisor
from chit.runtime.arguments import argument_problems
from chit.tasks.client import InProcessServer
from chit.tasks.server import TaskContext, TaskRuntime, build_server
from tests.engine_support import fast_options, supervisor

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _library(db: Path) -> Any:
    runtime = TaskRuntime(db)

    @runtime.task_tool("book")
    async def book(task: TaskContext, title: str, copies: int, note: str = "") -> str:
        """Order ``copies`` of a book."""
        return f"ordered {copies} × {title}"

    return build_server("library", runtime, log_level="WARNING")


def _nothing_recorded(sup: Supervisor) -> None:
    assert sup.store.intents.list() == []
    assert sup.store.receipts.count() == 0


async def test_unknown_server_is_not_found_and_records_nothing(tmp_path: Path) -> None:
    spec = InProcessServer(_library(tmp_path / "t.db"))
    async with supervisor(tmp_path / "home", {"lib": spec}, fast_options("2026")) as sup:
        with pytest.raises(NotFound) as caught:
            await sup.call("libr", "book", {"title": "Dune", "copies": 1})
        assert caught.value.exit_code is ExitCode.NOT_FOUND
        assert "no server named 'libr'" in caught.value.message
        _nothing_recorded(sup)


@pytest.mark.parametrize("mode", ["2026", "legacy"])
async def test_unknown_tool_names_the_real_ones_and_records_nothing(
    tmp_path: Path, mode: str
) -> None:
    spec = InProcessServer(_library(tmp_path / "t.db"))
    async with supervisor(tmp_path / "home", {"lib": spec}, fast_options(mode)) as sup:  # type: ignore[arg-type]
        with pytest.raises(NotFound) as caught:
            await sup.call("lib", "bok", {"title": "Dune", "copies": 1})
        assert caught.value.message == "server 'lib' has no tool 'bok'; its tools: book"
        _nothing_recorded(sup)
        done = await sup.call("lib", "book", {"title": "Dune", "copies": 2})  # still works
        assert done.tool == "book"


async def test_arguments_are_checked_against_the_input_schema(tmp_path: Path) -> None:
    spec = InProcessServer(_library(tmp_path / "t.db"))
    async with supervisor(tmp_path / "home", {"lib": spec}, fast_options("2026")) as sup:
        with pytest.raises(UsageError) as caught:
            await sup.call("lib", "book", {"copies": "two", "note": 5})
        assert caught.value.message == (
            "the arguments do not fit the input schema of lib/book (3 problems):"
        )
        assert list(caught.value.details) == [
            "copies: 'two' is not of type 'integer'",
            "note: 5 is not of type 'string'",
            "title: required",
        ]
        _nothing_recorded(sup)


def test_problems_name_nested_fields_and_stay_printable() -> None:
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}},
            "where": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
        "additionalProperties": False,
    }
    problems = argument_problems(schema, {"tags": ["a", 3], "where": {}, "bad\x1b[2J": 1})
    assert "tags[1]: 3 is not of type 'string'" in problems
    assert "where.city: required" in problems
    assert all(line.isprintable() for line in problems)
    assert any("Additional properties" in line and "bad" in line for line in problems)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"x": {"$ref": "https://example.invalid/s.json"}}},
        {"type": "no-such-type"},
        {"type": "object", "properties": {"x": {"type": "string", "pattern": "^(a+)+$"}}},
        "not a schema",
        {},
    ],
)
def test_a_hostile_or_broken_schema_never_blocks_or_hangs(schema: Any) -> None:
    # A server's schema that cannot be followed is the server's business (it judges the
    # call); a catastrophic pattern is not evaluated at all.
    assert argument_problems(schema, {"x": "a" * 40 + "!"}) == []


def test_many_problems_are_capped() -> None:
    schema = {"type": "object", "properties": {f"f{i:02d}": {"type": "integer"} for i in range(30)}}
    problems = argument_problems(schema, {f"f{i:02d}": "x" for i in range(30)})
    assert len(problems) == 11 and problems[-1] == "… and 20 more"


def test_a_changed_schema_is_checked_as_changed_and_a_kept_one_reuses_its_validator() -> None:
    """Validators are cached by the schema's content, never by the tool's name."""
    from chit.runtime import arguments

    loose: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "number"}}}
    strict = {**loose, "required": ["n"]}
    assert argument_problems(loose, {}) == []
    built = len(arguments._VALIDATORS)
    assert argument_problems(dict(loose), {}) == []  # an equal schema: no new validator
    assert len(arguments._VALIDATORS) == built
    assert argument_problems(strict, {}) == ["n: required"]  # the server's new schema
    assert argument_problems(strict, {"n": "x"}) == ["n: 'x' is not of type 'number'"]
