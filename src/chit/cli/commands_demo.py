"""``chit demo``: the TUI on a throwaway home, live within seconds.

A temporary home with an in-memory key store, the fixture task server registered, the
Supervisor and the sidecar executor running, and a scripted agent that opens work
records and starts a mix of tasks. ``--headless-seconds N`` plays the same script without
the TUI for N seconds and prints the receipts (for tests and CI); with ``--until-settled``
it ends as soon as the script has come to rest, N being only the limit.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from chit.cli.demo_signals import DemoSignals


def prepare_home(root: Path) -> None:
    """Point this process at ``root`` (memory key store) and register the demo server."""
    from chit.home import Home
    from chit.servers import Registry, ServerSpec

    os.environ["CHIT_HOME"] = str(root)
    os.environ["CHIT_KEY_STORE"] = "memory"
    # The Supervisor hosts the sidecar executor (seed 000: the executor runs in the app);
    # force it on, since the agent's first work_start creates sidecar.db only later.
    os.environ["CHIT_SIDECAR_EXECUTOR"] = "1"
    # The demo's own daemon ends with the demo, however the demo ends (a closed terminal).
    os.environ["CHIT_DAEMON_EXIT_WITH"] = str(os.getpid())
    home = Home(root).ensure()
    spec = ServerSpec(
        name="demo",
        transport="stdio",
        command=sys.executable,
        args=("-m", "chit", "demo-server", "--db", str(home.tasks_db_path)),
    )
    Registry.for_home(home).add(spec)


class DemoRun:
    """The running demo: its engine (hosting the sidecar executor) and the agent thread.

    By default the demo runs its own daemon on the throwaway home (the demo server is
    that daemon's child) and stops it, with every server, on exit; ``--no-daemon`` hosts
    the Supervisor in this process instead.
    """

    def __init__(self, root: Path, *, use_daemon: bool = True) -> None:
        import threading

        from chit.demo.agent import DemoAgent
        from chit.home import Home

        home = Home(root)
        self.home = home
        self.engine: Any = None
        if use_daemon:
            from chit.engine.blocking import BlockingEngine
            from chit.engine.remote import RemoteEngine
            from chit.tui.engine_host import EngineHost

            def opener() -> Any:
                return RemoteEngine.open(home, client="demo")

            self.engine = BlockingEngine.start(opener)
            # The TUI's host over the demo's engine; DemoRun.stop closes the engine.
            self.host: Any = EngineHost(opener, remote=True, owned=False, engine=self.engine)
            # Start the demo server (the daemon's child) and load the agent's sidecar now,
            # so the script's first steps do not wait for either.
            import chit.sidecar.service  # noqa: F401

            try:
                self.engine.tools("demo", timeout=60)
            except Exception as exc:  # the script's first call will say it again
                click.echo(f"chit: the demo server did not start yet: {exc}", err=True)
        else:
            from chit.tui.engine_host import EngineHost

            self.host = EngineHost.start(home, use_daemon=False)
        self.agent = DemoAgent(home, self._call)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self.agent.run, args=(self._stop,), name="chit-demo-agent", daemon=True
        )
        self._thread.start()

    def _call(
        self, server: str, tool: str, args: dict[str, Any], purpose: str | None, work: str | None
    ) -> Any:
        return self.host.call(server, tool, dict(args), purpose=purpose, work_ref=work)

    def stop(self) -> None:
        """Stop the agent, then the engine: the daemon and every server it runs."""
        self._stop.set()
        self._thread.join(timeout=5)
        if self.engine is None:
            self.host.close()
            return
        import anyio

        from chit.engine.daemon_control import stop_daemon
        from chit.engine.paths import DaemonPaths
        from chit.engine.start import wait_until_gone

        self.engine.close()
        pid = anyio.run(stop_daemon, self.home)
        if not wait_until_gone(DaemonPaths(self.home), 20, pid):
            click.echo("chit: the demo's daemon did not stop in 20 s", err=True)


@click.command("demo")
@click.option(
    "--headless-seconds",
    type=float,
    default=None,
    help="Run the script without the TUI for N seconds, then print the receipts.",
)
@click.option(
    "--until-settled",
    is_flag=True,
    help="With --headless-seconds: end once the script has run and its tasks came to rest.",
)
@click.option("--keep", is_flag=True, help="Keep the throwaway home (its path is printed).")
@click.pass_context
def demo(
    ctx: click.Context, headless_seconds: float | None, until_settled: bool, keep: bool
) -> None:
    """Open the TUI on a throwaway home with a demo server and a scripted agent."""
    import shutil
    import tempfile
    import time

    from chit.cli.demo_signals import orderly_exit
    from chit.cli.engine import use_daemon

    with orderly_exit() as signals:  # SIGTERM/SIGHUP: the same clean-up as quitting
        root = Path(tempfile.mkdtemp(prefix="chit-demo-"))
        code = 0
        try:
            with signals.deferred():  # once it runs, ``run.stop()`` undoes it all
                prepare_home(root)
                run = DemoRun(root, use_daemon=use_daemon(ctx))
            try:
                signals.check()
                if headless_seconds is not None:
                    if until_settled:
                        _wait_settled(run, headless_seconds)
                    else:
                        time.sleep(headless_seconds)
                    _print_receipts(root)
                else:
                    code = _run_tui(root, run, signals)
            finally:
                signals.cleaning = True
                run.stop()
        finally:
            signals.cleaning = True
            # After a crash the home is the evidence: keep it and say where it is.
            if keep or code:
                click.echo(f"demo home kept at {root}", err=True)
            else:
                shutil.rmtree(root, ignore_errors=True)
    code = code or signals.exit_code() or 0
    if code:
        raise SystemExit(code)


def _wait_settled(run: DemoRun, limit: float) -> None:
    """Wait until the demo's script has come to rest, or ``limit`` seconds have passed.

    Polls the home's store (the daemon writes it) a few times a second: the script's
    end is an event to wait for, not a time to guess, so a loaded machine only makes the
    wait longer, never the printout incomplete.
    """
    import time

    from chit.store import Store

    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if run.agent.finished.is_set():
            with Store.open(run.home) as store:
                if run.agent.settled(store):
                    return
        time.sleep(0.2)
    click.echo(f"chit: the demo script had not come to rest after {limit:g} s", err=True)


def _run_tui(root: Path, run: DemoRun, signals: DemoSignals) -> int:
    from chit.home import Home
    from chit.tui.app import ChitApp
    from chit.tui.backend import Backend, Mode
    from chit.tui.config import TuiSettings
    from chit.tui.launch import run as run_app

    mode = Mode(
        banner="Demo: throwaway home, in-memory key store (CHIT_KEY_STORE=memory);"
        " everything vanishes when you quit.",
        note="demo",
    )
    home = Home(root)
    app = ChitApp(Backend(home, mode, run.host), TuiSettings(), tick=1.0)
    with signals.tui(app):
        return run_app(app, home)


def _print_receipts(root: Path) -> None:
    from chit.home import Home
    from chit.store import Store

    with Store.open(Home(root)) as store:
        for r in store.receipts.list(limit=100).items:
            click.echo(
                f"{r.receipt_id}\t{r.state.value}\t{r.tool}\t{r.work_ref or '-'}\t{r.purpose or ''}"
            )
        for rec in store.work.list():
            click.echo(
                f"work\t{rec.id}\t{rec.status}\t{rec.title}\t{len(store.work.notes(rec.id))} notes"
            )


COMMANDS = [demo]
