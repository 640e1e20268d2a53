"""The router and the planner read a rule alike: for the rules Busbar and NServiceBus create (SQL with an
enclosed-types LIKE, correlation filters with properties, the catch-all ``1=1``, the FalseFilter ``1=0``,
the content conditions of handlers' ``where=``), a fallback subscription is one of the planner's delivery
paths of an event exactly when the router finds it takes some message of that event. Were they to disagree,
the router would withhold a bridged copy from an endpoint the broker never served (a loss), or the planner
would let a second path in beside one it did not see (a double).

Both are driven from the same rules (:mod:`shared.topology.rule_filters`, one model): the planner with
:func:`~shared.topology.delivery_paths.paths_of`, the router with :func:`~shared.router.decision.decide` on
messages built as Busbar publishes them (CorrelationFilter mode: the enclosed-types header and one boolean
stamp per type, the promoted fields), once with content a condition admits and once with content it does
not. (SQL of any other shape is no path to the planner and a possible match to the router, each side's
safe guess, so it is left out here.)
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from app.endpoints.sample.events import OrderAccepted, OrderAcceptedV2, OrderDeclined
from shared.contracts import Event, enclosed_types
from shared.handlers.conditions import handler_condition
from shared.messages import IncomingMessage
from shared.router.decision import RoutingSnapshot, SubscriptionRules, decide
from shared.topology.delivery_paths import CheckedEvent, carrier_topics, paths_of
from shared.topology.desired import RuleSpec
from shared.topology.messages import build_message
from shared.topology.options import FallbackTopicOptions, TopicRoutingMode, TopologyOptions
from shared.topology.plan import ExistingSubscription
from shared.topology.rule_filters import (
    FALSE_FILTER,
    TRUE_FILTER,
    RuleFilter,
    correlation_filter,
    sql_filter,
    sql_like_filter,
)

FALLBACK = "fallback"
OPTIONS = TopologyOptions(
    fallback_topic=FallbackTopicOptions(topic_name=FALLBACK, routing_mode=TopicRoutingMode.CorrelationFilter)
)
OA, OD, V2 = OrderAccepted.contract_name, OrderDeclined.contract_name, OrderAcceptedV2.contract_name
STATUS = "Shipping.IOrderStatusChanged"
AT_1000 = handler_condition(OrderAccepted, "amount >= 1000")
IN_EMEA = handler_condition(OrderAccepted, {"region": "emea"})

RULES: Mapping[str, RuleFilter] = {
    "like the event": sql_like_filter(OA),
    "like an interface": sql_like_filter(STATUS),
    "like another event": sql_like_filter(OD),
    "like in another case": sql_filter(f"[NServiceBus.EnclosedMessageTypes] like '%{OA.lower()}%'"),
    "like, spaced and user-scoped": sql_filter(
        f"user.[NServiceBus.EnclosedMessageTypes]  LIKE '%;{STATUS}%' "
    ),
    "correlation on the event": correlation_filter(OA),
    "correlation on an interface": correlation_filter(STATUS),
    "correlation on another event": correlation_filter(OD),
    "correlation with a property": IN_EMEA.combined(correlation_filter(OA)),
    "correlation on two stamps": RuleFilter("correlation", properties=((OA, True), (STATUS, True))),
    "stamp as SQL": sql_filter(f"[{OA}] = TRUE"),
    "catch-all": TRUE_FILTER,
    "catch-all spelled (1 = 1)": sql_filter("(1 = 1)"),
    "false filter": FALSE_FILTER,
    "where= SQL on a LIKE rule": AT_1000.combined(sql_like_filter(OA)),
    "where= SQL on a stamp": AT_1000.combined(correlation_filter(OA)),
    "where= SQL on another event's LIKE": AT_1000.combined(sql_like_filter(OD)),
    "where= properties on a LIKE rule": IN_EMEA.combined(sql_like_filter(OA)),
}
EVENTS: tuple[Event, ...] = (
    OrderAccepted(order_id="o-1", amount=5000.0, region="emea"),
    OrderAccepted(order_id="o-2", amount=10.0, region="apac"),
    OrderDeclined(order_id="o-3"),
    OrderAcceptedV2(order_id="o-4", amount=5000.0),
)


def received(event: Event) -> IncomingMessage:
    """``event`` as the router reads it off the fallback topic: what Busbar's publisher sends."""
    sent = build_message(event, TopicRoutingMode.CorrelationFilter, endpoint_name="shipping")
    return IncomingMessage(
        body=b"{}",
        message_id=sent.message_id,
        correlation_id=sent.correlation_id,
        content_type=sent.content_type,
        session_id=sent.session_id,
        application_properties={str(k): v for k, v in (sent.application_properties or {}).items()},
    )


