"""Helpers for ``chit proxy`` tests: homes with servers, hosts, waiting on real processes.

Every end is a real process: the host (this test process through chit's task client or
the ``mcp`` SDK, or a Node host), ``chit proxy`` (a subprocess the host launches, as a
host would), chit's daemon (started on demand by the proxy) and the server (a stdio
child of the daemon, or an HTTP process). Waiting polls the other process with a
deadline: nothing here sleeps a fixed time before an assertion.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

import chit as chit_package
from chit.tasks.client import StdioServer, TaskClient, TaskSnapshot
from tests import peers
from tests.cli_support import where_it_spins
from tests.daemon_support import chit, daemon_env, daemon_home

PYTHON = sys.executable
SOURCE = Path(chit_package.__file__).parents[1]
"""Where the chit under test is imported from: a demo server run there (``--cwd``) runs
this checkout's ``chit demo-server`` (``python -m chit`` imports from its working
directory first)."""

SECRET = "sk-live-Q7f9x2LmN4pR8tV1wY3z"
HOSTILE = f"[bold]big[/bold] [link=https://evil.example]click[/] \x1b[31mred\x07 key {SECRET}"
"""A server's hostile question text: Rich markup, terminal controls, its own secret."""


def demo_args(db: Path) -> list[str]:
    """``chit servers add`` arguments registering ``chit demo-server`` over stdio."""
    args = ["--command", PYTHON]
    for part in ("-m", "chit", "demo-server", "--db", str(db)):
        args += ["--arg", part]
    return args


def everything_args() -> list[str]:
    """``chit servers add`` arguments registering server-everything over stdio (Node 22)."""
    node = str(peers.node22())
    entry = str(peers.EVERYTHING.entry_path)
    peers.ensure(peers.EVERYTHING)
    return ["--command", node, "--arg", entry, "--arg", "stdio"]


@contextmanager
def proxy_home(tmp: Path, **servers: list[str]) -> Iterator[Path]:
    """A home with ``servers`` registered (name → ``servers add`` args); daemon stopped after."""
    with daemon_home(tmp / "home") as home:
        env = daemon_env(home)
        for name, args in servers.items():
            ran = chit("servers", "add", name, *args, env=env)
            assert ran.code == 0, ran.err
        yield home


def proxy_spec(home: Path, server: str, *extra: str, **env: str) -> StdioServer:
    """How a host launches ``chit proxy SERVER`` (the daemon is started on demand).

    The proxy's stderr goes to ``HOME/logs/proxy.stderr`` (appended), where
    :func:`diagnosis` reads it: its stack dump when :func:`explained` asks for one.
    """
    logs = home / "logs"
    logs.mkdir(mode=0o700, parents=True, exist_ok=True)  # chit refuses a home others can read
    stderr = open(logs / PROXY_STDERR, "a")  # noqa: SIM115 - the proxy's, for its life
    args = ["-m", "chit", "proxy", server, *extra]
    return StdioServer(PYTHON, args, env=daemon_env(home, **env), stderr=stderr)


PROXY_STDERR = "proxy.stderr"


async def until_terminal(tc: TaskClient, task_id: str, timeout: float = 60) -> TaskSnapshot:
    """Poll the proxy until the task ends (another process does the work)."""
    with anyio.fail_after(timeout):
        while True:
            snap = await tc.get(task_id)
            if snap.terminal:
                return snap
            await anyio.sleep(0.2)


async def until_status(
    tc: TaskClient, task_id: str, status: str, timeout: float = 60
) -> TaskSnapshot:
    """Poll the proxy until the task reports ``status``."""
    with anyio.fail_after(timeout):
        while True:
            snap = await tc.get(task_id)
            if snap.status == status:
                return snap
            assert not snap.terminal, f"ended {snap.status} while waiting for {status}"
            await anyio.sleep(0.2)


