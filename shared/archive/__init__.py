"""The failure archive: dead-lettered and unroutable messages kept as Parquet for audit and replay."""
