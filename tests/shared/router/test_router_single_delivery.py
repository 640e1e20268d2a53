"""The router's bridge never delivers an event twice: subscribers of the dedicated topic that already
received the event on the fallback topic (a fallback subscription forwarding to the same queue matched it)
get no bridged copy."""

from __future__ import annotations

from shared.contracts import ENCLOSED_MESSAGE_TYPES
from shared.messages import IncomingMessage
from shared.router.decision import CorrelationRule, RoutingSnapshot, SqlRule, SubscriptionRules, decide

ACCEPTED = "Shipping.OrderAccepted"
CATCH_ALL = (SqlRule("$Default", "1=1"),)


def order() -> IncomingMessage:
    properties = {ENCLOSED_MESSAGE_TYPES: f"{ACCEPTED};Shipping.IOrderStatusChanged", ACCEPTED: True}
    return IncomingMessage(body=b"{}", message_id="m", application_properties=properties)


def on_fallback(queue: str, contract: str = ACCEPTED) -> SubscriptionRules:
    rules = (SqlRule("$default", "1=0"), CorrelationRule(contract, properties={contract: True}))
    return SubscriptionRules(queue, rules, forward_to=queue)


def snapshot(fallback: list[SubscriptionRules], dedicated: list[SubscriptionRules]) -> RoutingSnapshot:
    router = SubscriptionRules("busbar-router", CATCH_ALL)
    return RoutingSnapshot(
        "fallback",
        "busbar-router",
        (router, *fallback),
        frozenset({"fallback", ACCEPTED}),
        {ACCEPTED.lower(): tuple(dedicated)},
    )


def same_name_topic(contract: str) -> str | None:
    return contract


def test_no_copy_when_every_subscriber_of_the_dedicated_topic_got_it_on_the_fallback_topic() -> None:
    view = snapshot([on_fallback("billing")], [SubscriptionRules("billing", CATCH_ALL, "billing")])

    decision = decide(order(), view, same_name_topic)

    assert decision.bridge_to is None and decision.bridge_to_entities == ()
    assert not decision.unrouted
    assert "not bridged to 'Shipping.OrderAccepted'" in decision.description
    assert "['billing'] received it on the fallback topic" in decision.description


def test_subscribers_not_served_on_the_fallback_topic_get_the_copy_straight_in_their_queues() -> None:
    dedicated = [
        SubscriptionRules("billing", CATCH_ALL, "billing"),
        SubscriptionRules("audit", CATCH_ALL, "audit"),
        SubscriptionRules("other", (CorrelationRule("x", properties={"Nope": True}),), "other"),
    ]

    decision = decide(order(), snapshot([on_fallback("billing")], dedicated), same_name_topic)

    assert decision.bridge_to is None
    assert decision.bridge_to_entities == ("audit",)


def test_a_subscriber_served_only_by_another_event_on_the_fallback_topic_still_gets_the_copy() -> None:
    fallback = [on_fallback("billing", "Shipping.OrderAcceptedV2")]  # billing's V2 rule: not this event
    view = snapshot(fallback, [SubscriptionRules("billing", CATCH_ALL, "billing")])

    decision = decide(order(), view, same_name_topic)

    assert decision.bridge_to == ACCEPTED


def test_when_a_non_forwarding_subscriber_needs_the_topic_the_copy_goes_there_and_the_note_says_so() -> None:
    dedicated = [SubscriptionRules("billing", CATCH_ALL, "billing"), SubscriptionRules("reader", CATCH_ALL)]

    decision = decide(order(), snapshot([on_fallback("billing")], dedicated), same_name_topic)

    assert decision.bridge_to == ACCEPTED
    assert "['billing'] receive it twice" in decision.description


def test_an_uncertain_fallback_match_does_not_withhold_the_copy() -> None:
    unknown = SubscriptionRules("billing", (SqlRule("r", "amount > 3"),), forward_to="billing")
    view = snapshot([unknown], [SubscriptionRules("billing", CATCH_ALL, "billing")])

    decision = decide(order(), view, same_name_topic)

    assert decision.bridge_to == ACCEPTED  # a possible duplicate rather than a possible loss


def test_forwarding_targets_compare_case_insensitively() -> None:
    view = snapshot([on_fallback("Billing")], [SubscriptionRules("b", CATCH_ALL, "billing")])

    assert decide(order(), view, same_name_topic).bridge_to is None
