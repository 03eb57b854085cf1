"""``chit demo --headless-seconds``: the scripted agent, the sidecar and the Supervisor, live."""

from __future__ import annotations

import os
import subprocess
import sys


def test_headless_demo_runs_the_whole_script() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHIT_")}
    done = subprocess.run(
        [sys.executable, "-m", "chit", "demo", "--headless-seconds", "10"],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    states = {
        line.split("\t")[2]: line.split("\t")[1] for line in lines if not line.startswith("work")
    }
    assert states["confirm_delete"] == "input_required"  # asks before deleting
    assert states["greet"] == "completed"
    assert states["failing_job"] in ("failed", "completed")  # 2026: completed + isError
    assert "slow_compute" in states
    records = [line for line in lines if line.startswith("work")]
    assert any("Quarterly report" in r and "completed" in r for r in records)
