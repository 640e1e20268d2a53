"""Desired state: the exact entities NServiceBus would provision for an endpoint's subscriptions."""

from __future__ import annotations

import pytest

from shared.topology import (
    DesiredState,
    FallbackTopicOptions,
    IncompatibleRoutingModesError,
    MigrationTopologyOptions,
    QuotaExceededError,
    RuleFilter,
    RuleSpec,
    SubscribedEvent,
    SubscriptionEntry,
    SubscriptionSpec,
    TopicRoutingMode,
    TopologyOptions,
    TopologyValidationError,
    desired_state,
    parse_subscribed_events,
)
from shared.topology.duplicate_detection import DEFAULT_WINDOW
from shared.topology.queues import QueueSpec
from shared.topology.quotas import check_desired

NM, CF, SQL = (
    TopicRoutingMode.NotMultiplexed,
    TopicRoutingMode.CorrelationFilter,
    TopicRoutingMode.SqlLikeFilter,
)
TRUE_DEFAULT = RuleSpec("$Default", RuleFilter("true"))
FALSE_DEFAULT = RuleSpec("$default", RuleFilter("false"))
LONG_EVENT = "NServiceBus.Transport.AzureServiceBus.Tests.TopicPerEventSubscriptionManagerTests+MyEvent1"


def endpoint_state(
    queues: tuple[str, ...],
    topics: tuple[str, ...],
    subscriptions: tuple[SubscriptionSpec, ...],
    forwarding_topics: tuple[str, ...] = (),
) -> DesiredState:
    """The desired state of an endpoint: its queues and topics require duplicate detection over the
    default window (``BUSBAR_DUPLICATE_DETECTION_WINDOW`` unset)."""
    specs = tuple(QueueSpec(q, duplicate_detection_window=DEFAULT_WINDOW) for q in queues)
    return DesiredState(
        queues, topics, subscriptions, forwarding_topics, specs, duplicate_detection_window=DEFAULT_WINDOW
    )


def catch_all(topic: str, queue: str = "billing", name: str = "billing") -> SubscriptionSpec:
    return SubscriptionSpec(topic, name, queue, (TRUE_DEFAULT,), queue)


def corr(event: str, name: str | None = None) -> RuleSpec:
    return RuleSpec(name or event, RuleFilter("correlation", properties=((event, True),)), event)


def sql(event: str, name: str | None = None) -> RuleSpec:
    return RuleSpec(
        name or event, RuleFilter("sql", sql=f"[NServiceBus.EnclosedMessageTypes] LIKE '%{event}%'"), event
    )


def test_unmapped_events_get_a_catch_all_subscription_on_the_topic_named_after_them() -> None:
    state = desired_state(TopologyOptions(), "billing", ["Shipping.OrderAccepted", "Shipping.OrderDeclined"])
    assert state == endpoint_state(
        ("billing",),
        ("Shipping.OrderAccepted", "Shipping.OrderDeclined"),
        (catch_all("Shipping.OrderAccepted"), catch_all("Shipping.OrderDeclined")),
    )


def test_an_interface_subscribed_on_its_implementers_topics_gets_one_subscription_per_topic() -> None:
    options = TopologyOptions(
        subscribed_event_to_topics_map={
            "Shipping.IOrderStatusChanged": (
                SubscriptionEntry(topic="Shipping.OrderAccepted"),
                SubscriptionEntry(topic="Shipping.OrderDeclined"),
            )
        }
    )
    state = desired_state(options, "billing", ["Shipping.IOrderStatusChanged"])
    assert state.subscriptions == (catch_all("Shipping.OrderAccepted"), catch_all("Shipping.OrderDeclined"))


def test_multiplexed_events_on_one_topic_share_one_catch_all_subscription() -> None:
    options = TopologyOptions(
        subscribed_event_to_topics_map={
            e: (SubscriptionEntry(topic="Tenant.CustomerLifecycle"),)
            for e in ("Tenant.CustomerCreated", "Tenant.CustomerUpdated", "Tenant.CustomerDeleted")
        }
    )
    state = desired_state(options, "crm", list(options.subscribed_event_to_topics_map))
    assert state == endpoint_state(
        ("crm",), ("Tenant.CustomerLifecycle",), (catch_all("Tenant.CustomerLifecycle", "crm", "crm"),)
    )


