"""Busbar's NServiceBus-compatible topology: options, validation, publish routing and stamping, desired
state of an endpoint's subscriptions, and provisioning through ``azure-mgmt-servicebus``.

Compatible with the NServiceBus Azure Service Bus transport 6.4+ (topic-per-event, fallback topic,
routing modes, migration/bundle topologies, hierarchy namespace), so .NET and Python endpoints can share a
namespace. The behaviour reproduced is pinned by the tests in ``tests/shared/topology/``.

App settings are declared in :mod:`shared.topology.options` (``SETTINGS``).
"""

from shared.topology.desired import (
    DesiredState,
    RuleFilter,
    RuleSpec,
    SubscribedEvent,
    SubscriptionRequest,
    SubscriptionSpec,
    correlation_filter,
    desired_state,
    parse_subscribed_events,
    sql_like_filter,
    subscription_name,
)
from shared.topology.errors import (
    IncompatibleRoutingModesError,
    ProvisioningError,
    QuotaExceededError,
    TopologyValidationError,
    UnmappedEventError,
)
from shared.topology.messages import build_message, correlation_stamps, publish_headers
from shared.topology.names import HierarchyNamespace, rule_name
from shared.topology.options import (
    FallbackTopicOptions,
    MigrationTopologyOptions,
    PublishEntry,
    SubscriptionEntry,
    TopicRoutingMode,
    TopologyOptions,
    load_topology_options,
    parse_topology_options,
)
from shared.topology.provisioner import (
    ApplyResult,
    EntityDefaults,
    ExistingSubscription,
    Plan,
    PlanItem,
    Provisioner,
)
from shared.topology.publisher import PublishedMessage, Publisher, PublishResult
from shared.topology.routing import PublishRoute, publish_route
from shared.topology.validation import validate, validation_errors

__all__ = [
    "ApplyResult",
    "DesiredState",
    "EntityDefaults",
    "ExistingSubscription",
    "FallbackTopicOptions",
    "HierarchyNamespace",
    "IncompatibleRoutingModesError",
    "MigrationTopologyOptions",
    "Plan",
    "PlanItem",
    "Provisioner",
    "ProvisioningError",
    "PublishEntry",
    "PublishResult",
    "PublishRoute",
    "PublishedMessage",
    "Publisher",
    "QuotaExceededError",
    "RuleFilter",
    "RuleSpec",
    "SubscribedEvent",
    "SubscriptionEntry",
    "SubscriptionRequest",
    "SubscriptionSpec",
    "TopicRoutingMode",
    "TopologyOptions",
    "TopologyValidationError",
    "UnmappedEventError",
    "build_message",
    "correlation_filter",
    "correlation_stamps",
    "desired_state",
    "load_topology_options",
    "parse_subscribed_events",
    "parse_topology_options",
    "publish_headers",
    "publish_route",
    "rule_name",
    "sql_like_filter",
    "subscription_name",
    "validate",
    "validation_errors",
]
