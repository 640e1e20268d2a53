"""The app's long-lived clients, built from app settings once per distinct configuration.

Functions run many invocations per process; opening an AMQP connection or a sender costs far more than a
send, so the Service Bus client, the publishers and the management client are cached, keyed by the settings
that define them (several devhost instances in one test process use different settings side by side).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from azure.servicebus import ServiceBusClient

from shared.api.message_size import MessageSizeLimits, arm_topic_max_message_size
from shared.app_settings import AppSetting, read
from shared.archive.writer import ArchiveWriter
from shared.contracts import ContractRegistry
from shared.idempotency.records import HandledRecords, handled_records_from_settings
from shared.management import ManagementClient, ManagementSettings, SettingsError
from shared.ordering.held_keys import HeldKeys, held_keys_from_settings
from shared.redrive import settings as archive_settings
from shared.router.service import (
    ROUTER_SUBSCRIPTION,
    ArchivingRecorder,
    FallbackRouter,
    snapshot_seconds,
)
from shared.storage_tables import storage_identity
from shared.topology.names import HierarchyNamespace
from shared.topology.options import TopologyOptions, load_topology_options
from shared.topology.publisher import Publisher

if TYPE_CHECKING:
    from shared.amqp.connection import Namespace

CONNECTION = "ServiceBusConnection"
"""The connection name the triggers use (app setting, or ``<name>__fullyQualifiedNamespace``)."""

API_ENDPOINT_NAME = AppSetting(
    "BUSBAR_API_ENDPOINT_NAME",
    "NServiceBus.OriginatingEndpoint of events published through POST /api/events/{eventType}.",
    default="busbar-api",
)

SETTINGS: tuple[AppSetting, ...] = (API_ENDPOINT_NAME,)

_cache: dict[tuple[str, ...], object] = {}
_cache_lock = threading.Lock()


def environment() -> Mapping[str, str]:
    """The app settings as the host exposes them: the process environment."""
    return os.environ


def cached[T](key: tuple[str, ...], build: Callable[[], T]) -> T:
    """The process's one ``key``'s object, built by ``build`` the first time (under the cache's lock, which
    is not reentrant: ``build`` must not call this); :func:`reset` closes and forgets it. The one cache of
    the app's long-lived clients: ``key`` starts with what the object is, then the settings that define it."""
    with _cache_lock:
        found = _cache.get(key)
        if found is None:
            found = build()
            _cache[key] = found
        return found  # type: ignore[return-value]


def service_bus_client(env: Mapping[str, str] | None = None) -> ServiceBusClient:
    """A client for ``ServiceBusConnection`` (connection string) or its ``__fullyQualifiedNamespace``."""
    values = environment() if env is None else env
    key, build = _service_bus_client_factory(values)
    return cached(key, build)


def new_service_bus_client(env: Mapping[str, str] | None = None, **kwargs: Any) -> ServiceBusClient:
    """A new, uncached client for the same connection (``kwargs`` go to the SDK, e.g. ``retry_total``);
    the caller closes it."""
    values = environment() if env is None else env
    return _service_bus_client_factory(values, **kwargs)[1]()


def wire_namespace(env: Mapping[str, str] | None = None) -> Namespace:
    """The namespace of ``ServiceBusConnection`` for Busbar's own AMQP receivers (the console's), cached;
    with the managed identity, the process's one credential (its tokens cached)."""
    from shared.amqp.connection import Namespace  # proton loads its C library only when it is needed

    values = environment() if env is None else env
    connection_string = (values.get(CONNECTION) or "").strip()
    if connection_string:
        return cached(
            ("wire", connection_string), lambda: Namespace.from_connection_string(connection_string)
        )
    require_connection(values)
    namespace = (values.get(f"{CONNECTION}__fullyQualifiedNamespace") or "").strip()

    from azure.identity import DefaultAzureCredential  # heavy; only in Azure

    credential = cached(("credential",), DefaultAzureCredential)
    return cached(("wire-identity", namespace), lambda: Namespace.from_credential(namespace, credential))


def require_connection(values: Mapping[str, str]) -> None:
    """Raise :class:`SettingsError` unless ``ServiceBusConnection`` names a connection string or its
    ``__fullyQualifiedNamespace`` a namespace (the managed identity's)."""
    if not (values.get(CONNECTION) or values.get(f"{CONNECTION}__fullyQualifiedNamespace") or "").strip():
        raise SettingsError(
            f"missing app setting: {CONNECTION} (connection string) or {CONNECTION}__fullyQualifiedNamespace"
        )


def _service_bus_client_factory(
    values: Mapping[str, str], **kwargs: Any
) -> tuple[tuple[str, ...], Callable[[], ServiceBusClient]]:
    connection_string = (values.get(CONNECTION) or "").strip()
    if connection_string:
        return ("sb", connection_string), lambda: ServiceBusClient.from_connection_string(
            connection_string, **kwargs
        )
    require_connection(values)
    namespace = (values.get(f"{CONNECTION}__fullyQualifiedNamespace") or "").strip()

    from azure.identity import DefaultAzureCredential  # heavy; only in Azure

    # One credential per process: it caches its tokens, which new clients (locks) then reuse. Taken
    # here, not in build(), which runs under the cache's (non-reentrant) lock.
    credential = cached(("credential",), DefaultAzureCredential)

    def build() -> ServiceBusClient:
        return ServiceBusClient(namespace, credential, **kwargs)

    return ("sb-identity", namespace), build


