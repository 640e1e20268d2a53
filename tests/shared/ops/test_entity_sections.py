"""Where the console shows an entity: with the app's endpoints, with Busbar's infrastructure, or apart as
foreign (shared/ops/entity_sections.py), and the entities view built from them (shared/ops/entities_view.py).
Pure: ARM models stand in as plain objects with the attributes the view reads."""

from __future__ import annotations

from types import SimpleNamespace

from shared.ops.entities_view import entities_view
from shared.ops.entity_sections import (
    AppEntities,
    Placement,
    Section,
    place_queue,
    place_subscription,
    place_topic,
)

APP = AppEntities(
    endpoints={"team-a/billing": "billing", "team-a/crm": "crm"},
    topics=frozenset({"team-a/bundle-1", "team-a/bundle-2", "team-a/busbar-fallback"}),
    subscriptions=frozenset(
        {"team-a/bundle-1/Subscriptions/forwardTo-bundle-2", "team-a/bundle-2/Subscriptions/billing"}
    ),
    lock_queue="team-a/busbar-provisioning-locks",
    fallback_topic="team-a/busbar-fallback",
    router_subscription="busbar-router",
)
QUEUES = frozenset({"team-a/billing", "team-a/crm", "team-a/crm.held", "audit", "audit.held", "notes.held"})


def test_an_endpoints_input_queue_is_the_apps_whatever_the_names_case() -> None:
    assert place_queue("TEAM-A/Billing", APP, QUEUES) == Placement(Section.APP, "input queue", "billing")


def test_an_ordered_endpoints_hold_queue_is_infrastructure_serving_that_endpoint() -> None:
    assert place_queue("team-a/crm.held", APP, QUEUES) == Placement(
        Section.INFRASTRUCTURE, "hold queue of crm (held keys wait here)", "crm"
    )


def test_the_provisioning_lock_queue_is_infrastructure() -> None:
    placement = place_queue("team-a/busbar-provisioning-locks", APP, QUEUES)
    assert placement.section is Section.INFRASTRUCTURE and placement.endpoint is None
    assert placement.role.startswith("provisioning locks")


def test_another_hosts_hold_queue_is_foreign_and_named_for_its_endpoint() -> None:
    assert place_queue("audit.held", APP, QUEUES) == Placement(Section.FOREIGN, "hold queue of audit")


def test_a_queue_merely_ending_in_held_is_a_foreign_queue() -> None:
    assert place_queue("notes.held", APP, QUEUES) == Placement(
        Section.FOREIGN, "queue no endpoint of this app reads"
    )


def test_the_lock_queue_under_another_prefix_is_not_this_apps() -> None:
    assert place_queue("busbar-provisioning-locks", APP, QUEUES).section is Section.FOREIGN


def test_the_fallback_topic_and_the_topologys_topics_are_infrastructure_and_others_foreign() -> None:
    assert place_topic("team-a/busbar-fallback", APP).role == "fallback topic (the router reads it)"
    assert place_topic("Team-A/Bundle-2", APP) == Placement(
        Section.INFRASTRUCTURE, "topic of the app's topology"
    )
    assert place_topic("bundle-1", APP) == Placement(Section.FOREIGN, "topic outside the app's topology")


def test_a_subscription_forwarding_to_an_app_endpoint_is_that_endpoints_whoever_created_it() -> None:
    assert place_subscription("bundle-1", "Shipping", "team-a/billing", APP) == Placement(
        Section.APP, "subscription forwarding to billing", "billing"
    )


def test_the_router_subscription_is_infrastructure_only_on_the_fallback_topic() -> None:
    router = place_subscription("team-a/busbar-fallback", "busbar-router", None, APP)
    assert router == Placement(Section.INFRASTRUCTURE, "the fallback router's subscription")
    elsewhere = place_subscription("team-a/bundle-1", "busbar-router", None, APP)
    assert elsewhere == Placement(Section.FOREIGN, "subscription read directly (no forwarding)")


def test_the_topologys_subscription_forwarding_to_a_topic_is_infrastructure() -> None:
    forward = place_subscription("team-a/bundle-1", "forwardTo-bundle-2", "team-a/bundle-2", APP)
    assert forward.section is Section.INFRASTRUCTURE
    assert forward.role == "subscription of the app's topology forwarding to team-a/bundle-2"


def test_a_subscription_forwarding_to_a_foreign_queue_is_foreign() -> None:
    assert place_subscription("team-a/busbar-fallback", "audit", "audit", APP) == Placement(
        Section.FOREIGN, "subscription forwarding to audit"
    )


def _entity(name: str, dead_letters: int = 0, **fields: object) -> SimpleNamespace:
    details = SimpleNamespace(
        active_message_count=0,
        dead_letter_message_count=dead_letters,
        scheduled_message_count=0,
        transfer_message_count=0,
        transfer_dead_letter_message_count=0,
    )
    return SimpleNamespace(name=name, count_details=details, **fields)


def test_the_view_lists_the_app_endpoints_in_the_apps_order_each_queue_before_its_subscriptions() -> None:
    queues = [
        _entity("audit", 4),
        _entity("team-a/crm", 2),
        _entity("team-a/crm.held", 1),
        _entity("team-a/billing"),
    ]
    fallback = _entity("team-a/busbar-fallback")
    subscriptions = [
        _entity("crm", 3, forward_to="team-a/crm"),
        _entity("busbar-router", forward_to=None),
        _entity("audit", forward_to="audit"),
    ]

    view = entities_view(queues, [(fallback, subscriptions)], APP)

    assert [(e["endpoint"], [r["path"] for r in e["entities"]]) for e in view["endpoints"]] == [
        ("billing", ["team-a/billing"]),
        ("crm", ["team-a/crm", "team-a/busbar-fallback/Subscriptions/crm"]),
    ]
    assert [r["path"] for r in view["infrastructure"]] == [
        "team-a/crm.held",
        "team-a/busbar-fallback/Subscriptions/busbar-router",
        "team-a/busbar-fallback",
    ]
    assert [r["path"] for r in view["foreign"]] == ["audit", "team-a/busbar-fallback/Subscriptions/audit"]
    # Per endpoint (its queue and the subscriptions feeding it): the app's endpoints first, in its order.
    assert view["deadLettersPerEndpoint"] == {
        "team-a/billing": 0,
        "team-a/crm": 5,
        "audit": 4,
        "team-a/busbar-fallback/Subscriptions/busbar-router": 0,
        "team-a/crm.held": 1,
    }
    assert {r["path"]: r["section"] for r in view["queues"]} == {
        "audit": "foreign",
        "team-a/billing": "app",
        "team-a/crm": "app",
        "team-a/crm.held": "infrastructure",
    }


def test_an_app_endpoint_without_a_queue_is_still_listed_and_notes_are_passed_on() -> None:
    app = AppEntities(endpoints={"billing": "billing"}, notes=("the topology options are invalid: ...",))

    view = entities_view([], [], app)

    assert view["endpoints"] == [{"endpoint": "billing", "queue": "billing", "entities": []}]
    assert view["notes"] == ["the topology options are invalid: ..."]
