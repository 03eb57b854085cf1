"""Shared helpers of the write-path benchmarks: what each commit writes, page by page.

A commit in WAL mode appends one frame (a page plus a 24-byte header) for every page it
dirtied, and ``synchronous=FULL`` makes the commit wait until they are on disk. So the
frames per commit — and which b-tree each frame belongs to — explain a write path's cost
independently of how loaded the shared disk is. ``frames_by_tree`` reads the frame
headers of the WAL and maps each page number to its table or index with the ``dbstat``
virtual table.

Also: the load average (printed beside every figure, since the machine is shared) and
the median of per-slice ratios, so a drifting disk moves both sides of a ratio alike.
"""

from __future__ import annotations

import collections
import os
import sqlite3
import statistics
import struct
from collections.abc import Callable
from pathlib import Path

WAL_HEADER = 32
FRAME_HEADER = 24


def load() -> str:
    """The 1/5/15-minute load average, formatted for a figure's caption."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (cores: {os.cpu_count()})"


def wal_frames(db_path: Path) -> list[tuple[int, bool]]:
    """Every frame in ``db_path``'s WAL as (page number, ends a commit)."""
    data = Path(f"{db_path}-wal").read_bytes()
    if len(data) < WAL_HEADER:
        return []
    page_size = struct.unpack(">I", data[8:12])[0]
    frames = []
    offset = WAL_HEADER
    while offset + FRAME_HEADER <= len(data):
        page, db_size = struct.unpack(">II", data[offset : offset + 8])
        frames.append((page, db_size != 0))  # db_size is set only on a commit frame
        offset += FRAME_HEADER + page_size
    return frames


def frames_by_tree(db_path: Path) -> tuple[float, dict[str, float]]:
    """Frames per commit in the WAL, in total and per b-tree (table or index name).

    Pages ``dbstat`` cannot place (overflow or freelist pages written before they were
    linked) are counted under ``(other)``. Page 1 (the header, rewritten whenever the
    file grows) is ``sqlite_schema``.
    """
    frames = wal_frames(db_path)
    commits = sum(1 for _, commit in frames if commit)
    if not commits:
        return 0.0, {}
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        owner = {
            int(row[1]): str(row[0]) for row in conn.execute("SELECT name, pageno FROM dbstat")
        }
    finally:
        conn.close()
    counts = collections.Counter(owner.get(page, "(other)") for page, _ in frames)
    per_tree = {name: n / commits for name, n in counts.most_common()}
    return len(frames) / commits, per_tree


def measure_frames(
    db_path: Path, conn: sqlite3.Connection, commit: Callable[[int], None], n: int = 200
) -> tuple[float, dict[str, float]]:
    """Run ``commit(i)`` ``n`` times into an emptied WAL; return ``frames_by_tree``.

    Automatic checkpoints are switched off for the measurement so every frame stays in
    the WAL to be counted; the caller's connection keeps its other settings.
    """
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    for i in range(n):
        commit(i)
    result = frames_by_tree(db_path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    conn.execute("PRAGMA wal_autocheckpoint=1000")
    return result


def print_frames(label: str, figures: tuple[float, dict[str, float]]) -> None:
    """Print one workload's frames per commit, biggest b-tree first."""
    total, per_tree = figures
    trees = ", ".join(f"{name} {n:.2f}" for name, n in per_tree.items())
    print(f"  {label:<22} {total:5.2f} frames ({total * 4.1:.1f} KB) per commit: {trees}")


def median_ratio(ours: list[float], base: list[float]) -> float:
    """Median of the per-slice ratios ``ours[i] / base[i]`` (slices measured side by side)."""
    return statistics.median(o / b for o, b in zip(ours, base, strict=True))


def quartiles(values: list[float]) -> tuple[float, float]:
    """The lower and upper quartile (the spread printed beside a median)."""
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]
