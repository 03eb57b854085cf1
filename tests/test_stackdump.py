"""``kill -USR1``: a chit process says where it waits, and goes on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="no SIGUSR1")

_WAITER = textwrap.dedent(
    """
    import asyncio, sys
    from chit import stackdump

    async def stuck_deep_inside(ready):
        ready.set()
        await asyncio.Event().wait()

    async def main():
        stackdump.install()
        ready = asyncio.Event()
        task = asyncio.create_task(stuck_deep_inside(ready), name="the-stuck-one")
        await ready.wait()
        print("ready", flush=True)
        line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        task.cancel()
        print("went on:", line.strip(), flush=True)

    asyncio.run(main())
    """
)


def test_sigusr1_dumps_tasks_and_threads_then_the_process_goes_on() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _WAITER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None and proc.stderr is not None
        assert proc.stdout.readline().strip() == "ready"
        os.kill(proc.pid, signal.SIGUSR1)
        lines = []
        deadline = time.monotonic() + 60  # a bound on a hang, not a timing
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("chit: end of stack dump"):
                break
        dump = "".join(lines)
        assert dump.startswith("chit: stack dump (SIGUSR1)")
        assert "--- task the-stuck-one" in dump
        assert "stuck_deep_inside" in dump  # the coroutine it is suspended in
        assert "--- thread" in dump
        out, _ = proc.communicate("still here\n", timeout=60)
        assert "went on: still here" in out
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_install_off_the_main_thread_is_a_no_op() -> None:
    import threading

    from chit import stackdump

    before = signal.getsignal(signal.SIGUSR1)
    worker = threading.Thread(target=stackdump.install)
    worker.start()
    worker.join()
    assert signal.getsignal(signal.SIGUSR1) == before
