"""Redaction at the boundary: task handles and sealed secrets never enter chit as text.

A task handle is a bearer secret (seed 003): the vault seals it, and every string a
server sends may still carry it back in - ``Task <id> not found``, a status message, an
input-request key, a result summary. The same holds for the sealed header and
environment values of a server's configuration. Every layer that receives server text
passes it through a :class:`Redactor` before keeping, printing or logging it:

* a handle becomes ``task#<fingerprint>`` (the vault's keyed fingerprint, the same one
  listings and exports show);
* a configuration secret becomes ``secret#<server>.<field>.<key>`` (which secret, never
  its value).

What is recognised, in any mix within one string:

* the value raw, in any letter case;
* percent-encoded (``%2F`` or ``%2f``, also doubly encoded ``%252F``);
* escaped as in JSON or Python source (``\\u0041``, ``\\/``, ``\\"``, nested ``\\\\u0041``);
* HTML character references (``&#65;``, ``&#x41;``, ``&quot;``);
* any run of at least :data:`FRAGMENT` consecutive characters of it - so a handle split
  between two fields, or cut off by a length bound, leaves no recognisable piece behind.

Values shorter than :data:`MIN_SECRET` characters are not redacted: they would match
ordinary text everywhere, and cannot be kept secret by matching anyway.

This module is a bottom module (like ``chit.clock``): every layer except the standalone
``chit.receipts`` and ``chit.tasks`` may import it. The process-wide :data:`REGISTRY`
holds every handle and secret this process opened; :func:`redact` uses it for error
messages and log records (:func:`install_log_redaction` makes every log record pass
through it).
"""

from chit.redaction.redactor import (
    FRAGMENT,
    MIN_SECRET,
    NOTHING,
    Redactor,
    Secret,
    config_secrets,
    handle_secret,
    secret_marker,
    task_marker,
)
from chit.redaction.registry import (
    REGISTRY,
    RedactingFilter,
    SecretRegistry,
    install_log_redaction,
    redact,
    redact_record,
)

__all__ = [
    "FRAGMENT",
    "MIN_SECRET",
    "NOTHING",
    "REGISTRY",
    "RedactingFilter",
    "Redactor",
    "Secret",
    "SecretRegistry",
    "config_secrets",
    "handle_secret",
    "install_log_redaction",
    "redact",
    "redact_record",
    "secret_marker",
    "task_marker",
]
