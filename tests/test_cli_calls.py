"""``chit call / answer / cancel / accept / reject / reconcile / intents`` end to end.

One ``chit demo-server --http`` serves the module; each test registers it in a private
home's ``config.toml`` and drives chit in subprocesses, as a user would.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_support import CLI_SAFETY_S, Ran, no_keyring_env, run_chit
from tests.engine_support import file_key_env, write_config
from tests.interop_support import http_server
from tests.proc_support import free_port

# Generous: a test here runs up to ~45 chit processes one after another, each a fresh
# interpreter; on an oversubscribed machine (load 11 on 2 cores) one test took > 120 s.
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("demo-http")
    port = free_port()
    argv = [sys.executable, "-m", "chit", "demo-server", "--http", f"127.0.0.1:{port}"]
    argv += ["--db", str(tmp / "tasks.db")]
    with http_server(argv, port, log=tmp / "server.log"):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture
def env(tmp_path: Path, demo_url: str) -> dict[str, str]:
    from chit.tasks.client import HttpServer

    home = tmp_path / "home"
    write_config(home, {"demo": HttpServer(demo_url)})
    base = no_keyring_env(home)
    base.update(file_key_env(home))
    return base


def chit(env: dict[str, str], *args: str) -> Ran:
    return run_chit(*args, env=env)


def as_json(ran: Ran) -> dict[str, object]:
    assert ran.out, ran.err
    doc = json.loads(ran.out)
    assert isinstance(doc, dict)
    return doc


@pytest.mark.parametrize("mode", ["2026", "legacy"])
def test_call_wait_completed_and_accepted(env: dict[str, str], mode: str) -> None:
    env["CHIT_TASK_MODE"] = mode
    ran = chit(
        env, "call", "demo", "slow_compute", "--arg", "seconds=0.3", "--arg", "label=x",
        "--purpose", "test", "--accept-if", 'text contains "Computed x"', "--wait", "--json",
    )  # fmt: skip
    assert ran.code == 0, ran.err
    doc = as_json(ran)
    assert doc["state"] == "completed"
    assert doc["acceptance"]["state"] == "accepted"  # type: ignore[index]
    assert doc["protocol"] == ("2025-11-25" if mode == "legacy" else "2026-07-28")


def test_wait_exit_codes(env: dict[str, str]) -> None:
    assert chit(env, "call", "demo", "failing_job", "--wait").code == 10  # 2026: completed+isError
    assert chit(env, "call", "demo", "protocol_error_job", "--wait").code == 11
    rejected = chit(
        env,
        "call",
        "demo",
        "greet",
        "--arg",
        "name=Ada",
        "--accept-if",
        'text contains "Bob"',
        "--wait",
    )
    assert rejected.code == 15, rejected.err
    assert chit(env, "call", "demo", "confirm_delete", "--arg", "filename=a", "--wait").code == 13


def test_call_then_reconcile_and_show(env: dict[str, str]) -> None:
    doc = as_json(chit(env, "call", "demo", "slow_compute", "--arg", "seconds=0.2", "--json"))
    assert doc["state"] == "working" and doc["next"]["actor"] == "chit"  # type: ignore[index]
    import time

    # The server (another process) finishes when it finishes: reconcile until it has,
    # each pass a whole chit process (no sleep between them, a deadline over them).
    deadline = time.monotonic() + CLI_SAFETY_S
    while True:
        report = json.loads(chit(env, "reconcile", "--once", "--json").out)
        assert report["checked"] == 1, report
        if report["by_state"].get("completed") == 1:
            break
        assert time.monotonic() < deadline, report
    shown = chit(env, "show", str(doc["receipt_id"]), "--json")
    assert json.loads(shown.out)["state"] == "completed"


@pytest.mark.parametrize("mode", ["2026", "legacy"])
def test_answer_input(env: dict[str, str], mode: str) -> None:
    env["CHIT_TASK_MODE"] = mode
    tool = "multi_input" if mode == "2026" else "confirm_delete"
    args = ["--arg", "filename=a.txt"] if tool == "confirm_delete" else []
    doc = as_json(chit(env, "call", "demo", tool, *args, "--json"))
    rid = str(doc["receipt_id"])
    chit(env, "reconcile", "--once")
    shown = json.loads(chit(env, "show", rid, "--json").out)
    pending = [q for q in shown["input_requests"] if q["answer_status"] == "pending"]
    assert shown["state"] == "input_required" and pending, shown
    bad = chit(env, "answer", rid, "--key", pending[0]["key"], "--json", '{"confirm": "maybe"}')
    assert bad.code == 2 and "confirm" in bad.err
    if mode == "2026":  # partial: answer one of two, the task keeps waiting
        ok = chit(env, "answer", rid, "--key", "confirm", "--json", '{"confirm": true}')
        assert ok.code == 0, ok.err
        chit(env, "reconcile", "--once")
        shown = json.loads(chit(env, "show", rid, "--json").out)
        assert shown["state"] == "input_required"
        ok = chit(env, "answer", rid, "--key", "name", "--json", '{"name": "Ada"}')
    else:
        ok = chit(env, "answer", rid, "--json", '{"confirm": true}')
    assert ok.code == 0, ok.err
    final = chit(env, "call", "demo", "greet", "--arg", "name=x")  # noise while it settles
    assert final.code == 0
    for _ in range(20):
        chit(env, "reconcile", "--once")
        shown = json.loads(chit(env, "show", rid, "--json").out)
        if shown["state"] == "completed":
            break
    assert shown["state"] == "completed", shown


def test_cancel_accept_reject(env: dict[str, str]) -> None:
    # Long enough that it cannot end before the cancel, however starved the machine (a
    # 20 s task completed first in a parallel run at load 12): the cancel ends it anyway.
    doc = as_json(chit(env, "call", "demo", "slow_compute", "--arg", "seconds=900", "--json"))
    rid = str(doc["receipt_id"])
    cancelled = as_json(chit(env, "cancel", rid, "--json"))
    assert cancelled["cancel"]["posture"] in ("acknowledged", "observed")  # type: ignore[index]
    chit(env, "reconcile", "--once")
    shown = json.loads(chit(env, "show", rid, "--json").out)
    assert shown["state"] == "cancelled" and shown["cancel"]["posture"] == "observed"
    assert chit(env, "reject", rid).code == 2  # --why is required
    rejected = as_json(chit(env, "reject", rid, "--why", "stopped on purpose", "--json"))
    assert rejected["acceptance"]["state"] == "rejected"  # type: ignore[index]


def test_no_key_store_exits_4_without_key_file(tmp_path: Path, demo_url: str) -> None:
    from chit.tasks.client import HttpServer

    home = tmp_path / "home"
    write_config(home, {"demo": HttpServer(demo_url)})
    ran = run_chit("call", "demo", "greet", "--arg", "name=x", env=no_keyring_env(home))
    assert ran.code == 4, ran.err
    assert len(ran.err.strip().splitlines()) == 1
    assert not (home / "data-key.json").exists()


def test_intents_listing_and_abandon(env: dict[str, str]) -> None:
    listed = chit(env, "intents", "--json")
    assert listed.code == 0 and json.loads(listed.out) == []
    assert chit(env, "intents", "abandon", "NOPE").code == 3


def test_call_on_a_stdio_server_warns_that_the_task_stops_with_chit(tmp_path: Path) -> None:
    from chit.tasks.client import StdioServer

    home = tmp_path / "home"
    argv = ("-m", "chit", "demo-server", "--db", str(tmp_path / "tasks.db"))
    write_config(home, {"demo": StdioServer(sys.executable, argv)})
    env = no_keyring_env(home)
    env.update(file_key_env(home))
    started = run_chit("call", "demo", "slow_compute", "--arg", "seconds=30", env=env)
    assert started.code == 0, started.err
    assert "stdio server" in started.err and "--wait" in started.err
    quick = run_chit("call", "demo", "greet", "--arg", "name=x", env=env)
    assert quick.code == 0 and "stdio server" not in quick.err  # finished: nothing to warn


def test_cancel_with_a_handle_that_does_not_open_exits_4(env: dict[str, str]) -> None:
    import sqlite3

    doc = as_json(chit(env, "call", "demo", "slow_compute", "--arg", "seconds=900", "--json"))
    rid = str(doc["receipt_id"])
    db = sqlite3.connect(Path(env["CHIT_HOME"]) / "chit.db")
    with db:
        db.execute("UPDATE receipts SET handle_blob = NULL WHERE receipt_id = ?", [rid])
    db.close()
    ran = chit(env, "cancel", rid)
    assert ran.code == 4, ran.err
    assert len(ran.err.strip().splitlines()) == 1 and "handle" in ran.err
    shown = json.loads(chit(env, "show", rid, "--json").out)
    assert shown["cancel"]["posture"] == "not_requested"  # nothing was sent


@pytest.mark.parametrize("value", ["soon", "0", "-1"])
def test_bad_read_timeout_setting_exits_2(env: dict[str, str], value: str) -> None:
    env["CHIT_READ_TIMEOUT"] = value
    ran = chit(env, "call", "demo", "greet", "--arg", "name=x")
    assert ran.code == 2, ran.err
    assert "CHIT_READ_TIMEOUT" in ran.err and len(ran.err.strip().splitlines()) == 1


def test_wait_on_an_unreachable_server_returns(tmp_path: Path) -> None:
    # It returns (exit 6) rather than waiting on: run_chit's timeout ends a hang; how soon
    # is not asserted (a loaded machine decides that).
    from chit.tasks.client import HttpServer

    home = tmp_path / "home"
    write_config(home, {"down": HttpServer(f"http://127.0.0.1:{free_port()}/mcp")})
    env = no_keyring_env(home)
    env.update(file_key_env(home))
    ran = run_chit("call", "down", "greet", "--arg", "name=x", "--wait", env=env)
    assert ran.code == 6, ran.err


def test_intents_retry_of_an_unknown_key_exits_3(env: dict[str, str]) -> None:
    ran = chit(env, "intents", "retry", "NOPE")
    assert ran.code == 3, ran.err
