"""Helpers for the engine tests: a Supervisor on a private home against chit's demo server."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from chit.clock import ManualClock, current_clock
from chit.clock import use as use_clock
from chit.home import Home
from chit.receipts import Receipt
from chit.reconcile import ClientOptions
from chit.runtime import Supervisor, SupervisorOptions
from chit.tasks.client import HttpServer, Mode, ServerSpec, StdioServer

MEMORY_ENV = {"CHIT_KEY_STORE": "file"}


def demo_stdio(db: Path) -> StdioServer:
    """``chit demo-server`` over stdio on the task store ``db``."""
    # The child gets the SDK's minimal environment: pass PYTHONPATH on, so a run from a
    # worktree (PYTHONPATH=$PWD/src) serves that worktree's code, not the editable install's.
    env = {k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}
    return StdioServer(
        sys.executable,
        ["-m", "chit", "demo-server", "--db", str(db)],
        env=env or None,
        stderr=_quiet(),
    )


def _quiet() -> Any:
    return open(os.devnull, "w")


def fast_options(
    mode: Mode = "auto", *, notifications: bool = True, **extra: Any
) -> SupervisorOptions:
    """Short timeouts and waits, so tests finish in seconds."""
    client = ClientOptions(
        mode=mode, read_timeout=10.0, result_timeout=30.0, notifications=notifications
    )
    settings: dict[str, Any] = {
        "client": client,
        "answer_wait_s": 5.0,
        "redeliver_wait_s": 3.0,
        "intent_grace_s": 0.0,
        "heartbeat_s": 0.5,
        "lease_stale_s": 3.0,
        "settle_s": 3.0,
    }
    settings.update(extra)
    return SupervisorOptions(**settings)


def file_key_env(home: Path) -> dict[str, str]:
    """Settings selecting the opt-in file key store under ``home`` (no keyring needed)."""
    return {"CHIT_KEY_STORE": "file", "CHIT_HOME": str(home)}


@asynccontextmanager
async def supervisor(
    home: Path,
    servers: Mapping[str, ServerSpec],
    options: SupervisorOptions | None = None,
    *,
    clock: ManualClock | None = None,
) -> AsyncIterator[Supervisor]:
    """A Supervisor whose server names resolve to ``servers`` (no config.toml needed).

    With ``clock`` the engine runs on that manual clock, installed as the process's
    clock for the block so the store's timestamps follow it too.
    """
    if clock is not None:
        with use_clock(clock):
            async with supervisor(home, servers, options) as sup:
                yield sup
        return

    def resolve(name: str) -> ServerSpec:
        from chit.errors import NotFound

        if name not in servers:
            raise NotFound(f"no server {name!r}")
        return servers[name]

    async with Supervisor.open(
        Home(home),
        environ=file_key_env(home),
        options=options or fast_options(),
        resolve=resolve,
        clock=current_clock(),
    ) as sup:
        yield sup


@asynccontextmanager
async def demo_engine(tmp_path: Path, *, run: bool = False) -> AsyncIterator[Any]:
    """A :class:`~chit.engine.local.LocalEngine` on ``tmp_path/home`` whose one server,
    ``demo``, is chit's demo server in process (``run``: reconciling too)."""
    from chit.demo.server import build_demo_server
    from chit.engine.local import LocalEngine
    from chit.errors import NotFound
    from chit.tasks.client import InProcessServer

    servers: dict[str, ServerSpec] = {
        "demo": InProcessServer(build_demo_server(tmp_path / "tasks.db"))
    }

    def resolve(name: str) -> ServerSpec:
        if name not in servers:
            raise NotFound(f"no server {name!r}")
        return servers[name]

    home = tmp_path / "home"
    async with LocalEngine.open(
        Home(home),
        environ=file_key_env(home),
        options=fast_options("2026"),
        resolve=resolve,
        run=run,
    ) as engine:
        yield engine


async def wait_receipt(
    sup: Supervisor, receipt_id: str, done: Callable[[Receipt], bool], *, within: float = 30.0
) -> Receipt:
    """Wait until ``done(receipt)`` holds, re-reading after each change ``sup`` commits.

    For changes this engine makes (its checks, its 2025 watchers): no polling, no sleep.
    """
    with anyio.fail_after(within):
        while not done(receipt := sup.store.receipts.require(receipt_id)):
            await sup.writer.wait_change(receipt_id)
    return receipt


async def wait_engine(sup: Supervisor, done: Callable[[], bool], *, within: float = 60.0) -> None:
    """Wait until ``done()`` holds, re-evaluated after every event ``sup`` publishes."""
    changed = anyio.Event()

    def on_event(_event: object) -> None:
        changed.set()

    unsubscribe = sup.subscribe(on_event)
    try:
        with anyio.fail_after(within):
            while True:
                changed = anyio.Event()
                if done():
                    return
                await changed.wait()
    finally:
        unsubscribe()


async def follow_virtually(
    sup: Supervisor,
    clock: ManualClock,
    receipt_id: str,
    *,
    step: float = 0.1,
    within: float = 30.0,
) -> Receipt:
    """``sup.follow`` on a manual clock: time moves ``step`` at a time until it returns.

    ``within`` bounds the real time it may take (real servers answer in real time).
    """
    followed: list[Receipt] = []
    async with anyio.create_task_group() as tg:

        async def go() -> None:
            followed.append(await sup.follow(receipt_id))
            tg.cancel_scope.cancel()

        tg.start_soon(go)
        with anyio.fail_after(within):
            while True:
                await clock.run_for(step)
    return followed[0]


def write_config(home: Path, servers: Mapping[str, ServerSpec]) -> None:
    """Register ``servers`` in ``home/config.toml`` (plain values, nothing secret)."""
    lines = []
    for name, spec in servers.items():
        lines.append(f"[servers.{name}]")
        if isinstance(spec, HttpServer):
            lines += ['transport = "http"', f'url = "{spec.url}"']
        else:
            assert isinstance(spec, StdioServer)
            args = ", ".join(f'"{a}"' for a in spec.args)
            lines += ['transport = "stdio"', f'command = "{spec.command}"', f"args = [{args}]"]
        lines.append("")
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    (home / "config.toml").write_text("\n".join(lines))


def crash_args(i: int) -> dict[str, Any]:
    """The deterministic arguments of task ``i`` in the crash test (so retries can match)."""
    return {"seconds": 0.3 + (i % 4) * 0.2, "label": f"t{i}"}


async def crash_driver(home: Path, url: str, tasks: int) -> None:
    """One life of the crash-test reconciler: resume, retry unknown intents, call, reconcile.

    Killed at random points by the test; each life continues where the last one died.
    """
    from chit.receipts import IntentState

    async with supervisor(home, {"demo": HttpServer(url)}) as sup:
        sup.resume_intents()
        for intent in sup.store.intents.list(IntentState.UNKNOWN):
            i = int((intent.purpose or "t-1").split()[-1])
            await sup.retry_intent(intent.request_key, crash_args(i))
        done = {i.purpose for i in sup.store.intents.list()}
        for i in range(tasks):
            if f"crash {i}" not in done:
                await sup.call("demo", "slow_compute", crash_args(i), purpose=f"crash {i}")
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sup.run, stop)
            await wait_engine(sup, lambda: not sup.reconciler.live_ids(), within=600)
            stop.set()


if __name__ == "__main__":  # python -m tests.engine_support HOME URL TASKS
    anyio.run(crash_driver, Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
