"""The MCP conformance suite against ``chit demo-server --http``.

* ``@modelcontextprotocol/conformance@0.2.0-alpha.12``: every ``tasks-*`` scenario
  (SEP-2663 tasks extension) must pass.
* ``@modelcontextprotocol/conformance@0.1.16``: the active server suite must exit 0 with
  ``conformance-baseline.yml`` naming each expected failure (a stale entry fails too).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import peers
from tests.interop.conftest import run_conformance

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

TASK_SCENARIOS = [
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
]
BASELINE = Path(__file__).with_name("conformance-baseline.yml")


@pytest.mark.parametrize("scenario", TASK_SCENARIOS)
def test_tasks_scenario(demo_url: str, scenario: str, tmp_path: Path) -> None:
    proc = run_conformance(
        peers.CONFORMANCE_ALPHA,
        ["server", "--url", demo_url, "--scenario", scenario],
        tmp_path,
        timeout=120,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert " 0 failed" in output, output[-4000:]


@pytest.mark.parametrize("scenario", TASK_SCENARIOS)
def test_tasks_scenario_on_postgres_replica(
    pg_demo_url: str, scenario: str, tmp_path: Path
) -> None:
    """The same scenarios against a replica of two sharing one PostgreSQL database."""
    test_tasks_scenario(pg_demo_url, scenario, tmp_path)


def test_active_suite_with_baseline(demo_url: str, tmp_path: Path) -> None:
    proc = run_conformance(
        peers.CONFORMANCE_STABLE,
        ["server", "--url", demo_url, "--expected-failures", str(BASELINE)],
        tmp_path,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
