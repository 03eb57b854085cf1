"""Servers that misbehave or that chit spawns (issue 11, cases 5 and 12).

5. A stdio server that prints lines on stdout that are not MCP: once an 11-line SDK
   traceback per line on stderr, even when the call succeeded. Now: one warning line per
   connection, the lines themselves in the server's log.
12. ``chit demo-server`` spawned over stdio did not get the home: every home shared one
   0644 task store in /tmp. Now: ``CHIT_HOME`` is passed, the store is in the home, 0600.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chit.home import Home
from chit.servers import Registry, ServerSpec
from chit.tasks.client import StdioServer, TaskClient
from chit.vault import MemoryKeyStore, Vault

PYTHON = sys.executable
# A real MCP server (chit's demo server) behind a banner and a stray JSON line on stdout.
NOISY = [
    "-c",
    "import runpy, sys; print('Welcome to noisy-server 1.0'); print('{\"debug\": true}');"
    " sys.stdout.flush(); sys.argv = ['chit', 'demo-server']; runpy.run_module('chit',"
    " run_name='__main__')",
]


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHIT_")}
    # In process (no daemon): the command's own terminal is what is checked here.
    env |= {"CHIT_HOME": str(home), "CHIT_KEY_STORE": "memory", "CHIT_NO_DAEMON": "1"}
    return env


def _chit(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "chit", *args],
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.timeout(120)
def test_stdout_noise_is_one_warning_line_not_a_traceback(tmp_path: Path) -> None:
    home = tmp_path / "home"
    added = _chit(home, "servers", "add", "noisy", "--command", PYTHON, "--", *NOISY)
    assert added.returncode == 0, added.stderr
    listed = _chit(home, "tools", "noisy", "--json")
    assert listed.returncode == 0, listed.stderr
    assert "slow_compute" in listed.stdout
    assert listed.stderr.splitlines() == [
        "chit: warning: server 'noisy' wrote 2 lines on stdout that are not MCP "
        "(ignored; logged with its stderr)"
    ]
    log = (home / "logs" / "servers" / "noisy.log").read_text()  # what `chit logs` shows
    assert "stdout line that is not MCP, ignored: 'Welcome to noisy-server 1.0'" in log
    assert "Traceback" not in log


@pytest.mark.anyio
@pytest.mark.timeout(120)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_stdout_noise_goes_to_the_servers_log(tmp_path: Path) -> None:
    log = tmp_path / "noisy.log"
    env = {"CHIT_HOME": str(tmp_path / "home")}
    with log.open("w+", encoding="utf-8") as sink:
        spec = StdioServer(PYTHON, NOISY, env=env, stderr=sink, label="noisy")
        async with TaskClient(spec, read_timeout=30) as client:
            names = [t.name for t in await client.list_tools()]
    assert "greet" in names
    text = log.read_text()
    assert "stdout line that is not MCP, ignored: 'Welcome to noisy-server 1.0'" in text
    assert "Traceback" not in text


def test_stdio_servers_get_the_home(tmp_path: Path) -> None:
    vault = Vault.unlock(MemoryKeyStore(), None)
    home = Home(tmp_path / "home")
    registry = Registry(home.config_path, lambda: vault)
    registry.add(ServerSpec(name="demo", transport="stdio", command="chit"))
    registry.add(
        ServerSpec(name="mine", transport="stdio", command="x", env={"CHIT_HOME": "/elsewhere"})
    )
    registry.add(ServerSpec(name="web", transport="http", url="http://127.0.0.1:9/mcp"))
    assert registry.resolve("demo").env == {"CHIT_HOME": str(home.root)}
    assert registry.resolve("mine").env == {"CHIT_HOME": "/elsewhere"}  # the user's choice
    assert registry.resolve("web").env == {}


@pytest.mark.timeout(120)
def test_demo_server_spawned_over_stdio_keeps_its_store_in_the_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    demo = ["-m", "chit", "demo-server"]
    assert _chit(home, "servers", "add", "demo", "--command", PYTHON, "--", *demo).returncode == 0
    # The SDK gives the child a minimal environment (no CHIT_HOME) plus what chit adds.
    listed = _chit(home, "tools", "demo")
    assert listed.returncode == 0, listed.stderr
    store = home / "demo-tasks.db"
    assert store.exists()
    assert store.stat().st_mode & 0o777 == 0o600
    assert home.stat().st_mode & 0o777 == 0o700


def test_demo_server_default_store_is_the_homes(tmp_path: Path) -> None:
    from chit.demo.server import default_db_path

    home = Home(tmp_path / "h")
    assert default_db_path(home) == home.root / "demo-tasks.db"


@pytest.mark.timeout(60)
def test_a_new_task_store_is_private(tmp_path: Path) -> None:
    from chit.tasks.server.store import TaskStore

    old = os.umask(0o022)
    try:
        TaskStore(tmp_path / "tasks.db").close()
    finally:
        os.umask(old)
    assert (tmp_path / "tasks.db").stat().st_mode & 0o777 == 0o600


@pytest.mark.timeout(120)
def test_a_postgres_store_without_psycopg_is_one_line_exit_5(tmp_path: Path) -> None:
    # The environment, not a bug: psycopg missing is a store that cannot be opened.
    code = (
        "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None\n"
        "from chit.cli.main import main\n"
        "sys.argv = ['chit', *sys.argv[1:]]\n"
        "main()\n"
    )
    url = "postgresql://u:pw@127.0.0.1:1/x"
    for argv in (["sidecar", "--store", url, "token", "list"], ["demo-server", "--store", url]):
        proc = subprocess.run(
            [PYTHON, "-c", code, *argv],
            env=_env(tmp_path / "home"),
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 5, (argv, proc.stderr)
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("chit: cannot open the"), lines
        assert "pip install 'chit[postgres]'" in lines[0] and "pw" not in lines[0]
