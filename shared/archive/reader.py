"""Read the archive back with pyarrow (the Spark replay job reads the same files with ``spark.read``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.dataset as ds

from shared.archive.properties import PropertyValue, decode_properties
from shared.archive.schema import ARCHIVE_SCHEMA
from shared.archive.writer import RUNS_DIRECTORY


def read_archive(url: str, storage_options: Mapping[str, Any] | None = None) -> pa.Table:
    """Every archived row under ``url``, with the archive schema's columns (partition columns dropped).

    An archive that does not exist yet reads as an empty table.
    """
    fs, root = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    root = root.rstrip("/")
    if not fs.exists(root):
        return ARCHIVE_SCHEMA.empty_table()
    dataset = ds.dataset(
        root,
        filesystem=fs,
        format="parquet",
        schema=ARCHIVE_SCHEMA,
        exclude_invalid_files=False,
        ignore_prefixes=[".", "_"],
    )
    return dataset.to_table()


def row_properties(row: Mapping[str, Any]) -> dict[str, PropertyValue]:
    """The typed application properties of one archive row (as from ``table.to_pylist()``)."""
    text = row.get("application_properties")
    return decode_properties(text if isinstance(text, str) else None)


def read_run_summary(url: str, run_id: str, storage_options: Mapping[str, Any] | None = None) -> Any:
    """The summary a run wrote next to the archive (``<root>/_runs/<run_id>.json``)."""
    fs, root = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    with fs.open(f"{root.rstrip('/')}/{RUNS_DIRECTORY}/{run_id}.json", "rb") as handle:
        return json.loads(handle.read().decode("utf-8"))
