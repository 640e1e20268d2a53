"""The records of handled messages, and the handlers' rows, in Azure Table Storage.

One table (:data:`TABLE_NAME`) for every endpoint. An entity's partition is the endpoint and the handled
message's ordering key (its ``SessionId``; the message id when it has none), so a message's record and the
rows its handlers write share a partition and commit in one transaction (an entity group transaction: all
or nothing). Row keys: ``m|<message id>`` for a record, ``d|<row name>`` for a handler's row (both encoded:
:func:`shared.table_keys.table_key`).

A record holds the message's outgoing messages (:mod:`.outbox`) and whether they were dispatched. It is
created, never replaced: of two copies of one message id handled at once, the second commit fails as the
entity exists, and that copy's effects are discarded.

The table is created on first use, and again when a call finds it missing
(:class:`shared.storage_tables.LazyTable`).

Records older than the retention (``BUSBAR_HANDLED_RETENTION_DAYS``, default 7: longer than any broker
duplicate-detection window) are deleted by :meth:`HandledRecords.purge` (the re-drive timer calls it): a
query over the whole table for old record rows (a scan, filtered by the service), then one delete each. The
handlers' rows are theirs and stay.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient, TableTransactionError, UpdateMode

from shared.app_settings import AppSetting, read
from shared.messages import IncomingMessage
from shared.storage_tables import LazyTable, table_client
from shared.table_keys import table_key

TABLE_NAME = "busbarhandled"
CHUNK = 60_000
"""Bytes per binary property (the service allows 64 KiB); an outbox larger than one takes several."""
MAX_CHUNKS = 15
"""An entity holds at most 1 MiB: an outbox of more than 900 KB is refused (the message is retried)."""

RETENTION = AppSetting(
    "BUSBAR_HANDLED_RETENTION_DAYS",
    "How many days an endpoint remembers a handled message id: longer than any duplicate detection window "
    "(at most 7 days), so a copy arriving later is still recognised.",
    default="7",
)
SETTINGS: tuple[AppSetting, ...] = (RETENTION,)


class RowChanged(RuntimeError):
    """A row the handlers read was changed by another message before this one committed: retry it."""


class OutboxTooLarge(ValueError):
    """A message's outgoing messages do not fit its record."""


def retention(env: Mapping[str, str] | None = None) -> timedelta:
    """``BUSBAR_HANDLED_RETENTION_DAYS`` as a duration; a value that is not a whole number of days of at
    least 1 raises ValueError naming the setting."""
    raw = read(RETENTION, env) or "7"
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{RETENTION.name} must be a whole number of days, at least 1; got {raw!r}")
    return timedelta(days=int(raw))


@dataclass(frozen=True, slots=True)
class HandledRecord:
    """One endpoint's record of one handled message."""

    endpoint: str
    partition: str
    message_id: str
    outbox: bytes
    dispatched: bool = False
    handled_at: datetime | None = None


def partition_of(endpoint: str, message: IncomingMessage) -> str:
    """The partition of ``message`` at ``endpoint``: its ordering key, else its message id."""
    return f"{endpoint}|{message.session_id or message.message_id or ''}"


def _record_row(message_id: str) -> str:
    return f"m|{table_key(message_id)}"


def _data_row(name: str) -> str:
    return f"d|{table_key(name)}"


