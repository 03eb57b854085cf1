"""chit's pydantic schemas are built on first use; a process that starts threads builds them first.

A command that talks to the daemon uses a handful of the protocol's and the receipts'
models, so every model is declared with ``defer_build`` and the socket's result
adapters are made by :func:`deferred_adapter`: importing them builds nothing, and each
is built the first time it validates or serialises. Building a model lazily is not
thread-safe in every pydantic version chit accepts (two threads validating a model for
the first time at once could see it half built; fixed in pydantic by a lock in
``model_rebuild``). So a process that validates in worker threads — the engine's
Supervisor (the daemon, ``--no-daemon``, the TUI in process) and the sidecar's
executor — calls :func:`build_all` before it starts them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter

_DEFERRED = ConfigDict(defer_build=True)
_ADAPTERS: list[TypeAdapter[Any]] = []


def deferred_adapter(tp: Any) -> TypeAdapter[Any]:
    """A ``TypeAdapter`` for ``tp`` whose schema is built on first use (or by build_all)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        adapter: TypeAdapter[Any] = TypeAdapter(tp)  # deferred by the model's own config
    else:
        adapter = TypeAdapter(tp, config=_DEFERRED)
    _ADAPTERS.append(adapter)
    return adapter


def build_all() -> int:
    """Build every deferred schema of chit's models imported so far; how many were built."""
    built = 0
    todo = list(BaseModel.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("chit.") and not cls.__pydantic_complete__:
            cls.model_rebuild(raise_errors=False)
            built += 1
    for adapter in _ADAPTERS:
        if not adapter.pydantic_complete:
            adapter.rebuild(raise_errors=False)
            built += 1
    return built


__all__ = ["build_all", "deferred_adapter"]