def test_correlation_filter_multiplexing_gives_a_false_default_and_one_correlation_rule_per_event() -> None:
    state = desired_state(
        TopologyOptions(),
        "billing",
        [
            {
                "type": "Shipping.OrderAccepted",
                "topic": "Shipping.IOrderStatusChanged",
                "routingMode": "CorrelationFilter",
            },
            {"type": LONG_EVENT, "topic": "Shipping.IOrderStatusChanged", "routingMode": "CorrelationFilter"},
        ],
    )
    (subscription,) = state.subscriptions
    assert subscription.rules == (
        FALSE_DEFAULT,
        corr("Shipping.OrderAccepted"),
        corr(LONG_EVENT, "Rule-db44afc39bdcd4d7"),
    )
    assert subscription.rules[0].filter.expression == "1=0"


def test_sql_filter_multiplexing_gives_a_false_default_and_one_like_rule_per_event() -> None:
    state = desired_state(
        TopologyOptions(),
        "billing",
        [SubscribedEvent("Shipping.OrderAccepted", "Shipping.IOrderStatusChanged", SQL)],
    )
    (subscription,) = state.subscriptions
    assert subscription.rules == (FALSE_DEFAULT, sql("Shipping.OrderAccepted"))
    assert (
        subscription.rules[1].filter.expression
        == "[NServiceBus.EnclosedMessageTypes] LIKE '%Shipping.OrderAccepted%'"
    )


@pytest.mark.parametrize("mode", [CF, SQL])
def test_unmapped_subscriptions_go_to_the_fallback_topic_with_its_filters(mode: TopicRoutingMode) -> None:
    options = TopologyOptions(
        fallback_topic=FallbackTopicOptions(topic_name="SharedEvents", routing_mode=mode)
    )
    state = desired_state(options, "billing", ["Shipping.IOrderAccepted", "Tenant.CustomerCreated"])
    rule = corr if mode is CF else sql
    assert state.subscriptions == (
        SubscriptionSpec(
            "SharedEvents",
            "billing",
            "billing",
            (FALSE_DEFAULT, rule("Shipping.IOrderAccepted"), rule("Tenant.CustomerCreated")),
            "billing",
        ),
    )


def test_a_mapped_entry_pointing_at_the_fallback_topic_inherits_its_mode_and_others_stay_catch_all() -> None:
    options = TopologyOptions(
        fallback_topic=FallbackTopicOptions(topic_name="SharedEvents", routing_mode=CF),
        subscribed_event_to_topics_map={
            "Shipping.OrderAccepted": (SubscriptionEntry(topic="SharedEvents"),),
            "Tenant.CustomerCreated": (SubscriptionEntry(topic="Tenant.CustomerCreated"),),
        },
    )
    state = desired_state(options, "billing", ["Shipping.OrderAccepted", "Tenant.CustomerCreated"])
    assert state.subscriptions == (
        SubscriptionSpec(
            "SharedEvents", "billing", "billing", (FALSE_DEFAULT, corr("Shipping.OrderAccepted")), "billing"
        ),
        catch_all("Tenant.CustomerCreated"),
    )


def test_not_multiplexed_and_correlation_entries_coexist_as_catch_all_plus_correlation_rules() -> None:
    state = desired_state(
        TopologyOptions(),
        "billing",
        [
            SubscribedEvent("Shipping.OrderAccepted", "Shared"),
            SubscribedEvent("Shipping.OrderDeclined", "Shared", CF),
        ],
    )
    assert state.subscriptions[0].rules == (TRUE_DEFAULT, corr("Shipping.OrderDeclined"))


