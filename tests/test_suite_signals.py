"""The suite's own conditions: processes a test starts can be interrupted (conftest)."""

from __future__ import annotations

import signal
import subprocess
import sys

CHILD = (
    "import signal, sys\n"
    "sys.exit(signal.getsignal(signal.SIGINT) is not signal.default_int_handler)"
)


def test_a_started_process_takes_sigint_even_when_the_suite_was_started_ignoring_it() -> None:
    # A suite started as a background job inherits SIGINT ignored (conftest undoes it);
    # a child must get Python's handler, or every Ctrl-C test waits for nothing.
    assert subprocess.run([sys.executable, "-c", CHILD], check=False).returncode == 0


def test_the_ignore_the_suite_undoes_is_inherited_otherwise() -> None:
    """Shows what the first test guards against: an ignored SIGINT passes to a child."""

    def ignore() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    ran = subprocess.run([sys.executable, "-c", CHILD], preexec_fn=ignore, check=False)
    assert ran.returncode == 1
