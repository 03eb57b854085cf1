"""The home and the files chit reads (issue 11, cases 2, 3, 4, 6, 7 and 9).

2. an existing home is checked, never chmodded (``--home /tmp`` once lost its sticky bit);
3. ``doctor`` reads ``quick_check``'s ``["ok"]`` as healthy;
4. a deleted data key over sealed values is "missing" (doctor, the TUI's banner);
6. a home on a read-only file system can be read; writes fail with one line;
7. FIFOs and devices where chit expects a file are refused at once, not waited on;
9. ``CHIT_KEY_STORE=memory`` never records its key id.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from chit.errors import ExitCode
from chit.home import Home
from chit.store import VAULT_KEY_ID, Store
from tests.cli_support import Ran, run_chit, seed_receipt

HANDLE = "task-handle-0123456789abcdef"
NOW = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


def env_for(home: Path, key_store: str = "file") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHIT_", "DBUS_"))}
    env |= {"CHIT_HOME": str(home), "CHIT_KEY_STORE": key_store, "CHIT_NO_DAEMON": "1"}
    return env


def one_line(ran: Ran, code: int) -> str:
    out_code, err = ran.code, ran.err
    assert out_code == code, (out_code, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("chit: "), err
    return lines[0]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --- case 2: the home's permissions -----------------------------------------------------


@pytest.mark.parametrize("command", [["receipts"], ["servers", "add", "s", "--command", "x"]])
def test_a_shared_directory_is_refused_and_left_alone(tmp_path: Path, command: list[str]) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp
    ran = run_chit("--home", str(shared), *command, env=env_for(tmp_path / "unused"))
    line = one_line(ran, ExitCode.USAGE)
    assert "mode 1777" in line and "chmod 700" in line
    assert _mode(shared) == 0o1777  # the sticky bit and the mode survive
    assert list(shared.iterdir()) == []


def test_doctor_reports_an_unsafe_home_and_changes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    ran = run_chit("doctor", "--json", env=env_for(home))
    assert ran.code == 0, ran.err
    report = json.loads(ran.out)
    assert "mode 0755" in report["home_problem"]
    assert _mode(home) == 0o755


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the home away")
def test_a_home_of_another_user_is_refused(tmp_path: Path) -> None:
    from chit.home import UnsafeHome

    home = tmp_path / "theirs"
    home.mkdir(mode=0o700)
    os.chown(home, 65534, 65534)
    with pytest.raises(UnsafeHome, match="belongs to uid 65534"):
        Home(home).ensure()
    with pytest.raises(UnsafeHome):
        Home(home).check()


def test_a_home_chit_creates_is_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        Home(tmp_path / "new" / "home").ensure()
    finally:
        os.umask(old)
    assert _mode(tmp_path / "new" / "home") == 0o700


# --- case 3: doctor reads quick_check correctly --------------------------------------


def test_doctor_calls_a_healthy_database_ok(tmp_path: Path) -> None:
    seed_receipt(Home(tmp_path / "home"), handle=HANDLE, now=NOW)
    ran = run_chit("doctor", "--json", env=env_for(tmp_path / "home"))
    assert ran.code == 0, ran.err
    db = json.loads(ran.out)["database"]
    assert (db["ok"], db["error"], db["receipts"]) == (True, None, 1)
    text = run_chit("doctor", env=env_for(tmp_path / "home"))
    assert "1 receipts, ok" in text.out and "PROBLEM" not in text.out


# --- case 4: a deleted data key over sealed values -----------------------------------


def _home_with_sealed_values(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    env = env_for(home)
    ran = run_chit(
        "servers", "add", "h", "--url", "http://127.0.0.1:9/mcp", "--header", "A=secret", env=env
    )
    assert ran.code == 0, ran.err
    (home / "data-key.json").unlink()
    return home


def test_doctor_reports_a_deleted_data_key_as_missing(tmp_path: Path) -> None:
    home = _home_with_sealed_values(tmp_path)
    ran = run_chit("doctor", "--json", env=env_for(home))
    assert ran.code == 0, ran.err
    ks = json.loads(ran.out)["key_store"]
    assert ks["usable"] is False
    assert ks["key_present"] is False and ks["sealed"] == 1 and ks["expected_kid"]
    assert "missing" in ks["why"] and "never makes a new key" in ks["fix"]
    assert not (home / "data-key.json").exists()  # doctor created nothing


def test_the_tui_opens_read_only_with_a_banner_not_a_traceback(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from chit.tui.launch import build_app

    home = _home_with_sealed_values(tmp_path)
    app = build_app(Home(home), environ={"CHIT_KEY_STORE": "file"})
    mode = app.backend.mode
    assert mode.readonly is True
    assert mode.banner is not None and "missing" in mode.banner
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err + captured.out
    assert not (home / "data-key.json").exists()


def test_open_on_a_tty_has_no_traceback(tmp_path: Path) -> None:
    # `chit open` on a real terminal (a pty), quitting at once: the banner path, no
    # traceback before it.
    pytest.importorskip("pty")
    home = _home_with_sealed_values(tmp_path)
    code = (
        "import os, pty, sys, time, select\n"
        "pid, fd = pty.fork()\n"
        "if pid == 0:\n"
        "    os.execvp(sys.executable, [sys.executable, '-m', 'chit', 'open'])\n"
        "out = b''\n"
        "deadline = time.monotonic() + 60\n"
        "sent = False\n"
        "while time.monotonic() < deadline:\n"
        "    r, _, _ = select.select([fd], [], [], 0.2)\n"
        "    if r:\n"
        "        try:\n"
        "            chunk = os.read(fd, 65536)\n"
        "        except OSError:\n"
        "            break\n"
        "        if not chunk:\n"
        "            break\n"
        "        out += chunk\n"
        "        if not sent and b'missing' in out:\n"
        "            os.write(fd, b'q')\n"
        "            sent = True\n"
        "os.waitpid(pid, 0)\n"
        "sys.stdout.buffer.write(out)\n"
    )
    env = env_for(home) | {"TERM": "xterm-256color", "COLUMNS": "200", "LINES": "50"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=90)
    screen = proc.stdout.decode("utf-8", "replace")
    assert "missing" in screen
    assert "Traceback" not in screen


# --- case 6: a home on a read-only file system ---------------------------------------


def _can_mount_readonly() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    probe = subprocess.run(
        [unshare, "-rm", "sh", "-c", "mount --bind / /mnt 2>/dev/null || mount --bind /tmp /tmp"],
        capture_output=True,
        timeout=30,
    )
    return probe.returncode == 0


READONLY_DRIVER = """
import json, subprocess, sys
runs = {}
for name, argv in json.loads(sys.argv[1]).items():
    p = subprocess.run([sys.executable, "-m", "chit", *argv], capture_output=True, text=True)
    runs[name] = [p.returncode, p.stdout, p.stderr]
