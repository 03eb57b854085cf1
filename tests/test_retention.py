"""Retention: settled receipts keep their first and last observation; the space comes back."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from chit import clock
from chit.cli.main import cli
from chit.errors import UsageError
from chit.home import Home
from chit.receipts import (
    AcceptanceDecided,
    AcceptanceState,
    Event,
    LifecycleState,
    ResultObserved,
    StatusObserved,
)
from chit.reconcile.writer import ReceiptWriter
from chit.runtime.retention import LAST_RUN, RetentionKeeper, apply_retention, timeline_days
from chit.store import Store
from tests.cli_support import seed_many

NOW = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture
def frozen() -> Iterator[None]:
    clock.freeze(NOW - timedelta(days=40))
    try:
        yield
    finally:
        clock.unfreeze()


def _history(store: Store, rid: str, rows: int, verdict: AcceptanceState | None) -> None:
    """``rows`` status changes (each its own row), then the end and maybe a verdict."""
    writer = ReceiptWriter(store)
    for i in range(rows):
        clock.advance(1)
        status = StatusObserved(status=LifecycleState.WORKING, message=f"step {i} " + "x" * 200)
        writer.apply(rid, [status])
    end: list[Event] = [
        StatusObserved(status=LifecycleState.COMPLETED, message="done"),
        ResultObserved(summary="ok"),
    ]
    if verdict is not None:
        end.append(AcceptanceDecided(state=verdict, why="checked"))
    writer.apply(rid, end)


def _seed(home: Home) -> dict[str, str]:
    """Receipts 40 days old: settled ones and ones that must keep their timeline."""
    ids = seed_many(home, 5)
    names = ["accepted", "rejected-late", "pending", "live", "no-check"]
    with Store.open(home) as store:
        _history(store, ids[0], 300, AcceptanceState.ACCEPTED)
        _history(store, ids[2], 300, None)  # acceptance still pending: not settled
        writer = ReceiptWriter(store)
        for i in range(300):  # still working: never trimmed
            writer.apply(ids[3], [StatusObserved(status=LifecycleState.WORKING, message=f"{i}")])
        _history(store, ids[4], 300, None)
        # needs no acceptance: settled when it ended
        store.db.execute(
            "UPDATE receipts SET acceptance = 'not_required' WHERE receipt_id = ?", [ids[4]]
        )
        store.db.conn.commit()
        clock.advance(35 * 86400)  # judged 5 days ago: inside the 30 days
        _history(store, ids[1], 300, None)
        writer.apply(ids[1], [AcceptanceDecided(state=AcceptanceState.REJECTED, why="late")])
    return dict(zip(names, ids, strict=True))


def _rows(home: Home) -> dict[str, int]:
    with Store.open(home) as store:
        return {
            str(r[0]): int(r[1])
            for r in store.db.execute(
                "SELECT receipt_id, count(*) FROM observations GROUP BY receipt_id"
            ).fetchall()
        }


def test_prune_trims_settled_timelines_and_reclaims(tmp_path: Path, frozen: None) -> None:
    home = Home(tmp_path / "home")
    ids = _seed(home)
    clock.freeze(NOW)
    before = _rows(home)
    run = CliRunner().invoke
    dry = run(cli, ["--home", str(home.root), "prune", "--older-than", "30d", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "would prune" in dry.output and "nothing changed" in dry.output
    assert _rows(home) == before
    out = run(cli, ["--home", str(home.root), "prune", "--older-than", "30d", "--json"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.output)
    assert report["receipts"] == 2 and report["rows"] == sum(
        before[ids[k]] - 2 for k in ("accepted", "no-check")
    )
    assert report["bytes_after"] < report["bytes_before"]
    with Store.open(home) as store:
        assert store.retention.free_pages() == 0  # every freed page went back
    after = _rows(home)
    assert after[ids["accepted"]] == 2 and after[ids["no-check"]] == 2
    for kept in ("rejected-late", "pending", "live"):
        assert after[ids[kept]] == before[ids[kept]]
    with Store.open(home) as store:
        timeline = store.observations.timeline(ids["accepted"])
        receipt = store.receipts.require(ids["accepted"])
    # the first (how it started) and the last (the verdict) stay; the receipt is whole
    assert timeline[0].message == "Starting" and timeline[-1].kind.value == "acceptance"
    assert receipt.outcome is not None and receipt.acceptance.state is AcceptanceState.ACCEPTED


def test_an_older_file_is_converted_once(tmp_path: Path, frozen: None) -> None:
    home = Home(tmp_path / "home")
    seed_many(home, 1)
    with Store.open(home) as store:
        assert store.retention.auto_vacuum() == 2  # new stores are incremental
        store.db.execute("PRAGMA auto_vacuum=NONE")
        store.db.execute("VACUUM")
        assert store.retention.auto_vacuum() == 0
        assert store.retention.reclaim().converted
        assert store.retention.auto_vacuum() == 2
        assert not store.retention.reclaim().converted


@pytest.mark.parametrize("bad", ["-3", '"thirty"', "true", "nan"])
def test_timeline_days_must_be_a_number(tmp_path: Path, bad: str) -> None:
    home = Home(tmp_path / "home").ensure()
    home.config_path.write_text(f"[retention]\ntimeline_days = {bad}\n")
    with pytest.raises(UsageError, match="timeline_days"):
        timeline_days(home)
    out = CliRunner().invoke(cli, ["--home", str(home.root), "prune"])
    assert out.exit_code == 2 and "timeline_days" in out.output


def test_timeline_days_default_and_off(tmp_path: Path) -> None:
    home = Home(tmp_path / "home").ensure()
    assert timeline_days(home) == 30
    home.config_path.write_text("[retention]\ntimeline_days = 0\n")
    assert timeline_days(home) is None


@pytest.mark.parametrize("bad", ["thirty", "30x", "-1d", ""])
def test_older_than_is_checked(tmp_path: Path, bad: str) -> None:
    out = CliRunner().invoke(cli, ["--home", str(tmp_path / "h"), "prune", "--older-than", bad])
    assert out.exit_code == 2 and "--older-than" in out.output


def test_retention_runs_once_a_day_under_the_lease(tmp_path: Path, frozen: None) -> None:
    home = Home(tmp_path / "home")
    ids = _seed(home)
    home.config_path.write_text("[retention]\ntimeline_days = 30\n")
    clock.freeze(NOW)
    keeper = RetentionKeeper(home, check_every_s=0.01)
    ran = anyio.run(keeper.apply_once)
    assert ran is not None and ran.receipts == 2
    assert _rows(home)[ids["accepted"]] == 2
    with Store.open(home) as store:
        assert store.meta.get(LAST_RUN) == clock.iso(NOW)
    # not again the same day (another process, a restart: the store remembers) ...
    clock.advance(23 * 3600)
    assert apply_retention(home, clock.now()) is None
    # ... but the next day, with the judged-5-days-ago receipt now old enough
    clock.advance(26 * 86400)
    again = apply_retention(home, clock.now())
    assert again is not None and again.receipts == 1
    assert _rows(home)[ids["rejected-late"]] == 2


def test_the_supervisor_applies_retention_while_it_reconciles(tmp_path: Path, frozen: None) -> None:
    from tests.engine_support import supervisor

    home = Home(tmp_path / "home")
    ids = _seed(home)
    home.config_path.write_text("[retention]\ntimeline_days = 30\n")
    clock.freeze(NOW)

    async def main() -> None:
        async with supervisor(home.root, {}) as sup:
            stop = anyio.Event()
            async with anyio.create_task_group() as tg:
                tg.start_soon(sup.run, stop)
                with anyio.fail_after(30):
                    while sup.retention.last is None:
                        await anyio.sleep(0.02)
                stop.set()

    anyio.run(main)
    assert _rows(home)[ids["accepted"]] == 2


def test_observations_of_a_settled_receipt_cannot_be_edited(tmp_path: Path, frozen: None) -> None:
    home = Home(tmp_path / "home")
    rid = seed_many(home, 1)[0]
    with Store.open(home) as store, pytest.raises(sqlite3.IntegrityError, match="append-only"):
        store.db.execute("UPDATE observations SET message = 'x' WHERE receipt_id = ?", [rid])
