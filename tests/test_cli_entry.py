"""The click-free entry (``chit.cli.entry``) answers exactly as click does.

``chit receipts`` and ``chit show`` run without click when their command line is plain
(issue 9: a cold read ≤ 0.1 s). Each command line here runs both ways, in process on the
same home at the same (frozen) time: through click (``chit.cli.main.cli``) and through
the entry. Where the entry takes it, the exit code, stdout and stderr must be the same
bytes; where it does not, click has it — so every line, good or bad, ends as it did
before the entry existed (bad input: one line, no traceback). The cases say which lines
the entry must take, so a parser that took nothing would fail here too.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from chit import clock
from chit.cli.entry import plain_command, run
from chit.cli.main import cli
from chit.home import Home
from chit.receipts import LifecycleState
from chit.store import Store
from tests.store_support import T0, make_obs, make_receipt

NOW = T0 + timedelta(minutes=7, seconds=3)

#: What the environment holds besides the home: nothing chit reads (the cases add some).
QUIET_ENV: dict[str, str | None] = {
    "CHIT_READONLY": None,
    "CHIT_NO_DAEMON": None,
    "CHIT_DEBUG": None,
    "_CHIT_COMPLETE": None,
    "CHIT_KEY_STORE": "memory",
}

Outcome = tuple[int, str, str]


@pytest.fixture(scope="module")
def homes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """An empty home (not even created), a home with receipts, and a plain file."""
    base = tmp_path_factory.mktemp("entry")
    full = Home(base / "full")
    with Store.open(full) as store:
        rows = [
            ("01RECEIPT1", LifecycleState.COMPLETED, "demo", None, "greet"),
            ("01RECEIPT2", LifecycleState.WORKING, "demo", "w-1", "slow"),
            ("01RECEIPT3", LifecycleState.FAILED, "other", "w-1", "t\x1b[31m\u202e"),
        ]
        for number, (rid, state, server, work, tool) in enumerate(rows):
            at = T0 + timedelta(seconds=number * 40)
            receipt = make_receipt(rid, state=state, server=server, work_ref=work, status_at=at)
            receipt = receipt.model_copy(update={"tool": tool})
            blob, first = b"\x01" + bytes(40), [make_obs(rid, status=state, at=at)]
            store.receipts.insert(receipt, blob, "fp0123456789", first)
    (base / "afile").write_text("not a directory")
    return {"empty": base / "empty", "full": full.root, "file": base / "afile"}


def _fill(argv: list[str], homes: dict[str, Path]) -> list[str]:
    full, file = str(homes["full"]), str(homes["file"])
    return [a.replace("{home}", full).replace("{file}", file) for a in argv]


def via_click(argv: list[str], env: dict[str, str | None]) -> Outcome:
    result = CliRunner().invoke(cli, argv, env=env, prog_name="chit")
    return result.exit_code, result.stdout, result.stderr


def via_entry(argv: list[str], env: dict[str, str | None]) -> Outcome | None:
    """The entry's answer, or None when it leaves the line to click."""
    with CliRunner().isolation(env=env) as (out, err, _):
        plain = plain_command(argv)
        if plain is None:
            return None
        try:
            run(*plain)
        except SystemExit as exc:
            code = exc.code
    assert isinstance(code, int)
    return code, out.getvalue().decode(), err.getvalue().decode()


def both(argv: list[str], env: dict[str, str | None]) -> tuple[Outcome, Outcome | None]:
    with clock.frozen(NOW):
        return via_click(argv, env), via_entry(argv, env)


