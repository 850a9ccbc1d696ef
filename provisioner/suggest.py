""" "Did you mean": the one close-match rule for misspelt commands, options, provider and GPU names.

Pure, and cheap to import: difflib loads only when a word is wrong.
"""

from __future__ import annotations

from collections.abc import Iterable

_LOOK_ALIKE = str.maketrans({"O": "0", "I": "1", "L": "1"})
"""Letters typed for the digits they look like (``H1OO`` for ``H100``), folded before comparing."""


def _folded(word: str) -> str:
    return word.upper().translate(_LOOK_ALIKE)


def close_match(word: str, known: Iterable[str]) -> str | None:
    """The one of ``known`` that ``word`` most likely misspells (case, look-alike letters and a
    letter or two aside: ``plna`` -> ``plan``, ``--fromat`` -> ``--format``, ``lamda`` ->
    ``lambda``, ``H1OO`` -> ``H100``), or None when none is close."""
    import difflib

    by_fold: dict[str, str] = {}
    for name in known:
        by_fold.setdefault(_folded(name), name)
    found = difflib.get_close_matches(_folded(word), list(by_fold), n=1, cutoff=0.6)
    return by_fold[found[0]] if found else None


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``"did you mean 'plan'? "`` (note the trailing space) or ``""``: to put before a list of choices."""
    match = close_match(word, known)
    return f"did you mean {match!r}? " if match is not None and match != word else ""


__all__ = ["close_match", "did_you_mean"]
