"""The installed package's version, as its metadata says."""

from __future__ import annotations

from importlib import metadata

__all__ = ["package_version"]


def package_version() -> str:
    """``judge-eval``'s installed version (``audit.json``, the judge's User-Agent); ``unknown``
    when run from a source tree that is not installed."""
    try:
        return metadata.version("judge-eval")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"