# (argv, extra environment, taken by the entry). "{home}" is the home with receipts,
# "{file}" a plain file; otherwise the home is $CHIT_HOME (the test's parameter).
CASES: list[tuple[list[str], dict[str, str], bool]] = [
    (["receipts"], {}, True),
    (["receipts", "--json"], {}, True),
    (["receipts", "--jsonl"], {}, True),
    (["receipts", "--json", "--jsonl"], {}, True),  # the command's own usage error
    (["receipts", "--limit", "1", "--json"], {}, True),
    (["receipts", "--limit=1", "--all", "--jsonl"], {}, True),
    (["receipts", "--limit", "5", "--limit", "0002"], {}, True),
    (["receipts", "--state", "completed", "--state", "working"], {}, True),
    (["receipts", "--state=failed", "--json"], {}, True),
    (["receipts", "--server", "demo", "--json"], {}, True),
    (["receipts", "--server", "nosuch"], {}, True),
    (["receipts", "--work", "w-1", "--jsonl", "--json"], {}, True),
    (["receipts", "--json", "--json"], {}, True),
    (["--home", "{home}", "receipts", "--json"], {}, True),
    (["--home={home}", "receipts"], {}, True),
    (["--readonly", "--no-daemon", "receipts", "--json"], {}, True),
    (["receipts", "--json"], {"CHIT_NO_DAEMON": "1", "CHIT_READONLY": "False"}, True),
    (["show", "01RECEIPT1"], {}, True),
    (["show", "01RECEIPT3", "--json"], {}, True),
    (["show", "--json", "01RECEIPT2"], {}, True),
    (["show", "01RECEIPT"], {}, True),  # ambiguous where there are receipts
    (["show", "nosuch"], {}, True),
    (["show", "-"], {}, True),
    (["--home", "{home}", "show", "01RECEIPT2"], {}, True),
    # Click's: bad values, unknown or misspelt options, help, odd spellings.
    (["receipts", "--limit", "0"], {}, False),
    (["receipts", "--limit", "1001"], {}, False),
    (["receipts", "--limit", "x"], {}, False),
    (["receipts", "--limit", "+5"], {}, False),
    (["receipts", "--limit", "\u0663"], {}, False),  # click reads an Arabic-Indic 3
    (["receipts", "--limit"], {}, False),
    (["receipts", "--limit="], {}, False),
    (["receipts", "--server=", "--work", ""], {}, True),
    (["receipts", "--state", "bogus"], {}, False),
    (["receipts", "--state", "COMPLETED"], {}, False),
    (["receipts", "--bogus"], {}, False),
    (["receipts", "--jso"], {}, False),
    (["receipts", "--json=yes"], {}, False),
    (["receipts", "extra"], {}, False),
    (["receipts", "--help"], {}, False),
    (["receipts", "-h"], {}, False),
    (["receipts", "--", "--json"], {}, False),
    (["receipts", "--server", "--json"], {}, False),
    (["receipts", "--server=\udcff"], {}, False),
    (["recepts"], {}, False),
    (["--bogus", "receipts"], {}, False),
    (["--version"], {}, False),
    (["--home", "{file}", "receipts"], {}, False),
    (["--home", "", "receipts"], {}, False),
    (["--home"], {}, False),
    (["show"], {}, False),
    (["show", "a", "b"], {}, False),
    (["show", "--json=1", "x"], {}, False),
    (["show", "\udcff"], {}, False),
    (["receipts"], {"CHIT_READONLY": "maybe"}, False),
    (["receipts"], {"CHIT_NO_DAEMON": "yes"}, False),
    (["receipts"], {"CHIT_HOME": "{file}"}, False),
    (["receipts"], {"_CHIT_COMPLETE": "bash_source"}, False),
]


@pytest.mark.parametrize("home", ["empty", "full"])
@pytest.mark.parametrize(("argv", "extra", "plain"), CASES, ids=[repr(c[0]) for c in CASES])
def test_the_entry_answers_as_click_does(
    homes: dict[str, Path], home: str, argv: list[str], extra: dict[str, str], plain: bool
) -> None:
    env = {**QUIET_ENV, "CHIT_HOME": str(homes[home])}
    env.update({k: v.replace("{file}", str(homes["file"])) for k, v in extra.items()})
    argv = _fill(argv, homes)
    clicked, entered = both(argv, env)
    assert (entered is not None) == plain
    if entered is not None:
        assert entered == clicked
    code, out, err = clicked
    assert "Traceback" not in out + err and code != 1, err  # exit 1 is a bug
    if code != 0:
        assert len(err.splitlines()) == 1, err
    assert not homes["empty"].exists()  # reading created nothing


