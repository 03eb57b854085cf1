"""``chit demo --headless-seconds``: the scripted agent, the sidecar and the Supervisor, live."""

from __future__ import annotations

import os
import subprocess
import sys


def test_headless_demo_runs_the_whole_script() -> None:
    # The demo waits for its script to come to rest (an event), not for a fixed 10 s that
    # a loaded machine outlasts; 120 s is only the limit.
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHIT_")}
    done = subprocess.run(
        [sys.executable, "-m", "chit", "demo", "--headless-seconds", "120", "--until-settled"],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "had not come to rest" not in done.stderr, done.stderr
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
