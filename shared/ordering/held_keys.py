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

import contextlib
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.data.tables import TableClient, TableServiceClient, UpdateMode

from shared.app_settings import AppSetting
from shared.table_keys import table_key

TABLE_NAME = "busbarheldkeys"
STORAGE_SETTING = "AzureWebJobsStorage"

SETTINGS: tuple[AppSetting, ...] = (
    AppSetting(
        STORAGE_SETTING,
        "Local only: the storage account's connection string (make run: Azurite's). Ordered endpoints keep "
        "their held keys in its table service. In Azure use the identity-based settings instead.",
        secret=True,
        local_only=True,
    ),
    AppSetting(
        f"{STORAGE_SETTING}__tableServiceUri",
        "The storage account's table service URL, reached with the managed identity (held keys of ordered "
        "endpoints).",
    ),
    AppSetting(
        f"{STORAGE_SETTING}__accountName",
        "The storage account, reached with the managed identity, when no table service URL is set.",
    ),
)

HELD = "held"
"""The blocker is dead-lettered: later messages of the key are parked."""
RELEASING = "releasing"
"""The blocker is resolved: the parked messages are being handled, newer ones still wait behind them."""


class StorageNotConfigured(ValueError):
    """No ``AzureWebJobsStorage`` setting: an ordered endpoint cannot hold its keys."""


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
        self._table = table
        self._created = False
        self._lock = threading.Lock()

    def _ensure_table(self) -> TableClient:
        with self._lock:
            if not self._created:
                with contextlib.suppress(ResourceExistsError):
                    self._table.create_table()
                self._created = True
        return self._table

    def get(self, queue: str, key: str) -> HeldKey | None:
        """The row of ``key`` on ``queue``, or None when the key flows."""
        try:
            return _held(self._ensure_table().get_entity(table_key(queue), table_key(key)))
        except ResourceNotFoundError:
            return None

    def put(self, held: HeldKey) -> HeldKey:
        """Write ``held`` (replacing the row it was read as, if any: optimistic, so a concurrent writer's
        change is never overwritten silently); the row as written."""
        table = self._ensure_table()
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
        table = self._ensure_table()
        table.delete_entity(table_key(held.queue), table_key(held.key))

    def of_queue(self, queue: str) -> Iterator[HeldKey]:
        """Every held key of ``queue``."""
        table = self._ensure_table()
        for entity in table.query_entities("PartitionKey eq @pk", parameters={"pk": table_key(queue)}):
            yield _held(entity)

    def close(self) -> None:
        """Close the table client."""
        self._table.close()


def table_client(values: Mapping[str, str], table: str) -> TableClient:
    """A client of ``table`` in the storage account ``AzureWebJobsStorage`` names: its connection string,
    or the identity-based ``AzureWebJobsStorage__tableServiceUri`` / ``__accountName`` with the app's
    identity (the connection string wins, as the Functions host resolves a connection)."""
    connection_string = (values.get(STORAGE_SETTING) or "").strip()
    if connection_string:
        return TableServiceClient.from_connection_string(connection_string).get_table_client(table)
    uri = (values.get(f"{STORAGE_SETTING}__tableServiceUri") or "").strip()
    account = (values.get(f"{STORAGE_SETTING}__accountName") or "").strip()
    if not uri and account:
        uri = f"https://{account}.table.core.windows.net"
    if not uri:
        raise StorageNotConfigured(
            f"Busbar keeps its endpoints' records in Table Storage: set {STORAGE_SETTING} (a connection "
            f"string; make run sets Azurite's) or {STORAGE_SETTING}__accountName / __tableServiceUri"
        )
    from azure.identity import DefaultAzureCredential  # heavy; only in Azure

    return TableClient(uri, table, credential=DefaultAzureCredential())


def held_keys_from_settings(values: Mapping[str, str]) -> HeldKeys:
    """The held keys of the storage account ``AzureWebJobsStorage`` names (:func:`table_client`)."""
    return HeldKeys(table_client(values, TABLE_NAME))
