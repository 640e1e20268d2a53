"""The management plane: one way to build an ``azure-mgmt-servicebus`` client, in Azure and locally.

In Azure the client authenticates with ``DefaultAzureCredential`` (the Function App's managed identity)
against ``https://management.azure.com``. Locally it talks to the emulator's ARM endpoint over plain
HTTP with the emulator's development token. azure-core refuses to send a bearer token over ``http://``
unless each call passes ``enforce_https=False``; :class:`ManagementClient` passes it for plain-HTTP
endpoints, so calling code is the same in both places.

App settings (see ``local.settings.sample.json``):

``BUSBAR_SUBSCRIPTION_ID``, ``BUSBAR_RESOURCE_GROUP``, ``BUSBAR_NAMESPACE``
    Where the Service Bus namespace lives.
``BUSBAR_MANAGEMENT_ENDPOINT``
    ARM base URL; default ``https://management.azure.com``. Locally ``http://127.0.0.1:5300``.
``BUSBAR_MANAGEMENT_TOKEN``
    Development only: a static bearer token (the emulator's). When unset, ``DefaultAzureCredential``.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from azure.core.credentials import AccessToken, TokenCredential
from azure.mgmt.servicebus import ServiceBusManagementClient

AZURE_MANAGEMENT_ENDPOINT = "https://management.azure.com"
EMULATOR_NAMESPACE = "sbemulatorns"


class SettingsError(ValueError):
    """App settings are missing or invalid. ``problems`` lists each (one line per bad setting); the message
    joins them with ``; ``."""

    def __init__(self, *problems: str) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(problems))


@dataclass(frozen=True, slots=True)
class ManagementSettings:
    """Where the namespace is and how to authenticate to its management plane."""

    subscription_id: str
    resource_group: str
    namespace: str
    endpoint: str = AZURE_MANAGEMENT_ENDPOINT
    token: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ManagementSettings:
        """Read the ``BUSBAR_*`` management settings; every missing one is reported at once."""
        values = os.environ if env is None else env
        missing = [
            name
            for name in ("BUSBAR_SUBSCRIPTION_ID", "BUSBAR_RESOURCE_GROUP", "BUSBAR_NAMESPACE")
            if not values.get(name, "").strip()
        ]
        problems = [f"missing app setting(s): {', '.join(missing)}"] if missing else []
        endpoint = values.get("BUSBAR_MANAGEMENT_ENDPOINT", "").strip() or AZURE_MANAGEMENT_ENDPOINT
        if not endpoint.startswith(("http://", "https://")):
            problems.append(f"BUSBAR_MANAGEMENT_ENDPOINT must be an http(s) URL, got {endpoint!r}")
        if problems:
            raise SettingsError(*problems)
        return cls(
            subscription_id=values["BUSBAR_SUBSCRIPTION_ID"].strip(),
            resource_group=values["BUSBAR_RESOURCE_GROUP"].strip(),
            namespace=values["BUSBAR_NAMESPACE"].strip(),
            endpoint=endpoint.rstrip("/"),
            token=values.get("BUSBAR_MANAGEMENT_TOKEN", "").strip() or None,
        )

    @property
    def plain_http(self) -> bool:
        """True for a local (emulator) endpoint without TLS."""
        return self.endpoint.startswith("http://")


class StaticTokenCredential:
    """A ``TokenCredential`` that always presents one token (the emulator's development token)."""

    def __init__(self, token: str) -> None:
        self._token = token

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken(self._token, int(time.time()) + 3600)


class PlainHttpOperations:
    """Wraps an operations group so every call carries ``enforce_https=False`` (for an ``http://`` ARM
    endpoint, i.e. the emulator's: azure-core refuses to send a bearer token over plain HTTP otherwise)."""

    def __init__(self, operations: object) -> None:
        self._operations = operations

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._operations, name)
        if not callable(attribute):
            return attribute
        return functools.partial(attribute, enforce_https=False)


class ManagementClient:
    """A ``ServiceBusManagementClient`` bound to one namespace.

    ``queues``, ``topics``, ``subscriptions``, ``rules`` and ``namespaces`` are the SDK's operation groups
    (wrapped for plain HTTP when needed); ``scope`` is ``(resource_group, namespace)``, the first two
    arguments of every entity operation.
    """

    def __init__(
        self, settings: ManagementSettings, credential: TokenCredential | None = None, **kwargs: Any
    ):
        self.settings = settings
        if credential is None:
            credential = _credential(settings)
        self.client = ServiceBusManagementClient(
            credential=credential,
            subscription_id=settings.subscription_id,
            base_url=settings.endpoint,
            **kwargs,
        )
        wrap = PlainHttpOperations if settings.plain_http else (lambda operations: operations)
        self.queues: Any = wrap(self.client.queues)
        self.topics: Any = wrap(self.client.topics)
        self.subscriptions: Any = wrap(self.client.subscriptions)
        self.rules: Any = wrap(self.client.rules)
        self.namespaces: Any = wrap(self.client.namespaces)

    @property
    def scope(self) -> tuple[str, str]:
        """``(resource_group, namespace)``."""
        return self.settings.resource_group, self.settings.namespace

    def close(self) -> None:
        """Close the underlying HTTP pipeline."""
        self.client.close()

    def __enter__(self) -> ManagementClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _credential(settings: ManagementSettings) -> TokenCredential:
    if settings.token is not None:
        return StaticTokenCredential(settings.token)
    # Imported here: azure-identity is heavy and not needed locally.
    from azure.identity import DefaultAzureCredential

    return DefaultAzureCredential()
