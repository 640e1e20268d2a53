"""The app's storage account, as Busbar's tables use it: where it is, and tables created on first use.

Busbar keeps its endpoints' handled-message records (:mod:`shared.idempotency.records`) and ordered
endpoints' held keys (:mod:`shared.ordering.held_keys`) in the Table Storage of the account the Functions
host itself uses, ``AzureWebJobsStorage``: a connection string locally (Azurite under ``make run``); in
Azure the identity-based ``AzureWebJobsStorage__tableServiceUri`` or ``__accountName`` with the app's
managed identity.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping

from azure.core.exceptions import HttpResponseError, ResourceExistsError
from azure.data.tables import TableClient, TableErrorCode, TableServiceClient

from shared.app_settings import AppSetting

STORAGE_SETTING = "AzureWebJobsStorage"

SETTINGS: tuple[AppSetting, ...] = (
    AppSetting(
        STORAGE_SETTING,
        "Local only: the storage account's connection string (make run: Azurite's). Endpoints keep the "
        "message ids they handled, and ordered endpoints their held keys, in its table service. In Azure use "
        "the identity-based settings instead.",
        secret=True,
        local_only=True,
    ),
    AppSetting(
        f"{STORAGE_SETTING}__tableServiceUri",
        "The storage account's table service URL, reached with the managed identity (handled-message "
        "records, held keys of ordered endpoints).",
    ),
    AppSetting(
        f"{STORAGE_SETTING}__accountName",
        "The storage account, reached with the managed identity, when no table service URL is set.",
    ),
)


class StorageNotConfigured(ValueError):
    """No ``AzureWebJobsStorage`` setting: the endpoints have nowhere to keep their records."""


def storage_identity(values: Mapping[str, str]) -> tuple[str, str, str]:
    """The settings that say which account :func:`table_client` reaches (a cache key for its clients)."""
    return (
        values.get(STORAGE_SETTING) or "",
        values.get(f"{STORAGE_SETTING}__tableServiceUri") or "",
        values.get(f"{STORAGE_SETTING}__accountName") or "",
    )


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


class LazyTable:
    """A table created on first use, and again after a call found it missing (deleted, or Azurite's data
    lost under ``make run``): otherwise every message would fail, and be dead-lettered, until the process
    restarts. Thread-safe (the SDK's table client is)."""

    def __init__(self, table: TableClient) -> None:
        self._table = table
        self._created = False
        self._lock = threading.Lock()

    def ready(self) -> TableClient:
        """The client, its table created if this process has not yet done so."""
        with self._lock:
            if not self._created:
                with contextlib.suppress(ResourceExistsError):
                    self._table.create_table()
                self._created = True
        return self._table

    def forget_if_missing(self, error: HttpResponseError) -> None:
        """Note ``error``: when it says the table is gone, the next :meth:`ready` creates it again."""
        if getattr(error, "error_code", None) == TableErrorCode.TABLE_NOT_FOUND:
            with self._lock:
                self._created = False

    def close(self) -> None:
        """Close the table client."""
        self._table.close()
