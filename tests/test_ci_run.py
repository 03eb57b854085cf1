"""``.ci/run`` checks its prerequisites and names what is missing in one line (exit 2).

Each case runs the real script with a PATH holding only stand-ins, so it stops at the
check under test and never reaches pip, npm or apt.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "run"
BASH = shutil.which("bash")

pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash")


def _stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!{BASH}\n{body}\n")
    path.chmod(0o755)


def _bin(tmp_path: Path, *, python: bool = True, node: bool = True, uid: int = 0) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    dirname = shutil.which("dirname")
    assert dirname is not None
    os.symlink(dirname, bin_dir / "dirname")
    _stub(bin_dir, "id", f"echo {uid}")
    if python:
        os.symlink(sys.executable, bin_dir / "python3")
    if node:
        _stub(bin_dir, "node", "exit 0")
        _stub(bin_dir, "npm", "exit 0")
    # apt-get present but never to be reached in these cases: fail loudly if it is.
    _stub(bin_dir, "apt-get", "echo apt-get-ran >&2; exit 99")
    return bin_dir


def _run(bin_dir: Path) -> subprocess.CompletedProcess[str]:
    assert BASH is not None
    return subprocess.run(
        [BASH, str(SCRIPT)],
        env={"PATH": str(bin_dir), "HOME": str(bin_dir.parent)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_missing_node_is_named_in_one_line(tmp_path: Path) -> None:
    proc = _run(_bin(tmp_path, node=False))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        ".ci/run: node not found: install Node.js 18+ with npm (apt: nodejs npm)"
    ]


def test_old_python_is_named_with_its_version(tmp_path: Path) -> None:
    bin_dir = _bin(tmp_path, python=False)
    # A python3 that reports 3.9 and fails the version check.
    _stub(
        bin_dir,
        "python3",
        'if [ "$1" = -c ]; then case "$2" in *platform*) echo 3.9.2;; *) exit 1;; esac; fi',
    )
    proc = _run(bin_dir)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        ".ci/run: python3 is 3.9.2: install Python 3.11 or newer"
    ]


def test_missing_python_is_named(tmp_path: Path) -> None:
    proc = _run(_bin(tmp_path, python=False))
    assert proc.returncode == 2
    assert "install Python 3.11 or newer" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_apt_step_without_root_or_sudo_names_the_packages(tmp_path: Path) -> None:
    # Not root, no sudo, and tmux / gnome-keyring / dbus are not on this PATH.
    proc = _run(_bin(tmp_path, uid=1000))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(".ci/run: apt-get needs root")
    assert "tmux gnome-keyring dbus" in lines[0]
    assert "apt-get-ran" not in proc.stderr


def test_a_failing_install_step_is_one_line_not_a_bare_exit(tmp_path: Path) -> None:
    bin_dir = _bin(tmp_path, python=False)
    # Every prerequisite is there; creating the venv fails (a full disk, say).
    _stub(
        bin_dir,
        "python3",
        'if [ "$1" = -c ]; then exit 0; fi; echo "venv: No space left on device" >&2; exit 1',
    )
    for tool in ("ls", "tmux", "gnome-keyring-daemon", "dbus-run-session"):
        _stub(bin_dir, tool, "exit 0")
    proc = _run(bin_dir)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        ".ci/run: python3 -m venv .venv failed (disk space? permissions?)"
    )


def test_ends_with_readmes_test_command_in_parallel_workers() -> None:
    """``.ci/run`` runs README's test command (plus its cache-less flag), with xdist."""
    readme = (ROOT / "README.md").read_text()
    command = next(line for line in readme.splitlines() if "-m pytest" in line)
    last = SCRIPT.read_text().rstrip().splitlines()[-1]
    assert " -n " in command and command.split(" -m pytest")[1].split()[:2] == ["-n", "3"]
    assert last.replace(" -q -e ", " -e ").replace(" -p no:cacheprovider", "") == command
