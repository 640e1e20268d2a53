"""Fixtures of the replay tests (the shared ``spark`` session is in ``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from shared.archive.rows import ArchiveRow
from spark.archive import archive_spark_schema
from tests.spark.archive_factory import as_records


@pytest.fixture
def frame(spark: Any) -> Any:
    """``frame(rows)``: archive rows as a DataFrame with the archive's Spark schema (no partition columns)."""
    from pyspark.sql.types import StructType

    schema = StructType([f for f in archive_spark_schema().fields if f.name not in ("date", "entity")])

    def build(rows: Sequence[ArchiveRow]) -> Any:
        return spark.createDataFrame(as_records(rows), schema)

    return build
