"""Start-up provisioning: the hosted endpoints' topology and the fallback router's entities.

Two callers, one path (:func:`provision_app`): devhost's ``--startup-hook app.bootstrap:provision`` under
``make run``, and, in Azure, ``function_app.py`` at indexing when ``BUSBAR_PROVISION_ON_START`` is on
(:mod:`app.provision_on_start`: under the provisioning lock, as many instances start at once).

``provision(settings)`` is idempotent (existing entities are left alone, as NServiceBus installers do) and
runs before the triggers start listening, so the queues and subscriptions they bind to exist:

1. every hosted endpoint's input queue (session-enabled, with its hold queue, for an ordered endpoint),
   topics and forwarding subscriptions (topology library); an existing queue whose ``RequiresSession``
   or ``RequiresDuplicateDetection`` differs fails the start-up with a message naming it (it needs a new
   queue: docs/topology-guide.md), and so does a subscription that would be created beside one forwarding
   to the same queue already (a moved endpoint whose options lost their ``QueueNameToSubscriptionNameMap``
   entry: every event twice); every queue and topic requires duplicate detection over
   ``BUSBAR_DUPLICATE_DETECTION_WINDOW``;
2. when a fallback topic is configured: the topic and its catch-all router subscription
   (``BUSBAR_ROUTER_SUBSCRIPTION``, ``$Default`` ``1=1``, no forwarding: the router function reads it).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping

from azure.core.exceptions import HttpResponseError
from azure.mgmt.servicebus.models import SBSubscription, SBSubscriptionProperties, SBTopic, SBTopicProperties

from app.discovery import hosted_catalog
from app.provision_on_start import enabled
from app.settings import require_valid_settings
from shared.api.provisioning.lock import (
    LOCK_QUEUE,
    ProvisioningLocks,
    create_lock_queue,
    endpoint_key,
    lock_wait_seconds,
)
from shared.api.provisioning.service import entity_defaults
from shared.app_settings import read
from shared.handlers.endpoints import Endpoint
from shared.management import ManagementClient, ManagementSettings, SettingsError
from shared.router.service import ROUTER_SUBSCRIPTION
from shared.topology import (
    ApplyResult,
    DesiredState,
    EntityDefaults,
    HierarchyNamespace,
    Plan,
    Provisioner,
    TopologyOptions,
    desired_state,
    load_topology_options,
)
from shared.topology.errors import QueueNeedsRecreatingError
from shared.topology.queues import topic_mismatch
from shared.topology.single_delivery import STARTUP_HINT, Subscriber, plan_delivery

log = logging.getLogger(__name__)


def provision(settings: Mapping[str, str]) -> None:
    """Provision the hosted endpoints and the fallback router for ``settings`` (idempotent): devhost's
    ``--startup-hook`` under ``make run``. Every invalid app setting is reported first, all in one error,
    before anything is provisioned."""
    provision_app(settings)


def provision_app(
    settings: Mapping[str, str],
    endpoints: Iterable[Endpoint] | None = None,
    *,
    locked: bool = False,
) -> ApplyResult:
    """Provision ``endpoints`` (default: those ``settings`` host, :func:`app.discovery.hosted_catalog`) and
    the fallback router for ``settings``, through the one planner; what the endpoints' plan created and found.

    ``locked``: hold every endpoint's provisioning lock (:mod:`shared.api.provisioning.lock`, the HTTP
    API's) while planning and applying, so instances starting at once, and ``PUT``s for the same endpoints,
    take turns: each plans against what the previous one left. A first plan without the locks that finds
    nothing to change (every later start) skips them; its refusals are raised at once."""
    require_valid_settings(settings)
    options = load_topology_options(settings)
    defaults = entity_defaults(settings)
    hosted = list(hosted_catalog(settings) if endpoints is None else endpoints)
    with (
        ManagementClient(ManagementSettings.from_env(settings)) as management,
        contextlib.ExitStack() as held,
    ):
        provisioner, plan = plan_endpoints(management, options, defaults, settings, hosted)
        if locked and plan.has_changes:
            # Only a start that has something to change takes the locks: once the topology is in place,
            # instances scaling out at once do not queue behind each other for a plan of "unchanged" (and
            # apply that plan, read once). Under the locks the plan is made again, against what an instance
            # that held them before left.
            hierarchy = HierarchyNamespace(options.hierarchy_namespace)
            locks = _locks(settings, management, hierarchy)
            held.enter_context(locks.hold(endpoint_key(hierarchy.apply(e.queue(settings))) for e in hosted))
            provisioner, plan = plan_endpoints(management, options, defaults, settings, hosted)
        result = _apply(provisioner, plan)
        if options.fallback_topic is not None and options.fallback_topic.topic_name:
            topic = HierarchyNamespace(options.hierarchy_namespace).apply(options.fallback_topic.topic_name)
            subscription = read(ROUTER_SUBSCRIPTION, settings) or "busbar-router"
            provision_router(management, topic, subscription, defaults)
    return result


def _locks(
    settings: Mapping[str, str], management: ManagementClient, hierarchy: HierarchyNamespace
) -> ProvisioningLocks:
    """The HTTP API's provisioning locks (the same lock queue and wait) for ``settings``."""
    from app import runtime

    queue = hierarchy.apply(read(LOCK_QUEUE, settings) or "busbar-provisioning-locks")
    return ProvisioningLocks(
        connect=lambda: runtime.new_service_bus_client(settings, retry_total=0),
        queue=queue,
        ensure_queue=lambda: create_lock_queue(management, queue),
        wait_seconds=lock_wait_seconds(settings),
    )


