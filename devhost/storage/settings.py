"""``AzureWebJobsStorage`` locally: when devhost's Azurite serves it, and its connection string.

Functions apps name their storage account in the app setting ``AzureWebJobsStorage``: a connection string,
locally ``UseDevelopmentStorage=true`` (Core Tools' template; Azurite on its default ports), or in Azure an
identity-based connection (``AzureWebJobsStorage__accountName``, ``__blobServiceUri`` / ``__queueServiceUri``
/ ``__tableServiceUri``, ``__serviceUri``). As the host resolves a connection, a non-empty
``AzureWebJobsStorage`` itself wins over the ``AzureWebJobsStorage__*`` settings, and the environment wins
over local.settings.json.

devhost with ``--with-azurite`` gives the app its own Azurite unless the settings in force name another
account (:func:`storage_configured_elsewhere`): no ``AzureWebJobsStorage`` at all, or one meant for the local
development storage (``UseDevelopmentStorage=true``, or the development account ``devstoreaccount1``
whatever its endpoints), is replaced by Azurite's connection string on the ports it actually listens on
(:func:`development_connection_string`), in local.settings.json and in the environment alike: such a value
means "the local emulator", and this Azurite is it. Any other value, or an identity-based connection, wins:
the app uses that account and devhost starts no Azurite.
"""

from __future__ import annotations

from collections.abc import Mapping

STORAGE_SETTING = "AzureWebJobsStorage"
DEVELOPMENT_ACCOUNT = "devstoreaccount1"
# The development account's well-known key (Azurite's documented default; no secret).
DEVELOPMENT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
IDENTITY_PROPERTIES = ("accountName", "serviceUri", "blobServiceUri", "queueServiceUri", "tableServiceUri")


def development_connection_string(host: str, blob_port: int, queue_port: int, table_port: int) -> str:
    """The development account's connection string with each service's endpoint, in the form Azurite's
    documentation gives for ports other than the defaults."""
    return (
        f"DefaultEndpointsProtocol=http;AccountName={DEVELOPMENT_ACCOUNT};AccountKey={DEVELOPMENT_KEY};"
        f"BlobEndpoint=http://{host}:{blob_port}/{DEVELOPMENT_ACCOUNT};"
        f"QueueEndpoint=http://{host}:{queue_port}/{DEVELOPMENT_ACCOUNT};"
        f"TableEndpoint=http://{host}:{table_port}/{DEVELOPMENT_ACCOUNT};"
    )


def points_at_development_storage(value: str) -> bool:
    """Whether a storage connection string means the local storage emulator."""
    text = value.replace(" ", "").lower()
    return "usedevelopmentstorage=true" in text or f"accountname={DEVELOPMENT_ACCOUNT}" in text


def _in_force(name: str, file_values: Mapping[str, str], environment: Mapping[str, str]) -> tuple[str, str]:
    if name in environment:
        return environment[name], "the environment"
    return file_values.get(name, ""), "local.settings.json"


def storage_configured_elsewhere(
    file_values: Mapping[str, str], environment: Mapping[str, str]
) -> str | None:
    """Why the app's storage is not devhost's Azurite (the setting and where it comes from), or None when
    Azurite serves ``AzureWebJobsStorage`` (see the module docstring)."""
    value, source = _in_force(STORAGE_SETTING, file_values, environment)
    if value.strip():
        return None if points_at_development_storage(value) else f"{STORAGE_SETTING} from {source}"
    for suffix in IDENTITY_PROPERTIES:
        name = f"{STORAGE_SETTING}__{suffix}"
        value, source = _in_force(name, file_values, environment)
        if value.strip():
            return f"an identity-based {STORAGE_SETTING} ({name} from {source})"
    return None
