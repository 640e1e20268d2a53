"""Write archive rows as Parquet files through fsspec: a local directory, ``abfs://`` in Azure, or any
other filesystem fsspec knows.

Layout (see :mod:`shared.archive.schema`): ``<root>/date=YYYY-MM-DD/entity=<entity>/<run_id>-<part>.parquet``.
``part`` is a digest of the rows' (source entity, sequence number, message id), so a retried run with the
same run id that archives the same messages rewrites the same file instead of adding a second copy of the
rows, and a different set of messages can never overwrite a file whose messages were already completed.

:meth:`ArchiveWriter.write` returns only after every file is closed: for a local directory the file is
written under a hidden name, fsynced and renamed into place (readers never see half a file); for blob
storage closing the file commits the blob. Callers settle messages only after it returns.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem

from shared.archive.rows import ArchiveRow
from shared.archive.schema import ARCHIVE_SCHEMA, entity_partition_value

RUNS_DIRECTORY = "_runs"
"""Run summaries live under ``<root>/_runs/``; the leading underscore keeps Spark and pyarrow datasets
from reading them as data."""


@dataclass(frozen=True, slots=True)
class WrittenFile:
    """A file :meth:`ArchiveWriter.write` wrote: its path, row count and size in bytes."""

    path: str
    rows: int
    size: int


@dataclass(slots=True)
class ArchiveWriter:
    """Writes archive rows under ``url`` (a local path or an fsspec URL such as ``abfs://container/dir``).

    ``storage_options`` go to the fsspec filesystem (for adlfs: ``account_name``, ``connection_string``,
    ``credential``, ...).
    """

    url: str
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    _fs: Any = field(init=False, repr=False)
    _root: str = field(init=False, repr=False)
    _container_ready: bool = field(init=False, repr=False, default=False)

    def __post_init__(self) -> None:
        self._fs, self._root = fsspec.core.url_to_fs(self.url, **dict(self.storage_options))
        self._root = self._root.rstrip("/")

    @property
    def filesystem(self) -> Any:
        """The fsspec filesystem the archive lives on."""
        return self._fs

    @property
    def root(self) -> str:
        """The archive's root path on :attr:`filesystem` (without protocol)."""
        return self._root

    def write(self, run_id: str, rows: Sequence[ArchiveRow]) -> list[WrittenFile]:
        """Write ``rows`` as one file per (date, entity) partition; returns when all are durable."""
        groups: dict[tuple[str, str], list[ArchiveRow]] = {}
        for row in rows:
            groups.setdefault((row.archived_date, row.source_entity), []).append(row)
        written = []
        for (date, entity), group in sorted(groups.items()):
            directory = f"{self._root}/date={date}/entity={entity_partition_value(entity)}"
            path = f"{directory}/{run_id}-{_part(group)}.parquet"
            table = pa.Table.from_pylist([asdict(row) for row in group], schema=ARCHIVE_SCHEMA)
            written.append(WrittenFile(path, len(group), self._write_table(directory, path, table)))
        return written

    def write_summary(self, run_id: str, summary: Mapping[str, Any]) -> str:
        """Write a run's summary as ``<root>/_runs/<run_id>.json``; returns its path."""
        directory = f"{self._root}/{RUNS_DIRECTORY}"
        path = f"{directory}/{run_id}.json"
        data = json.dumps(summary, indent=2, sort_keys=True, default=str).encode("utf-8")
        self._write_bytes(directory, path, data)
        return path

    def _write_table(self, directory: str, path: str, table: pa.Table) -> int:
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        data = sink.getvalue().to_pybytes()
        self._write_bytes(directory, path, data)
        return len(data)

    def _write_bytes(self, directory: str, path: str, data: bytes) -> None:
        if isinstance(self._fs, LocalFileSystem):
            _write_local(directory, path, data)
            return
        self._ensure_container()
        # Closing the file uploads and commits the blob; an exception leaves no partial blob behind.
        with self._fs.open(path, "wb") as handle:
            handle.write(data)

    def _ensure_container(self) -> None:
        """Create the blob container (the root's first segment) on first use if it does not exist."""
        if self._container_ready:
            return
        container = self._root.split("/", 1)[0]
        if not self._fs.exists(container):
            self._fs.mkdir(container, exist_ok=True)
        self._container_ready = True


def _write_local(directory: str, path: str, data: bytes) -> None:
    os.makedirs(directory, exist_ok=True)
    temporary = f"{directory}/.{os.path.basename(path)}.{os.getpid()}.inprogress"
    with open(temporary, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    # The rename is durable only once the directory entry is.
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _part(rows: Sequence[ArchiveRow]) -> str:
    digest = hashlib.sha256()
    for key in sorted((row.source_entity, row.sequence_number or -1, row.message_id or "") for row in rows):
        digest.update(repr(key).encode("utf-8"))
    return digest.hexdigest()[:16]
