"""One namespace's topology as read → plan → apply, behind one object.

The steps live in their own modules: :mod:`shared.topology.namespace_reading` reads (GET / list),
:mod:`shared.topology.topology_diff` compares a desired state with what it read (the raw plan),
:mod:`shared.topology.single_delivery` is the planner every caller uses (the raw plan checked for one
delivery per subscriber, refusals and second subscriptions), and :mod:`shared.topology.plan_execution`
executes a plan's steps. :class:`Provisioner` wires them to one management client and entity defaults.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import shared.topology.quotas as quotas
from shared.management import ManagementClient
from shared.topology.arm import filter_of
from shared.topology.desired import DesiredState
from shared.topology.namespace_reading import NamespaceReader
from shared.topology.options import TopologyOptions
from shared.topology.plan import (
    ApplyResult,
    EntityDefaults,
    ExistingSubscription,
    Plan,
    PlanItem,
    rule_path,
    subscription_path,
)
from shared.topology.plan_execution import PlanExecutor
from shared.topology.topology_diff import TopologyDiff, plan_unsubscribe

MAX_DELIVERY_COUNT_AZURE = 2147483647


class Provisioner:
    """Reads, plans and applies desired states on one namespace (see the module docstring).

    ``concurrency`` management calls run at once (per subscription the calls stay in order). Queues are
    created with ``queue_defaults`` when given (an endpoint's own queue settings), else ``defaults``."""

    def __init__(
        self,
        management: ManagementClient,
        defaults: EntityDefaults | None = None,
        *,
        concurrency: int = 4,
        queue_defaults: EntityDefaults | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.management = management
        self.defaults = defaults or EntityDefaults()
        self.queue_defaults = queue_defaults or self.defaults
        self.reader = NamespaceReader(management, concurrency=concurrency)
        self.executor = PlanExecutor(
            management, self.defaults, self.queue_defaults, concurrency=concurrency, sleep=sleep
        )

    def plan(self, desired: DesiredState) -> Plan:
        """The raw plan of ``desired`` (:meth:`TopologyDiff.plan`: reads only). Callers that mean to apply it
        plan through :func:`shared.topology.single_delivery.plan_delivery`, which adds the checks.
        :class:`shared.topology.QuotaExceededError` is raised before the first call when ``desired`` alone
        exceeds a per-topic quota, and before returning when the new subscriptions plus a topic's existing
        ones would."""
        return TopologyDiff(self.reader).plan(desired)

    def apply(self, plan: Plan) -> ApplyResult:
        """Execute ``plan``'s steps (:meth:`PlanExecutor.apply`); ``would-update`` items are reported, not
        done. A plan with a ``refused`` item is not applied at all: ``QueueNeedsRecreatingError`` is raised
        before the first call."""
        return self.executor.apply(plan)

    def plan_unsubscribe(
        self, options: TopologyOptions, endpoint_queue: str, event_name: str | dict[str, str]
    ) -> Plan:
        """The deletes that unsubscribe ``endpoint_queue`` from ``event_name``
        (:func:`shared.topology.topology_diff.plan_unsubscribe`; no calls are made)."""
        return plan_unsubscribe(options, endpoint_queue, event_name)

    def unsubscribe(self, options: TopologyOptions, endpoint_queue: str, event_name: str) -> ApplyResult:
        """:meth:`plan_unsubscribe` applied (404s count as deleted: a concurrent run got there first)."""
        return self.apply(self.plan_unsubscribe(options, endpoint_queue, event_name))

    def describe(
        self, endpoint_queue: str, options: TopologyOptions | None = None
    ) -> list[ExistingSubscription]:
        """Every subscription forwarding to the endpoint's queue, with its rules
        (:meth:`NamespaceReader.describe`)."""
        return self.reader.describe(endpoint_queue, options)

    def topic_usage(self, topic: str) -> quotas.TopicUsage:
        """What ``topic`` holds now (:meth:`NamespaceReader.topic_usage`)."""
        return self.reader.topic_usage(topic)


__all__ = [
    "MAX_DELIVERY_COUNT_AZURE",
    "ApplyResult",
    "EntityDefaults",
    "ExistingSubscription",
    "Plan",
    "PlanItem",
    "Provisioner",
    "filter_of",
    "rule_path",
    "subscription_path",
]
