"""Hypothesis profiles and hostile-input strategies for tests/test_fuzz*.py (no tests here).

Profiles: ``fuzz`` (the default: few examples, so the suite stays fast) and ``fuzz-deep`` (many,
for a run on purpose: ``PROVISIONER_FUZZ_PROFILE=fuzz-deep``). Both without deadlines (a loaded
machine is no finding) and derandomized under ``fuzz`` so a CI run is repeatable.
"""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

settings.register_profile(
    "fuzz",
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
settings.register_profile(
    "fuzz-deep",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
FUZZ = settings.get_profile(os.environ.get("PROVISIONER_FUZZ_PROFILE", "fuzz"))
"""Decorate each property test with it (``@FUZZ``)."""

CONTROL = "\x00\x07\x1b]0;t\x07\x1b[2J\x9b\u202e\r\n\t"
hostile_text = st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(list(CONTROL)), max_size=40)
hostile_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    hostile_text,
    st.sampled_from(["", "NaN", "Infinity", "-1", "1e309", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "null"]),
)
json_values = st.recursive(
    hostile_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(hostile_text, inner, max_size=4),
    max_leaves=20,
)


def dumped(value: Any) -> bytes:
    """``value`` as JSON text the way a careless server writes it (NaN and Infinity included)."""
    return json.dumps(value, allow_nan=True).encode()


def nested(depth: int, opening: bytes = b"[") -> bytes:
    return opening * depth


hostile_bodies = st.one_of(
    json_values.map(dumped),
    st.binary(max_size=200),
    st.integers(min_value=60, max_value=5000).map(nested),
    st.integers(min_value=60, max_value=5000).map(lambda n: b'{"a":' * n),
    json_values.map(dumped).map(lambda body: body[: len(body) // 2]),
)


def leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a scalar (and to each container) of decoded JSON ``value``."""
    found: list[tuple[Any, ...]] = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += leaves(item, (*path, index))
    return found


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """``value`` with the item at ``path`` replaced by ``new`` (a copy; the original is kept)."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: replaced(value[head], rest, new)}
    copy = list(value)
    copy[head] = replaced(value[head], rest, new)
    return copy


@st.composite
def spoiled(draw: st.DrawFn, document: Any) -> bytes:
    """``document`` (a real answer) with one to three of its values replaced by hostile ones."""
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = leaves(document)
        document = replaced(document, draw(st.sampled_from(paths)), draw(json_values))
    return dumped(document)


__all__ = ["FUZZ", "dumped", "hostile_bodies", "hostile_scalars", "hostile_text", "json_values", "spoiled"]
