"""The Provisioner against the emulator's ARM endpoint: plans before changes, idempotent applies, no silent
overwrites, concurrent runs, unsubscribe semantics, quotas before any call, and refusals surfaced."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from azure.mgmt.servicebus.models import SBSubscription, SBSubscriptionProperties

from emulator.testing import EmulatorHandle
from shared.management import ManagementClient, ManagementSettings
from shared.topology import (
    DesiredState,
    EntityDefaults,
    FallbackTopicOptions,
    MigrationTopologyOptions,
    Provisioner,
    ProvisioningError,
    QuotaExceededError,
    RuleFilter,
    SubscribedEvent,
    TopicRoutingMode,
    TopologyOptions,
    desired_state,
    quotas,
)
from shared.topology.desired import FALSE_FILTER, TRUE_FILTER
from shared.topology.provisioner import filter_of

CF = TopicRoutingMode.CorrelationFilter
OA, OD = "Shipping.OrderAccepted", "Shipping.OrderDeclined"


def _rules(management: ManagementClient, topic: str, subscription: str) -> dict[str, RuleFilter]:
    return {
        r.name.lower(): filter_of(r)
        for r in management.rules.list_by_subscriptions(*management.scope, topic, subscription)
    }


def _fallback(ns: str) -> TopologyOptions:
    return TopologyOptions(
        hierarchy_namespace=ns, fallback_topic=FallbackTopicOptions(topic_name="Shared", routing_mode=CF)
    )


def test_a_plan_lists_every_entity_to_create_and_changes_nothing(
    management: ManagementClient, ns: str
) -> None:
    provisioner = Provisioner(management)
    plan = provisioner.plan(desired_state(_fallback(ns), "billing", [OA]))
    assert [(i.action, i.kind, i.path) for i in plan.items] == [
        ("create", "queue", f"{ns}/billing"),
        ("create", "topic", f"{ns}/Shared"),
        ("create", "subscription", f"{ns}/Shared/Subscriptions/billing"),
        ("create", "rule", f"{ns}/Shared/Subscriptions/billing/Rules/$default"),
        ("create", "rule", f"{ns}/Shared/Subscriptions/billing/Rules/{OA}"),
    ]
    assert plan.to_dict()["summary"] == {"create": 5, "unchanged": 0, "delete": 0, "would-update": 0}
    assert [
        q.name for q in management.queues.list_by_namespace(*management.scope) if q.name.startswith(ns)
    ] == []


def test_apply_creates_a_filtered_subscription_with_only_its_rules_and_is_idempotent(
    management: ManagementClient, ns: str
) -> None:
    provisioner = Provisioner(management)
    desired = desired_state(_fallback(ns), "billing", [OA, OD])
    first = provisioner.apply(provisioner.plan(desired))
    assert len(first.created) == 6 and not first.unchanged
    rules = _rules(management, f"{ns}/Shared", "billing")
    # ARM's automatic $Default 1=1 was replaced by the false filter: nothing unfiltered gets through.
    assert rules == {
        "$default": RuleFilter("false"),
        OA.lower(): RuleFilter("correlation", properties=((OA, True),)),
        OD.lower(): RuleFilter("correlation", properties=((OD, True),)),
    }
    subscription = management.subscriptions.get(*management.scope, f"{ns}/Shared", "billing")
    assert subscription.forward_to == f"{ns}/billing"
    assert subscription.lock_duration == timedelta(minutes=5)
    assert subscription.dead_lettering_on_filter_evaluation_exceptions is False
    again = provisioner.plan(desired)
    assert again.summary() == {"create": 0, "unchanged": 6, "delete": 0, "would-update": 0}
    assert not again.has_changes
    second = provisioner.apply(again)
    assert second.created == [] and len(second.unchanged) == 6


def test_an_existing_catch_all_subscription_is_reported_as_would_update_and_left_alone(
    management: ManagementClient, ns: str
) -> None:
    provisioner = Provisioner(management)
    options = TopologyOptions(hierarchy_namespace=ns)
    provisioner.apply(provisioner.plan(desired_state(options, "billing", [SubscribedEvent(OA, "Shared")])))
    filtered = desired_state(options, "billing", [SubscribedEvent(OA, "Shared", CF)])
    plan = provisioner.plan(filtered)
    (update,) = plan.of("would-update")
    assert update.path == f"{ns}/Shared/Subscriptions/billing/Rules/$default"
    assert update.details == {
        "existing": {"filterType": "SqlFilter", "sqlExpression": "1=1"},
        "desired": {"filterType": "SqlFilter", "sqlExpression": "1=0"},
    }
    result = provisioner.apply(plan)
    assert result.would_update == [update.path]
    assert _rules(management, f"{ns}/Shared", "billing")["$default"] == RuleFilter(
        "true"
    )  # never overwritten


def test_a_subscription_forwarding_elsewhere_is_reported_not_redirected(
    management: ManagementClient, ns: str
) -> None:
    provisioner = Provisioner(management)
    options = TopologyOptions(hierarchy_namespace=ns)
    provisioner.apply(provisioner.plan(desired_state(options, "other", [OA])))
    management.subscriptions.create_or_update(
        *management.scope,
        f"{ns}/{OA}",
        "billing",
        SBSubscription(properties=SBSubscriptionProperties(forward_to=f"{ns}/other")),
    )
    plan = provisioner.plan(desired_state(options, "billing", [OA]))
    (update,) = plan.of("would-update")
    assert update.details == {"forwardTo": {"existing": f"{ns}/other", "desired": f"{ns}/billing"}}
    provisioner.apply(plan)
    assert (
        management.subscriptions.get(*management.scope, f"{ns}/{OA}", "billing").forward_to == f"{ns}/other"
    )


def test_concurrent_applies_of_the_same_plan_both_succeed(management: ManagementClient, ns: str) -> None:
    provisioner = Provisioner(management)
    desired = desired_state(_fallback(ns), "billing", [OA, OD])
    plan = provisioner.plan(desired)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            Provisioner(management).apply(plan)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert provisioner.plan(desired).summary()["unchanged"] == 6


def test_unsubscribing_a_filtered_event_deletes_only_its_rule(management: ManagementClient, ns: str) -> None:
    provisioner = Provisioner(management)
    options = _fallback(ns)
    provisioner.apply(provisioner.plan(desired_state(options, "billing", [OA, OD])))
    result = provisioner.unsubscribe(options, "billing", OA)
    assert result.deleted == [f"{ns}/Shared/Subscriptions/billing/Rules/{OA}"]
    assert set(_rules(management, f"{ns}/Shared", "billing")) == {"$default", OD.lower()}
    provisioner.unsubscribe(options, "billing", OD)
    # The subscription stays even with only $default left, as the NServiceBus runtime does.
    assert set(_rules(management, f"{ns}/Shared", "billing")) == {"$default"}
    assert provisioner.unsubscribe(options, "billing", OD).deleted  # already gone: still success


def test_unsubscribing_a_catch_all_event_deletes_the_subscription(
    management: ManagementClient, ns: str
) -> None:
    provisioner = Provisioner(management)
    options = TopologyOptions(hierarchy_namespace=ns)
    provisioner.apply(provisioner.plan(desired_state(options, "billing", [OA])))
    assert provisioner.unsubscribe(options, "billing", OA).deleted == [f"{ns}/{OA}/Subscriptions/billing"]
    assert list(management.subscriptions.list_by_topic(*management.scope, f"{ns}/{OA}")) == []
    assert provisioner.describe("billing", options) == []


def test_unsubscribing_from_the_bundle_deletes_the_events_rule(management: ManagementClient, ns: str) -> None:
    provisioner = Provisioner(management)
    options = MigrationTopologyOptions(hierarchy_namespace=ns, events_to_migrate_map=(OA, OD))
    provisioner.apply(provisioner.plan(desired_state(options, "billing", [OA, OD])))
    assert provisioner.unsubscribe(options, "billing", OD).deleted == [
        f"{ns}/bundle-1/Subscriptions/billing/Rules/{OD}"
    ]
    assert set(_rules(management, f"{ns}/bundle-1", "billing")) == {"$default", OA.lower()}


def test_describe_lists_the_subscriptions_forwarding_to_the_endpoint(
    management: ManagementClient, ns: str
) -> None:
    provisioner = Provisioner(management)
    options = _fallback(ns)
    provisioner.apply(provisioner.plan(desired_state(options, "billing", [OA, SubscribedEvent(OD, "Own")])))
    found = {
        (s.topic, s.name, s.forward_to, tuple(sorted(r.name.lower() for r in s.rules)))
        for s in provisioner.describe("billing", options)
    }
    assert found == {
        (f"{ns}/Shared", "billing", f"{ns}/billing", ("$default", OA.lower())),
        (f"{ns}/Own", "billing", f"{ns}/billing", ("$default",)),
    }


def test_a_plan_over_quota_is_refused_before_any_management_call() -> None:
    unreachable = ManagementClient(
        ManagementSettings("0", "rg", "sbemulatorns", endpoint="http://127.0.0.1:9", token="t"), retry_total=0
    )
    options = MigrationTopologyOptions(events_to_migrate_map=tuple(f"Ev.E{i}" for i in range(30)))
    states = [desired_state(options, f"endpoint-{n}", [f"Ev.E{i}" for i in range(30)]) for n in range(70)]
    with pytest.raises(QuotaExceededError) as raised:
        Provisioner(unreachable).plan(DesiredState.combine(states))
    assert raised.value.violations == [
        "topic 'bundle-1' would have 2170 SQL filter rules (including each subscription's $Default/$default "
        "rule) "
        "(2170 planned + 0 existing), over the limit of 2000 per topic"
    ]


def test_a_refusal_by_the_management_plane_is_a_provisioning_error_with_the_arm_status_and_code(
    management: ManagementClient, ns: str
) -> None:
    provisioner = Provisioner(management, EntityDefaults(lock_duration=timedelta(minutes=10)))
    with pytest.raises(ProvisioningError) as raised:
        provisioner.apply(
            provisioner.plan(desired_state(TopologyOptions(hierarchy_namespace=ns), "billing", [OA]))
        )
    error = raised.value
    assert (error.action, error.path, error.status, error.code) == (
        "create",
        f"{ns}/billing",
        400,
        "MessagingGatewayBadRequest",
    )
    assert "LockDuration" in error.message or "lock" in error.message.lower()
    assert error.done == []


def test_subscribing_to_one_more_event_adds_only_its_rule_to_the_existing_subscription(
    management: ManagementClient, ns: str
) -> None:
    provisioner = Provisioner(management)
    options = _fallback(ns)
    provisioner.apply(provisioner.plan(desired_state(options, "billing", [OA])))
    plan = provisioner.plan(desired_state(options, "billing", [OA, OD]))
    assert [(i.kind, i.path) for i in plan.of("create")] == [
        ("rule", f"{ns}/Shared/Subscriptions/billing/Rules/{OD}")
    ]
    assert provisioner.apply(plan).created == [f"{ns}/Shared/Subscriptions/billing/Rules/{OD}"]


def test_true_and_false_filters_count_as_sql_filters_in_the_planner_as_in_the_emulator(
    management: ManagementClient, emulator: EmulatorHandle, ns: str
) -> None:
    # Azure counts them as SQL filters: TrueRuleFilter/FalseRuleFilter derive from SqlRuleFilter in the
    # SDKs, and ARM reports them as filterType SqlFilter with 1=1 / 1=0 (issue 17, point 9).
    options = _fallback(ns)
    provisioner = Provisioner(management)
    sql_mode = TopologyOptions(
        hierarchy_namespace=ns,
        fallback_topic=FallbackTopicOptions(topic_name="Shared", routing_mode=TopicRoutingMode.SqlLikeFilter),
    )
    provisioner.apply(provisioner.plan(desired_state(options, "billing", [OA, OD])))  # $default + 2 CF
    provisioner.apply(provisioner.plan(desired_state(sql_mode, "crm", [OA])))  # $default + 1 SQL
    topic = f"{ns}/Shared"
    group, namespace = management.scope
    management.subscriptions.create_or_update(group, namespace, topic, "plain", SBSubscription())  # $Default

    counted = provisioner.topic_usage(topic)
    broker_topic = emulator.thread.call(lambda: emulator.emulator.namespace.topic_for(topic))

    assert (counted.subscriptions, counted.sql_filters, counted.correlation_filters) == (3, 4, 2)
    assert (broker_topic.sql_rules, broker_topic.correlation_rules) == (4, 2)
    assert (
        quotas.rule_usage(TRUE_FILTER) == quotas.rule_usage(FALSE_FILTER) == quotas.TopicUsage(sql_filters=1)
    )