def receipts(home: Path, **filters: str) -> list[dict[str, Any]]:
    """``chit receipts --json`` (read from the store, no daemon needed)."""
    args = ["receipts", "--json", "--all"]
    for key, value in filters.items():
        args += [f"--{key}", value]
    ran = chit(*args, env=daemon_env(home))
    assert ran.code == 0, ran.err
    rows: list[dict[str, Any]] = json.loads(ran.out)
    return rows


def show(home: Path, receipt_id: str) -> dict[str, Any]:
    """``chit show RECEIPT --json``."""
    ran = chit("show", receipt_id, "--json", env=daemon_env(home))
    assert ran.code == 0, ran.err
    data: dict[str, Any] = json.loads(ran.out)
    return data


def wait_receipt(
    home: Path, predicate: Any, *, timeout: float = 60, **filters: str
) -> dict[str, Any]:
    """Poll the store until a receipt matches ``predicate`` (the daemon writes it)."""
    deadline = time.monotonic() + timeout
    while True:
        found = [r for r in receipts(home, **filters) if predicate(r)]
        if found:
            return found[0]
        assert time.monotonic() < deadline, f"no receipt matched in {timeout} s"
        time.sleep(0.2)


def question_waits(row: dict[str, Any]) -> bool:
    """The receipt waits for input and its question is stored (a ``wait_receipt`` predicate).

    A task's ``input_required`` status can reach the receipt a poll before its question
    (2025: ``tasks/result`` brings it; 2026: a later ``tasks/get``); ``chit answer`` in
    between finds nothing pending. Questions outside a task are stored with their status
    in one commit, but every wait for a question waits for the question itself.
    """
    pending = [q for q in row["input_requests"] if q["answer_status"] == "pending"]
    return row["state"] == "input_required" and bool(pending)


def declare(home: Path, *capabilities: str, server: str = "everything") -> None:
    """Set ``declare`` in ``server``'s table (its own line under the header)."""
    config = home / "config.toml"
    text = config.read_text()
    head = f"[servers.{server}]\n"
    assert head in text, text
    line = f"declare = {json.dumps(list(capabilities))}\n"
    config.write_text(text.replace(head, head + line, 1))


def pending_question(home: Path, rid: str, kind: str, timeout: float = 90) -> dict[str, Any]:
    """Wait until receipt ``rid`` has a pending question of ``kind``; return it."""
    deadline = time.monotonic() + timeout
    while True:
        detail = show(home, rid)
        for question in detail["input_requests"]:
            if question["kind"] == kind and question["answer_status"] == "pending":
                return dict(question)
        assert detail["state"] not in ("completed", "failed", "cancelled"), detail
        why = (detail["state"], detail["input_requests"], detail["timeline"][-4:])
        assert time.monotonic() < deadline, f"no pending {kind} question: {why}"
        time.sleep(0.2)


def server_task_ids(db: Path) -> list[str]:
    """The task ids ``chit demo-server`` keeps in ``db`` (what chit must never store)."""
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute("SELECT id FROM tasks")]


@contextmanager
def demo_home(tmp: Path, prompts: str | None = None) -> Iterator[Path]:
    """A home with ``demo`` (this checkout's demo server, a secret in its env) declaring
    sampling and roots; ``prompts`` set in its table when given."""
    with daemon_home(tmp / "home") as home:
        args = [*demo_args(tmp / "demo.db"), "--env", f"API_TOKEN={SECRET}"]
        args += ["--cwd", str(SOURCE)]
        ran = chit("servers", "add", "demo", *args, env=daemon_env(home))
        assert ran.code == 0, ran.err
        declare(home, "sampling", "roots", server="demo")
        if prompts is not None:  # in the server's own table (not its env's, after it)
            config = home / "config.toml"
            head = "[servers.demo]\n"
            config.write_text(config.read_text().replace(head, f'{head}prompts = "{prompts}"\n'))
        yield home


