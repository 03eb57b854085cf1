"""The ``chit`` entry point: plain read commands without click, everything else with it.

Importing click costs more than the rest of a cold ``chit receipts --json`` on an empty
home (issue 9: ≤ 0.1 s). So ``chit receipts`` and ``chit show`` run without it when their
command line is *plain*: chit's own options and the command's, each spelled in full
(``--limit 5`` or ``--limit=5``), with values click would accept as they are. Anything
else — ``--help``, ``--version``, an unknown or misspelt option, a value click would
refuse or convert, a missing or extra argument, bytes that are not UTF-8, shell
completion — goes to click (``chit.cli.main``), which handles and reports it as always.

Both paths declare their parameters once (``chit.cli.params``), run the same function
(``chit.cli.reads``), write through the same ``echo`` and end a failure through the same
``exit_for`` (``chit.cli.terminal``): for a command line the entry takes, stdout, stderr
and the exit code are click's to the byte (tests/test_cli_entry.py runs both on the same
command lines).
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Sequence
from typing import Any

from chit.cli.params import GLOBAL, Param
from chit.inputs import first_surrogate

#: Values of a flag's environment variable that click reads as a boolean (a subset of
#: its ``BoolParamType``: anything else goes to click, which accepts or refuses it).
_BOOLEAN = frozenset({"1", "0", "true", "false"})


def main() -> None:
    """Entry point of the ``chit`` console script and of ``python -m chit``."""
    plain = plain_command(sys.argv[1:])
    if plain is not None:
        run(*plain)
    from chit.cli.main import main as click_main

    click_main()


def plain_command(
    argv: Sequence[str],
) -> tuple[Callable[..., None], str | None, dict[str, Any]] | None:
    """What to run for a plain command line: the function, the home and its arguments.

    Returns:
        None when the command line is not plain (click has it).
    """
    if os.environ.get("_CHIT_COMPLETE"):  # click's shell completion
        return None
    if any(first_surrogate(arg) is not None for arg in argv):  # click names the argument
        return None
    for declared in GLOBAL:
        value = os.environ.get(declared.envvar or "") if declared.kind == "flag" else None
        if value and value.strip().lower() not in _BOOLEAN:
            return None
    by_name = {p.name: p for p in GLOBAL}
    split = 0  # chit's own options come first, then the command (click's group rule)
    while split < len(argv) and argv[split].startswith("-") and argv[split] != "-":
        name, eq, _ = argv[split].partition("=")
        param = by_name.get(name)
        if param is None:  # --help, --version, anything click has to read
            return None
        split += 2 if param.takes_value and not eq else 1
    if split >= len(argv):  # no command: the TUI
        return None
    chit_options = parse(GLOBAL, argv[:split])
    if chit_options is None or argv[split] not in PLAIN_COMMANDS:
        return None
    params, function = _command(argv[split])
    options = parse(params, argv[split + 1 :])
    if options is None:
        return None
    home = chit_options["home"]
    if home is None:
        home = os.environ.get("CHIT_HOME") or None
        if home is not None and not _directory_ok(home):
            return None
    return function, home, options


def run(function: Callable[..., None], home: str | None, options: dict[str, Any]) -> None:
    """Run a plain command and exit: 0, or as ``chit.cli.terminal.exit_for`` ends it."""
    try:
        function(home, **options)
    except (KeyboardInterrupt, Exception) as exc:
        from chit.cli.terminal import exit_for

        exit_for(exc)
    sys.exit(0)


#: The commands the entry runs without click (their modules load only when named).
PLAIN_COMMANDS = ("receipts", "show")


def _command(name: str) -> tuple[Sequence[Param], Callable[..., None]]:
    """The parameters and the function of plain command ``name``."""
    from chit.cli import reads

    if name == "receipts":
        return reads.RECEIPTS, reads.list_receipts
    return reads.SHOW, reads.show_receipt


def parse(params: Sequence[Param], tokens: Sequence[str]) -> dict[str, Any] | None:
    """The values of ``params`` in ``tokens``, or None unless the tokens are plain.

    Plain: options spelled in full (``--name value`` or ``--name=value``, a flag alone), no
    ``--``, a value that does not start with ``-``, exactly the positional arguments
    declared. A repeated option's last value counts, as in click.
    """
    options = {p.name: p for p in params if p.is_option}
    arguments = [p for p in params if not p.is_option]
    values: dict[str, Any] = {p.dest: p.initial() for p in params}
    given: list[str] = []
    rest = list(tokens)
    while rest:
        token = rest.pop(0)
        if not token.startswith("-") or token == "-":
            given.append(token)
            continue
        name, eq, value = token.partition("=")
        param = options.get(name)
        if param is None:
            return None
        if param.kind == "flag":
            if eq:  # click: "option does not take a value"
                return None
            values[param.dest] = True
            continue
        if not eq:
            if not rest:
                return None
            value = rest.pop(0)
        converted = _convert(param, value)
        if converted is None:
            return None
        values[param.dest] = (*values[param.dest], converted) if param.multiple else converted
    if len(given) != len(arguments):
        return None
    for param, value in zip(arguments, given, strict=True):
        values[param.dest] = value
    return values


def _convert(param: Param, value: str) -> Any:
    """``value`` as click converts it for ``param``; None where the entry leaves it to click."""
    if value.startswith("-"):
        return None
    if param.kind == "choice":
        return value if value in param.choices() else None
    if param.kind == "int":
        low, high = param.bounds
        if not (value.isascii() and value.isdigit() and low <= int(value) <= high):
            return None
        return int(value)
    if param.kind == "dir":  # "" would be the working directory: click's to resolve
        return value if value and _directory_ok(value) else None
    return value


def _directory_ok(path: str) -> bool:
    """True when click's ``Path(file_okay=False)`` takes ``path`` as it is.

    A path that does not exist, or a readable directory; click refuses a file and an
    unreadable directory (and the entry leaves anything else, a device or a socket, to it).
    """
    try:
        st = os.stat(path)
    except OSError:
        return True
    return stat.S_ISDIR(st.st_mode) and os.access(path, os.R_OK)
