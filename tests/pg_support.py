"""A throwaway PostgreSQL cluster for the tests (no tests here).

One cluster per test session (``initdb`` + ``pg_ctl`` into a temporary directory,
listening on 127.0.0.1 at a free port and on a socket in that directory), and a fresh
database per test. The suite runs as root in CI and PostgreSQL refuses to run as root,
so the cluster runs as the ``postgres`` system user (or ``nobody``).

``CHIT_TEST_PG_URL`` (a server URL whose user may ``CREATE DATABASE``) uses an existing
server instead. Without PostgreSQL (or psycopg), tests that need it skip with one line,
except in CI (``CI=true``), where that is a failure: CI installs both (``.ci/run``).
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from chit.processes import pid_alive
from tests.proc_support import free_port

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"PostgreSQL tests cannot run in CI: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL not available: {reason}")


def pg_bindir() -> Path | None:
    """Directory of ``initdb``/``pg_ctl`` (Debian keeps them off the PATH)."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for found in candidates:
        if (Path(found) / "initdb").exists():
            return Path(found)
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class Cluster:
    """A running throwaway cluster."""

    def __init__(self, root: Path, bindir: Path, user: str | None, durable: bool = False) -> None:
        self.durable = durable
        """Keep PostgreSQL's default fsync settings (benchmarks); tests turn them off."""
        self.root = root
        self.bindir = bindir
        self.user = user
        self.port = free_port()
        self.data = root / "data"

    def _run(self, *args: str) -> None:
        subprocess.run(
            list(args),
            check=True,
            user=self.user,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=self.root,
            timeout=120,
        )

    def init(self) -> None:
        """Create the cluster's data directory (``initdb``)."""
        self._run(
            str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres",
            "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C",
        )  # fmt: skip

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1"
        options += " -c max_connections=300"
        if not self.durable:
            options += " -c fsync=off -c full_page_writes=off"
        self._run(
            str(self.bindir / "pg_ctl"), "-D", str(self.data), "-o", options,
            "-l", str(self.root / "server.log"), "-w", "-t", "60", "start",
        )  # fmt: skip

    def stop(self, mode: str = "immediate") -> None:
        """Stop the server (``immediate``: like a crash; ``fast``: clean)."""
        subprocess.run(
            [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"],
            user=self.user,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=self.root,
            timeout=60,
            check=False,
        )

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


def _run_as() -> str | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    return None


OWNER = "owner.pid"


def _remove_orphans(bindir: Path) -> None:
    """Stop and delete throwaway clusters whose creating process no longer runs.

    Only directories this module made (``chit-pg-*`` holding an ``owner.pid``) whose
    owner is dead: a run beside this one (another engineer's, another worker's) keeps
    its cluster.
    """
    for root in Path(tempfile.gettempdir()).glob("chit-pg-*"):
        try:
            pid = int((root / OWNER).read_text())
        except (OSError, ValueError):
            continue
        if pid_alive(pid):
            continue
        try:
            user: str | None = pwd.getpwuid(root.stat().st_uid).pw_name
        except (KeyError, OSError):
            continue
        if user == pwd.getpwuid(os.geteuid()).pw_name:
            user = None
        subprocess.run(
            [str(bindir / "pg_ctl"), "-D", str(root / "data"), "-m", "immediate", "-w", "stop"],
            user=user,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            timeout=60,
            check=False,
        )
        shutil.rmtree(root, ignore_errors=True)


def new_cluster(*, durable: bool = False) -> Cluster:
    """Create and start a throwaway cluster (skip, or fail in CI, when impossible).

    Args:
        durable: Keep fsync on (benchmarks); tests run without it for speed.
    """
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg is not installed (pip install -e '.[test,postgres]')")
    bindir = pg_bindir()
    if bindir is None:
        _unavailable("initdb not found (apt-get install postgresql)")
        raise AssertionError("unreachable")
    _remove_orphans(bindir)
    user = _run_as()
    root = Path(tempfile.mkdtemp(prefix="chit-pg-"))
    # Who started it: a worker killed by a timeout never runs its session finalizer, and
    # the next run stops a cluster whose owner is gone (see _remove_orphans).
    (root / OWNER).write_text(str(os.getpid()))
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    root.chmod(0o700)
    cluster = Cluster(root, bindir, user, durable)
    try:
        cluster.init()
        cluster.start()
    except (subprocess.SubprocessError, OSError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        shutil.rmtree(root, ignore_errors=True)
        _unavailable(f"could not start a cluster: {exc} {detail.decode(errors='replace')[:300]}")
    return cluster


def close_pools(url: str) -> None:
    """Close this process's sidecar pools on ``url`` (a database, or a server ending in
    ``/``) before it goes: a pool left open keeps reconnecting in the background and
    logs ``error connecting in 'chit-sidecar'`` into later tests' output."""
    try:
        from chit.sidecar.pgdb import close_pools as close
    except ImportError:  # psycopg missing: no pool was ever made
        return
    close(url)


def remove_cluster(cluster: Cluster) -> None:
    """Stop ``cluster`` (closing this process's pools on it first) and delete its directory."""
    close_pools(cluster.url.rpartition("/")[0] + "/")
    cluster.stop()
    shutil.rmtree(cluster.root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """URL of a PostgreSQL server (a throwaway cluster started once per session)."""
    external = os.environ.get("CHIT_TEST_PG_URL")
    if external:
        yield external
        close_pools(external.rpartition("/")[0] + "/")
        return
    cluster = new_cluster()
    try:
        yield cluster.url
    finally:
        remove_cluster(cluster)


def _admin(server: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(statement)


def database_url(server: str, name: str) -> str:
    """``server``'s URL pointing at database ``name`` instead."""
    base, _, _ = server.rpartition("/")
    return f"{base}/{name}"


def create_database(server: str, name: str) -> str:
    """Create database ``name`` on ``server``; return its URL."""
    _admin(server, f"CREATE DATABASE {name}")
    return database_url(server, name)


def drop_database(server: str, url: str) -> None:
    """Drop the database ``url`` names (its sessions are ended first)."""
    name = url.rpartition("/")[2]
    _admin(server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """URL of a fresh, empty database (dropped after the test)."""
    url = create_database(pg_server, f"t_{secrets.token_hex(6)}")
    try:
        yield url
    finally:
        close_pools(url)
        drop_database(pg_server, url)
