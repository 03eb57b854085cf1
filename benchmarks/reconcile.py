"""Reconciler detection lag, notification latency and CPU against ``chit demo-server``.

Usage: ``python benchmarks/reconcile.py [TASKS] [SECONDS] [--runs N] [--notify N] [--steady N]
[--compare-loop]`` (default 2,000 tasks of 3 s, 3 runs, 200 tasks per notification run, 1,000
in the CPU phase).

Every run, alternated so the baseline sees the same machine:

1. **The engine** (a Supervisor, write batcher on, reconciling from the start as the
   daemon does) creates TASKS concurrent ``slow_compute`` tasks on ``chit demo-server``
   over stdio (2026 generation, one connection, 16 requests in flight). For *every* task:
   detection lag = the server's completion time (``lastUpdatedAt`` of the terminal status)
   → the moment the terminal receipt was committed (the engine's ``Completed`` event,
   published after the commit).
2. **The bare loop**: the same tasks on one ``TaskClient``, each polled with ``tasks/get``
   at the server's poll interval (within chit's floor, as the engine schedules), 16 in
   flight, no store, no notifications; lag = completion → the reply that showed it.
3. **Notification → store**, both generations (2025: the demo server pushes status
   unasked; 2026: the engine subscribes): NOTIFY tasks, server change → receipt
   committed, split per task into the server's part (change → the end notification
   reached the client) and the client's (→ committed), and how many ends were folded
   from the 2026 push itself (``TaskObserver.told``: no ``tasks/get``).

4. **CPU per check**: STEADY live tasks (long ones), engine and bare loop in turn; client
   CPU (process time) over a 5 s window 2 s after creation, per check / per poll.

``--compare-loop`` runs phases 3 and 4 a second time, alternated, with the engine's write
batches committed on its event loop (``SupervisorOptions.write_thread=False``, as before
2026-12-01) instead of its writer thread: before and after side by side on one machine.

Reported per run and over all runs: lag p50 / p99 / max (goals: engine p99 ≤ 1.3× the bare
loop's p99, no task later than one poll interval), "server done → all terminal", CPU per
check (goal ≤ 1.5× the bare loop's per poll), notification → store p99 (goal < 100 ms in
every run). The load average is printed before and after each run.

The process settles its heap as the daemon does (:func:`chit.heap.settle`: the imports
frozen out of full collections), and every phase starts with a collection of what the
earlier phases left (their engines, clients and task stores): without it a full
collection of run 1's garbage could land in run 3's burst of ends — a cost of the
benchmark, not of the engine. Full collections *during* a notification phase are the
engine's own and are counted (``full GCs``). Likewise a notification phase starts with an
``os.sync()``: the earlier phases write hundreds of MB of task stores and homes, which
the kernel writes back up to 30 s later (``vm.dirty_expire_centisecs``), and an fsync —
the server's durable end, the engine's commit — can wait behind that writeback in the
burst of ends. How much was dirty when the phase began is printed (``dirty at start``).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.engine_support import demo_stdio, fast_options, supervisor  # noqa: E402

from chit import clock, heap  # noqa: E402
from chit.receipts import effective_poll_ms  # noqa: E402
from chit.runtime import Completed, EngineEvent, SupervisorOptions  # noqa: E402
from chit.tasks.client import Mode, TaskClient  # noqa: E402

POLL_S = effective_poll_ms(500) / 1000  # the demo server hints 500 ms; chit's floor is 1 s


def load() -> str:
    """The load average, printed beside every figure (the machine is shared)."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} / {five:.2f} / {fifteen:.2f}"


@dataclass
class Run:
    """One run's figures (seconds unless named otherwise)."""

    lags: list[float] = field(default_factory=list)
    done_to_all: float = 0.0
    checks: int = 0
    cpu_ms_per_check: float = 0.0
    create_s: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)