def test_sql_and_catch_all_modes_on_one_topic_are_refused_with_the_nservicebus_message() -> None:
    with pytest.raises(IncompatibleRoutingModesError) as raised:
        desired_state(
            TopologyOptions(),
            "billing",
            [SubscribedEvent("Ev.A", "Shared", CF), SubscribedEvent("Ev.B", "shared", SQL)],
        )
    assert raised.value.errors == [
        "Incompatible subscription routing modes detected for topic 'Shared' on subscription 'billing'. "
        "Event "
        "'Ev.B' uses 'SqlLikeFilter' but other events use 'CorrelationFilter'. All events subscribed to the "
        "same "
        "topic must use the same routing mode on the same endpoint subscription."
    ]


def test_hierarchy_prefixes_topics_queue_and_forward_to_but_not_subscription_or_rule_names() -> None:
    options = TopologyOptions(
        hierarchy_namespace="my-hierarchy",
        queue_name_to_subscription_name_map={"billing": "my-hierarchy/BillingSub"},
    )
    state = desired_state(options, "billing", [SubscribedEvent("Ev.A", "Shared", CF)])
    assert state == endpoint_state(
        ("my-hierarchy/billing",),
        ("my-hierarchy/Shared",),
        (
            SubscriptionSpec(
                "my-hierarchy/Shared",
                "BillingSub",
                "my-hierarchy/billing",
                (FALSE_DEFAULT, corr("Ev.A")),
                "my-hierarchy/billing",
            ),
        ),
    )


def test_subscription_name_override_applies_to_prefixed_and_unprefixed_queue_names() -> None:
    options = TopologyOptions(
        hierarchy_namespace="ns", queue_name_to_subscription_name_map={"ns/billing": "short"}
    )
    assert desired_state(options, "billing", ["Ev.A"]).subscriptions[0].name == "short"
    assert desired_state(options, "ns/billing", ["Ev.A"]).subscriptions[0].name == "short"


def test_a_default_subscription_name_over_50_characters_is_refused_up_front() -> None:
    with pytest.raises(TopologyValidationError, match="subscription limits: " + "q" * 51):
        desired_state(TopologyOptions(), "q" * 51, ["Ev.A"])


def test_an_event_whose_default_topic_is_invalid_is_refused() -> None:
    with pytest.raises(TopologyValidationError, match="topic limits: Outer\\+Inner"):
        desired_state(TopologyOptions(), "billing", ["Outer+Inner"])


def test_bundle_topology_gives_one_subscription_with_one_unhashed_sql_rule_per_event() -> None:
    options = MigrationTopologyOptions(
        events_to_migrate_map=("Shipping.OrderAccepted", "Shipping.IOrderStatusChanged"),
        subscribed_event_to_rule_name_map={"Shipping.IOrderStatusChanged": "StatusChanged"},
    )
    state = desired_state(options, "billing", ["Shipping.OrderAccepted", "Shipping.IOrderStatusChanged"])
    assert state == endpoint_state(
        ("billing",),
        ("bundle-1",),
        (
            SubscriptionSpec(
                "bundle-1",
                "billing",
                "billing",
                (
                    FALSE_DEFAULT,
                    sql("Shipping.OrderAccepted"),
                    sql("Shipping.IOrderStatusChanged", "StatusChanged"),
                ),
                "billing",
            ),
        ),
    )


def test_bundle_rules_are_never_hashed_so_a_long_name_is_refused() -> None:
    options = MigrationTopologyOptions(events_to_migrate_map=(LONG_EVENT,))
    with pytest.raises(TopologyValidationError, match="rule limits: " + LONG_EVENT.replace("+", "\\+")):
        desired_state(options, "billing", [LONG_EVENT])


def test_hierarchy_bundle_adds_the_forward_to_subscription_between_the_topics() -> None:
    options = MigrationTopologyOptions(
        topic_to_publish_to="bundle-1", topic_to_subscribe_on="bundle-2", events_to_migrate_map=("Ev.A",)
    )
    state = desired_state(options, "billing", ["Ev.A"])
    assert state.topics == ("bundle-1", "bundle-2")
    assert state.forwarding_topics == ("bundle-2",)
    assert state.subscriptions == (
        SubscriptionSpec(
            "bundle-1",
            "forwardTo-bundle-2",
            "bundle-2",
            (RuleSpec("$default", RuleFilter("true")),),
            "bundle-2",
        ),
        SubscriptionSpec("bundle-2", "billing", "billing", (FALSE_DEFAULT, sql("Ev.A")), "billing"),
    )


