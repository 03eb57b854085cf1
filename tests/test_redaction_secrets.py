"""No sealed header or env value in any byte chit keeps or shows, whatever a server echoes.

The leaky server runs as a real process - over streamable HTTP (it echoes the
``Authorization`` header chit sent) and over stdio (it echoes its ``LEAK_SECRET``
environment value) - registered in ``config.toml`` with the value sealed, exactly as
``chit servers add`` does. Whatever it says, in whatever spelling, the value must not
occur in ``chit.db``, its ``-wal``, the logs, ``export``, ``show`` or the TUI's detail.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chit.home import Home
from chit.redaction import REGISTRY
from chit.runtime import Supervisor
from chit.servers import Registry
from chit.servers.spec import ServerSpec
from tests.engine_support import fast_options, file_key_env
from tests.leak_scenario import captured_logs, cli_outputs, files, tui_text
from tests.leak_support import HANDLE_ALPHABET, leaks, spelling_names
from tests.proc_support import free_port, stop

pytestmark = [pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[1]
secret_values = st.text(alphabet=HANDLE_ALPHABET, min_size=12, max_size=40).filter(
    lambda v: len(set(v)) >= 6
)
TEMPLATES = ("{ENV}", "auth {AUTH} rejected", "token={ENV};", '{"key": "{AUTH}"}')


@pytest.fixture(scope="module")
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("leaky")
    port = free_port()
    log = open(tmp / "server.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.leaky_server", "http", str(tmp / "t.db"), str(port)],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((tmp / "server.log").read_text()) from None
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    stop(proc)
    log.close()


def _register(home: Path, spec: ServerSpec) -> None:
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    registry = Registry.for_home(Home(home), environ=file_key_env(home))
    stored = registry.add(spec)
    secret = stored.env.get("LEAK_SECRET") or stored.headers["Authorization"]
    assert secret.startswith("sealed:"), "the value must be sealed, as chit servers add does"


def _scenario(spec: ServerSpec, arguments: dict[str, Any]) -> dict[str, bytes]:
    root = Path(tempfile.mkdtemp(prefix="chit-secret-"))
    try:
        return _scenario_in(root / "home", spec, arguments)
    finally:
        # One directory per example (hundreds per run): never left in /tmp.
        shutil.rmtree(root, ignore_errors=True)


def _scenario_in(home: Path, spec: ServerSpec, arguments: dict[str, Any]) -> dict[str, bytes]:
    _register(home, spec)
    artifacts: dict[str, bytes] = {}

    async def main() -> list[str]:
        async with Supervisor.open(
            Home(home), environ=file_key_env(home), options=fast_options("2026")
        ) as sup:
            r = await sup.call("leaky", "leak", arguments)
            r = await sup.follow(r.receipt_id)
            assert r.is_terminal, r
            artifacts.update({f"open {k}": v for k, v in files(home).items()})
            return [r.receipt_id]

    with captured_logs() as logs:
        rids = anyio.run(main)
    artifacts.update(files(home))
    artifacts.update(cli_outputs(home, rids))
    artifacts.update(tui_text(home, rids))
    artifacts["logs"] = logs.getvalue().encode("utf-8")
    artifacts["config.toml"] = (home / "config.toml").read_bytes()
    REGISTRY.clear()
    return artifacts


def _arguments(spelling: str, template: str, outcome: str) -> dict[str, Any]:
    return {
        "spelling": spelling,
        "status": template,
        "result": template,
        "error": template,
        "outcome": outcome,
    }


_SETTINGS = settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@_SETTINGS
@given(
    secret=secret_values,
    spelling=spelling_names,
    template=st.sampled_from(TEMPLATES),
    outcome=st.sampled_from(("complete", "tool_error", "rpc_error")),
)
def test_no_sealed_header_in_any_byte(
    http_url: str, secret: str, spelling: str, template: str, outcome: str
) -> None:
    spec = ServerSpec(
        name="leaky", transport="http", url=http_url, headers={"Authorization": f"Bearer {secret}"}
    )
    artifacts = _scenario(spec, _arguments(spelling, template.replace("ENV", "AUTH"), outcome))
    found = {name: leaks(blob, [secret]) for name, blob in artifacts.items()}
    assert not {k: v for k, v in found.items() if v}


@_SETTINGS
@given(
    secret=secret_values,
    spelling=spelling_names,
    template=st.sampled_from(TEMPLATES),
    outcome=st.sampled_from(("complete", "tool_error", "rpc_error")),
)
def test_no_sealed_env_value_in_any_byte(
    tmp_path_factory: pytest.TempPathFactory,
    secret: str,
    spelling: str,
    template: str,
    outcome: str,
) -> None:
    db = tmp_path_factory.mktemp("leaky-stdio") / "t.db"
    spec = ServerSpec(
        name="leaky",
        transport="stdio",
        command=sys.executable,
        args=("-m", "tests.fakes.leaky_server", "stdio", str(db)),
        env={"LEAK_SECRET": secret},
        cwd=str(ROOT),
    )
    artifacts = _scenario(spec, _arguments(spelling, template.replace("AUTH", "ENV"), outcome))
    found = {name: leaks(blob, [secret]) for name, blob in artifacts.items()}
    assert not {k: v for k, v in found.items() if v}
