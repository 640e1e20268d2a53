"""Comparing a desired state with what the namespace holds: the plan step of read → plan → apply.

:meth:`TopologyDiff.plan` reads through a :class:`~shared.topology.namespace_reading.NamespaceReader` and
returns what would change: ``create``, ``unchanged``, ``delete`` or ``would-update`` per entity. NServiceBus
never updates an existing entity, so a difference is reported as ``would-update`` (with the differences) and
left alone. The exceptions are a declared move to a new queue (``DesiredState.moved_from``): a desired
subscription that exists forwarding to the old queue is ``update``d in place (its ``forwardTo``), and a rule
whose content condition changed is rewritten in place. A queue or topic whose immutable properties differ
(:mod:`shared.topology.queues`) is ``refused``. Quotas are checked here, before any write.

:func:`plan_unsubscribe` is the plan of an unsubscribe: the deletes only, no calls. The one-delivery check
and the refusals are applied on top of :meth:`TopologyDiff.plan` by :mod:`shared.topology.single_delivery`,
the one planner every caller uses.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import shared.topology.quotas as quotas
from shared.topology.arm import filter_of
from shared.topology.content_filters import refines
from shared.topology.desired import (
    FALSE_FILTER,
    TRUE_FILTER,
    DesiredState,
    RuleSpec,
    SubscriptionSpec,
    parse_subscribed_events,
    resolve_routes,
    subscription_name,
)
from shared.topology.duplicate_detection import iso_window
from shared.topology.errors import TopologyValidationError
from shared.topology.names import DEFAULT_RULE_NAME, HierarchyNamespace, rule_name
from shared.topology.namespace_reading import NamespaceReader
from shared.topology.options import MigrationTopologyOptions, TopicRoutingMode, TopologyOptions
from shared.topology.plan import Plan, PlanItem, rule_path, subscription_path
from shared.topology.queues import QueueSpec, immutable_mismatch, like_its_input, topic_mismatch
from shared.topology.routing import migration_unmapped_message
from shared.topology.validation import validate


class TopologyDiff:
    """The plan of a desired state against one namespace (see the module docstring)."""

    def __init__(self, reader: NamespaceReader) -> None:
        self.reader = reader

    def plan(self, desired: DesiredState) -> Plan:
        """Read the namespace and compare. :class:`shared.topology.QuotaExceededError` is raised before
        the first call when ``desired`` alone exceeds a per-topic quota, and before returning when the
        new subscriptions plus a topic's existing ones would."""
        quotas.check_desired(desired)
        items: list[PlanItem] = []
        found_queues = dict(
            zip(
                (q.lower() for q in desired.queues),
                self.reader.parallel(self.reader.queue, desired.queues),
                strict=True,
            )
        )
        for queue in desired.queues:
            spec = desired.queue_spec(queue)
            served = found_queues.get(spec.held_for.lower()) if spec.held_for else None
            if served is not None:
                spec = like_its_input(spec, served)
            items.append(self._plan_queue(spec, found_queues[queue.lower()]))
        topics = list(dict.fromkeys([*desired.forwarding_topics, *desired.topics]))
        topic_state: dict[str, Any] = {}
        window = desired.duplicate_detection_window
        for topic, found in zip(topics, self.reader.parallel(self.reader.topic, topics), strict=True):
            topic_state[topic.lower()] = found
            items.append(self._plan_topic(topic, window, found))
        moved = {q.lower() for q in desired.moved_from}
        sub_items = self.reader.parallel(
            lambda s: self._plan_subscription(s, topic_state, moved), desired.subscriptions
        )
        for group in sub_items:
            items.extend(group)
        near = self._check_existing_quotas(items, topic_state)
        return Plan(tuple(items), tuple(near))

    @staticmethod
    def _plan_queue(spec: QueueSpec, found: Any) -> PlanItem:
        """A queue's item: created with ``spec``, or kept when it exists as ``spec`` wants, or refused when
        its immutable properties differ (:func:`shared.topology.queues.immutable_mismatch`)."""
        if found is None:
            return PlanItem("create", "queue", spec.name, spec.to_dict(), name=spec.name, spec=spec)
        reason = immutable_mismatch(spec, found)
        if reason is None:
            return PlanItem("unchanged", "queue", spec.name, spec.to_dict(), name=spec.name, spec=spec)
        existing = bool(getattr(found, "requires_session", False))
        details: dict[str, Any] = {
            "requiresSession": {"existing": existing, "desired": spec.requires_session}
        }
        if spec.requires_duplicate_detection:
            found_dedup = bool(getattr(found, "requires_duplicate_detection", False))
            details["requiresDuplicateDetection"] = {"existing": found_dedup, "desired": True}
        details["reason"] = reason
        return PlanItem("refused", "queue", spec.name, details, name=spec.name, spec=spec)

    @staticmethod
    def _plan_topic(topic: str, window: timedelta | None, found: Any) -> PlanItem:
        """A topic's item: created requiring duplicate detection over ``window`` (none: a plain topic),
        kept when it exists as wanted, refused when it exists without the duplicate detection it needs
        (:func:`shared.topology.queues.topic_mismatch`: the same refusal as a queue's)."""
        details: dict[str, Any] = {}
        if window is not None:
            details = {
                "requiresDuplicateDetection": True,
                "duplicateDetectionHistoryTimeWindow": iso_window(window),
            }
        if found is None:
            return PlanItem("create", "topic", topic, details, name=topic, duplicate_detection_window=window)
        reason = topic_mismatch(topic, window, found)
        if reason is None:
            return PlanItem("unchanged", "topic", topic, details, name=topic)
        refused = {"requiresDuplicateDetection": {"existing": False, "desired": True}, "reason": reason}
        return PlanItem("refused", "topic", topic, refused, name=topic)

    def _check_existing_quotas(self, items: list[PlanItem], topic_state: dict[str, Any]) -> list[str]:
        """Quotas on what the plan creates plus what each existing topic already holds.

        A topic's existing rules are counted by listing every subscription's rules (ARM reports no
        per-topic filter count), and only for topics the plan adds subscriptions or rules to."""
        planned: dict[str, tuple[str, quotas.TopicUsage]] = {}
        for item in items:
            if item.action != "create" or item.topic is None:
                continue
            if item.kind == "subscription":
                added = quotas.TopicUsage(subscriptions=1)
            elif item.kind == "rule" and isinstance(item.spec, RuleSpec):
                added = quotas.rule_usage(item.spec.filter)
            else:
                continue
            key = item.topic.lower()
            name, usage = planned.get(key, (item.topic, quotas.TopicUsage()))
            planned[key] = (name, usage + added)
        existing_topics = [name for key, (name, _) in planned.items() if topic_state.get(key) is not None]
        existing = dict(
            zip(
                (t.lower() for t in existing_topics),
                self.reader.parallel(self.reader.topic_usage, existing_topics),
                strict=True,
            )
        )
        quotas.check(planned, existing)
        return quotas.near_limit(planned, existing)

    def _plan_subscription(
        self, spec: SubscriptionSpec, topic_state: dict[str, Any], moved: set[str]
    ) -> list[PlanItem]:
        path = spec.path
        existing = None
        if topic_state.get(spec.topic.lower()) is not None:
            existing = self.reader.subscription(spec.topic, spec.name, path)
        if existing is None:
            items = [
                PlanItem(
                    "create",
                    "subscription",
                    path,
                    {
                        "forwardTo": spec.forward_to,
                        "userMetadata": spec.user_metadata,
                        **({} if spec.has_default_rule else {"defaultRule": "removed after creation"}),
                    },
                    spec.topic,
                    spec.name,
                    spec.name,
                    spec,
                )
            ]
            for rule in spec.rules:
                implicit = rule.filter == TRUE_FILTER and rule.name.lower() == "$default"
                details = {**rule.filter.to_dict(), **({"implicit": True} if implicit else {})}
                items.append(
                    PlanItem(
                        "create",
                        "rule",
                        rule_path(spec.topic, spec.name, rule.name),
                        details,
                        spec.topic,
                        spec.name,
                        rule.name,
                        rule,
                        implicit,
                    )
                )
            return items
        items = []
        forward = existing.forward_to or ""
        if forward.lower() != spec.forward_to.lower() and forward.lower() in moved:
            details = {"forwardTo": {"existing": existing.forward_to, "desired": spec.forward_to}}
            items.append(
                PlanItem("update", "subscription", path, details, spec.topic, spec.name, spec.name, spec)
            )
        elif forward.lower() != spec.forward_to.lower():
            items.append(
                PlanItem(
                    "would-update",
                    "subscription",
                    path,
                    {"forwardTo": {"existing": existing.forward_to, "desired": spec.forward_to}},
                    spec.topic,
                    spec.name,
                    spec.name,
                    spec,
                )
            )
        else:
            items.append(
                PlanItem("unchanged", "subscription", path, {}, spec.topic, spec.name, spec.name, spec)
            )
        rules = {r.name.lower(): r for r in self.reader.rules(spec.topic, spec.name)}
        for rule in spec.rules:
            rpath = rule_path(spec.topic, spec.name, rule.name)
            found = rules.get(rule.name.lower())
            if found is None:
                items.append(
                    PlanItem(
                        "create", "rule", rpath, rule.filter.to_dict(), spec.topic, spec.name, rule.name, rule
                    )
                )
                continue
            current = filter_of(found)
            if current == rule.filter:
                items.append(PlanItem("unchanged", "rule", rpath, {}, spec.topic, spec.name, rule.name, rule))
            else:
                # A condition added, changed or dropped (routing by content): the rule is rewritten in place,
                # one atomic PUT, so the subscription never goes without it. Any other difference is
                # reported and left alone.
                rewritten = (
                    rule.content is not None
                    or refines(current, rule.filter)
                    or self._default_switches(spec, rule, current, rules)
                )
                items.append(
                    PlanItem(
                        "update" if rewritten else "would-update",
                        "rule",
                        rpath,
                        {"existing": current.to_dict(), "desired": rule.filter.to_dict()},
                        spec.topic,
                        spec.name,
                        rule.name,
                        rule,
                    )
                )
        items.extend(self._default_rule_left_behind(spec, rules))
        return items

    @staticmethod
    def _default_switches(
        spec: SubscriptionSpec, rule: RuleSpec, current: Any, found: dict[str, Any]
    ) -> bool:
        """Whether ``$Default`` switches between ``1=1`` and ``1=0`` because the subscription starts or stops
        routing by content: it starts when a rule of the spec holds a condition (the default must stop taking
        everything), it stops when it holds none and the subscription still has a rule the spec drops (that
        condition is about to go: the default must take everything again before it does)."""
        if rule.name.lower() != DEFAULT_RULE_NAME.lower():
            return False
        filtering = any(r.content is not None for r in spec.rules)
        if filtering:
            return current == TRUE_FILTER and rule.filter == FALSE_FILTER
        wanted = {r.name.lower() for r in spec.rules}
        dropped = [r for name, r in found.items() if name not in wanted]
        return current == FALSE_FILTER and rule.filter == TRUE_FILTER and bool(dropped)

    @staticmethod
    def _default_rule_left_behind(spec: SubscriptionSpec, found: dict[str, Any]) -> list[PlanItem]:
        """The delete of an existing subscription's ``$Default`` ``1=1`` once the subscription is to route
        by content: kept, it would match everything beside the condition (Azure: "if you add a custom rule,
        delete the default"). It goes after the creates and updates, so the subscription always has a rule
        taking the events it wants."""
        default = found.get(DEFAULT_RULE_NAME.lower())
        if default is None or spec.has_default_rule or not any(r.content is not None for r in spec.rules):
            return []
        if filter_of(default) != TRUE_FILTER:
            return []
        path = rule_path(spec.topic, spec.name, default.name)
        return [
            PlanItem(
                "delete", "rule", path, {}, spec.topic, spec.name, default.name, None, after_creates=True
            )
        ]


