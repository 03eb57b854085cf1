"""The CLI's exit codes, each produced where docs/cli.md says, through the real ``chit``.

Every test runs ``python -m chit`` in a subprocess on a private home, as a script would.
A ``chit demo-server --http`` (its own task store, so a test can make a task vanish)
serves the module.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chit import clock
from chit.errors import ExitCode
from chit.home import Home
from tests.cli_support import Ran, no_keyring_env, run_chit, seed_receipt
from tests.engine_support import file_key_env, write_config
from tests.interop_support import http_server
from tests.proc_support import free_port

pytestmark = pytest.mark.timeout(420)  # several CLI processes, each bounded by CLI_SAFETY_S

BAD_SERVER = Path(__file__).parent / "fakes" / "bad_server.py"
CHIT = [sys.executable, "-m", "chit"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    tmp = tmp_path_factory.mktemp("contract-demo")
    port = free_port()
    db = tmp / "tasks.db"
    argv = [sys.executable, "-m", "chit", "demo-server", "--http", f"127.0.0.1:{port}"]
    with http_server([*argv, "--db", str(db)], port, log=tmp / "server.log"):
        yield f"http://127.0.0.1:{port}/mcp", db


@pytest.fixture
def env(tmp_path: Path, demo: tuple[str, Path]) -> dict[str, str]:
    from chit.tasks.client import HttpServer, StdioServer

    home = tmp_path / "home"
    bad = StdioServer(sys.executable, [str(BAD_SERVER), "create_error_missing"])
    write_config(home, {"demo": HttpServer(demo[0]), "bad": bad})
    base = no_keyring_env(home)
    base.update(file_key_env(home))
    return base


def chit(env: dict[str, str], *args: str) -> Ran:
    return run_chit(*args, env=env)


def error_lines(ran: Ran, code: ExitCode) -> list[str]:
    """The stderr lines of a run that must have exited ``code`` (each a ``chit:`` line)."""
    assert ran.code == int(code), (ran.code, ran.err)
    lines = ran.err.strip().splitlines()
    assert lines and all(line.startswith("chit: ") for line in lines), ran.err
    return lines


def nothing_recorded(env: dict[str, str]) -> None:
    assert json.loads(chit(env, "receipts", "--json").out) == []
    assert json.loads(chit(env, "intents", "--all", "--json").out) == []


# --- 1 INTERNAL ---------------------------------------------------------------------------

BOOM = """
import sys
import chit.cli.output as output
def boom(*args, **kwargs):
    raise RuntimeError("boom")
