"""The registered form of one MCP server: ``ServerSpec``.

A spec is what ``config.toml`` holds, so secret values inside it are already sealed
(``sealed:v1:<base64>``); :mod:`chit.servers.resolve` turns a spec into the plaintext
connection parameters only at the moment a connection is made.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from chit import inputs

Transport = Literal["stdio", "http"]
"""The transports chit connects with (SSE is deprecated by MCP and not supported)."""

SEALED_PREFIX = "sealed:v1:"
"""Marks a value sealed with the vault; the rest is the base64 of the vault blob."""

_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""An HTTP header name: an RFC 9110 token (no ``:``, spaces or control characters)."""

# Name fragments that mark an environment variable as secret. Matching is on the
# upper-cased name split into ``_``/``-``/``.`` separated words *and* on substrings for
# the long fragments, so ``GITHUB_PERSONAL_ACCESS_TOKEN`` and ``OPENAIKEY`` both match.
# False positives only cost a fingerprint instead of a value in listings.
_SECRET_SUBSTRINGS = (
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "PRIVATE",
    "COOKIE",
    "AUTH",
    "KEY",
)
_SECRET_WORDS = frozenset({"PAT", "PASS", "PWD", "SESSION", "SIG", "SIGNATURE", "DSN"})
# A URL with a password in its userinfo (postgres://user:pw@host) is a secret whatever
# the variable is called.
_URL_WITH_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*:[^/@\s]+@")


def is_secret_env(name: str, value: str = "") -> bool:
    """Return True when an environment variable must be sealed.

    Args:
        name: The variable name (``GITHUB_TOKEN``).
        value: Its value; a URL carrying a password is secret whatever the name.
    """
    upper = name.upper()
    if any(fragment in upper for fragment in _SECRET_SUBSTRINGS):
        return True
    if any(word in _SECRET_WORDS for word in re.split(r"[_.\-]+", upper)):
        return True
    return bool(_URL_WITH_PASSWORD.match(value))


def is_sealed(value: str) -> bool:
    """Return True when ``value`` is a sealed secret (``sealed:v1:...``)."""
    return value.startswith(SEALED_PREFIX)


def valid_name(name: str) -> bool:
    """Return True when ``name`` is an acceptable server name (see ``chit.inputs``)."""
    return inputs.valid_name(name)


def _control(text: str, allowed: str = "") -> str | None:
    """The first control character of ``text`` (other than ``allowed``), or None."""
    for ch in text:
        if (ord(ch) < 0x20 or ord(ch) == 0x7F) and ch not in allowed:
            return ch
    return None


def header_problem(name: str, value: str | None = None) -> str | None:
    """Why ``name: value`` cannot be sent as an HTTP header, or None when it can.

    A CR or LF in a value would end the header early (header injection); a ``:`` or a
    space in a name cannot be sent at all. Both used to be accepted by ``servers add``
    and fail only at connect time as "unexpected failure: ExceptionGroup".
    """
    if not _HEADER_NAME.fullmatch(name):
        return (
            f"invalid header name {name!r}: use letters, digits and !#$%&'*+.^_`|~- "
            "(no ':', spaces or control characters)"
        )
    if value is not None:
        bad = _control(value, allowed="\t") or inputs.first_surrogate(value)
        if bad is not None:
            return f"the value of header {name!r} contains {bad!r}, which cannot be sent"
    return None


def env_problem(name: str, value: str | None = None) -> str | None:
    """Why ``name=value`` cannot be put in a process environment, or None when it can."""
    if not name or "=" in name or "\0" in name or inputs.first_surrogate(name) is not None:
        return f"invalid environment variable name {name!r}"
    if value is not None and ("\0" in value or inputs.first_surrogate(value) is not None):
        return f"the value of environment variable {name!r} contains a NUL or invalid text"
    return None


