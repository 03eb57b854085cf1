"""Helpers for the engine tests: a Supervisor on a private home against chit's demo server."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from chit.home import Home
from chit.reconcile import ClientOptions
from chit.runtime import Supervisor, SupervisorOptions
from chit.tasks.client import HttpServer, Mode, ServerSpec, StdioServer

MEMORY_ENV = {"CHIT_KEY_STORE": "file"}


def demo_stdio(db: Path) -> StdioServer:
    """``chit demo-server`` over stdio on the task store ``db``."""
    return StdioServer(
        sys.executable, ["-m", "chit", "demo-server", "--db", str(db)], stderr=_quiet()
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
) -> AsyncIterator[Supervisor]:
    """A Supervisor whose server names resolve to ``servers`` (no config.toml needed)."""

    def resolve(name: str) -> ServerSpec:
        from chit.errors import NotFound

        if name not in servers:
            raise NotFound(f"no server {name!r}")
        return servers[name]

    async with Supervisor.open(
        Home(home), environ=file_key_env(home), options=options or fast_options(), resolve=resolve
    ) as sup:
        yield sup


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
    import anyio

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
            while sup.reconciler.live_ids():
                await anyio.sleep(0.1)
            stop.set()


if __name__ == "__main__":  # python -m tests.engine_support HOME URL TASKS
    import anyio

    anyio.run(crash_driver, Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
