"""A declared migration off the fallback topic, as the router sees it: a fallback rule retired by a
handover (recorded on the new path's subscription) delivers the messages enqueued before its cutoff and
none after, whatever the router's snapshot still shows, so no event is lost in the switch; a message near
the cutoff is bridged although the old rule may have delivered it too, a twin with the original's MessageId
that the endpoint does not handle again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from shared.contracts import ENCLOSED_MESSAGE_TYPES
from shared.messages import IncomingMessage
from shared.router.decision import (
    BRIDGED_FROM,
    CorrelationRule,
    Retirement,
    RoutingSnapshot,
    SqlRule,
    SubscriptionRules,
    as_enqueued,
    decide,
)
from shared.router.service import bridged_copy
from shared.topology.handover import CLOCK_SKEW_SECONDS

ACCEPTED = "Shipping.OrderAccepted"
CATCH_ALL = (SqlRule("$Default", "1=1"),)
OLD_RULE = CorrelationRule(ACCEPTED, properties={ACCEPTED: True})
CUTOFF = datetime(2026, 11, 27, 6, 0, tzinfo=UTC)
SKEW = timedelta(seconds=CLOCK_SKEW_SECONDS)


def order(enqueued: datetime | None) -> IncomingMessage:
    properties = {ENCLOSED_MESSAGE_TYPES: f"{ACCEPTED};Shipping.IOrderStatusChanged", ACCEPTED: True}
    return IncomingMessage(
        body=b"{}", message_id="m", application_properties=properties, enqueued_time=enqueued
    )


def view(*, old_rule_shown: bool, billing_subscription_shown: bool = True) -> RoutingSnapshot:
    router = SubscriptionRules("busbar-router", CATCH_ALL)
    shown: list[CorrelationRule | SqlRule] = [OLD_RULE] if old_rule_shown else []
    rules = (SqlRule("$default", "1=0"), *shown)
    fallback = [SubscriptionRules("billing", rules, "billing")] if billing_subscription_shown else []
    return RoutingSnapshot(
        "fallback",
        "busbar-router",
        (router, *fallback),
        frozenset({"fallback", ACCEPTED}),
        {ACCEPTED.lower(): (SubscriptionRules("billing", CATCH_ALL, "billing"),)},
        (Retirement("billing", OLD_RULE, CUTOFF, "billing"),),
    )


def same_name_topic(contract: str) -> str | None:
    return contract


def test_before_the_cutoff_the_old_rule_delivered_so_no_copy_even_once_it_is_deleted() -> None:
    early = order(CUTOFF - SKEW - timedelta(milliseconds=1))
    for shown in (True, False):
        decision = decide(early, view(old_rule_shown=shown), same_name_topic)
        assert decision.bridge_to is None and decision.bridge_to_entities == (), decision
        assert not decision.unrouted


def test_after_the_cutoff_the_copy_goes_to_the_new_path_even_while_the_snapshot_shows_the_old_rule() -> None:
    late = order(CUTOFF + timedelta(milliseconds=1))
    for shown in (True, False):
        decision = decide(late, view(old_rule_shown=shown), same_name_topic)
        assert decision.bridge_to == ACCEPTED, decision


def test_within_the_clock_skew_allowance_the_router_bridges_toward_a_duplicate_not_a_loss() -> None:
    within = order(CUTOFF - SKEW + timedelta(milliseconds=1))
    assert decide(within, view(old_rule_shown=True), same_name_topic).bridge_to == ACCEPTED


def test_a_message_without_an_enqueued_time_is_bridged() -> None:
    assert decide(order(None), view(old_rule_shown=True), same_name_topic).bridge_to == ACCEPTED


def test_a_deleted_fallback_subscription_still_counts_for_messages_enqueued_before_the_cutoff() -> None:
    early = order(CUTOFF - timedelta(seconds=10))
    snapshot = as_enqueued(view(old_rule_shown=False, billing_subscription_shown=False), early)
    [billing] = [s for s in snapshot.subscriptions if s.name == "billing"]
    assert billing.rules == (OLD_RULE,) and billing.forward_to == "billing"
    decision = decide(early, view(old_rule_shown=False, billing_subscription_shown=False), same_name_topic)
    assert decision.bridge_to is None and decision.bridge_to_entities == ()


def test_a_naive_enqueued_time_is_read_as_utc() -> None:
    naive = (CUTOFF - timedelta(seconds=10)).replace(tzinfo=None)
    assert decide(order(naive), view(old_rule_shown=False), same_name_topic).bridge_to is None


def test_a_copy_that_may_have_a_twin_keeps_the_originals_message_id_and_carries_only_the_bridge_mark() -> (
    None
):
    # Enqueued within the skew allowance before the cutoff: the old rule may have delivered it too. The
    # bridged copy is the original with the bridge marker, same MessageId, so the endpoint's record of the
    # MessageId (shared.idempotency) makes it an ordinary duplicate; nothing else is stamped on it.
    within = order(CUTOFF - SKEW + timedelta(milliseconds=1))
    decision = decide(within, view(old_rule_shown=True), same_name_topic)
    assert decision.bridge_to == ACCEPTED, decision
    copy = bridged_copy(within, "fallback")
    assert copy.message_id == within.message_id == "m"
    assert copy.application_properties == {**within.application_properties, BRIDGED_FROM: "fallback"}
