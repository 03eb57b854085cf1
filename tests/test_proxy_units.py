"""Small pieces of ``chit proxy``: message rewrites, the HostLeft rule, JSON spans."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY

from chit.proxy import wire as pwire
from chit.proxy.mirror import is_cancellation, unwrap
from chit.receipts import HostInfo, HostLeft, Receipt
from chit.receipts.transitions import apply
from chit.servers import jsonspans
from chit.tasks import wire

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _receipt(**update: object) -> Receipt:
    base = Receipt(
        receipt_id="01ABC",
        server="demo",
        tool="slow_compute",
        args_digest="hmac-sha256:x",
        request_key="k",
        protocol="2026-07-28",
        accepted_at=NOW,
        status_at=NOW,
        state="working",
    )
    return base.model_copy(update=update)


def test_host_params_drop_the_hosts_envelope_and_progress_token() -> None:
    params: dict[str, Any] = {
        "name": "t",
        "_meta": {
            PROTOCOL_VERSION_META_KEY: "2026-07-28",
            CLIENT_INFO_META_KEY: {"name": "h"},
            CLIENT_CAPABILITIES_META_KEY: {},
            "progressToken": 7,
            "io.github.chit/work": "wi_1",
        },
    }
    out = pwire.host_params(params)
    assert out == {"name": "t", "_meta": {"io.github.chit/work": "wi_1"}}
    assert params["_meta"]["progressToken"] == 7  # the host's own params are untouched
    assert pwire.host_params({"name": "t", "_meta": {"progressToken": 1}}) == {"name": "t"}


def test_undeclare_extension_never_changes_the_shared_stamp() -> None:
    shared: dict[str, Any] = {"extensions": {wire.EXTENSION_ID: {}}, "elicitation": {}}
    params: dict[str, Any] = {"_meta": {CLIENT_CAPABILITIES_META_KEY: shared}}
    assert pwire.declared_extension(params)
    pwire.undeclare_extension(params)
    assert not pwire.declared_extension(params)
    assert params["_meta"][CLIENT_CAPABILITIES_META_KEY] == {"elicitation": {}}
    assert shared == {"extensions": {wire.EXTENSION_ID: {}}, "elicitation": {}}


def test_results_are_shaped_for_the_hosts_version() -> None:
    listing = {"tools": [{"name": "a", "inputSchema": {"type": "object"}}]}
    same = pwire.for_host("tools/list", listing, "2025-11-25", "2025-11-25")
    assert same is listing  # same version: untouched
    modern = pwire.for_host("tools/list", listing, "2026-07-28", "2025-11-25")
    assert modern["resultType"] == "complete"
    assert modern["cacheScope"] == "private" and modern["ttlMs"] == 0
    back = pwire.for_host("tools/list", modern, "2025-11-25", "2026-07-28")
    assert "resultType" not in back and "ttlMs" not in back


def test_task_support_by_generation() -> None:
    listing = {
        "tools": [
            {"name": "a", "execution": {"taskSupport": "required"}},
            {"name": "b", "execution": {"taskSupport": "forbidden"}},
            {"name": "c"},
        ]
    }
    assert pwire.task_support_of(listing, wire.PROTOCOL_2025) == {"a": "required"}
    assert pwire.task_support_of(listing, wire.PROTOCOL_2026) == dict.fromkeys("abc", "optional")
    assert pwire.task_support_of(listing, None) == {}
    shown = pwire.annotate_tools(
        {"tools": [{"name": "c"}, {"name": "b", "execution": {}}]}, {"c": "optional"}
    )
    assert shown["tools"][0]["execution"] == {"taskSupport": "optional"}
    assert shown["tools"][1]["execution"] == {"taskSupport": "forbidden"}


def test_host_left_is_noted_once_and_needs_a_host() -> None:
    bare = _receipt()
    assert not apply(bare, HostLeft(why="went away"), NOW).applied
    hosted = _receipt(host=HostInfo(name="Claude", version="1.2"))
    first = apply(hosted, HostLeft(why="timed out"), NOW)
    assert first.applied and first.observation.kind.value == "host"
    assert first.receipt.host is not None and first.receipt.host.left_at == NOW
    assert first.observation.message == "Claude 1.2 stopped waiting (timed out); the task runs on"
    assert first.receipt.state.value == "working"  # the task itself is untouched
    again = apply(first.receipt, HostLeft(why="again"), NOW)
    assert not again.applied


def test_cancellations_survive_task_group_wrapping() -> None:
    import anyio

    async def main() -> None:
        cancelled = anyio.get_cancelled_exc_class()
        group = BaseExceptionGroup("g", [cancelled(), RuntimeError("x")])
        assert isinstance(unwrap(group), cancelled)
        assert isinstance(unwrap(BaseExceptionGroup("g", [RuntimeError("x")])), RuntimeError)
        assert is_cancellation(BaseExceptionGroup("g", [cancelled()]))
        assert not is_cancellation(group)

    anyio.run(main)


def test_json_spans_find_values_whatever_their_text() -> None:
    text = '{"a": "x\\"}{", "mcpServers": {"k": {"v": [1, {"b": "}"}]}, "n": null}, "z": 1}'
    member = jsonspans.find_member(text, "mcpServers")
    assert member is not None
    inner = jsonspans.members(text, member.value_start)
    assert [m.key for m in inner] == ["k", "n"]
    assert json.loads(inner[0].value_text(text)) == {"v": [1, {"b": "}"}]}
    assert inner[1].value_text(text) == "null"
    spliced = jsonspans.splice(text, inner[0], '"new"')
    assert json.loads(spliced)["mcpServers"]["k"] == "new"


def test_an_attached_host_keeps_its_stdio_server_from_the_idle_stop(tmp_path: Path) -> None:
    """The daemon stops idle stdio servers, but not one a host is attached to."""
    import anyio

    from chit.daemon.upkeep import busy_servers
    from chit.engine.local import LocalEngine
    from chit.home import Home
    from chit.proxy.backend import EngineSide
    from chit.proxy.models import AttachParams
    from tests.engine_support import demo_stdio, fast_options, file_key_env, write_config

    home = tmp_path / "home"
    write_config(home, {"demo": demo_stdio(tmp_path / "demo.db")})

    class Peer:
        async def input(self, route: str, method: str, params: object) -> object:
            raise AssertionError("not asked")

        async def progress(self, *args: object) -> None:
            pass

        async def notice(self, *args: object) -> None:
            pass

    async def main() -> None:
        async with LocalEngine.open(
            Home(home), environ=file_key_env(home), options=fast_options()
        ) as engine:
            side = EngineSide(engine)
            assert busy_servers(engine) == set()
            params = AttachParams(server="demo", host=HostInfo(name="h", version="1"))
            att, info = await side.upstreams.attach(params, Peer())
            assert info.server_info["name"] == "chit-demo"
            assert busy_servers(engine) == {"demo"}
            statuses = {s.name: s for s in await engine.servers()}
            assert [h.name for h in statuses["demo"].hosts] == ["h"]
            side.upstreams.detach(att)
            assert busy_servers(engine) == set()

    anyio.run(main)


def test_a_tool_that_cannot_be_a_task_is_listed_once_not_per_call() -> None:
    """A 2025 server's ``forbidden`` tool: its first call lists the tools, later calls
    do not (each listing was a round trip to the server on every call)."""
    from types import SimpleNamespace

    import anyio

    from chit.proxy.host import ProxyHost
    from chit.proxy.models import Answer, UpstreamInfo

    listing = {
        "tools": [
            {"name": "echo", "inputSchema": {"type": "object"}},
            {
                "name": "slow",
                "inputSchema": {"type": "object"},
                "execution": {"taskSupport": "optional"},
            },
        ]
    }
    sent: list[str] = []

    class Backend:
        async def request(self, p: Any) -> Answer:
            sent.append(p.method)
            return Answer(result=listing)

    info = UpstreamInfo(
        server="s", protocol_version=wire.PROTOCOL_2025, generation=wire.PROTOCOL_2025
    )
    host = ProxyHost(Backend(), info, runtime=None)  # type: ignore[arg-type]
    ctx: Any = SimpleNamespace(params={}, protocol_version=wire.PROTOCOL_2025)

    async def calls() -> list[str]:
        return [await host.task_support(ctx, name) for name in ("echo", "echo", "slow", "echo")]

    assert anyio.run(calls) == ["forbidden", "forbidden", "optional", "forbidden"]
    assert sent == ["tools/list"]
    host.support_stale = True  # the server said its tools changed: list again, once
    assert anyio.run(calls)[0] == "forbidden" and sent == ["tools/list", "tools/list"]