def provision_endpoints(
    management: ManagementClient,
    options: TopologyOptions,
    defaults: EntityDefaults,
    settings: Mapping[str, str],
    endpoints: Iterable[Endpoint] | None = None,
) -> ApplyResult:
    """Every endpoint's queues, topics and subscriptions, in one plan (``endpoints``: default the hosted
    catalog, :func:`app.discovery.hosted_catalog`); what was created and found. An ordered endpoint gets a
    session-enabled input queue and its hold queue.

    Raises :class:`~shared.topology.errors.QueueNeedsRecreatingError` before changing anything when an
    existing endpoint queue's ``RequiresSession`` differs from what its endpoint needs: the app must not
    start on a queue that would refuse (or not order) its messages; the message names the queue and the
    move to a new one. Raises :class:`~shared.topology.queue_move.SecondSubscriptionError` before changing
    anything when a subscription would be created beside one that forwards to the same queue already, and
    :class:`~shared.topology.delivery_paths.DuplicateDeliveryError` when an endpoint would then receive an
    event through two paths (:func:`~shared.topology.single_delivery.plan_delivery`)."""
    return _apply(*plan_endpoints(management, options, defaults, settings, endpoints))


def _apply(provisioner: Provisioner, plan: Plan) -> ApplyResult:
    result = provisioner.apply(plan)
    log.info("endpoints provisioned: %d created, %d unchanged", len(result.created), len(result.unchanged))
    return result


def plan_endpoints(
    management: ManagementClient,
    options: TopologyOptions,
    defaults: EntityDefaults,
    settings: Mapping[str, str],
    endpoints: Iterable[Endpoint] | None = None,
) -> tuple[Provisioner, Plan]:
    """The checked plan of :func:`provision_endpoints` (reads only), with the provisioner to apply it."""
    hosted = list(hosted_catalog(settings) if endpoints is None else endpoints)
    states = [
        desired_state(
            options,
            endpoint.queue(settings),
            endpoint.subscriptions(),
            ordered=endpoint.ordered,
            duplicate_detection_window=defaults.duplicate_detection_window,
        )
        for endpoint in hosted
    ]
    provisioner = Provisioner(management, defaults)
    # The one planner (as the HTTP API and the CLI): refusals, one delivery per subscriber, and no second
    # subscription beside a moved one (options that lost the subscription-name map would double every event).
    plan = plan_delivery(
        provisioner,
        options,
        [Subscriber(endpoint.queue(settings), endpoint.subscriptions()) for endpoint in hosted],
        DesiredState.combine(states),
        hint=STARTUP_HINT,
    )
    return provisioner, plan


def provision_router(
    management: ManagementClient, topic: str, subscription: str, defaults: EntityDefaults
) -> None:
    """The fallback topic and the router's catch-all subscription on it (created only when missing). The
    topic requires duplicate detection like every topic Busbar creates; an existing one without it
    raises :class:`~shared.topology.errors.QueueNeedsRecreatingError` (the plan's refusal)."""
    group, namespace = management.scope
    window = defaults.duplicate_detection_window
    found = _create_missing(
        lambda: management.topics.get(group, namespace, topic),
        lambda: management.topics.create_or_update(
            group,
            namespace,
            topic,
            SBTopic(
                properties=SBTopicProperties(
                    max_size_in_megabytes=defaults.max_size_in_megabytes,
                    enable_batched_operations=defaults.enable_batched_operations,
                    requires_duplicate_detection=True,
                    duplicate_detection_history_time_window=window,
                )
            ),
        ),
    )
    refusal = None if found is None else topic_mismatch(topic, window, found)
    if refusal is not None:
        raise QueueNeedsRecreatingError([refusal])
    _create_missing(
        lambda: management.subscriptions.get(group, namespace, topic, subscription),
        lambda: management.subscriptions.create_or_update(
            group,
            namespace,
            topic,
            subscription,
            SBSubscription(
                properties=SBSubscriptionProperties(
                    lock_duration=defaults.lock_duration,
                    max_delivery_count=defaults.max_delivery_count,
                    enable_batched_operations=defaults.enable_batched_operations,
                    dead_lettering_on_filter_evaluation_exceptions=False,
                )
            ),
        ),
    )
    log.info("fallback router subscription %s/Subscriptions/%s is in place", topic, subscription)


def _create_missing(get: Callable[[], object], create: Callable[[], object]) -> object | None:
    """Create the entity unless ``get`` finds it; the entity found (``None``: this call created it)."""
    try:
        return get()
    except HttpResponseError as error:
        if error.status_code != 404:
            raise
    try:
        create()
    except HttpResponseError as error:
        if error.status_code != 409:  # created concurrently: fine
            raise
        return get()
    return None


def provision_on_start(
    settings: Mapping[str, str], endpoints: Iterable[Endpoint] | None = None
) -> ApplyResult | None:
    """Provision the app's endpoints (``endpoints``: those ``settings`` host) under the provisioning lock when
    ``BUSBAR_PROVISION_ON_START`` is on; what was created and found, ``None`` when off. Raises what the
    planner and the management plane refuse (nothing is applied then), and every invalid setting at once
    when ``BUSBAR_PROVISION_ON_START`` itself is invalid (the indexing fails with that message)."""
    try:
        on = enabled(settings)
    except SettingsError:
        require_valid_settings(settings)  # one error naming this setting and every other invalid one
        raise
    if not on:
        return None
    result = provision_app(settings, endpoints, locked=True)
    log.info("provisioned on start: %d created, %d unchanged", len(result.created), len(result.unchanged))
    return result
