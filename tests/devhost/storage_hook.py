"""A startup hook for tests/devhost/storage/test_azurite.py: writes one row through the
``AzureWebJobsStorage`` the hook is given, as app.bootstrap reads its settings, before the triggers start."""

from __future__ import annotations

from collections.abc import Mapping

from azure.data.tables import TableServiceClient


def record_start(settings: Mapping[str, str]) -> None:
    """Upsert ``hook/started`` into the table ``STORAGE_TEST_TABLE`` of the app's storage account."""
    with TableServiceClient.from_connection_string(settings["AzureWebJobsStorage"]) as service:
        table = service.create_table_if_not_exists(settings["STORAGE_TEST_TABLE"])
        table.upsert_entity({"PartitionKey": "hook", "RowKey": "started", "value": "by the startup hook"})


def nothing(settings: Mapping[str, str]) -> None:
    """A startup hook that writes nothing (for an app whose storage is not reachable from the tests)."""