def plan_unsubscribe(options: TopologyOptions, endpoint_queue: str, event_name: str | dict[str, str]) -> Plan:
    """The deletes that unsubscribe ``endpoint_queue`` from ``event_name`` (no calls are made): a
    contract name, or ``{"type": ..., "topic": ..., "routingMode": ...}`` for an explicit topic.

    Topic-per-event, NotMultiplexed route: delete the subscription (on a multiplexed catch-all topic
    this unsubscribes every event on it, as in NServiceBus). Filtered route: delete the event's rule and
    leave the subscription, even when only ``$default`` remains. Migration: an event to migrate loses
    its rule on TopicToSubscribeOn; a migrated one its catch-all subscriptions."""
    validate(options)
    events = parse_subscribed_events([event_name])
    name = subscription_name(options, endpoint_queue)
    items: list[PlanItem] = []

    def delete_rule(topic: str, rule: str) -> None:
        items.append(PlanItem("delete", "rule", rule_path(topic, name, rule), {}, topic, name, rule))

    def delete_subscription(topic: str) -> None:
        items.append(
            PlanItem("delete", "subscription", subscription_path(topic, name), {}, topic, name, name)
        )

    event = events[0].event
    if isinstance(options, MigrationTopologyOptions):
        hierarchy = HierarchyNamespace(options.hierarchy_namespace)
        if event in options.events_to_migrate_map:
            rule = options.subscribed_event_to_rule_name_map.get(event) or event
            delete_rule(hierarchy.apply(options.topic_to_subscribe_on), rule)
        elif event in options.subscribed_event_to_topics_map:
            for entry in options.subscribed_event_to_topics_map[event]:
                delete_subscription(hierarchy.apply(entry.topic))
        else:
            raise TopologyValidationError([migration_unmapped_message(event, subscribe=True)])
        return Plan(tuple(items))
    for route in resolve_routes(options, events):
        if route.routing_mode is TopicRoutingMode.NotMultiplexed:
            delete_subscription(route.topic)
        else:
            delete_rule(route.topic, rule_name(route.event))
    return Plan(tuple(items))


__all__ = ["TopologyDiff", "plan_unsubscribe"]
