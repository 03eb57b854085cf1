"""The ``proxy.*`` methods of the daemon's control socket (both ends import this).

Added to :data:`chit.engine.rpc.METHODS` on import, beside the engine's own methods, so
the daemon's dispatcher validates their params and the client knows their results and
timeouts. New methods need no protocol bump (docs/daemon.md): a daemon older than the
proxy answers -32601, which the proxy turns into "restart the daemon".

Proxy → daemon requests:

| method | params | result |
|---|---|---|
| ``proxy.attach`` | ``AttachParams`` | ``UpstreamInfo`` |
| ``proxy.host`` | ``HostParams`` | null |
| ``proxy.request`` | ``ForwardParams`` | ``Answer`` |
| ``proxy.notify`` | ``NotifyParams`` | null |
| ``proxy.cancel`` | ``RouteParams`` | null |
| ``proxy.start`` | ``StartParams`` | ``StartReply`` |
| ``proxy.outcome`` | ``ReceiptParams`` | ``Answer`` |
| ``proxy.question`` | ``QuestionParams`` | ``ServerRequest`` |
| ``proxy.answer`` | ``HostAnswerParams`` | ``Receipt`` |
| ``proxy.gave_up`` | ``GaveUpParams`` | ``Receipt`` |
| ``proxy.hosts`` | — | ``[ConnectedHost]`` |

Daemon → proxy, on the same connection (ids are strings ``d1``, ``d2``, … so they never
meet the client's integer ids): the request ``proxy.input`` (``InputParams`` → the
host's result object) and the notifications ``proxy.progress`` (``ProgressParams``) and
``proxy.notice`` (``NoticeParams``).
"""

from __future__ import annotations

from typing import Any

from chit.engine import rpc
from chit.proxy.models import (
    Answer,
    AttachParams,
    ConnectedHost,
    ForwardParams,
    GaveUpParams,
    HostAnswerParams,
    HostParams,
    NotifyParams,
    QuestionParams,
    ReceiptParams,
    RouteParams,
    ServerRequest,
    StartParams,
    StartReply,
    UpstreamInfo,
)
from chit.receipts import Receipt
from chit.receipts.schemas import deferred_adapter

INPUT = "proxy.input"
PROGRESS = "proxy.progress"
NOTICE = "proxy.notice"
INPUT_TIMEOUT_S = 3600.0
"""How long the daemon waits for a host to answer the server's question (a person may)."""

_LONG = 3700.0  # a call the server answers synchronously may take the engine's result timeout


def _method(name: str, params: Any, result: Any, timeout_s: float) -> rpc.Method:
    # model_construct: the params classes are this package's models, not rpc's own base.
    return rpc.Method.model_construct(
        name=name, params=params, result=deferred_adapter(result), timeout_s=float(timeout_s)
    )


METHODS: dict[str, rpc.Method] = {
    m.name: m
    for m in (
        _method("proxy.attach", AttachParams, UpstreamInfo, 120),
        _method("proxy.host", HostParams, None, 30),
        _method("proxy.request", ForwardParams, Answer, _LONG),
        _method("proxy.notify", NotifyParams, None, 30),
        _method("proxy.cancel", RouteParams, None, 30),
        _method("proxy.start", StartParams, StartReply, _LONG),
        _method("proxy.outcome", ReceiptParams, Answer, 300),
        _method("proxy.question", QuestionParams, ServerRequest, 60),
        _method("proxy.answer", HostAnswerParams, Receipt, 900),
        _method("proxy.gave_up", GaveUpParams, Receipt, 60),
        _method("proxy.hosts", rpc.NoParams, list[ConnectedHost], 30),
    )
}
rpc.METHODS.update(METHODS)