class HandledRecords:
    """The handled-message records and handlers' rows of one storage account (thread-safe)."""

    def __init__(self, table: TableClient) -> None:
        self._table = LazyTable(table)

    def get(self, partition: str, message_id: str) -> HandledRecord | None:
        """The record of ``message_id`` in ``partition``, or None when it was not handled."""
        try:
            entity = self._table.ready().get_entity(table_key(partition), _record_row(message_id))
        except ResourceNotFoundError as error:
            self._table.forget_if_missing(error)
            return None
        chunks = [bytes(entity[f"Outbox{n}"]) for n in range(int(entity.get("Chunks") or 0))]
        handled_at = entity.get("HandledAt")
        return HandledRecord(
            endpoint=str(entity.get("Endpoint") or ""),
            partition=partition,
            message_id=message_id,
            outbox=b"".join(chunks),
            dispatched=bool(entity.get("Dispatched")),
            handled_at=handled_at if isinstance(handled_at, datetime) else None,
        )

    def read_row(self, partition: str, name: str) -> dict[str, Any] | None:
        """A handler's row ``name`` in ``partition``, or None."""
        return self.read_versioned(partition, name)[0]

    def read_versioned(self, partition: str, name: str) -> tuple[dict[str, Any] | None, str | None]:
        """A handler's row ``name`` in ``partition`` and its ETag; ``(None, None)`` when absent."""
        try:
            entity = self._table.ready().get_entity(table_key(partition), _data_row(name))
        except ResourceNotFoundError as error:
            self._table.forget_if_missing(error)
            return None, None
        data = json.loads(str(entity["Data"]))
        return (data if isinstance(data, dict) else None), entity.metadata.get("etag")

    def commit(
        self,
        record: HandledRecord,
        writes: Mapping[str, Mapping[str, Any]],
        versions: Mapping[str, str | None] | None = None,
    ) -> bool:
        """Create ``record`` and write the handlers' rows, all or nothing; False when a record of the same
        message id exists already (another copy committed first: nothing of this one is written). A row
        the handlers read before writing it (``versions``) is written only if it is still as read (created
        if it was absent, replaced if its ETag still matches); otherwise :class:`RowChanged` is raised and
        nothing is written."""
        versions = versions or {}
        if len(record.outbox) > CHUNK * MAX_CHUNKS:
            raise OutboxTooLarge(
                f"the outgoing messages of {record.message_id} take {len(record.outbox)} bytes; a record "
                f"holds at most {CHUNK * MAX_CHUNKS}"
            )
        pk = table_key(record.partition)
        chunks = [record.outbox[i : i + CHUNK] for i in range(0, len(record.outbox), CHUNK)]
        entity: dict[str, Any] = {
            "PartitionKey": pk,
            "RowKey": _record_row(record.message_id),
            "Kind": "record",
            "Endpoint": record.endpoint,
            "MessageId": record.message_id,
            "HandledAt": datetime.now(UTC),
            "Dispatched": False,
            "Chunks": len(chunks),
        }
        entity.update({f"Outbox{n}": chunk for n, chunk in enumerate(chunks)})
        operations: list[Any] = [("create", entity)]
        for name, data in writes.items():
            row = {"PartitionKey": pk, "RowKey": _data_row(name), "Kind": "row", "Name": name}
            row["Data"] = json.dumps(dict(data), separators=(",", ":"))
            if name not in versions:  # written blind: last writer wins
                operations.append(("upsert", row, {"mode": UpdateMode.REPLACE}))
            elif versions[name] is None:  # read as absent: only if still absent
                operations.append(("create", row))
            else:
                condition = {"etag": versions[name], "match_condition": MatchConditions.IfNotModified}
                operations.append(("update", row, {"mode": UpdateMode.REPLACE, **condition}))
        try:
            self._table.ready().submit_transaction(operations)
        except TableTransactionError as error:
            # The documented ``error_code`` ivar (set by azure-core's HttpResponseError from the response).
            code = str(getattr(error, "error_code", "") or "")
            if error.index == 0 and code.endswith("EntityAlreadyExists"):
                return False
            if error.index > 0 and code.endswith(("EntityAlreadyExists", "UpdateConditionNotSatisfied")):
                name = list(writes)[error.index - 1]
                raise RowChanged(
                    f"row {name!r} of {record.partition} was changed by another message"
                ) from error
            self._table.forget_if_missing(error)
            raise
        return True

    def mark_dispatched(self, record: HandledRecord) -> None:
        """The record's outgoing messages went out."""
        entity = {
            "PartitionKey": table_key(record.partition),
            "RowKey": _record_row(record.message_id),
            "Dispatched": True,
        }
        try:
            self._table.ready().update_entity(
                entity, mode=UpdateMode.MERGE, match_condition=MatchConditions.Unconditionally
            )
        except ResourceNotFoundError as error:
            self._table.forget_if_missing(error)
            raise

    def purge(self, before: datetime) -> int:
        """Delete the records handled before ``before``; how many."""
        table = self._table.ready()
        old = table.query_entities(
            "Kind eq 'record' and HandledAt lt @before",
            parameters={"before": before},
            select=["PartitionKey", "RowKey"],
        )
        count = 0
        for entity in old:
            with contextlib.suppress(ResourceNotFoundError):
                table.delete_entity(entity["PartitionKey"], entity["RowKey"])
                count += 1
        return count

    def rows(self, kind: str = "row") -> Iterable[dict[str, Any]]:
        """Every entity of ``kind`` (``row``: the handlers' rows; ``record``), for counts and tools."""
        return self._table.ready().query_entities("Kind eq @kind", parameters={"kind": kind})

    def close(self) -> None:
        """Close the table client."""
        self._table.close()


def handled_records_from_settings(values: Mapping[str, str]) -> HandledRecords:
    """The records of the storage account ``AzureWebJobsStorage`` names (as the held keys')."""
    return HandledRecords(table_client(values, TABLE_NAME))
