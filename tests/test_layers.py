"""The layer rules of docs/architecture.md, enforced.

Imports point down only; the headless core never loads Textual; ``chit.receipts`` and
``chit.tasks`` import nothing else of chit (``chit.tasks`` could ship alone).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "chit"

# Which chit packages each layer may import (besides itself). Top-level helper modules
# (clock, errors, home, redaction, files, inputs, processes, heap, stackdump) sit at the
# bottom and may be imported by every layer except the two that must stand alone.
BOTTOM = {
    "chit.clock",
    "chit.errors",
    "chit.home",
    "chit.redaction",
    "chit.files",
    "chit.inputs",
    "chit.processes",
    "chit.heap",
    "chit.stackdump",
    "chit",
}
ALLOWED: dict[str, set[str]] = {
    "receipts": set(),
    "tasks": set(),
    "store": {"receipts"},
    "vault": set(),
    "servers": {"receipts", "store", "vault", "tasks"},
    "reconcile": {"receipts", "store", "vault", "tasks", "servers"},
    "sidecar": {"receipts", "store", "vault", "tasks", "servers"},
    "demo": {"receipts", "store", "vault", "tasks", "servers", "sidecar"},
    "runtime": {"receipts", "store", "vault", "tasks", "servers", "reconcile", "sidecar", "demo"},
    # The one door of the faces: the Engine protocol, its in-process implementation and
    # the socket client of the daemon.
    "engine": {
        "receipts",
        "store",
        "vault",
        "tasks",
        "servers",
        "reconcile",
        "sidecar",
        "demo",
        "runtime",
    },
    # chit proxy: the MCP server hosts launch in place of a server; its engine side too.
    "proxy": {
        "receipts",
        "store",
        "vault",
        "tasks",
        "servers",
        "reconcile",
        "sidecar",
        "demo",
        "runtime",
        "engine",
    },
    # The daemon process: the control socket's server side and the daemon's life.
    "daemon": {
        "proxy",
        "receipts",
        "store",
        "vault",
        "tasks",
        "servers",
        "reconcile",
        "sidecar",
        "demo",
        "runtime",
        "engine",
    },
    "tui": {
        "receipts",
        "store",
        "vault",
        "tasks",
        "servers",
        "reconcile",
        "sidecar",
        "demo",
        "runtime",
        "engine",
    },
    "cli": {
        "receipts",
        "store",
        "vault",
        "tasks",
        "servers",
        "reconcile",
        "sidecar",
        "demo",
        "runtime",
        "engine",
        "daemon",
        "proxy",
        "tui",
    },
}
STANDALONE = {"receipts", "tasks"}


def _chit_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "chit")
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and node.module.split(".")[0] == "chit"
        ):
            found.add(node.module)
    return found


def _layer_files() -> list[tuple[str, Path]]:
    return [(layer, p) for layer in ALLOWED for p in sorted((SRC / layer).rglob("*.py"))]


@pytest.mark.parametrize(("layer", "path"), _layer_files(), ids=lambda v: str(v))
def test_imports_point_down(layer: str, path: Path) -> None:
    for name in _chit_imports(path):
        parts = name.split(".")
        target = parts[1] if len(parts) > 1 else ""
        if target == layer:
            continue
        if name in BOTTOM or (len(parts) == 2 and f"chit.{target}" in BOTTOM):
            assert layer not in STANDALONE, f"{path}: {layer} must not import {name}"
            continue
        assert target in ALLOWED[layer], f"{path}: layer {layer} may not import {name}"


def test_textual_only_in_tui() -> None:
    for layer, path in _layer_files():
        if layer in {"tui", "cli"}:
            continue
        text = path.read_text(encoding="utf-8")
        assert "import textual" not in text and "from textual" not in text, path


def test_headless_core_does_not_load_textual() -> None:
    code = (
        "import sys, importlib\n"
        "for m in ('chit.receipts','chit.store','chit.vault','chit.tasks','chit.runtime',"
        "'chit.reconcile','chit.sidecar','chit.servers','chit.engine','chit.engine.local',"
        "'chit.cli.main'):\n"
        "    importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"textual loaded by the headless core: {out.stdout}"


def test_receipts_is_pure() -> None:
    code = (
        "import sys, chit.receipts\n"
        "print(','.join(sorted(m for m in sys.modules if m.startswith('chit.') "
        "and not m.startswith('chit.receipts'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", out.stdout


def test_no_wall_clock_outside_clock_module() -> None:
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.name == "clock.py":
            continue
        text = path.read_text(encoding="utf-8")
        for needle in ("datetime.now(", "datetime.utcnow(", "time.time()"):
            if needle in text:
                offenders.append(f"{path}: {needle}")
    assert not offenders, offenders


def test_redaction_is_a_bottom_module() -> None:
    """``chit.redaction`` (imported by every layer) imports nothing of chit but itself."""
    for path in sorted((SRC / "redaction").rglob("*.py")):
        for name in _chit_imports(path):
            assert name.startswith("chit.redaction"), f"{path} imports {name}"