def test_the_cases_cover_output_and_errors(homes: dict[str, Path]) -> None:
    """The comparison above is not between two empty answers."""
    env = {**QUIET_ENV, "CHIT_HOME": str(homes["full"])}
    code, out, _ = both(["receipts", "--state", "failed"], env)[0]
    assert code == 0 and "01RECEIPT3" in out and "\\x1b" in out and "01RECEIPT1" not in out
    code, _, err = both(["show", "01RECEIPT"], env)[0]
    assert code == 2 and err.count("\n") == 1
    code, _, err = both(["receipts", "--limit", "0"], env)[0]
    assert code == 2 and "--limit" in err and err.count("\n") == 1


_text = st.text(st.characters(blacklist_characters="\x00"), max_size=8)
_WORDS = ["01RECEIPT", "01RECEIPT2", "demo", "w-1", "{home}", "{file}", "x\n", "\x1b[31m", ""]
_word = st.one_of(st.sampled_from(_WORDS), _text)
#: Each option with values near its edges (and any word).
_VALUES = {
    "--limit": st.one_of(
        st.sampled_from(["0", "1", "7", "0050", "1000", "1001", "-1", "+5", " 3", "\u0663"]),
        st.integers(-2, 1003).map(str),
    ),
    "--state": st.sampled_from(["completed", "working", "failed", "COMPLETED", "bogus", "-"]),
    "--server": _word,
    "--work": _word,
}
_pair = st.sampled_from(sorted(_VALUES)).flatmap(
    lambda name: st.tuples(st.just(name), _VALUES[name])
)
_option = st.one_of(
    _pair.map(list),  # --name value
    _pair.map(lambda p: [f"{p[0]}={p[1]}"]),  # --name=value
    st.sampled_from(["--json", "--jsonl", "--all"]).map(lambda f: [f]),
)
_stray = st.one_of(
    st.sampled_from(["--", "-", "--help", "--jso", "--json=1", "--readonly", "--limit"]), _word
).map(lambda t: [t])


@st.composite
def lines(draw: st.DrawFn) -> list[str]:
    """``chit [its options] receipts|show …``: mostly plain lines, now and then a stray."""
    chit_options = draw(
        st.lists(
            st.sampled_from([["--readonly"], ["--no-daemon"], ["--home", "{home}"]]), max_size=2
        )
    )
    command = draw(st.sampled_from(["receipts", "show"]))
    if command == "receipts":
        items = draw(st.lists(_option, max_size=4))
    else:  # one argument, perhaps --json (before or after it)
        items = [[draw(_word)], *draw(st.lists(st.just(["--json"]), max_size=2))]
        items = draw(st.permutations(items))
    if draw(st.integers(0, 4)) == 0:
        items.insert(draw(st.integers(0, len(items))), draw(_stray))
    return [*(t for o in chit_options for t in o), command, *(t for i in items for t in i)]


@pytest.mark.timeout(600)
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(argv=lines(), home=st.sampled_from(["empty", "full"]))
def test_any_line_the_entry_takes_ends_as_in_click(
    homes: dict[str, Path], argv: list[str], home: str
) -> None:
    env = {**QUIET_ENV, "CHIT_HOME": str(homes[home])}
    argv = _fill(argv, homes)
    clicked, entered = both(argv, env)
    event("taken by the entry" if entered is not None else "left to click")
    if entered is not None:
        assert entered == clicked, argv


def test_the_parameters_click_reads_are_the_declared_ones() -> None:
    """click's options for the plain commands are built from chit.cli.params."""
    import click

    from chit.cli.params import GLOBAL
    from chit.cli.reads import RECEIPTS, SHOW

    ctx = click.Context(cli)
    for command, declared in (
        (cli, GLOBAL),
        (cli.get_command(ctx, "receipts"), RECEIPTS),
        (cli.get_command(ctx, "show"), SHOW),
    ):
        assert command is not None
        params = [p for p in command.params if p.name != "version"]
        assert [p.name for p in params] == [d.dest for d in declared]
        for param, decl in zip(params, declared, strict=True):
            if isinstance(param, click.Option):
                assert param.opts == [decl.name]
                assert param.envvar == decl.envvar and param.multiple == decl.multiple
