"""Task protocol overhead against ``chit demo-server``, over stdio and streamable HTTP.

Prints, per transport and generation:

* ``tasks/get`` round trips per second, and no-op ``tools/call`` (``greet``) round trips
  per second on the same connection, and their ratio (goal: >= 0.8 - a poll should
  cost no more than the cheapest tool call);
* create → terminal latency of a 0-second task (``slow_compute seconds=0``), polling
  ``tasks/get`` back to back (median and p95 over the runs).

Usage: ``python benchmarks/tasks.py [--n 300] [--runs 20] [--transport stdio|http|both]``
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import anyio

from chit.tasks.client import HttpServer, StdioServer, TaskClient, TaskHandle

CHIT = str(Path(sys.executable).with_name("chit"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _measure(
    spec: StdioServer | HttpServer, mode: str, n: int, runs: int
) -> dict[str, float]:
    async with TaskClient(spec, mode=mode, read_timeout=30) as tc:  # type: ignore[arg-type]
        handle = await tc.start("slow_compute", {"seconds": 0}, request_key=uuid.uuid4().hex)
        assert isinstance(handle, TaskHandle)
        for _ in range(20):  # warm up both paths
            await tc.get(handle.task_id)
            await tc.session.call_tool("greet", {"name": "x"})
        began = time.perf_counter()
        for _ in range(n):
            await tc.get(handle.task_id)
        get_rate = n / (time.perf_counter() - began)
        began = time.perf_counter()
        for _ in range(n):
            await tc.session.call_tool("greet", {"name": "x"})
        call_rate = n / (time.perf_counter() - began)
        latencies = []
        for _ in range(runs):
            began = time.perf_counter()
            started = await tc.start("slow_compute", {"seconds": 0}, request_key=uuid.uuid4().hex)
            assert isinstance(started, TaskHandle)
            while not (await tc.get(started.task_id)).terminal:
                pass
            latencies.append((time.perf_counter() - began) * 1000)
    latencies.sort()
    return {
        "get_per_s": get_rate,
        "call_per_s": call_rate,
        "ratio": get_rate / call_rate,
        "latency_median_ms": statistics.median(latencies),
        "latency_p95_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))],
    }


def _report(label: str, fig: dict[str, float]) -> None:
    verdict = "ok" if fig["ratio"] >= 0.8 else "BELOW GOAL"
    print(
        f"{label:<14} tasks/get {fig['get_per_s']:8.0f}/s  tools/call {fig['call_per_s']:8.0f}/s"
        f"  ratio {fig['ratio']:.2f} ({verdict})  create→terminal median"
        f" {fig['latency_median_ms']:.1f} ms p95 {fig['latency_p95_ms']:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--transport", choices=["stdio", "http", "both"], default="both")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "tasks.db")
        if args.transport in ("stdio", "both"):
            spec = StdioServer(CHIT, ["demo-server", "--db", db])
            for mode, gen in (("legacy", "2025"), ("2026", "2026")):
                _report(f"stdio {gen}", anyio.run(_measure, spec, mode, args.n, args.runs))
        if args.transport in ("http", "both"):
            port = _free_port()
            proc = subprocess.Popen(
                [CHIT, "demo-server", "--http", f"127.0.0.1:{port}", "--db", db],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    try:
                        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                        break
                    except OSError:
                        time.sleep(0.05)
                http = HttpServer(f"http://127.0.0.1:{port}/mcp")
                for mode, gen in (("legacy", "2025"), ("2026", "2026")):
                    _report(f"http {gen}", anyio.run(_measure, http, mode, args.n, args.runs))
            finally:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=10)


if __name__ == "__main__":
    main()
