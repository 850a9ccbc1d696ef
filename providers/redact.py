"""Scrub secrets out of what a provider says back before it becomes an error message.

Providers (and proxies in front of them) sometimes quote a request in an error: the API key
in "invalid key: ...", or a launch body with user data that holds a munge key or a join token.
The HTTP client therefore rewrites every error response before an adapter reads it: any run of
``MIN_RUN`` or more characters that also occurs in a secret is replaced by ``[redacted]``.
Matching fragments rather than whole strings catches truncated or partly escaped quotes. Two
more forms are caught: a secret quoted base64-encoded (each secret's base64 at all three byte
alignments, so it is found inside the encoding of a larger document) and a quote wrapped over
lines (line breaks, other whitespace and the JSON escapes ``\n``, ``\r``, ``\t`` are ignored while
matching, on both sides, and a match covers what it spans).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Iterator
from typing import Any

MIN_RUN = 12
"""Shortest fragment of a secret that is redacted; shorter secrets are replaced whole."""
MIN_SENSITIVE_BODY_STRING = 32
"""Request-body strings at least this long (user data, scripts, keys) count as secrets."""
MARK = "[redacted]"


_BREAKS = re.compile(r"\s|\\[nrt]")


def _unbroken(text: str) -> tuple[str, list[int]]:
    """``text`` without whitespace and JSON line escapes, and each kept character's index in ``text``."""
    kept: list[str] = []
    where: list[int] = []
    index = 0
    for found in _BREAKS.finditer(text):
        kept.append(text[index : found.start()])
        where.extend(range(index, found.start()))
        index = found.end()
    kept.append(text[index:])
    where.extend(range(index, len(text)))
    return "".join(kept), where


def base64_forms(secret: str) -> list[str]:
    """The parts of ``secret``'s base64 encoding that do not depend on its neighbours, at each of the
    three byte alignments it can have inside a larger encoded document."""
    raw = secret.encode("utf-8")
    forms = []
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode("ascii")
        start = (shift * 4 + 2) // 3 + (1 if shift else 0)  # characters still mixing in the padding bytes
        end = len(encoded) - 4  # the last quantum mixes in what follows
        if end - start >= MIN_RUN:
            forms.append(encoded[start:end])
    return forms


class Redactor:
    """Knows a set of secret strings; ``scrub(text)`` removes any fragment of them from ``text``,
    as written, base64-encoded or wrapped over lines."""

    def __init__(self, secrets: Iterable[str]) -> None:
        secrets = [s for s in secrets if s]
        self._whole = sorted({s for s in secrets if s and len(s) < MIN_RUN}, key=len, reverse=True)
        forms = {_unbroken(s)[0] for s in secrets if len(s) >= MIN_RUN}
        forms |= {form for s in secrets if len(s) >= MIN_RUN for form in base64_forms(s)}
        self._grams = {f[i : i + MIN_RUN] for f in forms for i in range(len(f) - MIN_RUN + 1)}

    def __bool__(self) -> bool:
        return bool(self._whole or self._grams)

    def scrub(self, text: str) -> str:
        flat, where = _unbroken(text)
        covered = [False] * len(text)
        for start in range(len(flat) - MIN_RUN + 1):
            if flat[start : start + MIN_RUN] in self._grams:
                for index in range(where[start], where[start + MIN_RUN - 1] + 1):
                    covered[index] = True
        pieces: list[str] = []
        index = 0
        while index < len(text):
            if covered[index]:
                while index < len(text) and covered[index]:
                    index += 1
                pieces.append(MARK)
            else:
                pieces.append(text[index])
                index += 1
        scrubbed = "".join(pieces)
        for secret in self._whole:
            scrubbed = scrubbed.replace(secret, MARK)
        return scrubbed


_BASE64_TOKEN = re.compile(r"[A-Za-z0-9+/]{24,}={0,2}")


def sensitive_strings(body: Any) -> Iterator[str]:
    """Long string leaves of a JSON request body, and what base64 inside them decodes to
    (RunPod and Vast.ai ship user data base64-encoded): what a provider might quote back."""
    if isinstance(body, str):
        if len(body) >= MIN_SENSITIVE_BODY_STRING:
            yield body
            for token in _BASE64_TOKEN.findall(body):
                try:
                    yield base64.b64decode(token, validate=True).decode("utf-8")
                except (ValueError, UnicodeDecodeError):
                    continue
    elif isinstance(body, dict):
        for value in body.values():
            yield from sensitive_strings(value)
    elif isinstance(body, list | tuple):
        for value in body:
            yield from sensitive_strings(value)


__all__ = ["MARK", "MIN_RUN", "Redactor", "base64_forms", "sensitive_strings"]
