"""``chit demo-server --store``: one-line errors when the store cannot be opened."""

from __future__ import annotations

from pathlib import Path

import pytest

from chit.tasks.server.backend import StoreUnavailable, open_task_store
from chit.tasks.server.pgstore import INSTALL_HINT
from tests.cli_support import no_keyring_env, run_chit
from tests.proc_support import free_port


def test_unreachable_postgres_is_one_line_exit_5(tmp_path: Path) -> None:
    pytest.importorskip("psycopg", reason="psycopg is not installed")
    url = f"postgresql://chit:pw@127.0.0.1:{free_port()}/tasks"
    ran = run_chit("demo-server", "--store", url, env=no_keyring_env(tmp_path))
    assert ran.code == 5, ran
    lines = ran.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("chit: cannot open the task store: "), ran.err
    assert "pw" not in lines[0].replace("chit:", "")
    assert "Traceback" not in ran.err


def test_without_psycopg_the_hint_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "block"
    (blocker / "psycopg").mkdir(parents=True)
    (blocker / "psycopg" / "__init__.py").write_text("raise ImportError('no psycopg here')\n")
    env = no_keyring_env(tmp_path)
    env["PYTHONPATH"] = str(blocker)
    ran = run_chit("demo-server", "--store", "postgresql://x@127.0.0.1/db", env=env)
    assert ran.code == 5 and INSTALL_HINT in ran.err and len(ran.err.strip().splitlines()) == 1
    monkeypatch.setitem(__import__("sys").modules, "psycopg", None)
    with pytest.raises(StoreUnavailable, match="chit\\[postgres\\]"):
        open_task_store("postgresql://x@127.0.0.1/db")


def test_store_and_db_together_is_a_usage_error(tmp_path: Path) -> None:
    ran = run_chit("demo-server", "--store", "a.db", "--db", "b.db", env=no_keyring_env(tmp_path))
    assert ran.code == 2 and "not both" in ran.err


def test_config_key_selects_store_and_doctor_reports_it(tmp_path: Path, pg_url: str) -> None:
    import json

    from chit.tasks.server.pgstore import redact

    url = pg_url.replace("postgres@", "postgres:hidden@", 1)
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[store]\ntasks = "{url}"\n')
    env = no_keyring_env(home)
    before = json.loads(run_chit("doctor", "--json", env=env).out)["stores"]["tasks"]
    assert before["kind"] == "postgresql" and before["ok"] and before["schema"] == {}
    assert before["location"] == redact(url) and "hidden" not in before["location"]
    open_task_store(url).close()  # what `chit demo-server` (no --store) opens from config
    after = json.loads(run_chit("doctor", "--json", env=env).out)["stores"]["tasks"]
    assert after["schema"] == {"tasks": 1}
    text = run_chit("doctor", env=env).out
    assert "tasks schema 1" in text and "hidden" not in text
    (home / "config.toml").write_text(
        f'[store]\ntasks = "postgresql://u@127.0.0.1:{free_port()}/x"\n'
    )
    ran = run_chit("demo-server", env=env)
    assert ran.code == 5 and "cannot open the task store" in ran.err
    down = json.loads(run_chit("doctor", "--json", env=env).out)["stores"]["tasks"]
    assert not down["ok"] and "refused" in down["error"].lower()
