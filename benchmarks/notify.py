"""A task's completion notification amid chatty tasks: how long after its commit it arrives.

The scenario of ``tests/test_tasks_server_notify.py`` (20 tasks changing their status
message every 10 ms, one quick task, a client spending 5 ms per notification), on an
in-process ``chit`` task server, both generations. The test asserts the behaviour (the
completion goes ahead of the chatter, coalesced, in order); this prints the figure:
the quick task's row committed → its completion notification received (p50 / max over
the runs), the notifications that arrived in between, and all sent per run.

Usage: ``python benchmarks/notify.py [--runs N]`` (default 5). The load average is
printed first and last: on a loaded machine the lag measures the scheduler too.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.test_tasks_server_notify import ChattyRun, run_chatty  # noqa: E402


def main() -> None:
    """Run the chatty scenario ``--runs`` times per generation and print the lags."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    for generation in ("2025", "2026"):
        runs: list[ChattyRun] = []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="chit-notify-") as tmp:
                runs.append(anyio.run(run_chatty, generation, Path(tmp), backend="asyncio"))
        lags = sorted(r.lag_s * 1000 for r in runs)
        print(
            f"{generation}: completion lag p50 {statistics.median(lags):.0f} ms,"
            f" max {lags[-1]:.0f} ms; ahead of it max {max(r.ahead for r in runs)};"
            f" sent per run {statistics.median(r.sent for r in runs):.0f}"
        )
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
