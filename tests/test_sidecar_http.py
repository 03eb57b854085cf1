"""The HTTP sidecar with bearer-token principals: records are private to their principal."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from chit.home import Home
from tests.sidecar_support import PYTHON, call, env_for, make_home, start_http, stop

# The waits below are safety nets against a hang, not timings: a CLI start took over 30 s
# in a parallel run at load 9 (three tests errored on a 30 s bound).
pytestmark = pytest.mark.timeout(300)


def _token(home: Home, name: str) -> str:
    out = subprocess.run(
        [PYTHON, "-m", "chit", "sidecar", "token", "add", name],
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out.stdout.strip()


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str, Home]]:
    home = make_home(tmp_path_factory.mktemp("sidecar-http"))
    a, b = _token(home, "alice"), _token(home, "bob")
    proc, url = start_http(home)
    try:
        yield url, a, b, home
    finally:
        stop(proc)


def _client(url: str, token: str | None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    http = create_mcp_http_client(headers=headers)
    return Client(streamable_http_client(url, http_client=http), read_timeout_seconds=20)


async def _texts(url: str, token: str, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    async with _client(url, token) as client:
        out = []
        for tool, args in calls:
            result = await client.call_tool(tool, args)
            out.append(result.content[0].text)  # type: ignore[union-attr]
        return out


def test_token_is_stored_as_hash_only(sidecar: tuple[str, str, str, Home]) -> None:
    _url, a, _b, home = sidecar
    raw = b"".join(p.read_bytes() for p in home.root.glob("sidecar.db*") if p.is_file())
    assert a.encode() not in raw
    assert (home.sidecar_db_path.stat().st_mode & 0o777) == 0o600


def test_no_token_is_refused(sidecar: tuple[str, str, str, Home]) -> None:
    url, *_ = sidecar
    response = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=10)
    assert response.status_code == 401
    bad = httpx.post(
        url,
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers={"Authorization": "Bearer chit_sc_wrong"},
        timeout=10,
    )
    assert bad.status_code == 401


def test_other_principal_gets_the_unknown_answer(sidecar: tuple[str, str, str, Home]) -> None:
    url, a, b, _home = sidecar

    async def run() -> None:
        async with _client(url, a) as alice:
            start, err = await call(alice, "work_start", {"task_key": "t", "title": "A's"})
            assert not err
            item = start["item_id"]
            mine, err = await call(alice, "work_inspect", {"item_id": item})
            assert not err and mine["item_id"] == item
        probes: list[tuple[str, dict[str, Any]]] = [
            ("work_inspect", {"item_id": item}),
            ("work_note", {"item_id": item, "text": "sneaky"}),
            ("work_status", {"item_id": item, "status": "done"}),
            ("work_complete", {"item_id": item}),
            ("work_ask", {"item_id": item, "question": "?"}),
        ]
        unknown = [(tool, {**args, "item_id": "wi_doesnotexist"}) for tool, args in probes]
        as_bob = await _texts(url, b, probes)
        as_bob_unknown = await _texts(url, b, unknown)
        assert as_bob == as_bob_unknown  # byte-identical: no existence oracle
        # Bob's task key is his own: same key, different item.
        async with _client(url, b) as bob:
            his, _ = await call(bob, "work_start", {"task_key": "t", "title": "B's"})
            assert his["item_id"] != item
        async with _client(url, a) as alice:
            info, _ = await call(alice, "work_inspect", {"item_id": item})
            assert [p["kind"] for p in info["pending"]] in (["start"], [])  # no note from bob

    anyio.run(run)


def test_no_auth_requires_flag_and_tokens(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    proc = subprocess.run(
        [PYTHON, "-m", "chit", "sidecar", "--http", "127.0.0.1:1"],
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "chit sidecar token add" in proc.stderr
    refused = subprocess.run(
        [PYTHON, "-m", "chit", "sidecar", "--http", "0.0.0.0:8000"],
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2 and "loopback" in refused.stderr
