"""Spark jobs, such as replaying archived messages from the Parquet dead-letter archive."""
