"""Which ``AzureWebJobsStorage`` devhost's Azurite serves, and the connection string it gives the app.

The rule (devhost/storage/settings.py): a non-empty ``AzureWebJobsStorage`` wins over the identity-based
``AzureWebJobsStorage__*`` settings, as the Functions host resolves a connection ("If the configured value is
both an exact match for a single setting and a prefix match for other settings, the exact match is used",
MicrosoftDocs/azure-docs includes/functions-storage-blob-connections.md, the storage bindings' Connections);
the environment wins over local.settings.json, as ``func start`` gives it. A value meant for the local
development storage is Azurite's to replace; any other account, or an identity-based connection, is the
app's own and Azurite is not started.
"""

from __future__ import annotations

import uuid

import pytest
from azure.data.tables import TableServiceClient

from devhost.storage.settings import (
    development_connection_string,
    points_at_development_storage,
    storage_configured_elsewhere,
)
from tests.azurite import table_connection_string

REAL = (
    "DefaultEndpointsProtocol=https;"
    "AccountName=busbarprod;AccountKey=c2VjcmV0;EndpointSuffix=core.windows.net"
)


@pytest.mark.parametrize(
    "value",
    [
        "UseDevelopmentStorage=true",  # Core Tools' template, and local.settings.sample.json
        "usedevelopmentstorage = TRUE",
        development_connection_string("127.0.0.1", 10000, 10001, 10002),  # Azurite's documented form
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=k;TableEndpoint=http://localhost:1/devstoreaccount1",
    ],
)
def test_values_meant_for_the_development_storage_are_azurites_to_serve(value: str) -> None:
    assert points_at_development_storage(value)
    assert storage_configured_elsewhere({"AzureWebJobsStorage": value}, {}) is None
    assert storage_configured_elsewhere({}, {"AzureWebJobsStorage": value}) is None


def test_no_storage_setting_at_all_or_an_empty_one_is_azurites_to_serve() -> None:
    assert storage_configured_elsewhere({}, {}) is None
    assert (
        storage_configured_elsewhere({"AzureWebJobsStorage": "", "AzureWebJobsStorage__accountName": ""}, {})
        is None
    )


def test_another_account_in_the_settings_file_wins_and_azurite_is_not_started() -> None:
    assert not points_at_development_storage(REAL)
    assert (
        storage_configured_elsewhere({"AzureWebJobsStorage": REAL}, {})
        == "AzureWebJobsStorage from local.settings.json"
    )


def test_the_environment_wins_over_the_settings_file_either_way() -> None:
    development = {"AzureWebJobsStorage": "UseDevelopmentStorage=true"}
    assert storage_configured_elsewhere(development, {"AzureWebJobsStorage": REAL}) == (
        "AzureWebJobsStorage from the environment"
    )
    assert storage_configured_elsewhere({"AzureWebJobsStorage": REAL}, development) is None


@pytest.mark.parametrize(
    "prop", ["accountName", "serviceUri", "blobServiceUri", "queueServiceUri", "tableServiceUri"]
)
def test_an_identity_based_connection_is_the_apps_own_account(prop: str) -> None:
    name = f"AzureWebJobsStorage__{prop}"
    assert storage_configured_elsewhere({name: "busbarhost"}, {}) == (
        f"an identity-based AzureWebJobsStorage ({name} from local.settings.json)"
    )
    assert storage_configured_elsewhere({}, {name: "busbarhost"}) == (
        f"an identity-based AzureWebJobsStorage ({name} from the environment)"
    )


def test_a_plain_development_value_wins_over_identity_based_settings_as_the_exact_match_does() -> None:
    settings = {
        "AzureWebJobsStorage": "UseDevelopmentStorage=true",
        "AzureWebJobsStorage__accountName": "busbarhost",
    }
    assert storage_configured_elsewhere(settings, {}) is None


def test_the_development_connection_string_reaches_each_service_on_its_port() -> None:
    # The tests' Azurite table service (tests/azurite.py) on its OS-picked port, reached through the string
    # devhost builds, as the app's azure-data-tables client reads it.
    port = int(table_connection_string().split("TableEndpoint=http://127.0.0.1:")[1].split("/")[0])
    connection = development_connection_string("127.0.0.1", 1, 2, port)
    table = f"t{uuid.uuid4().hex[:12]}"
    with TableServiceClient.from_connection_string(connection) as service:
        assert service.url.startswith(f"http://127.0.0.1:{port}/devstoreaccount1")
        client = service.create_table(table)
        client.upsert_entity({"PartitionKey": "p", "RowKey": "r", "value": "through devhost's string"})
        assert client.get_entity("p", "r")["value"] == "through devhost's string"