def _options(generation: Mode, thread: bool) -> SupervisorOptions:
    """The engine's options; ``thread=False`` commits write batches on the event loop."""
    return dataclasses.replace(fast_options(generation), write_thread=thread)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def summary(lags: list[float]) -> tuple[float, float, float]:
    """(p50, p99, max) in milliseconds."""
    return (
        1000 * statistics.median(lags),
        1000 * _quantile(lags, 0.99),
        1000 * max(lags),
    )


async def _create_all(call: Any, n: int, limit: int = 32) -> None:
    sem = anyio.Semaphore(limit)

    async def one(i: int) -> None:
        async with sem:
            await call(i)

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)


async def engine(tmp: Path, n: int, seconds: float, name: str) -> Run:
    """The engine reconciling while the tasks are created; every task's detection lag."""
    gc.collect()  # what the earlier phases left (the module's notes)
    run = Run()
    done = anyio.Event()
    newest: list[datetime] = []

    def on_event(event: EngineEvent) -> None:
        if isinstance(event, Completed) and event.receipt.server_updated_at:
            updated = event.receipt.server_updated_at
            run.lags.append((clock.now() - updated).total_seconds())
            newest.append(updated)
            if len(run.lags) >= n:
                done.set()

    options = fast_options("2026")
    async with supervisor(tmp / name, {"demo": demo_stdio(tmp / f"{name}.db")}, options) as sup:
        sup.subscribe(on_event)
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sup.run, stop)
            t0 = time.perf_counter()
            await _create_all(
                lambda i: sup.call("demo", "slow_compute", {"seconds": seconds, "label": f"{i}"}),
                n,
            )
            run.create_s = time.perf_counter() - t0
            await done.wait()
            all_done = clock.now()
            stop.set()
        run.checks = sup.reconciler.checks
        run.done_to_all = (all_done - max(newest)).total_seconds()
        run.extra["transactions"] = sup.writer.transactions
    return run


async def bare(tmp: Path, n: int, seconds: float, name: str) -> Run:
    """The same tasks polled with ``tasks/get`` alone, from their creation on."""
    gc.collect()  # what the earlier phases left (the module's notes)
    run = Run()
    async with TaskClient(demo_stdio(tmp / f"{name}.db"), mode="2026", read_timeout=30) as tc:
        due: dict[str, float] = {}  # task id → next poll (monotonic)
        newest: list[datetime] = []
        inflight: set[str] = set()
        sem = anyio.Semaphore(16)
        created = anyio.Event()

        async def start(i: int) -> None:
            h = await tc.start(
                "slow_compute", {"seconds": seconds, "label": f"{i}"}, request_key=f"b{i}"
            )
            interval = effective_poll_ms(h.poll_interval_ms) / 1000  # type: ignore[union-attr]
            due[h.task_id] = time.monotonic() + interval  # type: ignore[union-attr]

        async def poll(task_id: str) -> None:
            try:
                async with sem:
                    snap = await tc.get(task_id)
                run.checks += 1
                if snap.terminal:
                    run.lags.append((clock.now() - snap.updated_at).total_seconds())
                    newest.append(snap.updated_at)
                    due.pop(task_id, None)
                else:
                    interval = effective_poll_ms(snap.poll_interval_ms) / 1000
                    due[task_id] = time.monotonic() + interval
            finally:
                inflight.discard(task_id)

        async def scheduler() -> None:
            while not created.is_set() or due:
                now = time.monotonic()
                for task_id, at in list(due.items()):
                    if at <= now and task_id not in inflight:
                        inflight.add(task_id)
                        tg.start_soon(poll, task_id)
                await anyio.sleep(0.01)

        async with anyio.create_task_group() as tg:
            tg.start_soon(scheduler)
            t0 = time.perf_counter()
            await _create_all(start, n)
            run.create_s = time.perf_counter() - t0
            created.set()
        all_done = clock.now()
        run.done_to_all = (all_done - max(newest)).total_seconds()
    return run


STEADY_TASK_S = 600.0
"""Tasks of the CPU phase outlive it: every check in the window is of a live task."""


