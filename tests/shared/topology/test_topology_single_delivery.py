"""Delivery paths: which subscriptions carry an event into an endpoint's queue, the refusal of a second
path, and the deletes of a declared migration (pure: subscriptions given as data)."""

from __future__ import annotations

import pytest

from shared.topology import (
    FallbackTopicOptions,
    SubscribedEvent,
    SubscriptionEntry,
    TopicRoutingMode,
    TopologyOptions,
    TopologyValidationError,
    desired_state,
)
from shared.topology.delivery_paths import (
    CheckedEvent,
    checked_events,
    duplicate_paths,
    migration_deletes,
    paths_of,
    rule_takes,
)
from shared.topology.desired import FALSE_FILTER, TRUE_FILTER, RuleSpec, correlation_filter, sql_like_filter
from shared.topology.plan import ExistingSubscription

OA = "Shipping.OrderAccepted"
FALLBACK = TopologyOptions(
    fallback_topic=FallbackTopicOptions(
        topic_name="fallback", routing_mode=TopicRoutingMode.CorrelationFilter
    )
)
MOVED = FALLBACK.model_copy(update={"subscribed_event_to_topics_map": {OA: (SubscriptionEntry(topic=OA),)}})


def on_fallback(*events: str, queue: str = "billing") -> ExistingSubscription:
    rules = (RuleSpec("$default", FALSE_FILTER), *(RuleSpec(e, correlation_filter(e)) for e in events))
    return ExistingSubscription("fallback", queue, queue, rules)


def catch_all(topic: str, queue: str = "billing") -> ExistingSubscription:
    return ExistingSubscription(topic, queue, queue, (RuleSpec("$Default", TRUE_FILTER),))


def test_correlation_and_like_rules_take_the_events_they_name_or_enclose() -> None:
    enclosed = (OA, "Shipping.IOrderStatusChanged")

    assert rule_takes(correlation_filter(OA), enclosed)
    assert rule_takes(correlation_filter("Shipping.IOrderStatusChanged"), enclosed)
    assert not rule_takes(correlation_filter("Shipping.OrderAcceptedV2"), enclosed)
    assert rule_takes(sql_like_filter("Shipping.IOrderStatusChanged"), enclosed)
    assert not rule_takes(sql_like_filter("Shipping.OrderDeclined"), enclosed)
    assert not rule_takes(FALSE_FILTER, enclosed)


def test_a_catch_all_subscription_is_a_path_only_on_a_topic_the_event_travels_on() -> None:
    event = CheckedEvent(OA, (OA,))
    subscriptions = [catch_all(OA), catch_all("Tenant.CustomerCreated"), catch_all(OA, queue="crm")]

    paths = paths_of(subscriptions, "billing", event, frozenset({OA.lower()}))

    assert [p.label for p in paths] == [f"{OA}/billing"]


def test_a_dedicated_topic_beside_the_fallback_rule_is_two_paths_naming_both() -> None:
    desired = desired_state(MOVED, "billing", [OA])
    [duplicate] = duplicate_paths(
        MOVED, "billing", checked_events(MOVED, [SubscribedEvent(OA)]), [on_fallback(OA)], desired
    )

    assert [p.label for p in duplicate.kept] == [f"fallback/billing/{OA}"]
    assert [p.label for p in duplicate.added] == [f"{OA}/billing"]
    assert duplicate.message == (
        f"billing would receive {OA} 2 times, through fallback/billing/{OA} (existing) and "
        f"{OA}/billing (added)"
    )


def test_an_interface_rule_counts_for_its_implementers_when_their_enclosed_types_are_known() -> None:
    desired = desired_state(MOVED, "crm", [OA])
    existing = [on_fallback("Shipping.IOrderStatusChanged", queue="crm")]
    unknown = checked_events(MOVED, [SubscribedEvent(OA)])
    known = checked_events(
        MOVED, [SubscribedEvent(OA)], lambda name: [(name, "Shipping.IOrderStatusChanged")]
    )

    assert duplicate_paths(MOVED, "crm", unknown, existing, desired) == []
    [duplicate] = duplicate_paths(MOVED, "crm", known, existing, desired)
    assert [p.label for p in duplicate.kept] == ["fallback/crm/Shipping.IOrderStatusChanged"]


def test_a_plan_that_deletes_the_old_path_and_a_plan_that_adds_nothing_are_not_refused() -> None:
    events = checked_events(MOVED, [SubscribedEvent(OA)])
    desired = desired_state(MOVED, "billing", [OA])
    deletes = migration_deletes(MOVED, "billing", events, [on_fallback(OA, "V2")], desired)

    assert duplicate_paths(MOVED, "billing", events, [on_fallback(OA, "V2")], desired, deletes) == []
    unchanged = desired_state(FALLBACK, "billing", [OA])
    assert duplicate_paths(FALLBACK, "billing", events, [on_fallback(OA), catch_all(OA)], unchanged) == []


def test_a_migration_deletes_only_the_old_rule_of_each_moved_event_after_the_creates() -> None:
    events = checked_events(MOVED, [SubscribedEvent(OA)])
    existing = [on_fallback(OA, "Shipping.OrderAcceptedV2")]

    [delete] = migration_deletes(MOVED, "billing", events, existing, desired_state(MOVED, "billing", [OA]))

    assert (delete.action, delete.kind, delete.path) == (
        "delete",
        "rule",
        f"fallback/Subscriptions/billing/Rules/{OA}",
    )
    assert delete.after_creates
    assert delete.details["migratedTo"] == [f"{OA}/billing"]
    # Nothing to migrate to: the old path stays.
    assert (
        migration_deletes(FALLBACK, "billing", events, existing, desired_state(FALLBACK, "billing", [])) == []
    )


def test_a_migration_off_an_old_catch_all_topic_deletes_that_subscription() -> None:
    options = TopologyOptions(subscribed_event_to_topics_map={OA: (SubscriptionEntry(topic="orders"),)})
    events = checked_events(options, [SubscribedEvent(OA)])

    [delete] = migration_deletes(
        options, "billing", events, [catch_all(OA)], desired_state(options, "billing", [OA])
    )

    assert (delete.kind, delete.path) == ("subscription", f"{OA}/Subscriptions/billing")


def test_moving_an_event_off_a_catch_all_on_the_fallback_topic_is_refused() -> None:
    events = checked_events(MOVED, [SubscribedEvent(OA)])

    with pytest.raises(TopologyValidationError, match="takes every event on the fallback topic"):
        migration_deletes(
            MOVED, "billing", events, [catch_all("fallback")], desired_state(MOVED, "billing", [OA])
        )
