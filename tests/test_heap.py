"""chit.heap.settle: a service process's imports are frozen out of full collections."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chit import heap
from chit.home import Home


@pytest.fixture
def thawed() -> Iterator[None]:
    """Every test starts and ends with nothing frozen and the collector's thresholds as
    they were (both are process-wide)."""
    thresholds = gc.get_threshold()
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


class _Node:
    def __init__(self) -> None:
        self.other: Any = None


def test_settle_freezes_what_lives_and_collects_garbage_first(thawed: None) -> None:
    alive = _Node()
    dead = _Node()
    dead.other = _Node()
    dead.other.other = dead  # a cycle: only the collector frees it
    gone = weakref.ref(dead)
    del dead

    frozen = heap.settle()

    assert frozen == gc.get_freeze_count() > 0
    assert gone() is None  # collected, not frozen for ever
    assert not any(o is alive for o in gc.get_objects())  # out of the collector's sight


def test_settle_raises_the_young_threshold_and_never_lowers_it(thawed: None) -> None:
    gc.set_threshold(700, 10, 10)
    heap.settle()
    assert gc.get_threshold() == (heap.YOUNG_THRESHOLD, 10, 10)

    gc.set_threshold(heap.YOUNG_THRESHOLD * 3, 5, 7)
    heap.settle()
    assert gc.get_threshold() == (heap.YOUNG_THRESHOLD * 3, 5, 7)


def test_the_daemon_settles_before_it_serves(
    thawed: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import anyio

    from chit.daemon import service
    from chit.runtime import SupervisorOptions

    seen: list[int] = []
    monkeypatch.setattr(service, "_configure_logging", lambda spawned: None)
    monkeypatch.setattr(anyio, "run", lambda *a, **k: seen.append(gc.get_freeze_count()))

    assert service.run(Home(tmp_path / "home"), SupervisorOptions(), spawned=True) == 0

    assert seen and seen[0] > 0


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_demo_server_settles_before_it_serves(
    thawed: None, transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    from chit.demo import server as demo
    from chit.tasks.server import stdio

    seen: list[int] = []

    def serving(*args: Any, **kwargs: Any) -> None:
        seen.append(gc.get_freeze_count())

    class _Server:
        def streamable_http_app(self, host: str) -> Any:
            return lambda scope, receive, send: None

    monkeypatch.setattr(stdio, "run_stdio", serving)
    monkeypatch.setattr(uvicorn, "run", serving)
    if transport == "stdio":
        demo.run_stdio(_Server())
    else:
        demo.run_http(_Server(), "127.0.0.1", 0)

    assert seen and seen[0] > 0
