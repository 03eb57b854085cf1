"""The task server's stdio writer: in order, not a round trip per message, bounded.

``chit.tasks.server.stdio.PipeWriter`` replaces the SDK's per-message ``write`` +
``flush`` thread round trips (see the module docstring). Checked here on a real pipe:
every byte arrives, in order, batched into fewer ``write`` calls than messages when the
reader lags; a flush does not wait while the queue is under its cap and does wait (until
the reader drains) beyond it; a reader that went away surfaces as an error on the next
flush, not a hang. And ``chit demo-server`` over stdio serves a task end to end with a
tool that prints to stdout (the diversion keeps it off the wire).
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import anyio
import pytest

from chit.tasks.client import TaskClient
from chit.tasks.client.spec import StdioServer
from chit.tasks.server.stdio import PipeWriter

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _read_all(fd: int, into: bytearray, done: threading.Event) -> None:
    while chunk := os.read(fd, 65536):
        into += chunk
    done.set()


async def test_messages_arrive_in_order_batched() -> None:
    read_fd, write_fd = os.pipe()
    writer = PipeWriter(write_fd, cap=1 << 30)
    lines = [f'{{"n": {i}, "pad": "{"x" * 200}"}}\n' for i in range(2000)]
    try:
        # Nobody reads yet: the pipe fills, the writer thread blocks in write(), and the
        # later messages queue up behind it; flush never waits under the cap.
        for line in lines:
            await writer.write(line)
            await writer.flush()
        got = bytearray()
        done = threading.Event()
        reader = threading.Thread(target=_read_all, args=(read_fd, got, done), daemon=True)
        reader.start()
        await anyio.to_thread.run_sync(writer.close)
        os.close(write_fd)
        await anyio.to_thread.run_sync(done.wait)
    finally:
        os.close(read_fd)
    assert got.decode() == "".join(lines)
    assert writer.writes < len(lines)  # batched: queued messages left in shared writes


async def test_flush_waits_beyond_the_cap_until_the_reader_drains() -> None:
    read_fd, write_fd = os.pipe()
    writer = PipeWriter(write_fd, cap=1024)
    flushed = anyio.Event()
    blob = "y" * (1 << 20)  # far beyond the pipe's buffer and the cap

    async def send() -> None:
        await writer.write(blob)
        await writer.flush()
        flushed.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(send)
            # The reader has read nothing: the flush must still be waiting for room.
            await anyio.wait_all_tasks_blocked()
            assert not flushed.is_set()
            got = bytearray()
            while len(got) < len(blob):
                got += await anyio.to_thread.run_sync(os.read, read_fd, 65536)
            await flushed.wait()
        assert got == blob.encode()
    finally:
        writer.close()
        os.close(write_fd)
        os.close(read_fd)


async def test_a_closed_reader_fails_the_next_flush() -> None:
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    writer = PipeWriter(write_fd, cap=0)  # every flush waits for the thread's verdict
    try:
        with pytest.raises(OSError):
            await writer.write("hello\n")
            await writer.flush()
        with pytest.raises(OSError):
            await writer.flush()
    finally:
        writer.close()
        os.close(write_fd)


async def test_demo_server_over_stdio_serves_tasks(tmp_path: Path) -> None:
    code = (
        "import sys; from chit.demo.server import build_demo_server;"
        " from chit.tasks.server.stdio import run_stdio;"
        " run_stdio(build_demo_server(sys.argv[1]))"
    )
    env = {k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}
    spec = StdioServer(sys.executable, ["-c", code, str(tmp_path / "demo.db")], env=env or None)
    async with TaskClient(spec, mode="2026", read_timeout=30, result_timeout=60) as client:
        handles = [
            await client.start(
                "slow_compute", {"seconds": 0.2, "label": str(i)}, request_key=f"k{i}"
            )
            for i in range(20)
        ]
        outcomes = [await client.result(h.task_id) for h in handles]  # type: ignore[union-attr]
    assert [o.status for o in outcomes] == ["completed"] * 20