output.emit_json = boom
from chit.cli.main import main
sys.argv = ["chit", "receipts", "--json"]
main()
"""


def test_a_bug_exits_1_with_one_line_and_the_traceback_only_on_request(
    env: dict[str, str],
) -> None:
    ran = subprocess.run(
        [sys.executable, "-c", BOOM], env=env, capture_output=True, text=True, timeout=60
    )
    (line,) = error_lines(Ran(ran.returncode, ran.stdout, ran.stderr), ExitCode.INTERNAL)
    assert "internal error: RuntimeError: boom" in line and "CHIT_DEBUG=1" in line
    debug = subprocess.run(
        [sys.executable, "-c", BOOM],
        env={**env, "CHIT_DEBUG": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert debug.returncode != 0 and "Traceback" in debug.stderr


# --- 2 USAGE, 3 NOT_FOUND: what a call is checked for before anything is recorded ------


def test_unknown_server_exits_3_and_records_nothing(env: dict[str, str]) -> None:
    (line,) = error_lines(chit(env, "call", "demoo", "greet"), ExitCode.NOT_FOUND)
    assert "no server named 'demoo'" in line
    nothing_recorded(env)


def test_unknown_tool_exits_3_naming_the_tools_and_records_nothing(env: dict[str, str]) -> None:
    (line,) = error_lines(chit(env, "call", "demo", "slow_compte"), ExitCode.NOT_FOUND)
    assert "server 'demo' has no tool 'slow_compte'; its tools: slow_compute," in line
    assert "greet" in line and "confirm_delete" in line
    nothing_recorded(env)


def test_arguments_that_do_not_fit_exit_2_one_line_per_field(env: dict[str, str]) -> None:
    ran = chit(
        env, "call", "demo", "slow_compute", "--arg", "seconds=soon", "--args", '{"label": 7}'
    )
    lines = error_lines(ran, ExitCode.USAGE)
    assert lines == [
        "chit: the arguments do not fit the input schema of demo/slow_compute (2 problems):",
        "chit:   label: 7 is not of type 'string'",
        "chit:   seconds: 'soon' is not of type 'number'",
    ]
    nothing_recorded(env)


def test_an_ambiguous_prefix_exits_2_an_unknown_one_3(env: dict[str, str]) -> None:
    home = Home(Path(env["CHIT_HOME"]))
    now = clock.now()
    first = seed_receipt(home, handle="t-one", now=now).receipt_id
    second = seed_receipt(home, handle="t-two", now=now).receipt_id
    shared = next(i for i in range(26) if first[i] != second[i])
    prefix = first[:shared]
    (line,) = error_lines(chit(env, "show", prefix), ExitCode.USAGE)
    assert "matches several receipts" in line
    (line,) = error_lines(chit(env, "show", "ZZZZZZZZZ"), ExitCode.NOT_FOUND)
    assert chit(env, "show", first[: shared + 1]).code == 0  # unique again


# --- 5 STORE ------------------------------------------------------------------------------


def test_a_corrupt_store_exits_5(env: dict[str, str]) -> None:
    home = Path(env["CHIT_HOME"])
    (home / "chit.db").write_bytes(b"this is not a database" * 200)
    (line,) = error_lines(chit(env, "receipts"), ExitCode.STORE)
    assert "store" in line


def test_a_store_from_a_newer_chit_exits_5(env: dict[str, str]) -> None:
    home = Path(env["CHIT_HOME"])
    assert chit(env, "receipts").code == 0  # creates the store
    with sqlite3.connect(home / "chit.db") as conn:
        conn.execute("PRAGMA user_version = 9999")
    (line,) = error_lines(chit(env, "receipts"), ExitCode.STORE)
    assert "newer" in line


# --- 7 PROTOCOL ---------------------------------------------------------------------------


def test_a_server_that_refuses_the_call_exits_7(env: dict[str, str]) -> None:
    (line,) = error_lines(chit(env, "call", "bad", "job"), ExitCode.PROTOCOL)
    assert "refused the call" in line
    (intent,) = json.loads(chit(env, "intents", "--all", "--json").out)
    assert intent["state"] == "rejected"  # recorded as refused: never retried


# --- 12 CANCELLED, 14 EXPIRED_OR_LOST: --wait while something happens elsewhere --------


def _waiting_call(env: dict[str, str], label: str) -> tuple[subprocess.Popen[str], str]:
    """``chit call … --wait`` in the background; returns it and its receipt id."""
    args = json.dumps({"seconds": 60, "label": label})
    proc = subprocess.Popen(
        [*CHIT, "call", "demo", "slow_compute", "--args", args, "--wait", "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while True:  # the other process records the receipt when the server accepts
        listed = json.loads(chit(env, "receipts", "--json").out)
        if listed:
            return proc, str(listed[0]["receipt_id"])
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the waiting call recorded no receipt"


def _ended(proc: subprocess.Popen[str]) -> tuple[int, dict[str, object], str]:
    out, err = proc.communicate(timeout=90)
    return proc.returncode, json.loads(out), err


def test_wait_on_a_task_cancelled_by_another_process_exits_12(env: dict[str, str]) -> None:
    proc, rid = _waiting_call(env, "cancel-me")
    try:
        assert chit(env, "cancel", rid).code == 0
        code, doc, err = _ended(proc)
    finally:
        proc.kill()
    assert code == int(ExitCode.CANCELLED), err
    assert doc["state"] == "cancelled"


def test_wait_on_a_task_that_vanished_exits_14(env: dict[str, str], demo: tuple[str, Path]) -> None:
    proc, rid = _waiting_call(env, "vanish-me")
    try:
        with sqlite3.connect(demo[1], timeout=30) as conn:  # the server forgets the task
            gone = conn.execute("DELETE FROM tasks WHERE args_json LIKE '%vanish-me%'").rowcount
        assert gone == 1
        code, doc, err = _ended(proc)
    finally:
        proc.kill()
    assert code == int(ExitCode.EXPIRED_OR_LOST), err
    assert doc["retrieval"] == "vanished" and doc["receipt_id"] == rid


# --- the same through the daemon's socket ----------------------------------------------


def test_the_checks_hold_through_the_daemon(tmp_path: Path, demo: tuple[str, Path]) -> None:
    from chit.tasks.client import HttpServer
    from tests.daemon_support import chit as daemon_chit
    from tests.daemon_support import daemon_env, daemon_home

    with daemon_home(tmp_path / "home") as home:
        write_config(home, {"demo": HttpServer(demo[0])})
        env = daemon_env(home)
        ran = daemon_chit("call", "demo", "slow_compute", "--arg", "seconds=soon", env=env)
        assert error_lines(Ran(ran.code, ran.out, ran.err), ExitCode.USAGE) == [
            "chit: the arguments do not fit the input schema of demo/slow_compute (1 problem):",
            "chit:   seconds: 'soon' is not of type 'number'",
        ]
        ran = daemon_chit("call", "demo", "nope", env=env)
        (line,) = error_lines(Ran(ran.code, ran.out, ran.err), ExitCode.NOT_FOUND)
        assert "has no tool 'nope'; its tools: slow_compute" in line
        ran = daemon_chit("call", "dem", "greet", env=env)
        error_lines(Ran(ran.code, ran.out, ran.err), ExitCode.NOT_FOUND)
        nothing_recorded({**env, "CHIT_NO_DAEMON": "1"})


# --- 130: Ctrl-C is not a bug ---------------------------------------------------------------


def test_ctrl_c_in_a_command_exits_130_not_1(env: dict[str, str], tmp_path: Path) -> None:
    import signal

    from chit.tasks.client import StdioServer

    started = tmp_path / "mute-started"
    mute = StdioServer(  # starts, says so, and never answers initialize
        sys.executable,
        ["-c", f"import time; open({str(started)!r}, 'w').close(); time.sleep(120)"],
    )
    write_config(Path(env["CHIT_HOME"]), {"mute": mute})
    proc = subprocess.Popen(
        [*CHIT, "tools", "mute", "--timeout", "120"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not started.exists():  # the server process (another program) is up
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == int(ExitCode.DETACHED), err
    assert err.strip().splitlines() == ["chit: interrupted"]


# --- an answer that cannot be delivered -----------------------------------------------------


@pytest.mark.parametrize("mode", ["2026", "legacy"])
def test_an_answer_the_server_cannot_take_exits_8_at_once(tmp_path: Path, mode: str) -> None:
    """The server restarted without the task (a new store): the answer has nowhere to go."""
    from chit.tasks.client import HttpServer

    port = free_port()
    argv = [*CHIT, "demo-server", "--http", f"127.0.0.1:{port}"]
    home = tmp_path / "home"
    write_config(home, {"demo": HttpServer(f"http://127.0.0.1:{port}/mcp")})
    env = {**no_keyring_env(home), **file_key_env(home), "CHIT_TASK_MODE": mode}
    with http_server([*argv, "--db", str(tmp_path / "before.db")], port):
        ran = chit(env, "call", "demo", "confirm_delete", "--arg", "filename=x", "--json")
        rid = json.loads(ran.out)["receipt_id"]
        waited = chit(env, "follow", rid)  # until the prompt is pending
        assert waited.code == int(ExitCode.INPUT_REQUIRED), waited.err
    with http_server([*argv, "--db", str(tmp_path / "after.db")], port):
        ran = chit(env, "answer", rid, "--json", '{"confirm": true}')
    # Said as what it is (it was a re-delivery wait ending in "unreachable", exit 6).
    (line,) = error_lines(ran, ExitCode.CONFLICT)
    assert "the server no longer knows this task" in line
    shown = json.loads(chit(env, "show", rid, "--json").out)
    assert shown["retrieval"] == "vanished"
