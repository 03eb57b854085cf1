"""Helpers for CLI tests: run chit in a subprocess on a private home, seed receipts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from chit.home import Home
from chit.receipts import HandleRef, Intent, LifecycleState, Receipt, TaskProtocol
from chit.receipts.create import open_receipt
from chit.receipts.digest import args_digest
from chit.receipts.events import StatusObserved
from chit.receipts.ids import new_receipt_id, new_request_key
from chit.receipts.intents import new_intent
from chit.receipts.states import ObservationSource
from chit.store import Store
from chit.vault import MemoryKeyStore, Vault, aad_for


@dataclass
class Ran:
    """A finished chit process."""

    code: int
    out: str
    err: str


def no_keyring_env(home: Path) -> dict[str, str]:
    """An environment with a private home and no usable OS key store."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHIT_", "DBUS_"))}
    env["CHIT_NO_DAEMON"] = os.environ.get("CHIT_NO_DAEMON", "")  # see tests/conftest.py
    env["CHIT_HOME"] = str(home)
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"
    return env


CLI_SAFETY_S = 180.0
"""Bound on one CLI process (or a wait over several): a safety net, never a timing.

At load 12 on two cores (a parallel run beside other engineers' suites) single ``chit call``
and ``chit tools`` processes outlasted 60 s; a hang still fails, after this bound.
"""


def _cpu_ticks(pid: int) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])  # utime + stime


def where_it_spins(pid: int) -> str:
    """Whether a hung process burns CPU or waits (its CPU time over one second), and
    ``py-spy dump`` of it when py-spy is installed: SIGUSR1's dump runs in Python, at
    a bytecode boundary of whatever loop the process is stuck in, and cannot say which.
    """
    import shutil
    import time

    before = _cpu_ticks(pid)
    time.sleep(1.0)  # a measurement window, not a wait for an event
    after = _cpu_ticks(pid)
    ticks = os.sysconf("SC_CLK_TCK")
    used = "?" if before is None or after is None else f"{(after - before) / ticks:.2f}"
    text = f"CPU over the last second: {used} s"
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if Path(spy).exists():
        try:
            dump = subprocess.run(
                [spy, "dump", "--pid", str(pid), "--locals"],
                capture_output=True,
                text=True,
                timeout=30,
            )
            text += f"\npy-spy dump:\n{(dump.stdout + dump.stderr)[-8000:]}"
        except (OSError, subprocess.SubprocessError) as exc:
            text += f" (py-spy failed: {exc})"
    return text


def run_chit(*args: str, env: dict[str, str], stdin: str | None = None) -> Ran:
    """Run ``python -m chit ARGS`` and capture its outcome (bounded by :data:`CLI_SAFETY_S`).

    A process that outlives the bound is looked at (:func:`where_it_spins`) and asked
    where it waits (``kill -USR1``: ``chit.stackdump``) before it is killed, and the
    test fails with both.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "chit", *args],
        env=env,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(stdin, timeout=CLI_SAFETY_S)
    except subprocess.TimeoutExpired:
        native = where_it_spins(proc.pid)
        proc.send_signal(signal.SIGUSR1)
        try:
            out, err = proc.communicate(timeout=10)  # the dump, or the end it was near
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        raise AssertionError(
            f"chit {' '.join(args)} did not end within {CLI_SAFETY_S:g} s; {native}\n"
            f"its stderr, with where it waited:\n{err[-12000:]}"
        ) from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return Ran(proc.returncode, out, err)


def _write_accepted(
    store: Store,
    vault: Vault,
    *,
    handle: str,
    now: datetime,
    server: str,
    tool: str,
    state: LifecycleState,
    arguments: dict[str, object],
    poll_interval_ms: int,
    ttl_ms: int | None,
) -> Receipt:
    intent: Intent = new_intent(
        server=server,
        tool=tool,
        args_digest=args_digest(arguments),
        request_key=new_request_key(now),
        now=now,
    )
    receipt_id = new_receipt_id(now)
    blob = vault.seal(handle, aad_for(receipt_id, server, ""))
    fp = vault.fingerprint(handle)
    created = StatusObserved(
        source=ObservationSource.CREATE,
        status=state,
        message="Starting",
        poll_interval_ms=poll_interval_ms,
        ttl_ms=ttl_ms,
    )
    tr = open_receipt(
        intent,
        receipt_id=receipt_id,
        protocol=TaskProtocol.EXTENSION,
        created=created,
        now=now,
        handle=HandleRef(fingerprint=fp, key_id=vault.kid.hex()),
    )
    store.intents.begin(intent)
    store.receipts.record_acceptance(intent, tr.receipt, tr.observation, blob, fp)
    return tr.receipt


def seed_receipt(
    home: Home,
    *,
    handle: str,
    now: datetime,
    server: str = "demo",
    tool: str = "slow_compute",
    state: LifecycleState = LifecycleState.WORKING,
) -> Receipt:
    """Write one accepted-task receipt with a sealed handle, as ``chit call`` would."""
    vault = Vault.unlock(MemoryKeyStore(), None)
    with Store.open(home.ensure()) as store:
        return _write_accepted(
            store,
            vault,
            handle=handle,
            now=now,
            server=server,
            tool=tool,
            state=state,
            arguments={"seconds": 5},
            poll_interval_ms=500,
            ttl_ms=60_000,
        )


def seed_many(home: Home, count: int, *, server: str = "demo") -> list[str]:
    """Write ``count`` working receipts (as ``seed_receipt``, 1 s polls) in one transaction."""
    from chit import clock
    from chit.store.db import immediate

    vault = Vault.unlock(MemoryKeyStore(), None)
    now = clock.now()
    with Store.open(home.ensure()) as store, immediate(store.db):
        return [
            _write_accepted(
                store,
                vault,
                handle=f"handle-{i:06d}-seeded",
                now=now,
                server=server,
                tool="slow_compute",
                state=LifecycleState.WORKING,
                arguments={"i": i},
                poll_interval_ms=1000,
                ttl_ms=None,
            ).receipt_id
            for i in range(count)
        ]