def test_migration_mixes_bundle_rules_and_catch_all_subscriptions_for_migrated_events() -> None:
    options = MigrationTopologyOptions(
        events_to_migrate_map=("Ev.A",),
        subscribed_event_to_topics_map={"Ev.B": (SubscriptionEntry(topic="Ev.B"),)},
    )
    state = desired_state(options, "billing", ["Ev.A", "Ev.B"])
    assert state.topics == ("bundle-1", "Ev.B")
    assert state.subscriptions[1] == catch_all("Ev.B")


def test_migration_refuses_unmarked_events_and_routing_modes_all_at_once() -> None:
    options = MigrationTopologyOptions(events_to_migrate_map=("Ev.A",))
    with pytest.raises(TopologyValidationError) as raised:
        desired_state(options, "billing", ["Ev.X", SubscribedEvent("Ev.A", "t", CF)])
    assert raised.value.errors == [
        "When using migration topology, every event needs to be marked either as migrated or pending "
        "migration to "
        "avoid message loss. In the topology configuration use either MigratedSubscribedEvent<'Ev.X'>() or "
        "EventToMigrate<'Ev.X'>(), depending on the migration state of this event.",
        "Subscription entry for event 'Ev.A' has a routing mode of 'CorrelationFilter' but the migration "
        "topology "
        "does not support explicit routing modes. Use the topic-per-event topology instead.",
    ]


def test_request_items_parse_from_strings_and_objects_and_report_every_problem() -> None:
    assert parse_subscribed_events(["A", {"type": "B", "topic": "t", "routingMode": "SqlLikeFilter"}]) == (
        SubscribedEvent("A"),
        SubscribedEvent("B", "t", SQL),
    )
    with pytest.raises(TopologyValidationError) as raised:
        parse_subscribed_events(
            ["", {"topic": "t"}, {"type": "C", "routingMode": "CorrelationFilter"}, 5, {"type": "D", "x": 1}]
        )
    assert len(raised.value.errors) == 5


def test_the_capacity_example_overflows_a_single_bundle_topic_and_the_refusal_has_the_numbers() -> None:
    options = MigrationTopologyOptions(events_to_migrate_map=tuple(f"Ev.E{i}" for i in range(100)))
    states = [
        desired_state(options, f"endpoint-{n}", [f"Ev.E{(n + k * 4) % 100}" for k in range(25)])
        for n in range(80)
    ]
    combined = DesiredState.combine(states)
    assert len(combined.subscriptions) == 80 and combined.rule_count() == 80 * 26
    with pytest.raises(QuotaExceededError) as raised:
        check_desired(combined)
    assert raised.value.violations == [
        "topic 'bundle-1' would have 2080 SQL filter rules (including each subscription's $Default/$default "
        "rule) "
        "(2080 planned + 0 existing), over the limit of 2000 per topic"
    ]
    check_desired(DesiredState.combine(states[:76]))  # 76 x 26 = 1976 fits


def test_without_the_false_default_rule_a_bundle_subscription_holds_only_its_event_rules() -> None:
    options = MigrationTopologyOptions(events_to_migrate_map=("Shipping.OrderAccepted",))
    state = desired_state(options, "billing", ["Shipping.OrderAccepted"], false_default_rule=False)
    [subscription] = state.subscriptions
    assert subscription.rules == (sql("Shipping.OrderAccepted"),)
    assert not subscription.has_default_rule
    assert state.rule_count() == 1


def test_a_catch_all_subscription_keeps_its_true_default_rule_either_way() -> None:
    state = desired_state(TopologyOptions(), "billing", ["Shipping.OrderAccepted"], false_default_rule=False)
    [subscription] = state.subscriptions
    assert subscription.is_catch_all and subscription.has_default_rule
