"""The app's services, composed from the app settings and the hosted endpoints (what function code calls).

The services in :mod:`shared.api` take their options, clients and locks as arguments; this module builds
them from the app settings through :mod:`app.runtime` (the cached clients), so ``shared`` never reaches up
into the runtime.
"""

from __future__ import annotations

from collections.abc import Mapping

from app import runtime
from app.discovery import hosted_catalog
from shared.api import Misconfigured
from shared.api.message_size import MessageSizeLimits
from shared.api.provisioning.lock import LOCK_QUEUE, ProvisioningLocks, create_lock_queue, lock_wait_seconds
from shared.api.provisioning.service import ProvisioningService, entity_defaults
from shared.api.publishing import PublishingService
from shared.app_settings import read
from shared.contracts import ContractRegistry
from shared.entity_paths import endpoint_queue_path, hierarchy
from shared.handlers.endpoints import EndpointCatalog
from shared.management import SettingsError
from shared.ops.entity_sections import AppEntities
from shared.router.service import ROUTER_SUBSCRIPTION, FallbackRouter
from shared.topology import HierarchyNamespace, Publisher, TopologyValidationError, desired_state
from shared.topology.options import FALLBACK_TOPIC_SETTING

CATALOG = hosted_catalog(runtime.environment())
"""The endpoints this app hosts: every endpoint module under ``app/endpoints/`` (:mod:`app.discovery`)."""

PUBLISHED_ONLY = ContractRegistry()
"""Contracts the app publishes over HTTP (``POST /api/events/{eventType}``) and provisions for subscribers
(the ``PUT``) that no hosted endpoint declares: events only other systems handle. List them here,
``ContractRegistry(TheEvent, ...)``; a hosted endpoint's contracts need no declaration (the sample declares
none: every sample contract is in its endpoints' registry, and an endpoint module's contracts are known
as soon as the module is under ``app/endpoints/``)."""


def app_contracts(
    catalog: EndpointCatalog, published_only: ContractRegistry = PUBLISHED_ONLY
) -> ContractRegistry:
    """The contracts the HTTP API knows: every contract of ``catalog``'s endpoints (what each handles and
    publishes, :meth:`~shared.handlers.endpoints.EndpointCatalog.contracts`) and the published-only ones."""
    return ContractRegistry.union(catalog.contracts(), published_only)


CONTRACTS = app_contracts(CATALOG)


def provisioning_from_settings(
    env: Mapping[str, str], catalog: EndpointCatalog, contracts: ContractRegistry
) -> ProvisioningService:
    """The provisioning service for ``env`` (options are re-read: a bad value surfaces as an error)."""
    try:
        options = runtime.topology_options(env)
    except TopologyValidationError as error:
        raise Misconfigured("the topology options app settings are invalid", error.errors) from None
    try:
        management = runtime.management_client(env)
        defaults = entity_defaults(env)
        wait_seconds = lock_wait_seconds(env)
    except SettingsError as error:
        raise Misconfigured("the app settings are incomplete", [str(error)]) from None
    hierarchy = HierarchyNamespace(options.hierarchy_namespace)
    lock_queue = hierarchy.apply(read(LOCK_QUEUE, env) or "busbar-provisioning-locks")
    locks = ProvisioningLocks(
        connect=lambda: runtime.new_service_bus_client(env, retry_total=0),
        queue=lock_queue,
        ensure_queue=lambda: create_lock_queue(management, lock_queue),
        wait_seconds=wait_seconds,
    )
    return ProvisioningService(
        catalog=catalog,
        contracts=contracts,
        options=options,
        management=management,
        defaults=defaults,
        env=env,
        locks=locks,
    )


def publishing_from_settings(env: Mapping[str, str], contracts: ContractRegistry) -> PublishingService:
    """The publishing service for ``env``: the topology options, and the topics' maximum message sizes
    when the management settings are there (without them Service Bus alone checks sizes)."""
    try:
        options = runtime.topology_options(env)
    except TopologyValidationError as error:
        raise Misconfigured("the topology options app settings are invalid", error.errors) from None
    limits: MessageSizeLimits | None = runtime.message_size_limits(env)
    return PublishingService(
        contracts=contracts,
        options=options,
        max_message_bytes=None if limits is None else limits.max_message_bytes,
    )


def provisioning_service() -> ProvisioningService:
    """The provisioning service for the current settings (raises :class:`Misconfigured`)."""
    return provisioning_from_settings(runtime.environment(), CATALOG, CONTRACTS)


def publishing_service() -> PublishingService:
    """The publishing service for the current settings: needs no management settings."""
    return publishing_from_settings(runtime.environment(), CONTRACTS)


def fallback_router() -> FallbackRouter:
    """The fallback router for the current settings: it reads the ordering key of an event that arrives
    without a SessionId with the app's contracts (raises ``SettingsError`` when misconfigured)."""
    return runtime.fallback_router(CONTRACTS)


def publisher() -> Publisher:
    """The publisher of events posted over HTTP (raises :class:`Misconfigured`)."""
    try:
        return runtime.publisher(runtime.api_endpoint_name())
    except TopologyValidationError as error:
        raise Misconfigured("the topology options app settings are invalid", error.errors) from None
    except SettingsError as error:
        raise Misconfigured("the app settings are incomplete", [str(error)]) from None


def app_entities(env: Mapping[str, str], catalog: EndpointCatalog = CATALOG) -> AppEntities:
    """The entities the console lists as this app's: ``catalog``'s endpoint queues (as provisioned, under
    the hierarchy prefix), the topics and subscriptions their topology wants, the provisioning lock queue,
    the fallback topic and the router's subscription on it. Invalid topology options leave the topology's
    topics and subscriptions out, with a note saying why (the console still lists every entity)."""
    prefix = hierarchy(env)
    endpoints = {endpoint_queue_path(e, env): e.name for e in catalog}
    lock_queue = prefix.apply(read(LOCK_QUEUE, env) or "busbar-provisioning-locks")
    router = read(ROUTER_SUBSCRIPTION, env) or "busbar-router"
    try:
        options = runtime.topology_options(env)
        states = [
            desired_state(options, e.queue(env), e.subscribed_events(), ordered=e.ordered) for e in catalog
        ]
    except TopologyValidationError as error:
        note = "the topology options are invalid, so the app's topics are not told apart: " + "; ".join(
            error.errors
        )
        fallback = read(FALLBACK_TOPIC_SETTING, env)
        return AppEntities(
            endpoints,
            lock_queue=lock_queue,
            fallback_topic=prefix.apply(fallback) if fallback else None,
            router_subscription=router,
            notes=(note,),
        )
    fallback = options.fallback_topic.topic_name if options.fallback_topic else None
    return AppEntities(
        endpoints=endpoints,
        topics=frozenset(t for s in states for t in (*s.topics, *s.forwarding_topics)),
        subscriptions=frozenset(sub.path for s in states for sub in s.subscriptions),
        lock_queue=lock_queue,
        fallback_topic=prefix.apply(fallback) if fallback else None,
        router_subscription=router,
    )
