"""Read the re-drive's archive (Hive-partitioned Parquet, :mod:`shared.archive.schema`) as a DataFrame."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StringType, StructType

from shared.archive.schema import ARCHIVE_SCHEMA, PARTITION_COLUMNS
from spark.filesystem import url_to_fs


class ArchiveNotFoundError(FileNotFoundError):
    """The archive path does not exist or holds no files."""


def archive_spark_schema() -> StructType:
    """The archive's columns as Spark types, plus the ``date`` / ``entity`` partition columns as strings
    (declared, so Spark does not infer ``date`` as a date or an entity named ``007`` as a number)."""
    schema = from_arrow_schema(ARCHIVE_SCHEMA)
    for name in PARTITION_COLUMNS:
        schema = schema.add(name, StringType())
    return schema


def read_archive(spark: SparkSession, archive_path: str) -> DataFrame:
    """Every archived row under ``archive_path``; raises :class:`ArchiveNotFoundError` when there is none."""
    fs, root = url_to_fs(archive_path)
    if not fs.exists(root) or not fs.ls(root):
        raise ArchiveNotFoundError(f"no archive files under {archive_path!r}")
    return spark.read.schema(archive_spark_schema()).option("basePath", archive_path).parquet(archive_path)
