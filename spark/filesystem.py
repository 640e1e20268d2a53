"""The one door to fsspec (local paths, ``abfss://``, ``/dbfs``...): fsspec ships no type information, so
it is imported dynamically here and typed as ``Any`` once instead of in every module."""

from __future__ import annotations

import importlib
from typing import Any


def url_to_fs(url: str) -> tuple[Any, str]:
    """The fsspec filesystem for ``url`` and the path on it (for a local path: the path itself)."""
    fsspec = importlib.import_module("fsspec")
    fs, path = fsspec.core.url_to_fs(url)
    return fs, str(path)
