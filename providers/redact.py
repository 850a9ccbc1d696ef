"""Scrub secrets out of what a provider says back before it becomes an error message.

Providers (and proxies in front of them) sometimes quote a request in an error: the API key
in "invalid key: ...", or a launch body with user data that holds a munge key or a join token.
The HTTP client therefore rewrites every error response before an adapter reads it: any run of
``MIN_RUN`` or more characters that also occurs in a secret is replaced by ``[redacted]``.
Matching fragments rather than whole strings catches truncated or partly escaped quotes.
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


class Redactor:
    """Knows a set of secret strings; ``scrub(text)`` removes any fragment of them from ``text``."""

    def __init__(self, secrets: Iterable[str]) -> None:
        secrets = [s for s in secrets if s]
        self._whole = sorted({s for s in secrets if s and len(s) < MIN_RUN}, key=len, reverse=True)
        self._grams = {s[i:i + MIN_RUN] for s in secrets if len(s) >= MIN_RUN
                       for i in range(len(s) - MIN_RUN + 1)}

    def __bool__(self) -> bool:
        return bool(self._whole or self._grams)

    def scrub(self, text: str) -> str:
        covered = [False] * len(text)
        for start in range(len(text) - MIN_RUN + 1):
            if text[start:start + MIN_RUN] in self._grams:
                covered[start:start + MIN_RUN] = [True] * MIN_RUN
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


__all__ = ["MARK", "MIN_RUN", "Redactor", "sensitive_strings"]