class EnvironmentTransport:
    """The :class:`~shared.handlers.subscriber.Transport` of the cached clients for ``env`` (default: the
    process environment, read when a client is first needed)."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = env

    def publisher(self, endpoint_name: str) -> Publisher:
        """The cached publisher of ``endpoint_name``."""
        return publisher(endpoint_name, self._env)

    def service_bus_client(self) -> ServiceBusClient:
        """The cached Service Bus client."""
        return service_bus_client(self._env)

    def handled_records(self) -> HandledRecords:
        """The cached records of handled messages."""
        return handled_records(self._env)


def held_keys(env: Mapping[str, str] | None = None) -> HeldKeys:
    """The cached held-key store of ``AzureWebJobsStorage`` (ordered endpoints)."""
    values = environment() if env is None else env
    key = ("held-keys", *storage_identity(values))
    return cached(key, lambda: held_keys_from_settings(values))


def handled_records(env: Mapping[str, str] | None = None) -> HandledRecords:
    """The cached handled-message records of ``AzureWebJobsStorage`` (every endpoint's)."""
    values = environment() if env is None else env
    key = ("handled-records", *storage_identity(values))
    return cached(key, lambda: handled_records_from_settings(values))


def topology_options(env: Mapping[str, str] | None = None) -> TopologyOptions:
    """The effective topology options (not cached: cheap, and a bad value must surface every time)."""
    return load_topology_options(environment() if env is None else env)


def publisher(endpoint_name: str, env: Mapping[str, str] | None = None) -> Publisher:
    """The cached publisher of ``endpoint_name`` for the current connection and topology options."""
    values = environment() if env is None else env
    client = service_bus_client(values)
    options = topology_options(values)
    key = ("publisher", str(id(client)), options.model_dump_json(), endpoint_name)
    return cached(key, lambda: Publisher(client, options, endpoint_name=endpoint_name))


def api_endpoint_name(env: Mapping[str, str] | None = None) -> str:
    """The originating endpoint name of events published over HTTP."""
    return read(API_ENDPOINT_NAME, environment() if env is None else env) or "busbar-api"


def management_client(env: Mapping[str, str] | None = None) -> ManagementClient:
    """The cached management client of the namespace the ``BUSBAR_*`` management settings name."""
    settings = ManagementSettings.from_env(environment() if env is None else env)
    key = (
        "mgmt",
        settings.subscription_id,
        settings.resource_group,
        settings.namespace,
        settings.endpoint,
        settings.token or "",
    )
    return cached(key, lambda: ManagementClient(settings))


def message_size_limits(env: Mapping[str, str] | None = None) -> MessageSizeLimits | None:
    """The cached maximum message sizes of the topics, read through the management client; None without
    the ``BUSBAR_*`` management settings (publishing works without them)."""
    values = environment() if env is None else env
    try:
        management = management_client(values)
    except SettingsError:
        return None
    key = ("message-size-limits", str(id(management)))
    return cached(key, lambda: MessageSizeLimits(arm_topic_max_message_size(management)))


def reset() -> None:
    """Close and forget every cached client (tests, and a host shutting down)."""
    with _cache_lock:
        items = list(_cache.values())
        _cache.clear()
    # Publishers before the clients their senders belong to.
    items.sort(key=lambda item: not isinstance(item, Publisher))
    for item in items:
        close = getattr(item, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):  # best effort: the process is done with them
                close()


def archive_writer(env: Mapping[str, str] | None = None) -> ArchiveWriter:
    """The failure archive the re-drive settings name (``BUSBAR_ARCHIVE_URL`` and its credentials)."""
    values = environment() if env is None else env
    url = read(archive_settings.ARCHIVE_URL, values) or ".data/archive"
    options: dict[str, Any] = {}
    connection_string = account = None
    # The same rules as the re-drive's archive (shared.redrive.settings): credentials only for blob storage.
    if url.startswith(("abfs://", "az://", "abfss://")):
        connection_string = read(archive_settings.ARCHIVE_CONNECTION_STRING, values)
        account = read(archive_settings.ARCHIVE_ACCOUNT_NAME, values)
        if connection_string:
            options["connection_string"] = connection_string
        elif account:
            options.update(account_name=account, anon=False)  # adlfs then uses DefaultAzureCredential
        else:
            raise SettingsError(
                f"{archive_settings.ARCHIVE_URL.name} is {url!r}: set "
                f"{archive_settings.ARCHIVE_ACCOUNT_NAME.name} "
                f"(or, locally, {archive_settings.ARCHIVE_CONNECTION_STRING.name})"
            )
    key = ("archive", url, connection_string or "", account or "")
    return cached(key, lambda: ArchiveWriter(url, options))


def fallback_router(contracts: ContractRegistry, env: Mapping[str, str] | None = None) -> FallbackRouter:
    """The cached fallback router for the current settings, reading ordering keys with ``contracts``."""
    values = environment() if env is None else env
    options = topology_options(values)
    if options.fallback_topic is None or not options.fallback_topic.topic_name:
        raise SettingsError("no fallback topic is configured (BUSBAR_FALLBACK_TOPIC or TopologyOptions)")
    topic = HierarchyNamespace(options.hierarchy_namespace).apply(options.fallback_topic.topic_name)
    subscription = read(ROUTER_SUBSCRIPTION, values) or "busbar-router"
    management = management_client(values)
    namespace = wire_namespace(values)
    writer = archive_writer(values)
    seconds = snapshot_seconds(values)
    key = (
        "router",
        options.model_dump_json(),
        subscription,
        str(id(management)),
        str(id(namespace)),
        str(seconds),
        str(id(contracts)),
    )
    return cached(
        key,
        lambda: FallbackRouter(
            management=management,
            namespace=namespace,
            options=options,
            contracts=contracts,
            fallback_topic=topic,
            router_subscription=subscription,
            recorder=ArchivingRecorder(writer),
            snapshot_seconds=seconds,
        ),
    )
