"""Content filters as data: what a filtered subscription's rules are in each routing mode, and every kind of
bad filter refused (naming the problem and its position) before anything is provisioned."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from app.endpoints.sample.events import OrderAccepted, sample_registry
from shared.contracts import Event
from shared.topology import TopologyOptions, desired_state, parse_topology_options
from shared.topology.cli import run
from shared.topology.content_filters import ContentFilter, content_filter_errors
from shared.topology.delivery_paths import duplicate_paths
from shared.topology.desired import RuleFilter, RuleSpec, SubscribedEvent, parse_subscribed_events
from shared.topology.errors import TopologyValidationError
from shared.topology.event_carriers import checked_events, registry_enclosed_of
from shared.topology.plan import ExistingSubscription
from shared.topology.sql_check import SqlFilterError, check_sql_filter

OA = "Shipping.OrderAccepted"


def _rules(events: list[Any], options: TopologyOptions | None = None) -> list[dict[str, Any]]:
    [subscription] = desired_state(options or TopologyOptions(), "sales", events).subscriptions
    return [r.to_dict() for r in subscription.rules]


def test_a_not_multiplexed_filtered_subscription_has_the_conditions_rule_instead_of_the_match_all() -> None:
    rules = _rules([{"type": OA, "filter": "amount >= 1000"}])

    assert [(r["name"], r.get("sqlExpression")) for r in rules] == [
        ("$default", "1=0"),
        (OA, "amount >= 1000"),
    ]
    assert rules[1]["contentFilter"] == "amount >= 1000"


def test_a_correlation_condition_on_a_not_multiplexed_subscription_is_a_correlation_rule() -> None:
    rules = _rules([{"type": OA, "filter": {"region": "emea"}}], TopologyOptions())

    assert rules[1]["filterType"] == "CorrelationFilter" and rules[1]["properties"] == {"region": "emea"}


def test_the_filter_is_shown_back_in_the_subscribed_events_shape() -> None:
    [event] = parse_subscribed_events([{"type": OA, "filter": {"region": "emea"}}])

    assert event.to_dict() == {"type": OA, "filter": {"region": "emea"}}
    assert SubscribedEvent(OA).to_dict() == OA


@pytest.mark.parametrize(
    ("text", "problem", "position"),
    [
        ("amount >", "expected a condition or a value, found the end of the filter", 9),
        ("amount >= 1000 AND", "expected a condition or a value, found the end of the filter", 19),
        ("amount", "expected a condition as the filter, found a value", 1),
        ("region = 'emea", "unterminated string constant", 10),
        ("sys.Colour = 'red'", "'sys.Colour' is not a system property", 1),
        ("amount >= 1000 region = 'x'", "expected AND, OR or the end of the filter, found 'region'", 16),
        ("(amount > 1", "expected ')' to close the '(' opened at position 1", 12),
        ("_amount = 1", "unexpected character '_'", 1),  # Azure: a regular identifier starts with a letter
    ],
)
def test_sql_that_does_not_parse_is_refused_naming_the_problem_and_its_position(
    text: str, problem: str, position: int
) -> None:
    with pytest.raises(SqlFilterError) as raised:
        check_sql_filter(text)
    assert problem in raised.value.message and raised.value.position == position

    with pytest.raises(TopologyValidationError, match=f"filter of {OA}: .*at position {position}"):
        desired_state(TopologyOptions(), "sales", [{"type": OA, "filter": text}])


def test_the_sql_check_accepts_the_languages_constructs_and_lists_what_they_read() -> None:
    text = (
        "(amount >= 1000 OR region IN ('emea', 'apac')) AND NOT sys.Label LIKE 'test%' ESCAPE '!' "
        "AND EXISTS(region) AND [amount] * 2 - 1 > @floor AND region IS NOT NULL"
    )

    reads = [(r.scope, r.name) for r in check_sql_filter(text)]

    assert reads == [
        ("user", "amount"),
        ("user", "region"),
        ("sys", "Label"),
        ("user", "region"),
        ("user", "amount"),
        ("user", "region"),
    ]


def test_a_filter_reading_a_field_the_contract_does_not_promote_is_refused_naming_it_and_its_position() -> (
    None
):
    events = parse_subscribed_events([{"type": OA, "filter": "amount >= 1000 AND order_id = 'x'"}])

    [error] = content_filter_errors(events, sample_registry())

    assert "property 'order_id' at position 20 is not promoted by Shipping.OrderAccepted" in error
    assert "(promoted: amount, region)" in error


def test_a_correlation_filter_on_an_unknown_property_is_refused_naming_it() -> None:
    events = parse_subscribed_events([{"type": OA, "filter": {"regoin": "emea"}}])

    [error] = content_filter_errors(events, sample_registry())

    assert error.startswith(f"correlation filter of {OA}: property 'regoin' is not promoted by {OA}")


def test_a_filter_on_an_interface_must_read_what_every_known_implementer_promotes() -> None:
    # OrderAcceptedV2 and OrderDeclined promote nothing: an amount filter on the interface would miss them.
    events = parse_subscribed_events([{"type": "Shipping.IOrderAccepted", "filter": "amount > 1"}])

    [error] = content_filter_errors(events, sample_registry())

    assert "Shipping.OrderAcceptedV2, Shipping.OrderDeclined" in error


def test_a_filter_on_a_contract_the_registry_does_not_know_is_refused_as_uncheckable() -> None:
    events = parse_subscribed_events([{"type": "Partner.Thing", "topic": "t", "filter": "x = 1"}])

    [error] = content_filter_errors(events, sample_registry())

    assert "the contract is not known here" in error


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({}, "is empty"),
        ({"region": ["emea"]}, "must equal a string, number or boolean"),
        (17, "must be a SQL string or an object"),
    ],
)
def test_a_malformed_correlation_filter_is_refused(value: object, problem: str) -> None:
    with pytest.raises(TopologyValidationError, match=problem):
        ContentFilter.parse(value, OA)


def test_one_event_with_two_different_filters_is_refused_with_the_reason() -> None:
    items = [{"type": OA, "filter": "amount >= 1000"}, {"type": OA, "filter": {"region": "emea"}}]

    with pytest.raises(TopologyValidationError, match="combine the conditions with OR"):
        parse_subscribed_events(items)


def test_a_filter_that_an_unfiltered_event_on_the_same_topic_would_make_moot_is_refused() -> None:
    options = parse_topology_options(
        {"SubscribedEventToTopicsMap": {OA: "orders", "Shipping.OrderDeclined": "orders"}}
    )
    items: list[Any] = [{"type": OA, "filter": "amount >= 1000"}, "Shipping.OrderDeclined"]

    with pytest.raises(TopologyValidationError, match="would never apply"):
        desired_state(options, "sales", items)


def test_a_filtered_rule_is_a_delivery_path_so_a_second_path_for_the_event_is_found() -> None:
    options = parse_topology_options(
        {"FallbackTopic": {"TopicName": "bundle", "RoutingMode": "CorrelationFilter"}}
    )
    events = parse_subscribed_events([{"type": OA, "topic": OA, "filter": "amount >= 1000"}])
    desired = desired_state(options, "sales", events)
    # The endpoint already receives the event through the fallback topic's correlation rule.
    fallback = ExistingSubscription(
        "bundle", "sales", "sales", (RuleSpec(OA, RuleFilter("correlation", properties=((OA, True),))),)
    )

    checked = checked_events(options, events, registry_enclosed_of(sample_registry()))
    [duplicate] = duplicate_paths(options, "sales", checked, [fallback], desired)

    assert duplicate.event == OA
    assert [p.label for p in duplicate.added] == [f"{OA}/sales/{OA}"]


def test_the_cli_refuses_a_bad_filter_with_exit_2_before_any_call() -> None:
    out = io.StringIO()
    event = json.dumps({"type": OA, "filter": {"amout": 5}})

    status = run(["validate", "--endpoint", "sales", "--events", event], out, environment={})

    assert status == 2
    document = json.loads(out.getvalue())
    assert document["error"] == "invalid"
    assert "property 'amout' is not promoted by Shipping.OrderAccepted" in document["errors"][0]


def test_promoting_nothing_and_filtering_on_nothing_is_still_allowed() -> None:
    class Plain(Event, contract="Tests.Filters.Plain"):
        amount: float

    assert Plain.promoted_fields == () and OrderAccepted.promoted_fields == ("amount", "region")
