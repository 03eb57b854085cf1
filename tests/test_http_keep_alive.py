"""chit's HTTP servers keep an idle connection longer than HTTP clients keep theirs.

uvicorn closes an idle keep-alive connection after 5 s by default and httpx reuses one for
up to 5 s: a request could go out on a connection the server was closing, and fail with
``ReadError('')`` (one of 500 concurrent ``work_start`` calls did, under load). So the
sidecar, the proxy and the demo server keep idle connections for ``KEEP_ALIVE_S``, and
chit's own client drops its idle connections after ``IDLE_EXPIRY_S`` — well inside the
5 s that common servers allow.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from chit.tasks.client.spec import IDLE_EXPIRY_S, http_client
from chit.tasks.server.http import KEEP_ALIVE_S
from tests.daemon_support import chit, daemon_env, daemon_home
from tests.proc_support import start_chit_http, stop
from tests.sidecar_support import make_home, start_http
from tests.tasks_server_support import start_http_server

pytestmark = [pytest.mark.timeout(240)]

# Longer than the 5 s idle timeout of uvicorn's default (and of httpx's pool).
IDLE_S = 6.5


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The sidecar, the demo server and ``chit proxy`` (over the demo server), on HTTP."""
    with ExitStack() as stack:
        sidecar, sidecar_url = start_http(make_home(tmp_path / "sidecar"), "--no-auth")
        stack.callback(stop, sidecar)
        demo, demo_url = start_http_server(tmp_path / "demo.db", tmp_path)
        stack.callback(stop, demo)
        home = stack.enter_context(daemon_home(tmp_path / "proxy-home"))
        env = daemon_env(home)
        added = chit("servers", "add", "demo", "--url", demo_url, env=env)
        assert added.code == 0, added.err
        proxy, proxy_url = start_chit_http(
            ["proxy", "demo"], env=env, log_dir=tmp_path, log_name="proxy", what="chit proxy"
        )
        stack.callback(stop, proxy)
        yield {"sidecar": sidecar_url, "demo server": demo_url, "proxy": proxy_url}


def _ask(conn: http.client.HTTPConnection, path: str) -> http.client.HTTPResponse:
    conn.request("GET", path, headers={"Accept": "text/event-stream"})
    response = conn.getresponse()
    response.read()
    return response


def test_servers_keep_an_idle_connection_past_five_seconds(servers: dict[str, str]) -> None:
    assert KEEP_ALIVE_S > 3 * IDLE_S
    opened: dict[str, tuple[http.client.HTTPConnection, Any]] = {}
    for name, url in servers.items():
        parts = urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
        first = _ask(conn, parts.path)
        assert not first.will_close, f"{name} closed after one request ({first.status})"
        opened[name] = (conn, conn.sock)
    # The assertion is that nothing happens during the idle time: a slow machine can only
    # make the server close later, never sooner, so this wait cannot fail spuriously.
    time.sleep(IDLE_S)
    for name, (conn, sock) in opened.items():
        try:
            second = _ask(conn, urlsplit(servers[name]).path)
        except (http.client.RemoteDisconnected, ConnectionError) as exc:
            pytest.fail(f"{name} closed an idle connection within {IDLE_S} s: {exc!r}")
        assert conn.sock is sock, f"{name}: the second request needed a new connection"
        assert second.status < 500
        conn.close()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_chits_client_drops_an_idle_connection_before_common_servers_do() -> None:
    connections: list[asyncio.StreamWriter] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                await reader.readuntil(b"\r\n\r\n")
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    assert IDLE_EXPIRY_S <= 5 / 2
    try:
        async with http_client({"X-Test": "1"}) as client:
            assert (await client.get(f"http://127.0.0.1:{port}/")).text == "ok"
            # Past chit's expiry: the pooled connection must not be reused (a server with
            # a 5 s idle timeout could be closing it right now). Waiting longer can only
            # make the expiry more certain, so this wait cannot fail spuriously.
            await asyncio.sleep(IDLE_EXPIRY_S + 0.5)
            assert (await client.get(f"http://127.0.0.1:{port}/")).text == "ok"
            assert len(connections) == 2, "an idle connection was reused past its expiry"
            assert client.headers["X-Test"] == "1"
            # The SDK's own timeouts are kept: 30 s, and 300 s to read a held stream.
            assert client.timeout.connect == 30 and client.timeout.read == 300
    finally:
        for writer in connections:
            writer.close()
        server.close()