def diagnosis(home: Path, server: str = "demo", lines: int = 60) -> str:
    """What happened, for a failure's message: the daemon's and the server's log tails
    and every receipt's timeline (read from the store; no daemon needed)."""
    parts: list[str] = []
    logs = home / "logs"
    for log in (logs / "daemon.log", logs / "servers" / f"{server}.log", logs / PROXY_STDERR):
        try:
            tail = _tail(log.read_text(errors="replace").splitlines(), lines)
        except FileNotFoundError:
            continue
        except OSError as exc:
            tail = [f"(unreadable: {exc})"]
        parts += [f"--- {log.name}", *tail]
    ran = chit("receipts", "--json", "--all", env=daemon_env(home))
    rows = json.loads(ran.out) if ran.code == 0 else []
    for row in rows:
        shown = chit("show", row["receipt_id"], "--json", env=daemon_env(home))
        detail = json.loads(shown.out) if shown.code == 0 else {}
        parts.append(f"--- receipt {row['receipt_id']} {row['tool']} {row['state']}")
        for q in row.get("input_requests", []):
            parts.append(f"  input {q['kind']} {q['key']} {q['answer_status']}")
        for t in detail.get("timeline", []):
            seen = f"{t.get('kind')}/{t.get('source')} {t.get('status')} {t.get('message')!r}"
            parts.append(f"  {t.get('at')} {seen} applied={t.get('applied')}")
    return "\n".join(parts)


def _tail(lines: list[str], keep: int) -> list[str]:
    """The last ``keep`` lines, and every line from the last stack dump on (a dump is
    longer than a log's usual tail and is the part that says where a process waited)."""
    starts = [i for i, line in enumerate(lines) if "chit: stack dump" in line]
    first = min(len(lines) - keep, starts[-1]) if starts else len(lines) - keep
    return lines[max(first, 0) :]


WATCH_S = 120.0
"""When :func:`explained` looks at a block still running: well past a passing run
(~30 s at load 6) and well before the tests' own 180 s waits give up, while the
processes still wait where they hung."""


def chit_processes(home: Path) -> list[int]:
    """Pids of chit processes (proxy, daemon, demo server) running for ``home``."""
    mark = f"CHIT_HOME={home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if b"chit" in cmdline and mark in environ.split(b"\0"):
            found.append(int(entry.name))
    return sorted(found)


def where_they_wait(home: Path) -> str:
    """Each chit process of ``home``: its command, CPU use and ``py-spy dump``; each is
    sent SIGUSR1 too (``chit.stackdump``: its asyncio tasks, to the daemon's log and the
    proxy's stderr file, which :func:`diagnosis` shows)."""
    parts = []
    for pid in chit_processes(home):
        try:
            cmd = (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        parts.append(f"--- pid {pid}: {cmd.decode(errors='replace')}\n{where_it_spins(pid)}")
        try:
            os.kill(pid, signal.SIGUSR1)
        except OSError:
            continue
    return "\n".join(parts) or "(no chit process of this home was running)"


@contextmanager
def explained(home: Path, server: str = "demo", watch_s: float = WATCH_S) -> Iterator[None]:
    """Re-raise any failure in the block with :func:`diagnosis` in its message.

    A block still running after ``watch_s`` gets its chit processes looked at then
    (:func:`where_they_wait`), while they still wait where they hung: a test that gives
    up later ends its host, and with it the proxy, first. A block that then passes
    throws the look away.
    """
    started = time.monotonic()
    looked: list[str] = []
    done = threading.Event()

    def watch() -> None:
        if not done.wait(watch_s):
            looked.append(f"--- after {watch_s:g} s, where the processes waited\n")
            looked.append(where_they_wait(home))

    watcher = threading.Thread(target=watch, name="explained-watch", daemon=True)
    watcher.start()
    try:
        yield
    except Exception as exc:
        took = time.monotonic() - started
        done.set()
        watcher.join()
        why = f"{type(exc).__name__}: {exc} (after {took:.1f} s)\n{''.join(looked)}"
        raise AssertionError(f"{why}\n{diagnosis(home, server)}") from exc
    finally:
        done.set()
