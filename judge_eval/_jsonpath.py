"""Find the first place in a parsed JSON value where a predicate holds, as a dotted path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def first_path(value: Any, hit: Callable[[str], bool], *, strings: bool = True, prefix: str = "") -> str | None:
    """The dotted path (``a.b.2``) of the first object key, or (with ``strings``) the first
    string value, for which ``hit`` is true, in document order; ``None`` if there is none."""
    if isinstance(value, str):
        return prefix if strings and hit(value) else None
    if isinstance(value, dict):
        for k, v in value.items():
            here = f"{prefix}.{k}" if prefix else str(k)
            if hit(str(k)):
                return here
            found = first_path(v, hit, strings=strings, prefix=here)
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = first_path(v, hit, strings=strings, prefix=f"{prefix}.{i}" if prefix else str(i))
            if found:
                return found
    return None
