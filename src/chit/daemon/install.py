"""Keeping the daemon running across logins: a systemd user unit or a launchd agent.

``chit daemon install`` writes the file and prints what it wrote and the command that
enables it; it never runs that command (a service manager is the user's to change).
The unit runs ``chit daemon`` in the foreground for one home, with the settings the
daemon needs from the environment it was installed from (home, key store choice).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from chit.home import Home, resolve_home

CARRIED = (
    "CHIT_KEY_STORE",
    "CHIT_KEYRING_SERVICE",
    "CHIT_TRUSTED_KEYRING_BACKENDS",
    "CHIT_TASK_MODE",
    "CHIT_NOTIFICATIONS",
    "CHIT_READ_TIMEOUT",
    "CHIT_STDIO_IDLE_S",
    "CHIT_SIDECAR_EXECUTOR",
    "CHIT_DAEMON_LOG_LEVEL",
)
"""Settings copied into the unit when set (secrets such as passphrases never are)."""


@dataclass(frozen=True)
class Installed:
    """What ``install`` wrote and how to turn it on."""

    path: Path
    content: str
    enable: str
    kind: str


def unit_name(home: Home) -> str:
    """``chit`` for the default home, ``chit-<hash>`` for any other (several may coexist)."""
    default = resolve_home(None) if "CHIT_HOME" not in os.environ else None
    if default is not None and default.root == home.root:
        return "chit"
    return "chit-" + hashlib.sha256(str(home.root).encode()).hexdigest()[:8]


def _command(home: Home) -> list[str]:
    return [sys.executable, "-m", "chit", "--home", str(home.root), "daemon"]


def _settings(home: Home) -> dict[str, str]:
    env = {k: os.environ[k] for k in CARRIED if os.environ.get(k)}
    env["CHIT_HOME"] = str(home.root)
    return env


def systemd_unit(home: Home, user_home: Path) -> Installed:
    """The systemd user unit for ``home`` (under ``~/.config/systemd/user``)."""
    name = unit_name(home)
    lines = [
        "[Unit]",
        f"Description=chit daemon for {home.root}",
        "",
        "[Service]",
        "Type=simple",
        f"ExecStart={shlex.join(_command(home))}",
        *(f'Environment="{k}={v}"' for k, v in sorted(_settings(home).items())),
        "Restart=on-failure",
        "RestartSec=5",
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ]
    path = user_home / ".config" / "systemd" / "user" / f"{name}.service"
    enable = f"systemctl --user daemon-reload && systemctl --user enable --now {name}.service"
    return Installed(path, "\n".join(lines), enable, "systemd user unit")


def launchd_agent(home: Home, user_home: Path) -> Installed:
    """The launchd agent for ``home`` (under ``~/Library/LaunchAgents``)."""
    label = "dev.chit." + unit_name(home)
    args = "\n".join(f"    <string>{escape(a)}</string>" for a in _command(home))
    env = "\n".join(
        f"    <key>{escape(k)}</key><string>{escape(v)}</string>"
        for k, v in sorted(_settings(home).items())
    )
    log = escape(str(home.root / "logs" / "daemon.log"))
    content = f"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
  <key>Label</key><string>{label}</string>
  <key>ProgramArguments</key>
  <array>
{args}
  </array>
  <key>EnvironmentVariables</key>
  <dict>
{env}
  </dict>
  <key>RunAtLoad</key><true/>
  <key>KeepAlive</key><dict><key>SuccessfulExit</key><false/></dict>
  <key>StandardOutPath</key><string>{log}</string>
  <key>StandardErrorPath</key><string>{log}</string>
</dict>
</plist>
"""
    path = user_home / "Library" / "LaunchAgents" / f"{label}.plist"
    enable = f"launchctl bootstrap gui/{os.getuid()} {shlex.quote(str(path))}"
    return Installed(path, content, enable, "launchd agent")


def install(home: Home, *, platform: str | None = None, user_home: Path | None = None) -> Installed:
    """Write the service file for this platform (``linux`` → systemd, ``darwin`` → launchd).

    Raises:
        ChitError: the platform has neither.
    """
    from chit.errors import UsageError

    which = platform or sys.platform
    base = user_home or Path.home()
    if which.startswith("linux"):
        made = systemd_unit(home, base)
    elif which == "darwin":
        made = launchd_agent(home, base)
    else:
        raise UsageError(f"no service manager chit knows on {which} (systemd or launchd)")
    made.path.parent.mkdir(parents=True, exist_ok=True)
    tmp = made.path.with_name(made.path.name + ".tmp")
    tmp.write_text(made.content, encoding="utf-8")
    os.replace(tmp, made.path)
    return made
