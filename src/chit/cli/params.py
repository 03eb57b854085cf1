"""Parameters declared once, for click and for the click-free entry (``chit.cli.entry``).

``chit receipts`` and ``chit show`` (and chit's own options before a command) run
without click when their command line is plain (issue 9: a cold read ≤ 0.1 s). Their
parameters are declared here as plain data: click builds its options from them
(:func:`click_params`), and the entry parses with the same declarations, so the two
cannot drift apart. Importing this module imports no click.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: The kinds of parameter: a positional argument, a flag, and options taking a value —
#: any text, one of ``choices``, an integer within ``bounds``, a directory path.
KINDS = ("argument", "flag", "text", "choice", "int", "dir")


class Param:
    """One argument or option of a command, as click and the entry both read it.

    Args:
        name: ``--name`` for an option, the argument's name for an argument.
        dest: The keyword the command receives (default: derived from ``name``).
        kind: One of :data:`KINDS`.
        help: The option's help text.
        default: The value when it is not given (flags: False; ``multiple``: ``()``).
        show_default: Show the default in ``--help``.
        envvar: An environment variable read when the option is not given.
        choices: A function returning the values of a ``choice``, called when they are
            needed (a command line without the option never imports what they come from).
        bounds: ``(low, high)`` of an ``int``, both included.
        multiple: The option may repeat; the command receives a tuple.
    """

    __slots__ = (
        "bounds",
        "choices",
        "default",
        "dest",
        "envvar",
        "help",
        "kind",
        "multiple",
        "name",
        "show_default",
    )

    def __init__(
        self,
        name: str,
        dest: str | None = None,
        *,
        kind: str = "text",
        help: str | None = None,
        default: Any = None,
        show_default: bool = False,
        envvar: str | None = None,
        choices: Callable[[], Sequence[str]] = tuple,
        bounds: tuple[int, int] = (0, 0),
        multiple: bool = False,
    ) -> None:
        assert kind in KINDS, kind
        self.name = name
        self.dest = dest or name.lstrip("-").replace("-", "_")
        self.kind = kind
        self.help = help
        self.default = default
        self.show_default = show_default
        self.envvar = envvar
        self.choices = choices
        self.bounds = bounds
        self.multiple = multiple

    @property
    def is_option(self) -> bool:
        """True for an option, False for a positional argument."""
        return self.kind != "argument"

    @property
    def takes_value(self) -> bool:
        """True for an option followed by a value."""
        return self.kind not in ("argument", "flag")

    def initial(self) -> Any:
        """The value the command receives when the option is not given."""
        if self.multiple:
            return ()
        return False if self.kind == "flag" else self.default


def click_params(params: Sequence[Param]) -> Callable[[F], F]:
    """A decorator adding ``params`` to a click command, in the order given.

    The same as writing one ``@click.option``/``@click.argument`` per parameter above the
    function; only what a declaration sets is passed, so click's own defaults hold.
    """
    import click

    def decorate(function: F) -> F:
        # click collects decorators bottom-up: add the last one first.
        for param in reversed(params):
            if param.kind == "argument":
                function = click.argument(param.dest)(function)
                continue
            kwargs: dict[str, Any] = {}
            if param.kind == "flag":
                kwargs["is_flag"] = True
            elif param.kind == "choice":
                kwargs["type"] = click.Choice(list(param.choices()))
            elif param.kind == "int":
                kwargs["type"] = click.IntRange(*param.bounds)
            elif param.kind == "dir":
                kwargs["type"] = click.Path(file_okay=False)
            for key in ("default", "envvar", "help"):
                if getattr(param, key) is not None:
                    kwargs[key] = getattr(param, key)
            if param.show_default:
                kwargs["show_default"] = True
            if param.multiple:
                kwargs["multiple"] = True
            function = click.option(param.name, param.dest, **kwargs)(function)
        return function

    return decorate


#: chit's own options, given before the command (``chit --home DIR receipts``).
GLOBAL = (
    Param(
        "--home",
        kind="dir",
        envvar="CHIT_HOME",
        help="chit's home directory (default: $CHIT_HOME, else the user data dir).",
    ),
    Param(
        "--readonly",
        kind="flag",
        envvar="CHIT_READONLY",
        help="With no command: open the TUI to look only (no answer, cancel, accept or call).",
    ),
    Param(
        "--no-daemon",
        kind="flag",
        envvar="CHIT_NO_DAEMON",
        help=(
            "Run the engine in this process instead of asking the home's daemon (scripts, tests)."
        ),
    ),
)