def router_takes(rules: tuple[RuleSpec, ...], contract: str) -> bool:
    """Whether the router finds the ``billing`` subscription takes some message of ``contract``."""
    subscriptions = (
        SubscriptionRules("busbar-router", (RuleSpec("$Default", TRUE_FILTER),)),
        SubscriptionRules("billing", rules, "billing"),
    )
    snapshot = RoutingSnapshot(FALLBACK, "busbar-router", subscriptions, frozenset({FALLBACK}))
    decisions = [decide(received(e), snapshot, lambda _: None) for e in EVENTS if e.contract_name == contract]
    return any("billing" in d.matched_subscriptions for d in decisions)


def planner_takes(rules: tuple[RuleSpec, ...], contract: str) -> bool:
    """Whether ``billing`` is one of the planner's delivery paths of ``contract`` into its queue."""
    event = CheckedEvent(
        contract, tuple(enclosed_types(type(next(e for e in EVENTS if e.contract_name == contract))))
    )
    existing = ExistingSubscription(FALLBACK, "billing", "billing", rules)
    return bool(paths_of([existing], "billing", event, carrier_topics(OPTIONS, event)))


@pytest.mark.parametrize("contract", [OA, OD, V2])
@pytest.mark.parametrize("shape", list(RULES))
def test_a_fallback_rule_is_a_delivery_path_exactly_when_the_router_finds_it_takes_the_event(
    shape: str, contract: str
) -> None:
    # A neutral name: the planner also counts a rule named after the event, whatever it reads.
    rules = (RuleSpec("$default", FALSE_FILTER), RuleSpec("rule", RULES[shape]))

    assert router_takes(rules, contract) == planner_takes(rules, contract)


def test_the_representative_rules_take_what_each_shape_promises() -> None:
    """The agreement above is not vacuous: each side takes the events the rule names, and not others."""
    takes = {
        shape: {c for c in (OA, OD, V2) if planner_takes((RuleSpec("rule", f),), c)}
        for shape, f in RULES.items()
    }

    assert takes["like the event"] == {OA, V2}  # LIKE '%Shipping.OrderAccepted%' matches the V2 name too
    assert takes["like an interface"] == {OA, OD, V2}
    assert takes["like in another case"] == set()  # LIKE compares case-sensitively
    assert takes["like, spaced and user-scoped"] == {OA, OD, V2}
    assert takes["correlation on the event"] == takes["stamp as SQL"] == {OA}
    assert takes["correlation with a property"] == {OA}  # with region emea, not with apac
    assert takes["catch-all"] == takes["catch-all spelled (1 = 1)"] == {OA, OD, V2}
    assert takes["false filter"] == set()
    assert takes["where= SQL on another event's LIKE"] == {OD}
    assert takes["where= SQL on a LIKE rule"] == {OA, V2}
    assert router_takes((RuleSpec("rule", RULES["correlation with a property"]),), OA)
    only_apac = (e for e in EVENTS if getattr(e, "region", None) == "apac")
    apac = received(next(only_apac))
    eu_rule = SubscriptionRules(
        "billing", (RuleSpec("rule", RULES["correlation with a property"]),), "billing"
    )
    snapshot = RoutingSnapshot(FALLBACK, "busbar-router", (eu_rule,), frozenset({FALLBACK}))
    assert decide(apac, snapshot, lambda _: None).unrouted  # the router reads the property itself
