"""``chit tools SERVER TOOL``: one tool's arguments, readable, and its schema in ``--json``."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from chit.cli.schema_text import schema_lines, tool_lines
from tests.cli_support import no_keyring_env, run_chit
from tests.engine_support import file_key_env, write_config

pytestmark = pytest.mark.timeout(300)


@dataclass
class Tool:
    name: str
    title: str | None = None
    description: str | None = None
    task_support: str = "optional"
    input_schema: dict[str, Any] = field(default_factory=dict)


def test_schema_lines_show_types_choices_bounds_defaults_and_nesting() -> None:
    schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "description": "What to look for"},
            "depth": {"type": "integer", "minimum": 1, "maximum": 5, "default": 2},
            "mode": {
                "oneOf": [{"const": "fast", "title": "Quick look"}, {"const": "deep"}],
                "default": "fast",
            },
            "lang": {"type": "string", "enum": ["en", "de"], "enumNames": ["English", "German"]},
            "where": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                "required": ["city"],
            },
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
            "ref": {"$ref": "#/$defs/thing"},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    assert schema_lines(schema) == [
        "query  string, required, length >= 1: What to look for",
        "depth  integer, optional, >= 1, <= 5, default 2",
        'mode   choice, optional, default "fast"; one of "fast" (Quick look), "deep"',
        'lang   string, optional; one of "en" (English), "de" (German)',
        "where  object, optional",
        "  city  string, required",
        "  zip   string, optional",
        "tags   array of string, optional, items <= 3",
        "ref    see #/$defs/thing, optional",
        "(no other arguments)",
    ]


def test_hostile_schemas_render_bounded_and_printable() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for i in range(30):
        deep = {"type": "object", "properties": {f"level{i}": deep}}
    wide = {
        "type": "object",
        "properties": {f"p{i}\x1b[2J": {"type": "string"} for i in range(500)},
    }
    for schema in (deep, wide, "nonsense", {"properties": ["not", "a", "map"]}, {}):
        lines = schema_lines(schema)
        assert 1 <= len(lines) <= 201 and all(line.isprintable() for line in lines)
    assert schema_lines({}) == ["(none)"]
    lines = tool_lines("s", Tool("t\n", "T", "First line\nSecond\x07 line", "required", wide))
    assert lines[:4] == ["s/t — T", "  First line", "  Second? line", "tasks: required"]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    from chit.tasks.client import StdioServer

    home = tmp_path / "home"
    demo = StdioServer(
        sys.executable, ["-m", "chit", "demo-server", "--db", str(tmp_path / "tasks.db")]
    )
    write_config(home, {"demo": demo})
    base = no_keyring_env(home)
    base.update(file_key_env(home))
    return base


def test_tools_server_tool_prints_the_arguments(env: dict[str, str]) -> None:
    ran = run_chit("tools", "demo", "slow_compute", env=env)
    assert ran.code == 0, ran.err
    assert ran.out.splitlines() == [
        "demo/slow_compute",
        "  Work for `seconds` seconds, reporting progress; cancellable at any step.",
        "tasks: optional",
        "arguments:",
        "  seconds  number, optional, default 1.0: Seconds",
        '  label    string, optional, default "job": Label',
    ]
    doc = json.loads(run_chit("tools", "demo", "slow_compute", "--json", env=env).out)
    assert doc["name"] == "slow_compute" and doc["task_support"] == "optional"
    assert doc["input_schema"]["properties"]["seconds"]["type"] == "number"
    listing = json.loads(run_chit("tools", "demo", "--json", env=env).out)
    schemas = {t["name"]: t["input_schema"] for t in listing["tools"]}
    assert schemas["greet"]["properties"]["name"]["default"] == "World"


def test_tools_unknown_tool_exits_3_with_the_list(env: dict[str, str]) -> None:
    ran = run_chit("tools", "demo", "slow", env=env)
    assert ran.code == 3 and ran.out == ""
    assert ran.err.startswith("chit: server 'demo' has no tool 'slow'; its tools: slow_compute,")
    assert len(ran.err.strip().splitlines()) == 1
    assert run_chit("tools", "nosuch", "slow", env=env).code == 3
