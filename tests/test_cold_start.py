"""Commands import only what they need (issue 9: cold start ≤ 0.1 s; a thin client).

A cold ``chit receipts --json`` on an empty home cost ~0.22 s, most of it importing
pydantic models and sqlite-utils it never used; a command sent to the daemon imported
the whole in-process engine (mcp, the runtime, the store) it does not run. Each check
runs the command in a fresh interpreter and looks at ``sys.modules`` afterwards — what
was imported, not how long it took (timing lives in ``benchmarks/daemon.py`` and
``benchmarks/store.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chit.home import Home
from chit.receipts import LifecycleState
from chit.store import Store
from tests.daemon_support import daemon_env, demo_daemon_home
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
#: Never imported by a read-only command on a current store (``chit.store.reader``):
#: sqlite-utils is for migrations and writes, and brings pluggy, dateutil and click.
HEAVY_WITH_A_STORE = ("sqlite_utils", "sqlite_fts4", "pluggy", "dateutil")
#: Never imported by a command the daemon serves (``tools``, ``call``, ``daemon status``):
#: the engine runs in the daemon. pydantic and anyio are the client's own: the socket's
#: messages are pydantic models shared by both ends (issue 9), read with anyio.
HEAVY_FOR_A_CLIENT = (
    "mcp",
    "textual",
    "rich",
    "httpx",
    "starlette",
    "uvicorn",
    "keyring",
    "cryptography",
    "sqlite_utils",
    "chit.runtime",
    "chit.reconcile",
    "chit.tasks",
    "chit.tui",
    "chit.store.db",
)

_RUN_CLI = """
import contextlib, io, json, sys
from chit.cli.main import cli
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        cli.main(args=sys.argv[1:], prog_name="chit", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code
"""
_PROBE = (
    _RUN_CLI
    + """
print(json.dumps({"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}))
"""
)


def _run(*args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    """Run ``chit ARGS`` in a fresh interpreter: its exit code, stdout and modules.

    The environment is bare (``env`` for a daemon's home) but for ``PYTHONPATH``, so that
    a worktree's run probes the worktree's chit.
    """
    if env is None:
        env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
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
    # Only the command's own module is loaded, not the other thirteen (main.COMMAND_MODULES).
    assert [m for m in _loaded(ran["modules"], ("chit.cli",)) if "commands_" in m] == [
        "chit.cli.commands_receipts"
    ]


_ENTRY_PROBE = """
import json, sys
from chit.cli.entry import main
try:
    main()
except SystemExit as exc:
    code = exc.code
loader = sys.modules.get("pydantic.plugin._loader")
scanned = loader is not None and loader._plugins is not None  # entry points were read
report = {"code": code, "modules": sorted(sys.modules), "plugins_scanned": scanned}
sys.stderr.write("\\n" + json.dumps(report) + "\\n")
"""


def _run_entry(*args: str) -> tuple[dict[str, Any], str, str]:
    """Run ``chit ARGS`` through ``chit.cli.entry`` in a fresh interpreter.

    Returns:
        Its exit code and modules, its stdout, its stderr but for the report.
    """
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    proc = subprocess.run(
        [sys.executable, "-c", _ENTRY_PROBE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    *lines, report = proc.stderr.splitlines()
    ran: dict[str, Any] = json.loads(report)
    return ran, proc.stdout, "\n".join(lines)


#: Never imported by the click-free entry (chit.cli.entry) reading an empty home.
ENTRY_NEVER = ("click", "logging", "dataclasses", "inspect", "chit.cli.main")


@pytest.mark.parametrize(
    ("args", "output", "code", "error"),
    [
        (("receipts", "--json"), "[]", 0, ""),
        (("receipts",), "", 0, "no receipts"),
        (("receipts", "--limit=3", "--jsonl"), "", 0, ""),
        (("show", "01ABC", "--json"), "", 3, "chit: no receipt starts with '01ABC'"),
    ],
    ids=["receipts-json", "receipts", "receipts-jsonl", "show"],
)
def test_the_entry_reads_an_empty_home_without_click(
    tmp_path: Path, args: tuple[str, ...], output: str, code: int, error: str
) -> None:
    """``chit receipts`` and ``chit show`` on a plain command line: no click, no logging.

    What it prints is checked against click's own in tests/test_cli_entry.py. A failure
    (``show``: no such receipt) may load more to report it, but not click.
    """
    home = tmp_path / "home"
    ran, out, err = _run_entry("--home", str(home), *args)
    assert (ran["code"], out.strip(), err.strip()) == (code, output, error)
    banned = ENTRY_NEVER if code == 0 else ("click", "chit.cli.main")
    assert _loaded(ran["modules"], banned + HEAVY_WHEN_EMPTY + HEAVY_ALWAYS) == []
    assert not home.exists()


def test_python_m_chit_goes_through_the_entry(tmp_path: Path) -> None:
    """``python -m chit`` (the benchmark's command) takes the entry, and falls back."""
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "CHIT_HOME": str(tmp_path / "h")}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    chit = [sys.executable, "-X", "importtime", "-m", "chit", "receipts"]
    plain = subprocess.run([*chit, "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert plain.returncode == 0 and plain.stdout == "[]\n"
    assert " click\n" not in plain.stderr and "chit.cli.entry" in plain.stderr
    bad = subprocess.run(
        [*chit, "--limit", "0"], capture_output=True, text=True, env=env, timeout=120
    )
    errors = [ln for ln in bad.stderr.splitlines() if not ln.startswith("import time:")]
    assert bad.returncode == 2 and len(errors) == 1 and "--limit" in errors[0]
    assert " click\n" in bad.stderr  # click read and reported it


def _one_receipt(root: Path) -> Home:
    home = Home(root)
    with Store.open(home) as store:
        receipt = make_receipt("01RECEIPT1", state=LifecycleState.COMPLETED)
        blob, first = b"\x01" + bytes(40), [make_obs("01RECEIPT1")]
        store.receipts.insert(receipt, blob, "fp0123456789", first)
    return home


def test_reading_receipts_never_loads_the_engine(tmp_path: Path) -> None:
    home = _one_receipt(tmp_path / "home")
    for args in (("receipts", "--json"), ("show", "01RECEIPT"), ("export",)):
        ran = _run("--home", str(home.root), *args)
        assert ran["code"] == 0 and "01RECEIPT1" in str(ran["out"])
        assert _loaded(ran["modules"], HEAVY_ALWAYS + HEAVY_WITH_A_STORE) == [], args


@pytest.mark.parametrize(
    "args",
    [("receipts", "--json"), ("receipts", "--jsonl", "--all"), ("show", "01RECEIPT", "--json")],
    ids=["receipts-json", "receipts-jsonl", "show"],
)
def test_the_entry_reads_a_store_without_click_or_sqlite_utils(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    """A cold ``chit receipts`` with receipts to print: sqlite3 and the models, no more."""
    home = _one_receipt(tmp_path / "home")
    ran, out, err = _run_entry("--home", str(home.root), *args)
    assert (ran["code"], err.strip()) == (0, "") and "01RECEIPT1" in out
    banned = ("click", "chit.cli.main", *HEAVY_WITH_A_STORE, *HEAVY_ALWAYS)
    assert _loaded(ran["modules"], banned) == []
    # Read through the reader, not the full Store (whose modules import sqlite-utils).
    assert "chit.store.reader" in ran["modules"] and "chit.store.store" not in ran["modules"]
    # Models were built, but no installed distribution's entry points were read for
    # pydantic plugins (≈ 50 ms of a cold read; chit uses none).
    assert "pydantic.plugin._loader" in ran["modules"] and ran["plugins_scanned"] is False


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


_TABLE = """
import importlib, json, pkgutil
import click
import chit.cli
from chit.cli.main import COMMAND_MODULES, cli
ctx = click.Context(cli)
lazy_servers = sorted(cli.get_command(ctx, "servers").commands)  # its modules alone
exported = {}
for info in pkgutil.iter_modules(chit.cli.__path__):
    if info.name.startswith("commands_"):
        module = importlib.import_module("chit.cli." + info.name)
        exported[info.name] = sorted(c.name for c in module.COMMANDS)
print(json.dumps({"table": COMMAND_MODULES, "exported": exported, "lazy_servers": lazy_servers,
                  "servers": sorted(cli.get_command(ctx, "servers").commands)}))
"""


def test_the_command_table_names_every_command_module() -> None:
    """``COMMAND_MODULES`` (what ``chit NAME`` imports) agrees with the modules' COMMANDS.

    A command added to a module but not to the table would be missing from ``chit``; a
    module that adds subcommands to another's group (``servers wrap``) must be named with
    that group, or the subcommands would be missing when the group is loaded alone.
    """
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    proc = subprocess.run(
        [sys.executable, "-c", _TABLE], capture_output=True, text=True, timeout=60, env=env
    )
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    table: dict[str, list[str]] = found["table"]
    exported: dict[str, list[str]] = found["exported"]
    assert {m for modules in table.values() for m in modules} == set(exported)
    for module, names in exported.items():
        assert names == sorted(n for n, modules in table.items() if modules[0] == module)
    assert found["lazy_servers"] == found["servers"]
    assert {"wrap", "unwrap", "add"} <= set(found["servers"])


@pytest.fixture
def daemon_home(tmp_path: Path) -> Iterator[Path]:
    with demo_daemon_home(tmp_path) as home:
        yield home


@pytest.mark.timeout(240)
def test_a_daemon_client_does_not_load_the_engine(daemon_home: Path) -> None:
    """Commands the daemon serves import neither mcp, the store nor the runtime.

    The first command starts the daemon on demand; each then runs as a client of it.
    """
    env = daemon_env(daemon_home)
    for args in (
        ("call", "demo", "greet", "--arg", "name=Ada", "--json"),
        ("tools", "demo", "greet", "--json"),
        ("daemon", "status", "--json"),
    ):
        ran = _run(*args, env=env)
        assert ran["code"] == 0, args
        assert _loaded(ran["modules"], HEAVY_FOR_A_CLIENT) == [], args
    assert "Hello, Ada!" in str(_run("receipts", "--json", env=env)["out"])


_BUILT_PROBE = (
    _RUN_CLI
    + """
from pydantic import BaseModel
def every(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from every(sub)
built = sorted({c.__name__ for c in every(BaseModel)
                if c.__module__.startswith("chit.") and c.__pydantic_complete__})
print(json.dumps({"code": code, "built": built}))
"""
)

#: The models whose schemas ``chit daemon status`` needs: the greeting, the request's
#: (empty) parameters and the status reply. Every other model of the socket's protocol
#: and of the receipts is built on first use (``defer_build``), not at import.
STATUS_MODELS = {"HelloParams", "HelloResult", "NoParams", "DaemonStatus", "ServerStatus"}


@pytest.mark.timeout(240)
def test_daemon_status_builds_only_the_models_it_uses(daemon_home: Path) -> None:
    env = daemon_env(daemon_home)
    assert _run("call", "demo", "greet", "--arg", "name=Ada", env=env)["code"] == 0
    proc = subprocess.run(
        [sys.executable, "-c", _BUILT_PROBE, "daemon", "status", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    ran = json.loads(proc.stdout.splitlines()[-1])
    assert ran["code"] == 0
    built = set(ran["built"])
    assert built <= STATUS_MODELS, sorted(built - STATUS_MODELS)
    assert "DaemonStatus" in built  # the probe sees a build when there is one


def test_build_all_leaves_no_model_of_chit_deferred() -> None:
    """What a Supervisor or the sidecar's executor does before its threads validate."""
    code = (
        "import json, chit.engine.rpc, chit.proxy.protocol, chit.receipts.models\n"
        "from pydantic import BaseModel\n"
        "from chit.receipts.schemas import _ADAPTERS, build_all\n"
        "def every(c):\n"
        "    for s in c.__subclasses__():\n"
        "        yield s\n"
        "        yield from every(s)\n"
        "def deferred():\n"
        "    models = [c.__name__ for c in every(BaseModel)\n"
        "              if c.__module__.startswith('chit.') and not c.__pydantic_complete__]\n"
        "    return models + [repr(a) for a in _ADAPTERS if not a.pydantic_complete]\n"
        "before = deferred()\n"
        "build_all()\n"
        "print(json.dumps({'before': before, 'after': deferred()}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert "Receipt" in found["before"]  # deferred at import: the check can fail
    assert found["after"] == []