async def steady_engine(
    tmp: Path, n: int, settle: float, window: float, name: str, thread: bool = True
) -> Run:
    """Client CPU per check while the engine keeps ``n`` live tasks true (after creation)."""
    gc.collect()  # what the earlier phases left (the module's notes)
    run = Run()
    options = _options("2026", thread)
    async with supervisor(tmp / name, {"demo": demo_stdio(tmp / f"{name}.db")}, options) as sup:
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sup.run, stop)
            await _create_all(
                lambda i: sup.call(
                    "demo", "slow_compute", {"seconds": STEADY_TASK_S, "label": f"{i}"}
                ),
                n,
            )
            await anyio.sleep(settle)
            rec = sup.reconciler
            cpu0, checks0, hints0 = time.process_time(), rec.checks, rec.message_hints
            await anyio.sleep(window)
            cpu = time.process_time() - cpu0
            run.checks = rec.checks - checks0
            run.extra["hints"] = rec.message_hints - hints0
            stop.set()
    run.cpu_ms_per_check = 1000 * cpu / max(run.checks, 1)
    run.extra["cpu_ms_per_s"] = 1000 * cpu / window
    return run


async def steady_bare(tmp: Path, n: int, settle: float, window: float, name: str) -> Run:
    """The same for the bare ``tasks/get`` loop: client CPU per poll over the same window."""
    gc.collect()  # what the earlier phases left (the module's notes)
    run = Run()
    async with TaskClient(demo_stdio(tmp / f"{name}.db"), mode="2026", read_timeout=30) as tc:
        due: dict[str, float] = {}
        inflight: set[str] = set()
        sem = anyio.Semaphore(16)
        stop = anyio.Event()

        async def start(i: int) -> None:
            h = await tc.start(
                "slow_compute", {"seconds": STEADY_TASK_S, "label": f"{i}"}, request_key=f"s{i}"
            )
            due[h.task_id] = time.monotonic() + effective_poll_ms(h.poll_interval_ms) / 1000  # type: ignore[union-attr]

        async def poll(task_id: str) -> None:
            try:
                async with sem:
                    snap = await tc.get(task_id)
                run.checks += 1
                due[task_id] = time.monotonic() + effective_poll_ms(snap.poll_interval_ms) / 1000
            finally:
                inflight.discard(task_id)

        async def scheduler() -> None:
            while not stop.is_set():
                now = time.monotonic()
                for task_id, at in list(due.items()):
                    if at <= now and task_id not in inflight:
                        inflight.add(task_id)
                        tg.start_soon(poll, task_id)
                await anyio.sleep(0.01)

        async with anyio.create_task_group() as tg:
            tg.start_soon(scheduler)
            await _create_all(start, n)
            await anyio.sleep(settle)
            cpu0, polls0 = time.process_time(), run.checks
            await anyio.sleep(window)
            cpu = time.process_time() - cpu0
            polls = run.checks - polls0
            stop.set()
    run.checks = polls
    run.cpu_ms_per_check = 1000 * cpu / max(polls, 1)
    run.extra["cpu_ms_per_s"] = 1000 * cpu / window
    return run


