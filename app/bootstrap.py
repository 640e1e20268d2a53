"""Start-up provisioning for ``make run``: the hosted endpoints' topology and the fallback router's entities.

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

import logging
from collections.abc import Callable, Iterable, Mapping

from azure.core.exceptions import HttpResponseError
from azure.mgmt.servicebus.models import SBSubscription, SBSubscriptionProperties, SBTopic, SBTopicProperties

from app.discovery import hosted_catalog
from app.settings import require_valid_settings
from shared.api.provisioning.service import entity_defaults
from shared.app_settings import read
from shared.handlers.endpoints import Endpoint
from shared.management import ManagementClient, ManagementSettings
from shared.router.service import ROUTER_SUBSCRIPTION
from shared.topology import (
    DesiredState,
    EntityDefaults,
    HierarchyNamespace,
    Provisioner,
    TopologyOptions,
    desired_state,
    load_topology_options,
)
from shared.topology.errors import QueueNeedsRecreatingError
from shared.topology.queue_move import check_no_second_subscription
from shared.topology.queues import topic_mismatch

log = logging.getLogger(__name__)


def provision(settings: Mapping[str, str]) -> None:
    """Provision the hosted endpoints and the fallback router for ``settings`` (idempotent). Every invalid
    app setting is reported first, all in one error, before anything is provisioned."""
    require_valid_settings(settings)
    options = load_topology_options(settings)
    defaults = entity_defaults(settings)
    with ManagementClient(ManagementSettings.from_env(settings)) as management:
        provision_endpoints(management, options, defaults, settings)
        if options.fallback_topic is not None and options.fallback_topic.topic_name:
            topic = HierarchyNamespace(options.hierarchy_namespace).apply(options.fallback_topic.topic_name)
            subscription = read(ROUTER_SUBSCRIPTION, settings) or "busbar-router"
            provision_router(management, topic, subscription, defaults)


def provision_endpoints(
    management: ManagementClient,
    options: TopologyOptions,
    defaults: EntityDefaults,
    settings: Mapping[str, str],
    endpoints: Iterable[Endpoint] | None = None,
) -> None:
    """Every endpoint's queues, topics and subscriptions, in one plan (``endpoints``: default the hosted
    catalog, :func:`app.discovery.hosted_catalog`). An ordered endpoint gets a session-enabled input queue
    and its hold queue.

    Raises :class:`~shared.topology.errors.QueueNeedsRecreatingError` before changing anything when an
    existing endpoint queue's ``RequiresSession`` differs from what its endpoint needs: the app must not
    start on a queue that would refuse (or not order) its messages; the message names the queue and the
    move to a new one. Raises :class:`~shared.topology.queue_move.SecondSubscriptionError` before changing
    anything when a subscription would be created beside one that forwards to the same queue already."""
    states = [
        desired_state(
            options,
            endpoint.queue(settings),
            endpoint.subscriptions(),
            ordered=endpoint.ordered,
            duplicate_detection_window=defaults.duplicate_detection_window,
        )
        for endpoint in (hosted_catalog(settings) if endpoints is None else endpoints)
    ]
    provisioner = Provisioner(management, defaults)
    plan = provisioner.plan(DesiredState.combine(states))
    if plan.refusals:
        raise QueueNeedsRecreatingError(plan.refusals)
    # After a move to a new queue, options that lost the subscription-name map would double every event.
    check_no_second_subscription(
        plan, lambda topic: management.subscriptions.list_by_topic(*management.scope, topic)
    )
    result = provisioner.apply(plan)
    log.info("endpoints provisioned: %d created, %d unchanged", len(result.created), len(result.unchanged))


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
