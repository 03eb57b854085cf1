"""End to end: a server whose "not found" error quotes the task id, through chit's CLI.

A real server process over stdio (``tests/fakes/leaky_server.py``), registered with
``chit servers add``, driven by ``chit call``, ``chit reconcile``, ``chit show`` and
``chit export`` as separate processes - exactly what a user does. The server forgets the
task between two commands (a fresh task store) and answers ``Task <id> not found`` to
every ``tasks/*`` request, as the TypeScript SDK does on ``tasks/result`` and
``tasks/cancel`` (server-everything; chit asks ``tasks/get`` first, whose message there
names no id, so that server's id-bearing messages are not reached). No output of any
command and no byte of ``chit.db`` or its ``-wal`` may hold the id.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from tests.cli_support import Ran, no_keyring_env, run_chit
from tests.engine_support import file_key_env
from tests.leak_scenario import files
from tests.leak_support import leaks

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[1]


def _env(home: Path) -> dict[str, str]:
    env = no_keyring_env(home)
    env.update(file_key_env(home))
    return env


def _ok(ran: Ran, *codes: int) -> Ran:
    assert ran.code in (codes or (0,)), (ran.code, ran.out, ran.err)
    return ran


def _everything_said(env: dict[str, str], rid: str) -> dict[str, Ran]:
    """Every way a user reads the receipt back."""
    return {
        "show": _ok(run_chit("show", rid, env=env)),
        "show --json": _ok(run_chit("show", "--json", rid, env=env)),
        "export": _ok(run_chit("export", env=env)),
        "receipts": _ok(run_chit("receipts", "--json", env=env)),
    }


def _assert_clean(home: Path, outputs: dict[str, Ran], handle: str) -> None:
    for name, ran in outputs.items():
        assert not leaks((ran.out + ran.err).encode(), [handle]), (name, ran.out, ran.err)
    for name, blob in files(home).items():
        assert not leaks(blob, [handle]), name


def test_leaky_server_not_found_through_the_cli(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = _env(home)
    db = tmp_path / "tasks.db"
    _ok(
        run_chit(
            "servers",
            "add",
            "leaky",
            "--command",
            sys.executable,
            "--cwd",
            str(ROOT),
            "--",
            "-m",
            "tests.fakes.leaky_server",
            "stdio",
            str(db),
            env=env,
        )
    )
    args = {"status": "working on {H}", "outcome": "vanish", "not_found": "Task {H} not found"}
    call = _ok(run_chit("call", "leaky", "leak", "--args", json.dumps(args), "--json", env=env))
    rid = json.loads(call.out)["receipt_id"]
    with sqlite3.connect(db) as conn:
        (handle,) = conn.execute("SELECT id FROM tasks").fetchone()
    for suffix in ("", "-wal", "-shm"):  # the next server process starts with no tasks
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    reconcile = _ok(run_chit("reconcile", "--once", env=env), 0, 6)
    outputs = {"call": call, "reconcile": reconcile, **_everything_said(env, rid)}
    shown = json.loads(outputs["show --json"].out)
    assert shown["retrieval"] == "vanished", shown
    assert "task#" in shown["retrieval_error"] and "not found" in shown["retrieval_error"]
    assert any("task#" in (o["message"] or "") for o in shown["timeline"])
    _assert_clean(home, outputs, handle)
