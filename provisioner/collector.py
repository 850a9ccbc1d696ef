"""The cyclic garbage collector paused while a large, short piece of work runs (a plan, a catalog decode).

Such work allocates many objects and almost no reference cycles; each collection pass it sets off
would walk every object still alive. Pure: no I/O."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside the block; collection resumes afterwards if it was on before."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