print(json.dumps(runs))
"""


@pytest.mark.timeout(240)
@pytest.mark.skipif(not _can_mount_readonly(), reason="needs unshare and a mount namespace")
def test_a_home_on_a_read_only_file_system_can_be_read(tmp_path: Path) -> None:
    home = tmp_path / "home"
    receipt = seed_receipt(Home(home), handle=HANDLE, now=NOW)
    with Store.open(Home(home)) as store:
        store.checkpoint()  # a cleanly closed store: no write-ahead log left
    assert run_chit("servers", "add", "s", "--command", "x", env=env_for(home)).code == 0
    commands = {
        "receipts": ["receipts", "--json"],
        "show": ["show", receipt.receipt_id[:10], "--json"],
        "export": ["export"],
        "doctor": ["doctor", "--json"],
        "servers": ["servers", "list", "--json"],
        "intents": ["intents", "--json"],
        "add": ["servers", "add", "t", "--command", "x"],
        "remove": ["servers", "remove", "s"],
        "accept": ["accept", receipt.receipt_id, "--why", "fine"],
    }
    script = (
        f"mount --bind {home} {home} && mount -o remount,ro,bind {home} {home} && "
        f'exec "{sys.executable}" -c "$0" "$1"'
    )
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, READONLY_DRIVER, json.dumps(commands)],
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(proc.stdout)
    for name in ("receipts", "show", "export", "doctor", "servers", "intents"):
        code, _out, err = runs[name]
        assert code == 0, (name, err)
    assert json.loads(runs["receipts"][1])[0]["receipt_id"] == receipt.receipt_id
    assert json.loads(runs["show"][1])["receipt_id"] == receipt.receipt_id
    assert json.loads(runs["export"][1].splitlines()[0])["receipt_id"] == receipt.receipt_id
    doctor = json.loads(runs["doctor"][1])
    assert doctor["database"]["ok"] is True and doctor["database"]["receipts"] == 1
    for name in ("add", "remove", "accept"):
        code, _out, err = runs[name]
        lines = err.splitlines()
        assert code == ExitCode.STORE, (name, code, err)
        assert len(lines) == 1 and "read-only" in lines[0].lower(), (name, err)
    # Nothing was written behind the mount either.
    assert sorted(p.name for p in home.iterdir()) == [".config.toml.lock", "chit.db", "config.toml"]


# --- case 7: FIFOs, devices and huge files --------------------------------------------


@pytest.mark.timeout(120)
def test_a_fifo_named_data_key_json_is_refused_not_waited_on(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    os.mkfifo(home / "data-key.json")
    doctor = run_chit("doctor", "--json", env=env_for(home))
    assert doctor.code == 0, doctor.err
    ks = json.loads(doctor.out)["key_store"]
    assert ks["usable"] is False and "not a regular file" in ks["why"]
    assert "FIFO" in ks["why"]
    ran = run_chit(
        "servers", "add", "h", "--url", "http://x/mcp", "--header", "A=b", env=env_for(home)
    )
    assert "not a regular file" in one_line(ran, ExitCode.KEY_STORE)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["chit.db", "config.toml"])
def test_a_fifo_in_place_of_a_home_file_is_one_line(tmp_path: Path, name: str) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    os.mkfifo(home / name)
    command = ["receipts"] if name == "chit.db" else ["servers", "list"]
    line = one_line(run_chit(*command, env=env_for(home)), ExitCode.STORE)
    assert "FIFO" in line


@pytest.mark.timeout(120)
@pytest.mark.parametrize("target", ["fifo", "/dev/zero", "big"])
def test_env_file_that_is_not_a_small_regular_file_is_skipped(tmp_path: Path, target: str) -> None:
    if target == "fifo":
        env_file = tmp_path / "vars.env"
        os.mkfifo(env_file)
    elif target == "big":
        env_file = tmp_path / "vars.env"
        env_file.write_bytes(b"A=" + b"x" * (2 << 20) + b"\n")
    else:
        env_file = Path(target)
    source = tmp_path / "mcp.json"
    source.write_text(json.dumps({"mcpServers": {"s": {"command": "x", "envFile": str(env_file)}}}))
    ran = run_chit("servers", "import", str(source), "--json", env=env_for(tmp_path / "home"))
    assert ran.code == 0, ran.err
    skipped = json.loads(ran.out)["skipped"]
    assert [s["name"] for s in skipped] == ["s"]
    assert "cannot be read" in skipped[0]["reason"]


@pytest.mark.timeout(60)
def test_importing_a_fifo_or_device_is_usage(tmp_path: Path) -> None:
    fifo = tmp_path / "mcp.json"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero"):
        line = one_line(run_chit("servers", "import", path, env=env_for(tmp_path / "h")), 2)
        assert "not a regular file" in line


def test_read_regular_caps_and_types(tmp_path: Path) -> None:
    from chit.files import FileTooLarge, NotRegularFile, read_regular

    big = tmp_path / "big"
    big.write_bytes(b"x" * 100)
    assert read_regular(big, limit=100) == b"x" * 100
    with pytest.raises(FileTooLarge):
        read_regular(big, limit=99)
    with pytest.raises(NotRegularFile, match="directory"):
        read_regular(tmp_path, limit=10)
    with pytest.raises(NotRegularFile, match="character device"):
        read_regular(Path("/dev/zero"), limit=10)


# --- case 9: a memory key store never records its key id ------------------------------


def test_memory_key_store_never_records_its_key_id(tmp_path: Path) -> None:
    # The Supervisor's unlock (every engine command) and the registry's sealer both
    # leave no key id behind for a memory key, so the next command on the home is not
    # refused with "data key missing" over nothing worth keeping.
    from chit.runtime.keys import recorded_key_id, unlock_vault

    home = Home(tmp_path / "home").ensure()
    memory = {"CHIT_KEY_STORE": "memory"}
    with Store.open(home) as store:
        unlock_vault(home, store, memory)
        assert recorded_key_id(store) is None
        unlock_vault(home, store, memory)  # a second process: no DataKeyMissing
        assert store.meta.get(VAULT_KEY_ID) is None
    env = env_for(home.root, key_store="memory")
    added = run_chit("servers", "add", "web", "--url", "http://x/mcp", "--header", "A=b", env=env)
    assert added.code == 0, added.err
    with Store.open(home) as store:
        assert store.meta.get(VAULT_KEY_ID) is None


def test_diagnose_knows_a_missing_key_from_a_fresh_one(tmp_path: Path) -> None:
    from chit.vault import FileKeyStore, Vault, diagnose_key_store

    home = Home(tmp_path / "home").ensure()
    file_env = {"CHIT_KEY_STORE": "file"}
    fresh = diagnose_key_store(home, file_env)
    assert fresh["usable"] is True and "created on first use" in fresh["why"]
    missing = diagnose_key_store(home, file_env, expected_kid=bytes(8), sealed=3)
    assert missing["usable"] is False and "3 sealed value(s)" in missing["why"]
    vault = Vault.unlock(FileKeyStore(home.key_file), None)
    other = diagnose_key_store(home, file_env, expected_kid=bytes(8), sealed=1)
    assert other["usable"] is False and other["kid"] == vault.kid.hex()
    assert "need 0000000000000000" in other["why"]
    same = diagnose_key_store(home, file_env, expected_kid=vault.kid, sealed=1)
    assert same["usable"] is True


@pytest.mark.timeout(30)
def test_daemon_files_that_are_fifos_do_not_hang_a_client(tmp_path: Path) -> None:
    from chit.engine.rpc import decode
    from chit.engine.start import DaemonUnavailable, last_line, lock_is_held, lock_pid

    fifo = tmp_path / "daemon.lock"
    os.mkfifo(fifo)
    assert lock_pid(fifo) is None
    assert last_line(fifo) == ""
    with pytest.raises(DaemonUnavailable, match="FIFO"):
        lock_is_held(fifo)
    with pytest.raises(ValueError, match="nested too deeply"):
        decode(b"[" * 200_000)


def test_the_read_only_tui_reads_without_writing(tmp_path: Path) -> None:
    from chit.tui.backend import Backend, Mode

    home = Home(tmp_path / "home").ensure()
    with Backend(home, Mode(readonly=True)).store() as store:
        assert store.receipts.count() == 0
    assert not home.db_path.exists()  # nothing created to look at nothing
    seed_receipt(home, handle=HANDLE, now=NOW)
    with Backend(home, Mode(readonly=True)).store() as store:
        assert store.receipts.count() == 1
        assert store.db.conn.execute("PRAGMA query_only").fetchone()[0] == 1
