"""What ``chit proxy`` costs a host: a no-op call through the proxy vs directly, over stdio.

One process holds two ``mcp`` SDK client sessions at once, each over stdio: one to
``chit demo-server`` directly, one to ``chit proxy demo`` (which forwards through chit's
daemon, whose session reaches the same server over stdio). Measured side by side,
interleaved, in one run:

* latency of a no-op ``tools/call`` (``greet``, a plain call of a 2026 host: passed on by
  the proxy on its fast path, ``chit.proxy.fast``; ``--no-fast`` sends it through the
  SDK's server path instead): p50 and p99 of each, and what the proxy adds (goal: at
  most 2 ms at p50);
* throughput with ``--concurrency`` callers per session, in alternating slices
  (calls per second, and proxy / direct; goal: at least 0.7);
* a task create through the proxy (a 2025 host's ``slow_compute`` with ``params.task``):
  the host's create round trip, which returns only once the receipt is committed
  (intent first, then the server's reply, then the receipt in one transaction), so its
  p50/p99 are "task create → receipt committed"; the direct create beside it.

Usage: ``python benchmarks/proxy.py [--calls 2000] [--concurrency 8] [--slices 10]
[--creates 200] [--no-fast]``. Prints the load average beside the figures: on a busy machine the
ratios, not the absolute numbers, are what to read.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from chit.tasks.client import StdioServer, TaskClient, TaskHandle

PYTHON = sys.executable


def _cpu_ms(pid: int) -> float:
    """CPU time (user + system) a process has used so far, in milliseconds (Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def _ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def _pids(home: Path) -> dict[str, int]:
    """The daemon, the proxy and both demo servers of this run (by their command lines).

    ``server`` is the one this process talks to directly, ``server_via_daemon`` the
    daemon's own stdio child (the same command).
    """
    found: dict[str, int] = {}
    servers: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if str(home).encode() not in env and str(home).encode() not in b" ".join(argv):
            continue
        if b"proxy" in argv and b"demo" in argv:
            found["proxy"] = int(entry.name)
        elif b"daemon" in argv and b"--spawned" in argv:
            found["daemon"] = int(entry.name)
        elif b"demo-server" in argv:
            servers.append(int(entry.name))
    for pid in servers:
        if _ppid(pid) == os.getpid():
            found["server"] = pid
        elif _ppid(pid) == found.get("daemon"):
            found["server_via_daemon"] = pid
    return found


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _chit(home: Path, *args: str) -> None:
    env = _env(home)
    subprocess.run([PYTHON, "-m", "chit", *args], env=env, check=True, capture_output=True)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHIT_")}
    env.update({"CHIT_HOME": str(home), "CHIT_KEY_STORE": "file"})
    env["CHIT_PROXY_LOG_LEVEL"] = "WARNING"
    if "CHIT_PROXY_FAST" in os.environ:
        env["CHIT_PROXY_FAST"] = os.environ["CHIT_PROXY_FAST"]
    return env


async def _latency(direct: Client, proxied: Client, calls: int) -> tuple[list[float], list[float]]:
    near: list[float] = []
    far: list[float] = []
    for i in range(calls):
        # Alternate which goes first, so neither always meets a warm cache.
        order = ((direct, near), (proxied, far)) if i % 2 else ((proxied, far), (direct, near))
        for client, into in order:
            began = time.perf_counter()
            await client.call_tool("greet", {"name": "x"})
            into.append((time.perf_counter() - began) * 1000)
    return near, far


async def _throughput(client: Client, concurrency: int, seconds: float) -> tuple[float, int]:
    done = 0
    deadline = time.perf_counter() + seconds

    async def caller() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await client.call_tool("greet", {"name": "x"})
            done += 1

    began = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(caller)
    return done / (time.perf_counter() - began), done


async def _creates(spec: StdioServer, creates: int, label: str) -> list[float]:
    times: list[float] = []
    async with TaskClient(spec, mode="legacy", read_timeout=60) as tc:
        for i in range(creates):
            began = time.perf_counter()
            handle = await tc.start(
                "slow_compute",
                {"seconds": 0, "label": "b"},
                request_key=f"{label}-{i}-{time.time()}",
            )
            times.append((time.perf_counter() - began) * 1000)
            assert isinstance(handle, TaskHandle)
    return times


async def run(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    env = _env(home)
    demo = ["-m", "chit", "demo-server", "--db", str(home / "bench-demo.db")]
    direct_params = StdioServerParameters(command=PYTHON, args=demo, env=env)
    proxy_params = StdioServerParameters(
        command=PYTHON, args=["-m", "chit", "proxy", "demo"], env=env
    )
    out: dict[str, Any] = {}
    async with (
        Client(direct_params, read_timeout_seconds=60) as direct,
        Client(proxy_params, read_timeout_seconds=60) as proxied,
    ):
        for client in (direct, proxied):  # warm up: imports, sessions, the daemon's too
            for _ in range(50):
                await client.call_tool("greet", {"name": "x"})
        pids = _pids(home)
        before = {name: _cpu_ms(pid) for name, pid in pids.items()}
        host_before = time.process_time()
        near, far = await _latency(direct, proxied, args.calls)
        out["cpu_per_call"] = {
            name: (_cpu_ms(pid) - before[name]) / args.calls for name, pid in pids.items()
        }
        out["cpu_per_call"]["host"] = (time.process_time() - host_before) * 1000 / args.calls
        out["direct_p50"], out["direct_p99"] = _pct(near, 0.5), _pct(near, 0.99)
        out["proxy_p50"], out["proxy_p99"] = _pct(far, 0.5), _pct(far, 0.99)
        rates: dict[str, list[float]] = {"direct": [], "proxy": []}
        pairs: list[tuple[str, Client]] = [("direct", direct), ("proxy", proxied)]
        # CPU of every process on each path while its slices run, per call done.
        paths = {"direct": ("server",), "proxy": ("server_via_daemon", "proxy", "daemon")}
        spent = {"direct": 0.0, "proxy": 0.0}
        calls = {"direct": 0, "proxy": 0}
        for i in range(args.slices):
            for name, client in pairs if i % 2 == 0 else list(reversed(pairs)):
                cpu0 = {n: _cpu_ms(pids[n]) for n in paths[name] if n in pids}
                host0 = time.process_time()
                rate, done = await _throughput(client, args.concurrency, args.slice_s)
                spent[name] += (time.process_time() - host0) * 1000
                spent[name] += sum(_cpu_ms(pids[n]) - cpu0[n] for n in cpu0)
                calls[name] += done
                rates[name].append(rate)
        out["slice_cpu"] = {name: spent[name] / max(1, calls[name]) for name in spent}
        out["direct_rate"] = statistics.median(rates["direct"])
        out["proxy_rate"] = statistics.median(rates["proxy"])
        out["slice_ratios"] = [p / d for p, d in zip(rates["proxy"], rates["direct"], strict=True)]
    direct_spec = StdioServer(PYTHON, demo, env=env)
    proxy_spec = StdioServer(PYTHON, ["-m", "chit", "proxy", "demo"], env=env)
    creates_direct = await _creates(direct_spec, args.creates, "direct")
    creates_proxy = await _creates(proxy_spec, args.creates, "proxy")
    out["create_direct_p50"], out["create_direct_p99"] = (
        _pct(creates_direct, 0.5),
        _pct(creates_direct, 0.99),
    )
    out["create_proxy_p50"], out["create_proxy_p99"] = (
        _pct(creates_proxy, 0.5),
        _pct(creates_proxy, 0.99),
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--slices", type=int, default=10)
    parser.add_argument("--slice-s", type=float, default=2.0)
    parser.add_argument("--creates", type=int, default=200)
    parser.add_argument("--no-fast", action="store_true", help="CHIT_PROXY_FAST=0")
    args = parser.parse_args()
    if args.no_fast:
        os.environ["CHIT_PROXY_FAST"] = "0"  # _env passes it on to the proxy
    with tempfile.TemporaryDirectory(prefix="chit-bench-proxy-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir(mode=0o700)
        demo_args = ["--command", PYTHON]
        for part in ("-m", "chit", "demo-server", "--db", str(home / "bench-demo.db")):
            demo_args += ["--arg", part]
        _chit(home, "servers", "add", "demo", *demo_args)
        try:
            out = anyio.run(run, args, home)
        finally:
            subprocess.run(
                [PYTHON, "-m", "chit", "daemon", "stop"], env=_env(home), capture_output=True
            )
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} cores")
    print(f"no-op tools/call latency over stdio ({args.calls} each, interleaved):")
    print(f"  direct  p50 {out['direct_p50']:.2f} ms  p99 {out['direct_p99']:.2f} ms")
    print(f"  proxy   p50 {out['proxy_p50']:.2f} ms  p99 {out['proxy_p99']:.2f} ms")
    added50 = out["proxy_p50"] - out["direct_p50"]
    added99 = out["proxy_p99"] - out["direct_p99"]
    print(f"  added   p50 {added50:.2f} ms (goal <= 2 ms)  p99 {added99:.2f} ms")
    per = out["cpu_per_call"]
    print(f"  CPU per proxied call: daemon {per['daemon']:.2f} ms, proxy {per['proxy']:.2f} ms")
    cpu = ", ".join(f"{name} {ms:.2f} ms" for name, ms in sorted(per.items()))
    print(f"  CPU per call of each process ('host': this process, both calls): {cpu}")
    ratio = out["proxy_rate"] / out["direct_rate"]
    print(
        f"throughput ({args.concurrency} callers, {args.slices} alternating slices of "
        f"{args.slice_s:g} s): direct {out['direct_rate']:.0f}/s, proxy {out['proxy_rate']:.0f}/s,"
        f" ratio {ratio:.2f} (goal >= 0.7; per slice "
        + ", ".join(f"{r:.2f}" for r in out["slice_ratios"])
        + ")"
    )
    busy = out["slice_cpu"]
    print(
        f"  CPU per call during the slices (all processes of the path): direct "
        f"{busy['direct']:.2f} ms, proxy {busy['proxy']:.2f} ms: ratio predicted by CPU "
        f"{busy['direct'] / busy['proxy']:.2f} (what the ratio tends to when CPU bounds it)"
    )
    print(
        f"task create -> receipt committed ({args.creates} creates): proxy p50 "
        f"{out['create_proxy_p50']:.1f} ms p99 {out['create_proxy_p99']:.1f} ms "
        f"(direct create, no receipt: p50 {out['create_direct_p50']:.1f} ms "
        f"p99 {out['create_direct_p99']:.1f} ms)"
    )


if __name__ == "__main__":
    main()
