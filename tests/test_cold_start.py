"""Read-only commands import only what they need (issue 9: cold start ≤ 0.1 s).

A cold ``chit receipts --json`` on an empty home cost ~0.22 s, most of it importing
pydantic models and sqlite-utils it never used. Each check runs the command in a fresh
interpreter and looks at ``sys.modules`` afterwards — what was imported, not how long it
took (timing lives in ``benchmarks/store.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from chit.home import Home
from chit.receipts import LifecycleState
from chit.store import Store
from tests.store_support import make_obs, make_receipt

#: Never imported by a read-only command on an empty home.
HEAVY_WHEN_EMPTY = (
    "pydantic",
    "pydantic_core",
    "sqlite_utils",
    "chit.receipts.models",
    "chit.store.db",
    "platformdirs",  # --home is given: no default home to look up
    "importlib.metadata",
)
#: Never imported by a read-only command at all: the engine's and the TUI's libraries.
HEAVY_ALWAYS = ("mcp", "textual", "anyio", "httpx", "keyring", "cryptography", "chit.runtime")

_PROBE = """
import contextlib, io, json, sys
from chit.cli.main import cli
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        cli.main(args=sys.argv[1:], prog_name="chit", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}))
"""


def _run(*args: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout.splitlines()[-1])
    return result


def _loaded(modules: object, banned: tuple[str, ...]) -> list[str]:
    assert isinstance(modules, list)
    return [m for m in modules if any(m == b or m.startswith(b + ".") for b in banned)]


@pytest.mark.parametrize(
    ("args", "output", "code"),
    [
        (("receipts", "--json"), "[]", 0),
        (("receipts",), "", 0),
        (("export",), "", 0),
        (("show", "01ABC"), "", 3),
    ],
    ids=["receipts-json", "receipts", "export", "show"],
)
def test_empty_home_reads_import_nothing_heavy(
    tmp_path: Path, args: tuple[str, ...], output: str, code: int
) -> None:
    home = tmp_path / "home"
    ran = _run("--home", str(home), *args)
    assert ran["code"] == code
    assert str(ran["out"]).strip() == output
    assert _loaded(ran["modules"], HEAVY_WHEN_EMPTY + HEAVY_ALWAYS) == []
    assert not home.exists()  # reading created nothing


def test_reading_receipts_never_loads_the_engine(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    with Store.open(home) as store:
        receipt = make_receipt("01RECEIPT1", state=LifecycleState.COMPLETED)
        blob, first = b"\x01" + bytes(40), [make_obs("01RECEIPT1")]
        store.receipts.insert(receipt, blob, "fp0123456789", first)
    for args in (("receipts", "--json"), ("show", "01RECEIPT"), ("export",)):
        ran = _run("--home", str(home.root), *args)
        assert ran["code"] == 0 and "01RECEIPT1" in str(ran["out"])
        assert _loaded(ran["modules"], HEAVY_ALWAYS) == [], args


def test_the_probe_would_see_a_heavy_import(tmp_path: Path) -> None:
    """The check can fail: a command that does load the engine's libraries is caught."""
    ran = _run("--home", str(tmp_path / "home"), "servers", "--help")
    assert ran["code"] == 0
    probe = subprocess.run(
        [sys.executable, "-c", "import anyio, sys; print('anyio' in sys.modules)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.stdout.strip() == "True"
    assert _loaded(["anyio", "anyio._core", "anyiox"], HEAVY_ALWAYS) == ["anyio", "anyio._core"]