class ServerSpec(BaseModel):
    """One registered MCP server, as stored in ``config.toml``.

    Attributes:
        name: The registry key; letters, digits, ``_ . -``; at most 64 characters.
        transport: ``stdio`` (a local command) or ``http`` (streamable HTTP).
        command: stdio only - the program to run.
        args: stdio only - its arguments.
        env: stdio only - extra environment; secret-looking values are sealed.
        cwd: stdio only - the working directory, if not chit's.
        url: http only - the MCP endpoint.
        headers: http only - extra request headers; every value is sealed.
        fingerprints: ``"env.NAME"`` / ``"headers.NAME"`` → fingerprint of the sealed
            plaintext, so listings identify a secret without the data key.
        prompts: ``chit proxy`` only - who is asked when the server needs input for a
            host's call: ``host`` (the host when it can answer, and only it while it
            waits; else chit's inbox), ``chit`` (chit's inbox only), ``both`` (both;
            the first answer wins).
        host_cancel: ``chit proxy`` only - what a host's cancel of a call that became
            a task does: ``confirm`` (nothing until a person cancels it in chit) or
            ``cancel`` (cancel the task).
        declare: client capabilities chit's session of the server declares beyond
            elicitation: ``sampling``, ``roots`` (default none). Their requests then
            go to a host that declared them, or wait in chit's inbox (``chit proxy``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    fingerprints: dict[str, str] = Field(default_factory=dict)
    prompts: Literal["host", "chit", "both"] = "host"
    host_cancel: Literal["confirm", "cancel"] = "confirm"
    declare: tuple[Literal["sampling", "roots"], ...] = ()

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not valid_name(value):
            raise ValueError(f"invalid server name {value!r}: {inputs.NAME_RULE}")
        return value

    @field_validator("headers")
    @classmethod
    def _check_headers(cls, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            # A sealed value is checked before sealing and again once opened.
            problem = header_problem(key, None if is_sealed(text) else text)
            if problem:
                raise ValueError(problem)
        return value

    @field_validator("env")
    @classmethod
    def _check_env(cls, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            problem = env_problem(key, None if is_sealed(text) else text)
            if problem:
                raise ValueError(problem)
        return value

    @field_validator("command", "cwd")
    @classmethod
    def _check_plain(cls, value: str | None) -> str | None:
        if value is not None and ("\0" in value or inputs.first_surrogate(value) is not None):
            raise ValueError(f"{value!r} contains a NUL or invalid text")
        return value

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None and (_control(value) or inputs.first_surrogate(value)):
            raise ValueError(f"url {value!r} contains a control character or invalid text")
        return value

    @field_validator("args")
    @classmethod
    def _check_args(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for arg in value:
            if "\0" in arg or inputs.first_surrogate(arg) is not None:
                raise ValueError(f"argument {arg!r} contains a NUL or invalid text")
        return value

    @model_validator(mode="after")
    def _check_transport(self) -> ServerSpec:
        if self.transport == "stdio":
            if not self.command:
                raise ValueError(f"server {self.name!r}: a stdio server needs a command")
            if self.url is not None or self.headers:
                raise ValueError(f"server {self.name!r}: url/headers apply to http servers only")
        else:
            if not self.url:
                raise ValueError(f"server {self.name!r}: an http server needs a url")
            if not self.url.startswith(("http://", "https://")):
                raise ValueError(f"server {self.name!r}: url must start with http:// or https://")
            if self.command is not None or self.args or self.env or self.cwd is not None:
                raise ValueError(
                    f"server {self.name!r}: command/args/env/cwd apply to stdio servers only"
                )
        return self

    @property
    def target(self) -> str:
        """A one-line description of where the server is: the command line or the URL."""
        if self.transport == "http":
            return self.url or ""
        import shlex

        return shlex.join([self.command or "", *self.args])

    def secret_fields(self) -> list[tuple[str, str, str]]:
        """Return ``(field, key, value)`` for every sealed value in ``env`` and ``headers``."""
        out = [("env", k, v) for k, v in self.env.items() if is_sealed(v)]
        out += [("headers", k, v) for k, v in self.headers.items() if is_sealed(v)]
        return out

    def public_view(self) -> dict[str, Any]:
        """Return a JSON-ready view with each sealed value replaced by its fingerprint."""

        def show(field: str, values: dict[str, str]) -> dict[str, Any]:
            return {
                k: (
                    {"sealed": True, "fingerprint": self.fingerprints.get(f"{field}.{k}")}
                    if is_sealed(v)
                    else v
                )
                for k, v in values.items()
            }

        view: dict[str, Any] = {"name": self.name, "transport": self.transport}
        if self.transport == "stdio":
            view |= {
                "command": self.command,
                "args": list(self.args),
                "env": show("env", self.env),
                "cwd": self.cwd,
            }
        else:
            view |= {"url": self.url, "headers": show("headers", self.headers)}
        return view

    def to_toml(self) -> dict[str, Any]:
        """Return the ``[servers.NAME]`` table (the name is the table key, not a field)."""
        data = self.model_dump(exclude={"name"}, exclude_defaults=True)
        data["transport"] = self.transport  # always explicit, even though it is required
        if "args" in data:
            data["args"] = list(data["args"])
        return data

    @classmethod
    def from_toml(cls, name: str, table: Mapping[str, Any]) -> ServerSpec:
        """Build a spec from its ``[servers.NAME]`` table.

        Raises:
            pydantic.ValidationError: if the table is not a valid server entry.
        """
        return cls.model_validate({**dict(table), "name": name})
