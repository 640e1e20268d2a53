"""The fallback router's pure decision: bridge, record unrouted, never loop."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.contracts import ENCLOSED_MESSAGE_TYPES
from shared.messages import IncomingMessage
from shared.router.decision import (
    BRIDGED_FROM,
    CorrelationRule,
    Match,
    RoutingSnapshot,
    SqlRule,
    SubscriptionRules,
    decide,
    rule_matches,
)

ACCEPTED = "Shipping.OrderAccepted;Shipping.IOrderAccepted;Shipping.IOrderStatusChanged"


def message(properties: Mapping[str, Any] | None = None, *, header: str | None = ACCEPTED) -> IncomingMessage:
    props: dict[str, Any] = dict(properties or {})
    if header is not None:
        props[ENCLOSED_MESSAGE_TYPES] = header
    return IncomingMessage(body=b"{}", message_id="m", application_properties=props)


def snapshot(*subscriptions: SubscriptionRules, topics: tuple[str, ...] = ("bundle-1",)) -> RoutingSnapshot:
    router = SubscriptionRules("busbar-router", (SqlRule("$Default", "1=1"),))
    return RoutingSnapshot("bundle-1", "busbar-router", (router, *subscriptions), frozenset(topics))


def no_dedicated_topic(contract: str) -> str | None:
    return None


def same_name_topic(contract: str) -> str | None:
    return contract


def correlation(name: str, contract: str) -> SubscriptionRules:
    return SubscriptionRules(
        name, (SqlRule("$default", "1=0"), CorrelationRule(contract, properties={contract: True}))
    )


def test_an_event_matching_an_interface_correlation_rule_is_routed() -> None:
    crm = correlation("crm", "Shipping.IOrderStatusChanged")

    decision = decide(message({"Shipping.IOrderStatusChanged": True}), snapshot(crm), no_dedicated_topic)

    assert not decision.unrouted
    assert decision.matched_subscriptions == ("crm",)
    assert decision.bridge_to is None


def test_an_event_no_other_subscription_matches_is_unrouted_even_though_the_router_sees_it() -> None:
    crm = correlation("crm", "Tenant.ICustomerLifecycleEvent")

    decision = decide(message({"Shipping.OrderAccepted": True}), snapshot(crm), no_dedicated_topic)

    assert decision.unrouted
    assert decision.contract == "Shipping.OrderAccepted"
    assert "no subscription on topic 'bundle-1' matches Shipping.OrderAccepted" in decision.description
    assert "['crm']" in decision.description


def test_an_event_with_an_existing_dedicated_topic_is_bridged_and_not_unrouted() -> None:
    decision = decide(message(), snapshot(topics=("bundle-1", "Shipping.OrderAccepted")), same_name_topic)

    assert decision.bridge_to == "Shipping.OrderAccepted"
    assert not decision.unrouted


def test_a_dedicated_topic_that_does_not_exist_is_not_a_bridge_target() -> None:
    decision = decide(message(), snapshot(), same_name_topic)

    assert decision.bridge_to is None
    assert decision.unrouted


def test_a_bridged_copy_is_never_routed_again() -> None:
    decision = decide(
        message({BRIDGED_FROM: "bundle-1"}),
        snapshot(topics=("bundle-1", "Shipping.OrderAccepted")),
        same_name_topic,
    )

    assert decision.bridge_to is None
    assert not decision.unrouted
    assert "already bridged" in decision.description


def test_the_fallback_topic_itself_is_never_a_bridge_target() -> None:
    decision = decide(message(), snapshot(), lambda contract: "BUNDLE-1")

    assert decision.bridge_to is None


def test_sql_like_rules_on_the_enclosed_types_header_are_evaluated_case_sensitively() -> None:
    like = SqlRule("r", "[NServiceBus.EnclosedMessageTypes] LIKE '%Shipping.IOrderAccepted%'")
    lower = SqlRule("r", "[NServiceBus.EnclosedMessageTypes] like '%shipping.iorderaccepted%'")

    assert rule_matches(like, message()) is Match.YES
    assert rule_matches(lower, message()) is Match.NO
    assert rule_matches(like, message(header=None)) is Match.NO


def test_sql_rules_the_router_cannot_evaluate_count_as_matches() -> None:
    audit = SubscriptionRules("audit", (SqlRule("a", "sys.Label = 'x' OR priority > 3"),))

    decision = decide(message(), snapshot(audit), no_dedicated_topic)

    assert rule_matches(audit.rules[0], message()) is Match.UNKNOWN
    assert not decision.unrouted
    assert decision.matched_subscriptions == ("audit",)


def test_true_and_false_filters() -> None:
    assert rule_matches(SqlRule("t", "1=1"), message()) is Match.YES
    assert rule_matches(SqlRule("f", " 1 = 0 "), message()) is Match.NO


def test_correlation_rules_compare_typed_values_and_system_properties() -> None:
    rule = CorrelationRule("r", subject="orders", properties={"Shipping.OrderAccepted": True})
    with_subject = IncomingMessage(
        body=b"", subject="orders", application_properties={"Shipping.OrderAccepted": True}
    )
    string_true = IncomingMessage(
        body=b"", subject="orders", application_properties={"Shipping.OrderAccepted": "True"}
    )
    other_subject = IncomingMessage(
        body=b"", subject="other", application_properties={"Shipping.OrderAccepted": True}
    )

    assert rule_matches(rule, with_subject) is Match.YES
    assert rule_matches(rule, string_true) is Match.NO
    assert rule_matches(rule, other_subject) is Match.NO


def test_a_subscription_without_rules_receives_nothing() -> None:
    decision = decide(message(), snapshot(SubscriptionRules("empty", ())), no_dedicated_topic)

    assert decision.unrouted


def test_an_event_another_events_content_filtered_rule_cannot_take_is_still_unrouted() -> None:
    # sales routes Shipping.OrderAccepted by content on the fallback topic: its rule's type condition rules
    # out every other event, so an InvoiceIssued nobody subscribes to is still found unrouted.
    sales = SubscriptionRules(
        "sales",
        (
            SqlRule("$default", "1=0"),
            SqlRule("Shipping.OrderAccepted", "[Shipping.OrderAccepted] = TRUE AND (amount >= 1000)"),
        ),
    )
    invoice = message({"Billing.InvoiceIssued": True}, header="Billing.InvoiceIssued")

    decision = decide(invoice, snapshot(sales), no_dedicated_topic)

    assert decision.unrouted
    assert rule_matches(sales.rules[1], invoice) is Match.NO


def test_the_events_own_content_filtered_rule_is_a_possible_match_the_router_cannot_settle() -> None:
    rule = SqlRule("r", "[Shipping.OrderAccepted] = TRUE AND (amount >= 1000)")
    like = SqlRule(
        "r", "[NServiceBus.EnclosedMessageTypes] LIKE '%Shipping.OrderAccepted%' AND (amount >= 1000)"
    )
    stamp_only = SqlRule("r", "[Shipping.OrderAccepted] = TRUE")
    order = message({"Shipping.OrderAccepted": True, "amount": 10.0})

    assert rule_matches(rule, order) is Match.UNKNOWN
    assert rule_matches(like, order) is Match.UNKNOWN
    assert rule_matches(stamp_only, order) is Match.YES
    assert rule_matches(stamp_only, message({"Shipping.OrderDeclined": True})) is Match.NO
