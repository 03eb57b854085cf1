"""The MCP conformance suite against ``chit proxy demo --http`` in front of ``chit demo-server``.

* ``@modelcontextprotocol/conformance@0.2.0-alpha.12``: every ``tasks-*`` scenario
  passes through the proxy (the host's tasks are chit's own, mirroring receipts of the
  demo server's tasks, which the daemon's session holds).
* ``@modelcontextprotocol/conformance@0.1.16``: the active server suite gives the same
  pass/fail set through the proxy as against the demo server directly (the scenario sets
  are compared, and the proxy run meets the same baseline file).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import peers
from tests.daemon_support import chit, daemon_env, daemon_home
from tests.interop.conftest import run_conformance
from tests.interop.test_conformance import BASELINE, TASK_SCENARIOS
from tests.proc_support import start_chit_http, stop

pytestmark = [pytest.mark.interop, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def proxy_url(demo_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``chit proxy demo --http 127.0.0.1:<port>`` (through a daemon) for the module."""
    tmp = tmp_path_factory.mktemp("proxy-conformance")
    with daemon_home(tmp / "home") as home:
        env = daemon_env(home)
        ran = chit("servers", "add", "demo", "--url", demo_url, env=env)
        assert ran.code == 0, ran.err
        proc, url = start_chit_http(
            ["proxy", "demo"], env=env, log_dir=tmp, log_name="proxy", what="chit proxy"
        )
        try:
            yield url
        finally:
            stop(proc)


@pytest.mark.parametrize("scenario", TASK_SCENARIOS)
def test_tasks_scenario_through_the_proxy(proxy_url: str, scenario: str, tmp_path: Path) -> None:
    proc = run_conformance(
        peers.CONFORMANCE_ALPHA,
        ["server", "--url", proxy_url, "--scenario", scenario],
        tmp_path,
        timeout=180,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert " 0 failed" in output, output[-4000:]


def _outcomes(out: Path) -> dict[str, bool]:
    """Scenario → passed, from a run's ``checks.json`` files."""
    found: dict[str, bool] = {}
    for checks in out.glob("*/checks.json"):
        name = re.sub(r"-\d{4}-\d\d-\d\dT.*$", "", checks.parent.name).removeprefix("server-")
        rows = json.loads(checks.read_text())
        found[name] = all(r["status"] in ("SUCCESS", "INFO", "WARNING") for r in rows)
    return found


def test_stable_suite_same_as_direct(demo_url: str, proxy_url: str, tmp_path: Path) -> None:
    runs = {}
    for label, url in (("direct", demo_url), ("proxy", proxy_url)):
        out = tmp_path / label
        run_conformance(peers.CONFORMANCE_STABLE, ["server", "--url", url], out)
        runs[label] = _outcomes(out)
    assert len(runs["direct"]) >= 30
    assert runs["proxy"] == runs["direct"]
    proc = run_conformance(
        peers.CONFORMANCE_STABLE,
        ["server", "--url", proxy_url, "--expected-failures", str(BASELINE)],
        tmp_path / "baseline",
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
