"""Pending input requests on a terminal: ``chit show`` lists the fields, the prompt re-asks.

The rendering and the prompt are functions of plain data (a request, scripted input), so
most of this drives them directly; the last tests go through a real pseudo-terminal:
``chit call --wait`` and ``chit answer`` asking, refusing a bad value, and asking again.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from chit.errors import UsageError
from chit.home import Home
from chit.receipts import InputKind, InputRequest
from tests.cli_support import CLI_SAFETY_S, no_keyring_env, run_chit, seed_receipt
from tests.engine_support import file_key_env, write_config
from tests.interop_support import http_server
from tests.proc_support import free_port

pytestmark = pytest.mark.timeout(300)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "copies": {
            "type": "integer",
            "title": "Copies",
            "minimum": 1,
            "maximum": 10,
            "default": 2,
        },
        "priority": {
            "type": "string",
            "title": "Priority",
            "oneOf": [
                {"const": "low", "title": "Whenever"},
                {"const": "high", "title": "Today, please"},
            ],
        },
        "size": {"type": "string", "enum": ["s", "l"], "enumNames": ["Small", "Large"]},
        "colours": {
            "type": "array",
            "title": "Colours",
            "items": {"anyOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
        },
        "gift": {"type": "boolean", "title": "Gift wrap", "default": False},
        "note": {"type": "string", "description": "Anything \x1b[31melse\x1b[0m?"},
    },
    "required": ["copies", "priority", "size"],
}


def _request(schema: dict[str, Any] | None = SCHEMA, **extra: Any) -> InputRequest:
    return InputRequest(
        key="k1",
        message="How should the order go?",
        requested_schema=schema,
        received_at=datetime(2026, 1, 1, tzinfo=UTC),
        **extra,
    )


def test_request_lines_give_types_options_with_titles_and_defaults() -> None:
    from chit.cli.forms import request_lines

    lines = request_lines(_request(), indent="")
    assert lines == [
        "How should the order go?",
        "- copies (whole number, required, 1..10): Copies [default: 2]",
        "- priority (one of, required): Priority",
        "    low — Whenever",
        "    high — Today, please",
        "- size (one of, required)",
        "    s — Small",
        "    l — Large",
        "- colours (any of, comma-separated, optional): Colours",
        "    r — Red",
        "    g — Green",
        "- gift (yes/no, optional): Gift wrap [default: no]",
        "- note (text, optional): Anything ?[31melse?[0m?",
    ]
    assert all(line.isprintable() for line in lines)


class Script:
    """Scripted answers for the prompt, and what it said."""

    def __init__(self, *typed: str) -> None:
        self.typed = list(typed)
        self.asked: list[tuple[str, str | None]] = []
        self.said: list[str] = []

    def ask(self, label: str, default: str | None) -> str:
        self.asked.append((label, default))
        answer = self.typed.pop(0)
        return default if answer == "" and default is not None else answer

    def say(self, line: str) -> None:
        self.said.append(line)


def test_the_prompt_asks_again_until_each_value_fits() -> None:
    from chit.cli.forms import prompt_answer

    script = Script(
        "twelve",  # copies: not a number
        "12",  # copies: out of range
        "",  # copies: the default (2)
        "today, PLEASE",  # priority: by title, any case
        "m",  # size: not an option
        "Large",  # size: by title
        "Red, g",  # colours: titles and values mixed
        "perhaps",  # gift: not yes/no
        "",  # gift: the default (no)
        "",  # note: optional, left out
    )
    answer = prompt_answer(_request(), script.ask, script.say)
    assert answer == {
        "copies": 2,
        "priority": "high",
        "size": "l",
        "colours": ["r", "g"],
        "gift": False,
    }
    retries = [line for line in script.said if line.endswith("try again")]
    assert retries == [
        "Copies: expected a whole number, got 'twelve' — try again",
        "Copies: must be at most 10 — try again",
        "size: 'm' is not one of the options: s, l — try again",
        "Gift wrap: expected yes or no, got 'perhaps' — try again",
    ]
    assert ("Copies", "2") in script.asked and ("Gift wrap", "no") in script.asked
    assert script.typed == []


def test_a_required_field_cannot_be_skipped() -> None:
    from chit.cli.forms import prompt_answer

    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    script = Script("", "", "yes")
    assert prompt_answer(_request(schema), script.ask, script.say) == {"ok": True}
    assert script.said.count("ok: an answer is required — try again") == 2


def test_a_sampling_question_is_a_form() -> None:
    """Shown as its conversation, line by line and printable; asked field by field."""
    from chit.cli.forms import prompt_answer, request_lines
    from chit.reconcile.questions import SAMPLING_SCHEMA

    message = "the server asks:\nsystem: be [bold]brief[/]\nuser: 2+2?\x1b[2J\n(at most 9 tokens)"
    request = _request(SAMPLING_SCHEMA, kind=InputKind.SAMPLING).model_copy(
        update={"message": message}
    )
    lines = request_lines(request, indent="")
    assert lines[:4] == [
        "the server asks:",
        "system: be [bold]brief[/]",
        "user: 2+2??[2J",
        "(at most 9 tokens)",
    ]
    assert all(line.isprintable() for line in lines)
    script = Script("", "four", "")  # the reply is required; the model takes its default
    answer = prompt_answer(request, script.ask, script.say)
    assert answer == {"text": "four", "model": "a person, through chit"}
    assert script.said.count("Reply: an answer is required — try again") == 1


def test_a_roots_answer_that_is_not_file_uris_is_asked_again() -> None:
    """The roots form (a task's or one outside a task): only file:// URIs are sent."""
    from chit.cli.forms import prompt_answer
    from chit.reconcile.questions import ROOTS_SCHEMA

    request = _request(ROOTS_SCHEMA, kind=InputKind.ROOTS)
    script = Script("https://x.example/ file:///ok", "file:///srv/a file:///srv/b")
    answer = prompt_answer(request, script.ask, script.say)
    assert answer == {"roots": "file:///srv/a file:///srv/b"}
    refused = "roots: 'https://x.example/' is not a file:// URI — try again"
    assert script.said.count(refused) == 1, script.said


@pytest.mark.parametrize(
    "request_",
    [
        _request(kind=InputKind.URL, url="https://example.com/consent"),
        _request(None, kind=InputKind.SAMPLING),  # a sampling request without chit's form
        _request({"type": "object", "properties": {"x": {"type": "object"}}, "required": ["x"]}),
    ],
    ids=["url", "sampling", "unbuildable-required-field"],
)
def test_what_cannot_be_asked_says_how_to_answer_instead(request_: InputRequest) -> None:
    from chit.cli.forms import prompt_answer

    script = Script()
    with pytest.raises(UsageError) as caught:
        prompt_answer(request_, script.ask, script.say)
    assert "chit answer RECEIPT --json" in caught.value.message


# --- through chit ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("forms-demo")
    port = free_port()
    argv = [sys.executable, "-m", "chit", "demo-server", "--http", f"127.0.0.1:{port}"]
    with http_server([*argv, "--db", str(tmp / "tasks.db")], port, log=tmp / "server.log"):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture
def env(tmp_path: Path, demo_url: str) -> dict[str, str]:
    from chit.tasks.client import HttpServer

    home = tmp_path / "home"
    write_config(home, {"demo": HttpServer(demo_url)})
    base = no_keyring_env(home)
    base.update(file_key_env(home))
    return base


def test_show_lists_the_pending_fields(env: dict[str, str]) -> None:
    from chit.receipts.events import InputRequested, InputRequestSeen
    from chit.reconcile import ReceiptWriter
    from chit.store import Store

    home = Home(Path(env["CHIT_HOME"]))
    rid = seed_receipt(home, handle="t-forms", now=datetime.now(UTC)).receipt_id
    seen = InputRequestSeen(key="k1", message="How should the order go?", requested_schema=SCHEMA)
    with Store.open(home) as store:
        ReceiptWriter(store).apply(rid, [InputRequested(request=seen)])
    out = run_chit("show", rid, env=env).out
    assert "input        [pending] k1: How should the order go?" in out
    assert "             - priority (one of, required): Priority" in out
    assert "                 high — Today, please" in out
    assert "             - copies (whole number, required, 1..10): Copies [default: 2]" in out
    shown = json.loads(run_chit("show", rid, "--json", env=env).out)
    assert shown["input_requests"][0]["requested_schema"] == SCHEMA


class Terminal:
    """``python -m chit ARGS`` on a pseudo-terminal: read what it shows, type answers."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "chit", *args],
            env=env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self.seen = ""

    def expect(self, text: str, timeout: float = 60) -> None:
        """Read until ``text`` has appeared (the process is another program: a deadline)."""
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, f"{text!r} never appeared; the terminal showed:\n{self.seen}"
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:  # the process ended and closed its side
                    chunk = b""
                assert chunk or text in self.seen, f"{text!r} never appeared:\n{self.seen}"
                self.seen += chunk.decode(errors="replace").replace("\r\n", "\n")

    def type(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def wait(self, timeout: float = 60) -> int:
        """Read everything it still shows until it exits; its exit code."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"it did not end; the terminal showed:\n{self.seen}"
            ready, _, _ = select.select([self.master], [], [], min(left, 1.0))
            try:
                chunk = os.read(self.master, 4096) if ready else b""
            except OSError:  # every writer closed its side: it is done
                break
            self.seen += chunk.decode(errors="replace").replace("\r\n", "\n")
            if not ready and self.proc.poll() is not None:
                break
        code = self.proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        os.close(self.master)
        return code


@pytest.mark.parametrize("mode", ["2026", "legacy"])
def test_call_wait_on_a_terminal_asks_again_on_a_bad_value(env: dict[str, str], mode: str) -> None:
    env["CHIT_TASK_MODE"] = mode
    term = Terminal(env, "call", "demo", "confirm_delete", "--arg", "filename=a.txt", "--wait")
    try:
        term.expect("- confirm (yes/no, required)")
        term.expect(": ")
        term.type("perhaps")
        term.expect("expected yes or no, got 'perhaps' — try again")
        term.type("yes")
        assert term.wait() == 0, term.seen
    finally:
        term.proc.kill()
    assert "state    completed" in term.seen and "Deleted a.txt" in term.seen


def test_answer_on_a_terminal_asks_for_the_fields(env: dict[str, str]) -> None:
    env["CHIT_TASK_MODE"] = "2026"
    ran = run_chit("call", "demo", "confirm_delete", "--arg", "filename=b.txt", "--json", env=env)
    rid = json.loads(ran.out)["receipt_id"]
    deadline = time.monotonic() + CLI_SAFETY_S
    while json.loads(run_chit("show", rid, "--json", env=env).out)["state"] != "input_required":
        assert time.monotonic() < deadline
        run_chit("reconcile", "--once", env=env)
    term = Terminal(env, "answer", rid)
    try:
        term.expect("- confirm (yes/no, required)")
        term.type("")
        term.expect("an answer is required — try again")
        term.type("no")
        assert term.wait() == 0, term.seen
    finally:
        term.proc.kill()
    assert f"receipt  {rid}" in term.seen
    assert run_chit("answer", rid, env=env).code == 2  # no terminal: say what to give


@pytest.mark.parametrize("mode", ["2026", "legacy"])
def test_call_wait_asks_a_tasks_sampling_and_roots_on_the_terminal(
    env: dict[str, str], mode: str
) -> None:
    """A task's sampling and roots requests are the same forms on a terminal."""
    from tests.proxy_support import declare

    declare(Path(env["CHIT_HOME"]), "sampling", "roots", server="demo")
    env["CHIT_TASK_MODE"] = mode
    term = Terminal(env, "call", "demo", "summarize_notes", "--wait")
    try:
        term.expect("- text (text, required")
        term.expect(": ")
        term.type("Release shipped.")
        term.expect("Model name")
        term.type("")  # the default: a person, through chit
        term.expect("- roots (text, optional")
        term.expect(": ")
        term.type("https://x.example/")
        term.expect("roots: 'https://x.example/' is not a file:// URI — try again")
        term.type("file:///srv/term")
        assert term.wait() == 0, term.seen
    finally:
        term.proc.kill()
    assert "Summary by a person, through chit: Release shipped." in term.seen, term.seen
    assert "(roots: file:///srv/term)" in term.seen, term.seen
