"""Running the sidecar process: transports, authentication and the in-process executor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chit.errors import UsageError
from chit.home import Home
from chit.sidecar.executor import Executor, ExecutorThread
from chit.sidecar.owner import VaultOwnerResolver
from chit.sidecar.principals import SidecarTokenVerifier, list_tokens
from chit.sidecar.server import build_sidecar_server


def _auth_options(target: Path | str, host: str, port: int) -> dict[str, Any]:
    from mcp.server.auth.settings import AuthSettings

    from chit.sidecar.sql import open_database

    db = open_database(target)
    try:
        if not list_tokens(db):
            raise UsageError(
                "no sidecar tokens: create one with 'chit sidecar token add NAME' "
                "(or pass --no-auth for a single local principal)"
            )
    finally:
        db.close()
    base = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    return {
        "auth": AuthSettings(
            issuer_url=base,
            resource_server_url=None,
            validate_token_resource=False,
        ),
        "token_verifier": SidecarTokenVerifier(target),
    }


def serve(
    home: Home,
    *,
    host: str | None = None,
    port: int | None = None,
    auth: bool = True,
    executor: bool = True,
    gateway: Any = None,
    store: Path | str | None = None,
) -> None:
    """Serve stdio (``host`` None) or streamable HTTP on ``host:port`` until stopped.

    Args:
        home: The chit home.
        host: HTTP host (loopback), or None for stdio.
        port: HTTP port.
        auth: Require bearer tokens on HTTP (stdio always has the one local principal).
        executor: Apply intents in this process too (the Supervisor may run another;
            leases keep them from applying an intent twice).
        gateway: The Supervisor's receipt gateway (``task_call`` and ``receipt_*``).
        store: The sidecar store: a file or a ``postgresql://`` URL shared by replicas
            (default: the home's ``sidecar.db``).
    """
    target = store or home.sidecar_db_path
    thread = None
    if executor:
        thread = ExecutorThread(Executor(home, VaultOwnerResolver(home), sidecar_path=target))
    options: dict[str, Any] = {}
    if host is not None and auth:
        assert port is not None
        options = _auth_options(target, host, port)
    server, _service = build_sidecar_server(
        home,
        sidecar_path=target,
        on_queued=thread.wake if thread else None,
        gateway=gateway,
        **options,
    )
    if thread is not None:
        thread.start()
    try:
        if host is None:
            server.run("stdio")
            return
        import uvicorn

        from chit.tasks.server.http import KEEP_ALIVE_S, TaskNameHeaderGuard

        assert port is not None
        app = TaskNameHeaderGuard(server.streamable_http_app(host=host))
        uvicorn.run(app, host=host, port=port, log_level="warning", timeout_keep_alive=KEEP_ALIVE_S)
    finally:
        if thread is not None:
            thread.stop()
        close = getattr(gateway, "close", None)
        if callable(close):
            close()
