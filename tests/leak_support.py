"""Spelling a secret the ways a hostile server might, and finding it in bytes again.

Shared by the redaction unit tests and the end-to-end "no handle in any byte" tests.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable, Iterable
from urllib.parse import quote

from hypothesis import strategies as st

HANDLE_ALPHABET = string.ascii_letters + string.digits + "-_"


def _pct_all(value: str, upper: bool = True) -> str:
    fmt = "%{:02X}" if upper else "%{:02x}"
    return "".join(fmt.format(b) for b in value.encode("utf-8"))


def _json_u(value: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in value)


SPELLINGS: dict[str, Callable[[str], str]] = {
    "raw": lambda h: h,
    "quoted": lambda h: f'"{h}"',
    "single-quoted": lambda h: f"'{h}'",
    "json": lambda h: json.dumps({"taskId": h}),
    "json-in-json": lambda h: json.dumps(json.dumps({"taskId": h})),
    "url": lambda h: quote(h, safe=""),
    "url-all-upper": lambda h: _pct_all(h, upper=True),
    "url-all-lower": lambda h: _pct_all(h, upper=False),
    "url-double": lambda h: quote(_pct_all(h), safe=""),
    "json-unicode": _json_u,
    "upper": lambda h: h.upper(),
    "html": lambda h: "".join(f"&#{ord(c)};" for c in h),
}
"""Ways of writing a handle into a message (all of them must be redacted)."""

handles = st.text(alphabet=HANDLE_ALPHABET, min_size=12, max_size=48).filter(
    lambda h: len(set(h)) >= 6  # a real handle has entropy; "aaaaaaaaaaaa" is not one
)
spelling_names = st.sampled_from(sorted(SPELLINGS))
filler = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)


def needles(secret: str) -> list[bytes]:
    """Byte patterns whose presence in a file means ``secret`` leaked.

    The raw value in UTF-8 (and upper/lower case), JSON-escaped, and percent-encoded in
    both hex cases - the forms SQLite files, JSON exports and logs would hold.
    """
    forms = {
        secret,
        secret.lower(),
        secret.upper(),
        json.dumps(secret)[1:-1],
        quote(secret, safe=""),
        _pct_all(secret, upper=True),
        _pct_all(secret, upper=False),
    }
    return [f.encode("utf-8") for f in forms if f]


def leaks(blob: bytes, secrets: Iterable[str]) -> list[str]:
    """Which of ``secrets`` occur in ``blob`` (in any form of :func:`needles`)."""
    found = []
    low = blob.lower()
    for secret in secrets:
        if any(n.lower() in low for n in needles(secret)):
            found.append(secret)
    return found
