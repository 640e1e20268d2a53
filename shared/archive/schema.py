"""The archive's row schema: the contract between the re-drive (writer) and the Spark replay (reader).

One row per archived message. Files are Hive-partitioned as
``<root>/date=YYYY-MM-DD/entity=<source entity, '/' replaced by '~'>/<run_id>-<part>.parquet``; ``date``
and ``entity`` are the partition columns (also present as the ``archived_date`` and ``source_entity``
columns inside each file, so a single file is self-describing).

Application properties keep their AMQP types: ``application_properties`` is a JSON object whose values are
JSON scalars, or one-key tagged objects for the types JSON cannot hold (``{"$bytes": "<base64>"}``,
``{"$datetime": "<iso>"}``, ``{"$uuid": "<str>"}``, ``{"$long": "<digits>"}`` and the other integer types,
``{"$float32": ...}``, ``{"$decimal": ...}``, ``{"$char": ...}``, ``{"$symbol": ...}``, an AMQP described
value as ``{"$described": {"descriptor": ..., "value": ...}}``) and for floats JSON cannot spell
(``{"$float": "nan"|"inf"|"-inf"}``); see :mod:`shared.archive.properties`. Adding tags is compatible: rows
written before decode as they always did.

Changing this schema is a breaking change for archives already written: only add nullable columns.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 1

TIMESTAMP = pa.timestamp("us", tz="UTC")

ARCHIVE_SCHEMA = pa.schema(
    [
        # what happened
        pa.field("run_id", pa.string(), nullable=False),  # the re-drive run (or router run) that wrote it
        pa.field("archived_at", TIMESTAMP, nullable=False),
        pa.field("archived_date", pa.string(), nullable=False),  # YYYY-MM-DD of archived_at (partition)
        pa.field("decision", pa.string(), nullable=False),  # archive | redrive-limit | oversize | ...
        pa.field("decision_detail", pa.string()),
        # where it came from and where it belongs
        pa.field("source_entity", pa.string(), nullable=False),  # "orders" or "topic/Subscriptions/sub"
        pa.field("source_kind", pa.string(), nullable=False),  # queue | subscription | topic
        pa.field("source_topic", pa.string()),
        pa.field("source_subscription", pa.string()),
        pa.field("target_entity", pa.string()),  # where a replay sends it (a subscription's forward-to queue)
        # the message
        pa.field("message_id", pa.string()),
        pa.field("session_id", pa.string()),
        pa.field("correlation_id", pa.string()),
        pa.field("subject", pa.string()),
        pa.field("content_type", pa.string()),
        pa.field("reply_to", pa.string()),
        pa.field("reply_to_session_id", pa.string()),
        pa.field("to", pa.string()),
        pa.field("partition_key", pa.string()),
        pa.field("time_to_live_ms", pa.int64()),
        pa.field("body", pa.binary()),
        pa.field("application_properties", pa.string()),  # typed JSON, see module docstring
        pa.field("contract_type", pa.string()),  # first entry of NServiceBus.EnclosedMessageTypes, if any
        # broker state at the time it was archived
        pa.field("sequence_number", pa.int64()),
        pa.field("enqueued_time", TIMESTAMP),
        pa.field("delivery_count", pa.int32()),
        pa.field("dead_letter_reason", pa.string()),
        pa.field("dead_letter_description", pa.string()),
        pa.field("dead_letter_source", pa.string()),
        pa.field("redrive_count", pa.int32(), nullable=False),
    ],
    metadata={"busbar.archive.schema_version": str(SCHEMA_VERSION)},
)
"""The Parquet schema of every archive file."""

PARTITION_COLUMNS = ("date", "entity")
"""Hive partition keys in the directory layout (``date=…/entity=…``)."""


def entity_partition_value(source_entity: str) -> str:
    """The ``entity=`` directory value for a source entity path (``/`` cannot appear in a directory name)."""
    return source_entity.replace("/", "~")
