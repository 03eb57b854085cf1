"""The foundation CLI: doctor, receipts, show, export — real processes, real files."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from chit.errors import ExitCode
from chit.home import Home
from tests.cli_support import no_keyring_env, run_chit, seed_receipt

HANDLE = "task-handle-7f3a9c1e5b2d4f6a8c0e1b3d5f7a9c2e"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _files(root: Path) -> set[str]:
    return {p.name for p in root.rglob("*") if p.is_file()}


def test_doctor_without_keyring_reports_the_fix_and_creates_nothing(tmp_path: Path) -> None:
    ran = run_chit("doctor", "--json", env=no_keyring_env(tmp_path))
    assert ran.code == 0, ran.err
    report = json.loads(ran.out)
    assert report["key_store"]["usable"] is False
    assert "CHIT_KEY_STORE=file" in report["key_store"]["fix"]
    assert report["database"]["exists"] is False
    assert _files(tmp_path) == set(), "doctor must not create keys, key files or databases"


def test_receipts_json_on_a_fresh_home_is_an_empty_list(tmp_path: Path) -> None:
    ran = run_chit("receipts", "--json", env=no_keyring_env(tmp_path))
    assert (ran.code, ran.out.strip()) == (0, "[]")
    assert "data-key.json" not in _files(tmp_path)
    assert "chit.db" not in _files(tmp_path)  # reading creates nothing


def test_receipts_show_and_export_carry_fingerprints_never_handles(tmp_path: Path) -> None:
    receipt = seed_receipt(Home(tmp_path), handle=HANDLE, now=NOW)
    env = no_keyring_env(tmp_path)

    listing = run_chit("receipts", "--json", env=env)
    assert listing.code == 0, listing.err
    docs = json.loads(listing.out)
    assert [d["receipt_id"] for d in docs] == [receipt.receipt_id]
    assert docs[0]["state"] == "working"
    assert docs[0]["next"]["actor"] in {"chit", "agent", "user"}

    table = run_chit("receipts", env=env)
    assert receipt.receipt_id in table.out and "working" in table.out

    shown = run_chit("show", receipt.receipt_id[:12], "--json", env=env)
    assert shown.code == 0, shown.err
    doc = json.loads(shown.out)
    assert doc["handle"]["fingerprint"] == receipt.handle.fingerprint  # type: ignore[union-attr]
    assert [o["source"] for o in doc["timeline"]] == ["create"]

    human = run_chit("show", receipt.receipt_id, env=env)
    assert "fingerprint" in human.out and "timeline" in human.out

    exported = run_chit("export", "--jsonl", env=env)
    assert exported.code == 0
    lines = exported.out.strip().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["receipt_id"] == receipt.receipt_id
    for output in (listing.out, table.out, shown.out, human.out, exported.out):
        assert HANDLE not in output


def test_filters_select_by_state_and_server(tmp_path: Path) -> None:
    home = Home(tmp_path)
    seed_receipt(home, handle=HANDLE + "1", now=NOW, server="alpha")
    seed_receipt(home, handle=HANDLE + "2", now=NOW, server="beta")
    env = no_keyring_env(tmp_path)
    only_beta = json.loads(run_chit("receipts", "--server", "beta", "--json", env=env).out)
    assert [d["server"] for d in only_beta] == ["beta"]
    none_done = json.loads(run_chit("receipts", "--state", "completed", "--json", env=env).out)
    assert none_done == []
    jsonl = run_chit("receipts", "--jsonl", env=env).out.strip().splitlines()
    assert len(jsonl) == 2


def test_bad_input_is_one_line_with_a_documented_code(tmp_path: Path) -> None:
    env = no_keyring_env(tmp_path)
    missing = run_chit("show", "NOPE", env=env)
    assert missing.code == ExitCode.NOT_FOUND
    assert missing.err.count("\n") == 1 and missing.err.startswith("chit: ")
    assert "Traceback" not in missing.err and missing.out == ""

    both = run_chit("receipts", "--json", "--jsonl", env=env)
    assert both.code == ExitCode.USAGE and "Traceback" not in both.err

    bad_state = run_chit("receipts", "--state", "done", env=env)
    assert bad_state.code == ExitCode.USAGE and "Traceback" not in bad_state.err


def test_version() -> None:
    ran = run_chit("--version", env={"PATH": "/usr/bin:/bin"})
    assert ran.code == 0 and ran.out.startswith("chit, version ")


def test_a_reader_that_goes_away_is_not_an_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    home = Home(tmp_path)
    for n in range(3):
        seed_receipt(home, handle=f"{HANDLE}{n}", now=NOW)
    proc = subprocess.Popen(
        [sys.executable, "-m", "chit", "export", "--jsonl"],
        env=no_keyring_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # like `chit export | head -0`: the reader is gone before we write
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0
    assert "internal error" not in err and "Traceback" not in err
