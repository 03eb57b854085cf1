"""No task handle in any byte chit keeps or shows, whatever a server embeds it in.

A real MCP task server (``tests/fakes/leaky_server.py``, both task generations) writes
its own task id - raw, quoted, inside JSON, URL-encoded, split between status and error,
... - into status messages, input requests (message, key, schema), results, errors and
"not found" replies. After a call is followed, answered and ends (or vanishes), the
handle must not occur in ``chit.db``, its ``-wal``, the logs, ``chit export``, ``chit show
[--json]`` or the TUI's detail pane.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from chit.receipts import LifecycleState, Receipt, RetrievalCondition
from chit.redaction import REGISTRY
from chit.runtime import Supervisor
from chit.tasks.client import InProcessServer, Mode
from tests.engine_support import fast_options, supervisor
from tests.fakes.leaky_server import build
from tests.leak_scenario import captured_logs, cli_outputs, files, tui_text
from tests.leak_support import leaks, spelling_names

pytestmark = [pytest.mark.timeout(600)]

TEMPLATES = ("{H}", "Task {H} not found", "id={H};", "{H1}", "{H2} failed", "«{H}»")
places = st.fixed_dictionaries(
    {
        "status": st.sampled_from(TEMPLATES),
        "prompt": st.sampled_from(("", *TEMPLATES)),
        "key": st.sampled_from(("", "{H}", "answer-{H}")),
        "error": st.sampled_from(TEMPLATES),
        "result": st.sampled_from(TEMPLATES),
        "outcome": st.sampled_from(("complete", "tool_error", "rpc_error")),
        "not_found": st.sampled_from(("Task {H} not found", "Task not found: {H}", "{H2}")),
    }
)


async def _vanished(sup: Supervisor, arguments: dict[str, Any]) -> Receipt:
    """A task the server forgets at once; checked until its receipt says so."""
    r = await sup.call("leaky", "leak", {**arguments, "prompt": "", "outcome": "vanish"})
    with anyio.fail_after(30):
        while r.retrieval is not RetrievalCondition.VANISHED:
            r = await sup.reconciler.check(r.receipt_id) or r
            await anyio.sleep(0.05)  # the tool runs in the server's task group: let it
    return r


async def _drive(sup: Supervisor, arguments: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Call, follow, answer, follow; then a task that vanishes. Returns (rids, handles)."""
    r = await sup.call("leaky", "leak", arguments)
    handles = [sup.handles.task_id(r)]
    r = await sup.follow(r.receipt_id)
    if r.pending_inputs:
        r = await sup.answer(r.receipt_id, content={"ok": True})
        r = await sup.follow(r.receipt_id)
    assert r.is_terminal, r
    gone = await _vanished(sup, arguments)
    handles.append(sup.handles.task_id(gone))
    # Cancelling a task the server no longer knows: the refusal names it too.
    cancelled = await _vanished(sup, arguments)
    handles.append(sup.handles.task_id(cancelled))
    cancelled = await sup.cancel(cancelled.receipt_id)
    assert cancelled.retrieval is RetrievalCondition.VANISHED
    return [r.receipt_id, gone.receipt_id, cancelled.receipt_id], handles


def _scenario(mode: Mode, arguments: dict[str, Any]) -> tuple[dict[str, bytes], list[str]]:
    tmp = Path(tempfile.mkdtemp(prefix="chit-leak-"))
    try:
        return _scenario_in(tmp, mode, arguments)
    finally:
        # One directory per example (hundreds per run): never left in /tmp.
        shutil.rmtree(tmp, ignore_errors=True)


def _scenario_in(
    tmp: Path, mode: Mode, arguments: dict[str, Any]
) -> tuple[dict[str, bytes], list[str]]:
    home = tmp / "home"
    artifacts: dict[str, bytes] = {}

    async def main() -> tuple[list[str], list[str]]:
        spec = InProcessServer(build(tmp / "tasks.db"))
        async with supervisor(home, {"leaky": spec}, fast_options(mode)) as sup:
            rids, handles = await _drive(sup, arguments)
            artifacts.update({f"open {k}": v for k, v in files(home).items()})
        return rids, handles

    with captured_logs() as logs:
        rids, handles = anyio.run(main)
    artifacts.update(files(home))
    artifacts.update(cli_outputs(home, rids))
    artifacts.update(tui_text(home, rids))
    artifacts["logs"] = logs.getvalue().encode("utf-8")
    REGISTRY.clear()  # the next example must not be helped by this one's handles
    return artifacts, handles


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    mode=st.sampled_from(("2026", "legacy")),
    spelling=spelling_names,
    cut=st.integers(1, 30),
    where=places,
)
@example(
    mode="2026",
    spelling="raw",
    cut=9,
    where={
        "status": "{H1}",
        "prompt": "answer for {H}",
        "key": "answer-{H}",
        "error": "{H2} failed",
        "result": "{H}",
        "outcome": "rpc_error",
        "not_found": "Task {H} not found",
    },
)
# Found by Hypothesis: the task runtime logged a tool's exception with its message, and
# the leaky tool's message is its own task id (chit.tasks.server.workers).
@example(
    mode="legacy",
    spelling="raw",
    cut=3,
    where={
        "status": "{H}",
        "prompt": "",
        "key": "",
        "error": "Task {H} not found",
        "result": "{H}",
        "outcome": "tool_error",
        "not_found": "{H2}",
    },
)
def test_no_handle_in_any_byte(mode: Mode, spelling: str, cut: int, where: dict[str, str]) -> None:
    arguments = {"spelling": spelling, "cut": cut, **where}
    artifacts, handles = _scenario(mode, arguments)
    found = {name: leaks(blob, handles) for name, blob in artifacts.items()}
    assert not {k: v for k, v in found.items() if v}, arguments
    assert artifacts["chit.db"] and artifacts["export"] and artifacts["logs"] is not None


def test_the_leaky_server_really_leaks(tmp_path: Path) -> None:
    """The scenario's server does put the handle in what it says (else the test proves
    nothing): without redaction the receipt's texts would hold it."""

    async def main() -> None:
        spec = InProcessServer(build(tmp_path / "tasks.db"))
        async with supervisor(tmp_path / "home", {"leaky": spec}, fast_options("2026")) as sup:
            sup.writer.redactor = None  # as before the boundary existed
            r = await sup.call("leaky", "leak", {"outcome": "tool_error", "error": "x {H}"})
            handle = sup.handles.task_id(r)
            r = await sup.follow(r.receipt_id)
            assert r.state is LifecycleState.COMPLETED and r.outcome is not None
            assert handle in r.outcome.summary

    anyio.run(main)
    REGISTRY.clear()
