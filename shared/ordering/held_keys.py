"""The held keys of ordered endpoints, in Azure Table Storage: one row per held key.

A row says which message blocks the key (its ``MessageId`` and sequence number, why and since when), how
many later messages are parked behind it and whether the key is being released. It lives in the app's
storage account (``AzureWebJobsStorage``: a connection string locally, Azurite under ``make run``; in Azure
the identity-based ``AzureWebJobsStorage__tableServiceUri`` or ``__accountName``), table
:data:`TABLE_NAME`, partition = the endpoint's queue, row = the key. Rows are written only for held keys,
so an endpoint whose keys all flow pays one point read per message.

Keys are encoded (:func:`shared.table_keys.table_key`); the raw values are kept in the row's properties.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode

from shared.storage_tables import LazyTable, table_client
from shared.table_keys import table_key

TABLE_NAME = "busbarheldkeys"
HELD = "held"
"""The blocker is dead-lettered: later messages of the key are parked."""
RELEASING = "releasing"
"""The blocker is resolved: the parked messages are being handled, newer ones still wait behind them."""


@dataclass(frozen=True, slots=True)
class HeldKey:
    """One held key of one endpoint queue."""

    queue: str
    key: str
    status: str
    blocker_message_id: str | None
    blocker_sequence_number: int | None
    reason: str
    since: datetime
    parked: int = 0
    etag: str | None = None

    def blocked_by(self, message_id: str | None) -> bool:
        """Whether ``message_id`` is the message holding this key."""
        return self.status == HELD and message_id is not None and message_id == self.blocker_message_id

    def to_dict(self) -> dict[str, Any]:
        """The row as the console and the API show it."""
        return {
            "key": self.key,
            "status": self.status,
            "blockerMessageId": self.blocker_message_id,
            "blockerSequenceNumber": self.blocker_sequence_number,
            "reason": self.reason,
            "since": self.since.isoformat(),
            "parked": self.parked,
        }


def _row(held: HeldKey) -> dict[str, Any]:
    return {
        "PartitionKey": table_key(held.queue),
        "RowKey": table_key(held.key),
        "Queue": held.queue,
        "Key": held.key,
        "Status": held.status,
        "BlockerMessageId": held.blocker_message_id or "",
        "BlockerSequenceNumber": held.blocker_sequence_number if held.blocker_sequence_number else -1,
        "Reason": held.reason,
        "Since": held.since,
        "Parked": held.parked,
    }


def _held(entity: Mapping[str, Any]) -> HeldKey:
    sequence = entity.get("BlockerSequenceNumber")
    since = entity.get("Since")
    return HeldKey(
        queue=str(entity["Queue"]),
        key=str(entity["Key"]),
        status=str(entity.get("Status") or HELD),
        blocker_message_id=str(entity.get("BlockerMessageId") or "") or None,
        blocker_sequence_number=int(sequence) if isinstance(sequence, int) and sequence >= 0 else None,
        reason=str(entity.get("Reason") or ""),
        since=since if isinstance(since, datetime) else datetime.now(UTC),
        parked=int(entity.get("Parked") or 0),
        etag=entity.metadata.get("etag") if hasattr(entity, "metadata") else None,
    )


class HeldKeys:
    """The held-key rows of one storage account (thread-safe: the SDK's table client is)."""

    def __init__(self, table: TableClient) -> None:
        self._table = LazyTable(table)

    def get(self, queue: str, key: str) -> HeldKey | None:
        """The row of ``key`` on ``queue``, or None when the key flows."""
        try:
            return _held(self._table.ready().get_entity(table_key(queue), table_key(key)))
        except ResourceNotFoundError as error:
            self._table.forget_if_missing(error)
            return None

    def put(self, held: HeldKey) -> HeldKey:
        """Write ``held`` (replacing the row it was read as, if any: optimistic, so a concurrent writer's
        change is never overwritten silently); the row as written."""
        table = self._table.ready()
        if held.etag is None:
            try:
                written = table.create_entity(_row(held))
            except ResourceExistsError:
                current = self.get(held.queue, held.key)
                assert current is not None
                return self.put(replace(held, etag=current.etag))
        else:
            written = table.update_entity(
                _row(held),
                mode=UpdateMode.REPLACE,
                etag=held.etag,
                match_condition=MatchConditions.IfNotModified,
            )
        return replace(held, etag=written.get("etag"))

    def delete(self, held: HeldKey) -> None:
        """Remove the row of ``held``: the key flows again."""
        table = self._table.ready()
        table.delete_entity(table_key(held.queue), table_key(held.key))

    def of_queue(self, queue: str) -> Iterator[HeldKey]:
        """Every held key of ``queue``."""
        table = self._table.ready()
        for entity in table.query_entities("PartitionKey eq @pk", parameters={"pk": table_key(queue)}):
            yield _held(entity)

    def close(self) -> None:
        """Close the table client."""
        self._table.close()


def held_keys_from_settings(values: Mapping[str, str]) -> HeldKeys:
    """The held keys of the storage account ``AzureWebJobsStorage`` names (:func:`table_client`)."""
    return HeldKeys(table_client(values, TABLE_NAME))