class _FullCollections:
    """Counts full (generation 2) collections and the longest one, until closed."""

    def __init__(self) -> None:
        self.count = 0
        self.longest = 0.0
        self._start = 0.0
        gc.callbacks.append(self._seen)

    def _seen(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._start = time.perf_counter()
            return
        self.count += 1
        self.longest = max(self.longest, time.perf_counter() - self._start)

    def close(self) -> None:
        gc.callbacks.remove(self._seen)


def _dirty_mb() -> float:
    """Page cache waiting to be written back (Dirty + Writeback, MB; NaN off Linux)."""
    try:
        with open("/proc/meminfo") as f:
            fields = dict(line.split(":", 1) for line in f)
        kb = sum(int(fields[k].split()[0]) for k in ("Dirty", "Writeback"))
    except (OSError, KeyError, ValueError):
        return float("nan")
    return kb / 1024


def _hint_arrivals(arrivals: dict[str, float]) -> Any:
    """Record, per task, when its terminal notification reached the client (instrumentation).

    Splits notification → store into the server's part (change → notification received:
    the demo server's own notification queue) and the engine's part (the rest).
    """
    original = TaskClient._on_notification

    async def observed(self: TaskClient, task_id: str, params: dict[str, Any]) -> None:
        stamp = params.get("lastUpdatedAt")
        if params.get("status") in ("completed", "failed") and isinstance(stamp, str):
            late = (clock.now() - clock.parse_iso(stamp)).total_seconds()
            arrivals.setdefault(task_id, late)
        await original(self, task_id, params)

    TaskClient._on_notification = observed  # type: ignore[method-assign,assignment]
    return original


async def notifications(
    tmp: Path, n: int, seconds: float, generation: Mode, name: str, thread: bool = True
) -> Run:
    """Server change → receipt committed for tasks whose end is pushed."""
    run = Run()
    run.extra["dirty_mb"] = _dirty_mb()
    os.sync()  # the earlier phases' writes, written back now, not in the burst (notes)
    gc.collect()  # what the earlier phases left (the module's notes)
    arrivals: dict[str, float] = {}
    full = _FullCollections()
    original = _hint_arrivals(arrivals)
    done = anyio.Event()

    stored: dict[str, float] = {}  # task id → change → committed (s)

    def on_event(event: EngineEvent) -> None:
        if isinstance(event, Completed) and event.receipt.server_updated_at:
            lag = (clock.now() - event.receipt.server_updated_at).total_seconds()
            run.lags.append(lag)
            stored[sup.reconciler.handles.task_id(event.receipt)] = lag
            if len(run.lags) >= n:
                done.set()

    options = _options(generation, thread)
    try:
        async with supervisor(tmp / name, {"demo": demo_stdio(tmp / f"{name}.db")}, options) as sup:
            sup.subscribe(on_event)
            stop = anyio.Event()
            async with anyio.create_task_group() as tg:
                tg.start_soon(sup.run, stop)
                await _create_all(
                    lambda i: sup.call(
                        "demo", "slow_compute", {"seconds": seconds, "label": f"{i}"}
                    ),
                    n,
                )
                await done.wait()
                stop.set()
            run.checks = sup.reconciler.checks
            run.extra["message_hints"] = sup.reconciler.message_hints
            run.extra["told"] = sup.reconciler.observer.ends_told
    finally:
        TaskClient._on_notification = original  # type: ignore[method-assign]
        full.close()
    run.extra["full_gcs"] = full.count
    run.extra["full_gc_ms"] = 1000 * full.longest
    late = sorted(arrivals.values()) or [float("nan")]
    run.extra["hint_p50_ms"] = 1000 * statistics.median(late)
    run.extra["hint_p99_ms"] = 1000 * _quantile(late, 0.99)
    # The client's part, task by task: the end notification held → its receipt committed.
    client = sorted(stored[t] - arrivals[t] for t in stored if t in arrivals) or [float("nan")]
    run.extra["client_p50_ms"] = 1000 * statistics.median(client)
    run.extra["client_p99_ms"] = 1000 * _quantile(client, 0.99)
    return run


def _row(label: str, *cells: str) -> str:
    return f"{label:<44}" + "".join(f" {c:>24}" for c in cells)


def _lag_cells(run: Run) -> str:
    p50, p99, top = summary(run.lags)
    return f"{p50:.0f} / {p99:.0f} / {top:.0f}"


async def main(
    n: int, seconds: float, runs: int, notify: int, steady: int, compare: bool = False
) -> None:
    heap.settle()  # as the daemon does when it starts
    tmp = Path(tempfile.mkdtemp(prefix="chit-bench-"))
    try:
        await _main(tmp, n, seconds, runs, notify, steady, compare)
    finally:
        # Every run's homes and task databases (hundreds of MB over three runs).
        shutil.rmtree(tmp, ignore_errors=True)


async def _main(
    tmp: Path, n: int, seconds: float, runs: int, notify: int, steady: int, compare: bool
) -> None:
    engines: list[Run] = []
    bares: list[Run] = []
    steady_e: list[Run] = []
    steady_b: list[Run] = []
    steady_l: list[Run] = []  # --compare-loop: commits on the event loop
    notes: dict[str, list[Run]] = {"legacy": [], "2026": []}
    notes_l: dict[str, list[Run]] = {"legacy": [], "2026": []}
    for r in range(runs):
        print(f"run {r + 1}: before engine  {load()}", flush=True)
        engines.append(await engine(tmp, n, seconds, f"engine-{r}"))
        print(f"run {r + 1}: before bare    {load()}", flush=True)
        bares.append(await bare(tmp, n, seconds, f"bare-{r}"))
        # --compare-loop: the loop variant goes first in every other run (a loaded
        # machine's drift then favours neither side).
        loop_first = compare and r % 2 == 1
        if steady:
            if loop_first:
                steady_l.append(
                    await steady_engine(tmp, steady, 2.0, 5.0, f"steady-l-{r}", thread=False)
                )
            steady_e.append(await steady_engine(tmp, steady, 2.0, 5.0, f"steady-e-{r}"))
            steady_b.append(await steady_bare(tmp, steady, 2.0, 5.0, f"steady-b-{r}"))
            if compare and not loop_first:
                steady_l.append(
                    await steady_engine(tmp, steady, 2.0, 5.0, f"steady-l-{r}", thread=False)
                )
        for gen in ("legacy", "2026") if notify else ():  # --notify 0: no phase to wait on
            if loop_first:
                notes_l[gen].append(
                    await notifications(
                        tmp, notify, seconds, gen, f"notify-l-{gen}-{r}", thread=False
                    )
                )
            notes[gen].append(await notifications(tmp, notify, seconds, gen, f"notify-{gen}-{r}"))
            if compare and not loop_first:
                notes_l[gen].append(
                    await notifications(
                        tmp, notify, seconds, gen, f"notify-l-{gen}-{r}", thread=False
                    )
                )
        print(f"run {r + 1}: done           {load()}", flush=True)

    print(
        f"\ntasks {n} x {seconds} s, demo-server over stdio, 2026 generation, one connection;"
        f" poll interval {POLL_S:.1f} s"
    )
    print("detection lag, server completion -> receipt committed (ms): p50 / p99 / max")
    print(_row("", "engine", "bare tasks/get", "p99 ratio (<=1.3)"))
    for r in range(runs):
        e, b = engines[r], bares[r]
        ratio = summary(e.lags)[1] / summary(b.lags)[1]
        print(_row(f"run {r + 1}", _lag_cells(e), _lag_cells(b), f"{ratio:.2f}x"))
    pooled_e = [x for e in engines for x in e.lags]
    pooled_b = [x for b in bares for x in b.lags]
    ratio = summary(pooled_e)[1] / summary(pooled_b)[1]
    print(
        _row(
            f"all runs ({len(pooled_e)} / {len(pooled_b)} tasks)",
            _lag_cells(Run(lags=pooled_e)),
            _lag_cells(Run(lags=pooled_b)),
            f"{ratio:.2f}x",
        )
    )
    late = sum(1 for x in pooled_e if x > POLL_S)
    print(f"engine tasks later than one poll interval ({POLL_S:.1f} s): {late}")
    print(_row("server done -> all terminal (s), per run", "", "", ""))
    for r in range(runs):
        print(
            _row(f"  run {r + 1}", f"{engines[r].done_to_all:.2f}", f"{bares[r].done_to_all:.2f}")
        )
    if steady:
        print(f"client CPU per check, {steady} live tasks, 5 s after creation (ms)")
        for r in range(runs):
            e, b = steady_e[r], steady_b[r]
            print(
                _row(
                    f"  run {r + 1} ({e.checks} checks, {b.checks} polls)",
                    f"{e.cpu_ms_per_check:.2f}",
                    f"{b.cpu_ms_per_check:.2f}",
                    f"{e.cpu_ms_per_check / b.cpu_ms_per_check:.2f}x (<=1.5)",
                )
            )
            print(
                _row(
                    f"    message-only hints {e.extra['hints']:.0f}; CPU ms/s",
                    f"{e.extra['cpu_ms_per_s']:.0f}",
                    f"{b.extra['cpu_ms_per_s']:.0f}",
                )
            )
            if compare:
                lo = steady_l[r]
                print(
                    _row(
                        f"    commits on the loop ({lo.checks} checks)",
                        f"{lo.cpu_ms_per_check:.2f}",
                        "",
                        f"{lo.cpu_ms_per_check / b.cpu_ms_per_check:.2f}x",
                    )
                )
    print(_row("checks / polls, run 1", f"{engines[0].checks}", f"{bares[0].checks}"))
    print(
        _row("creating tasks (s), run 1", f"{engines[0].create_s:.1f}", f"{bares[0].create_s:.1f}")
    )
    if notify:
        _print_notifications(notify, runs, compare, notes, notes_l)
    print(f"after: {load()}")


def _print_notifications(
    notify: int,
    runs: int,
    compare: bool,
    notes: dict[str, list[Run]],
    notes_l: dict[str, list[Run]],
) -> None:
    """The notification → store table (phase 3), per run and generation."""
    print(f"\nnotification -> store, {notify} tasks (ms): p50 / p99 / max (goal: p99 < 100)")
    print(_row("", "2025 (pushed)", "2026 (subscribed)"))
    for r in range(runs):
        print(_row(f"run {r + 1}", _lag_cells(notes["legacy"][r]), _lag_cells(notes["2026"][r])))
        if compare:
            print(
                _row(
                    "  commits on the loop",
                    _lag_cells(notes_l["legacy"][r]),
                    _lag_cells(notes_l["2026"][r]),
                )
            )
    for key, label in (
        ("hint_p50_ms", "change -> hint, p50"),
        ("hint_p99_ms", "change -> hint, p99"),
        ("client_p50_ms", "hint -> store, p50"),
        ("client_p99_ms", "hint -> store, p99"),
    ):
        cells = [
            " / ".join(f"{x.extra[key]:.0f}" for x in notes[gen]) for gen in ("legacy", "2026")
        ]
        print(_row(f"  of which {label} per run", *cells))
    cells = [" / ".join(f"{x.extra['told']:.0f}" for x in notes[g]) for g in notes]
    print(_row("  ends folded from the push (no tasks/get)", *cells))
    cells = [" / ".join(f"{x.extra['message_hints']:.0f}" for x in notes[g]) for g in notes]
    print(_row("  message-only hints per run", *cells))
    cells = [
        " / ".join(f"{x.extra['full_gcs']:.0f} ({x.extra['full_gc_ms']:.0f})" for x in notes[g])
        for g in notes
    ]
    print(_row("  full GCs per run (longest ms)", *cells))
    cells = [" / ".join(f"{x.extra['dirty_mb']:.0f}" for x in notes[g]) for g in notes]
    print(_row("  dirty at start, MB (then synced)", *cells))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="?", type=int, default=2000)
    parser.add_argument("seconds", nargs="?", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--notify", type=int, default=200)
    parser.add_argument("--steady", type=int, default=1000, help="live tasks, CPU phase (0: skip)")
    parser.add_argument(
        "--compare-loop",
        action="store_true",
        help="also run phases 3 and 4 with write batches committed on the event loop",
    )
    args = parser.parse_args()
    anyio.run(
        main, args.tasks, args.seconds, args.runs, args.notify, args.steady, args.compare_loop
    )
