"""A declared migration off the fallback topic is a handover: the new subscription records the fallback
rules it retires, and apply deletes them only after every create and the router's snapshot interval (plus a
margin), so at no moment does the endpoint have neither path (management calls observed in order, against
the emulator's ARM endpoint)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.mgmt.servicebus.models import SBQueue, SBSubscription, SBSubscriptionProperties, SBTopic
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from emulator.testing import EmulatorHandle
from shared.amqp.connection import Namespace
from shared.contracts import ENCLOSED_MESSAGE_TYPES, ContractRegistry
from shared.management import ManagementClient
from shared.messages import IncomingMessage
from shared.router.decision import CorrelationRule, Retirement
from shared.router.service import ArchivingRecorder, FallbackRouter, load_snapshot
from shared.topology import (
    FallbackTopicOptions,
    Provisioner,
    SubscribedEvent,
    SubscriptionEntry,
    TopicRoutingMode,
    TopologyOptions,
    TopologyValidationError,
    desired_state,
)
from shared.topology.desired import correlation_filter, sql_like_filter
from shared.topology.handover import (
    MARGIN_SECONDS,
    Handover,
    RetiredRule,
    handover_seconds,
    skew_allowance,
)
from shared.topology.single_delivery import plan_single_delivery

OA, V2, OD = "Shipping.OrderAccepted", "Shipping.OrderAcceptedV2", "Shipping.OrderDeclined"


def test_a_handover_round_trips_through_user_metadata_and_anything_else_is_no_handover() -> None:
    handover = Handover(
        "team/billing",
        (
            RetiredRule("team/fallback", "billing", OA, correlation_filter(OA)),
            RetiredRule("team/fallback", "billing", "Like", sql_like_filter(OA)),
        ),
        32.0,
    )
    assert Handover.parse(handover.to_metadata()) == handover
    cutoff = datetime(2026, 11, 27, 13, 0, 5, 120000, tzinfo=UTC)
    fixed = replace(handover, retires=tuple(replace(r, cutoff=cutoff) for r in handover.retires))
    assert Handover.parse(fixed.to_metadata()) == fixed
    for other in (None, "", "billing", "{not json", '{"other": 1}', '{"busbar.handover": {"retires": 3}}'):
        assert Handover.parse(other) is None


def test_a_handover_too_long_for_user_metadata_is_refused_with_the_numbers() -> None:
    rules = tuple(
        RetiredRule("fallback", "billing", f"Event{i:04d}", correlation_filter(f"E{i}")) for i in range(40)
    )
    with pytest.raises(TopologyValidationError, match="at most 1024"):
        Handover("billing", rules, 2.0).to_metadata()


class Recording:
    """A management client whose subscription and rule operations are noted, in call order, before they go
    over the wire to the real ARM endpoint."""

    def __init__(self, management: ManagementClient, calls: list[tuple[str, ...]]) -> None:
        self.scope = management.scope
        self.queues = management.queues
        self.topics = management.topics
        self.namespaces = management.namespaces
        self.subscriptions = _Noting(management.subscriptions, "subscription", calls)
        self.rules = _Noting(management.rules, "rule", calls)


class _Noting:
    def __init__(self, operations: Any, kind: str, calls: list[tuple[str, ...]]) -> None:
        self._operations, self._kind, self._calls = operations, kind, calls

    def __getattr__(self, name: str) -> Any:
        operation = getattr(self._operations, name)
        if name not in ("create_or_update", "delete"):
            return operation

        def noted(*args: Any, **kwargs: Any) -> Any:
            path = "/".join(str(a) for a in args[2 : 5 if self._kind == "rule" else 4])
            self._calls.append((name, self._kind, path))
            return operation(*args, **kwargs)

        return noted


def test_apply_deletes_the_old_fallback_rule_only_after_the_creates_and_the_handover(
    management: ManagementClient, sb_client: ServiceBusClient, ns: str
) -> None:
    fallback = TopologyOptions(
        hierarchy_namespace=ns,
        fallback_topic=FallbackTopicOptions(
            topic_name="fallback", routing_mode=TopicRoutingMode.CorrelationFilter
        ),
    )
    moved = fallback.model_copy(
        update={"subscribed_event_to_topics_map": {OA: (SubscriptionEntry(topic=OA),)}}
    )
    before = Provisioner(management)
    before.apply(before.plan(desired_state(fallback, "billing", [OA, V2])))
    queue, topic, old_topic = f"{ns}/billing", f"{ns}/{OA}", f"{ns}/fallback"

    calls: list[tuple[str, ...]] = []
    seen_during_handover: dict[str, Any] = {}

    def handover_wait(seconds: float) -> None:
        calls.append(("wait", str(seconds)))
        scope = management.scope
        seen_during_handover["new"] = management.subscriptions.get(*scope, topic, "billing")
        seen_during_handover["old"] = {
            r.name for r in management.rules.list_by_subscriptions(*scope, old_topic, "billing")
        }
        # Both paths deliver while the handover lasts, and nothing is added to what they deliver: a message
        # both take reaches billing twice with one MessageId, which billing handles once
        # (shared.idempotency).
        with sb_client.get_topic_sender(old_topic) as sender:
            sender.send_messages(ServiceBusMessage("order", application_properties={OA: True}))
        with sb_client.get_topic_sender(topic) as sender:
            sender.send_messages(ServiceBusMessage("bridged", application_properties={OA: True}))
        with sb_client.get_queue_receiver(queue, max_wait_time=10) as receiver:
            delivered = receiver.receive_messages(max_message_count=10, max_wait_time=10)
            delivered += receiver.receive_messages(max_message_count=10, max_wait_time=2)
            seen_during_handover["delivered"] = sorted(
                (str(m), dict(m.application_properties or {})) for m in delivered
            )
            for message in delivered:
                receiver.complete_message(message)

    provisioner = Provisioner(Recording(management, calls), sleep=handover_wait)  # type: ignore[arg-type]
    events = [SubscribedEvent(OA)]
    plan = plan_single_delivery(
        provisioner, moved, "billing", events, desired_state(moved, "billing", [OA]), migrate=True,
        router_snapshot_seconds=0,
    )  # fmt: skip
    assert plan.handover_seconds == handover_seconds(0) == MARGIN_SECONDS
    assert plan.to_dict()["handoverSeconds"] == MARGIN_SECONDS

    result = provisioner.apply(plan)

    old_rule = f"{old_topic}/billing/{OA}"
    assert result.deleted == [f"{old_topic}/Subscriptions/billing/Rules/{OA}"]
    [wait] = [i for i, c in enumerate(calls) if c[0] == "wait"]
    [delete] = [i for i, c in enumerate(calls) if c == ("delete", "rule", old_rule)]
    new_subscription = ("create_or_update", "subscription", f"{topic}/billing")
    # The new path, the wait, the delete, and nothing after it; the rules that stay are not touched.
    assert calls.index(new_subscription) < wait < delete == len(calls) - 1, calls
    assert not [
        c for c in calls if c[1] == "rule" and c[2].startswith(f"{old_topic}/") and c != calls[delete]
    ]
    assert seen_during_handover["delivered"] == [
        ("bridged", {OA.encode(): True}),
        ("order", {OA.encode(): True}),
    ]
    queues = [q.name for q in management.queues.list_by_namespace(*management.scope)]
    assert [q for q in queues if q.lower().startswith(ns.lower())] == [queue], queues
    # While the handover lasts both paths exist: the new subscription, recording what it takes over ...
    new = seen_during_handover["new"]
    assert new.forward_to == queue
    handover = Handover.parse(new.user_metadata)
    assert handover is not None and handover.endpoint == queue
    assert handover.after_seconds == MARGIN_SECONDS
    assert [(r.topic, r.subscription, r.rule, r.filter) for r in handover.retires] == [
        (old_topic, "billing", OA, correlation_filter(OA))
    ]
    # ... and the old rule, still delivering; afterwards only the other event's rule stays.
    assert OA in seen_during_handover["old"]
    after = {r.name for r in management.rules.list_by_subscriptions(*management.scope, old_topic, "billing")}
    assert OA not in after and V2 in after
    # The router's snapshot carries the retired rule with its cutoff: the new subscription's createdAt
    # (the management plane's clock) plus the handover.
    view = load_snapshot(management, old_topic, "busbar-router")
    assert view.retirements == (
        Retirement(
            "billing",
            CorrelationRule(OA, properties={OA: True}),
            new.created_at + timedelta(seconds=MARGIN_SECONDS),
            queue,
            skew_allowance(MARGIN_SECONDS),  # at most half the (2 s) handover
        ),
    )


def test_a_migration_between_two_topics_without_the_fallback_topic_is_no_handover(
    management: ManagementClient, ns: str
) -> None:
    before = Provisioner(management)
    own_topic = TopologyOptions(hierarchy_namespace=ns)
    before.apply(before.plan(desired_state(own_topic, "billing", [OA])))
    moved = own_topic.model_copy(
        update={"subscribed_event_to_topics_map": {OA: (SubscriptionEntry(topic="orders"),)}}
    )
    waits: list[float] = []
    provisioner = Provisioner(management, sleep=waits.append)
    events = [SubscribedEvent(OA)]

    plan = plan_single_delivery(
        provisioner, moved, "billing", events, desired_state(moved, "billing", [OA]), migrate=True,
        router_snapshot_seconds=30,
    )  # fmt: skip
    provisioner.apply(plan)

    assert [i.path for i in plan.of("delete")] == [f"{ns}/{OA}/Subscriptions/billing"]
    assert plan.handover_seconds == 0 and "handoverSeconds" not in plan.to_dict()
    assert waits == []


def test_moving_an_event_onto_a_rule_of_an_existing_subscription_records_a_fixed_cutoff_on_it(
    management: ManagementClient, ns: str
) -> None:
    cf = TopicRoutingMode.CorrelationFilter
    fallback = TopologyOptions(
        hierarchy_namespace=ns,
        fallback_topic=FallbackTopicOptions(topic_name="fallback", routing_mode=cf),
        subscribed_event_to_topics_map={OD: (SubscriptionEntry(topic="orders", routing_mode=cf),)},
    )
    before = Provisioner(management)
    before.apply(before.plan(desired_state(fallback, "billing", [OA, OD])))
    moved_map = {e: (SubscriptionEntry(topic="orders", routing_mode=cf),) for e in (OA, OD)}
    moved = fallback.model_copy(update={"subscribed_event_to_topics_map": moved_map})
    orders, old_topic = f"{ns}/orders", f"{ns}/fallback"
    calls: list[tuple[str, ...]] = []
    provisioner = Provisioner(
        Recording(management, calls),  # type: ignore[arg-type]
        sleep=lambda seconds: calls.append(("wait", str(seconds))),
    )
    events = [SubscribedEvent(OA)]

    plan = plan_single_delivery(
        provisioner, moved, "billing", events, desired_state(moved, "billing", [OA]), migrate=True,
        router_snapshot_seconds=0,
    )  # fmt: skip
    assert plan.handover_updates == ((orders, "billing"),)
    assert plan.to_dict()["handoverRecordedOn"] == [f"{orders}/Subscriptions/billing"]
    provisioner.apply(plan)

    rule_create = calls.index(("create_or_update", "rule", f"{orders}/billing/{OA}"))
    updates = [
        i for i, c in enumerate(calls) if c == ("create_or_update", "subscription", f"{orders}/billing")
    ]
    wait = calls.index(("wait", str(MARGIN_SECONDS)))
    delete = calls.index(("delete", "rule", f"{old_topic}/billing/{OA}"))
    assert rule_create < updates[0] < updates[1] < wait < delete, calls
    subscription = management.subscriptions.get(*management.scope, orders, "billing")
    handover = Handover.parse(subscription.user_metadata)
    assert handover is not None
    [retired] = handover.retires
    # Fixed: the first update's updatedAt plus the handover, whatever updates the subscription sees later.
    assert retired.rule == OA and retired.cutoff is not None
    assert subscription.created_at + timedelta(seconds=MARGIN_SECONDS) <= retired.cutoff
    assert retired.cutoff <= subscription.updated_at + timedelta(seconds=MARGIN_SECONDS)
    assert subscription.forward_to == f"{ns}/billing"
    [view] = load_snapshot(management, old_topic, "busbar-router").retirements
    assert (view.subscription, view.rule.name, view.cutoff) == ("billing", OA, retired.cutoff)


def test_a_router_behind_a_deleted_fallback_subscription_still_learns_it_delivered_before_the_cutoff(
    management: ManagementClient, sb_client: ServiceBusClient, ns: str, emulator: EmulatorHandle
) -> None:
    # A migration (a declarative PUT) deleted billing's whole fallback subscription: billing is served
    # nowhere on the fallback topic, so the router's snapshot does not list the dedicated topic and finds
    # no handover there. Bridging an order enqueued before the cutoff, it reads that topic first and learns
    # the old subscription delivered the order: no second copy.
    g, n = management.scope
    fallback, dedicated, queue = f"{ns}/fallback", f"{ns}/{OA}", f"{ns}/billing"
    management.queues.create_or_update(g, n, queue, SBQueue())
    for topic in (fallback, dedicated):
        management.topics.create_or_update(g, n, topic, SBTopic())
    management.subscriptions.create_or_update(g, n, fallback, "busbar-router", SBSubscription())
    handover = Handover(queue, (RetiredRule(fallback, "billing", OA, correlation_filter(OA)),), 3600.0)
    management.subscriptions.create_or_update(
        g,
        n,
        dedicated,
        "billing",
        SBSubscription(
            properties=SBSubscriptionProperties(forward_to=queue, user_metadata=handover.to_metadata())
        ),
    )
    options = TopologyOptions(
        hierarchy_namespace=ns,
        fallback_topic=FallbackTopicOptions(
            topic_name="fallback", routing_mode=TopicRoutingMode.CorrelationFilter
        ),
    )
    router = FallbackRouter(
        management=management,
        namespace=Namespace.from_connection_string(emulator.connection_string),
        options=options,
        contracts=ContractRegistry(),
        fallback_topic=fallback,
        router_subscription="busbar-router",
        recorder=ArchivingRecorder(None),
    )
    assert load_snapshot(management, fallback, "busbar-router").retirements == ()
    order = IncomingMessage(
        body=b"{}",
        message_id="order-1",
        application_properties={ENCLOSED_MESSAGE_TYPES: OA, OA: True},
        enqueued_time=datetime.now(UTC),
    )

    decision = router.route(order)

    assert decision.bridge_to is None and decision.bridge_to_entities == (), decision
    with sb_client.get_queue_receiver(queue, max_wait_time=2) as receiver:
        assert receiver.receive_messages(max_message_count=1, max_wait_time=2) == []


def test_the_clock_skew_allowance_is_five_seconds_and_at_most_half_the_handover() -> None:
    # Five seconds either way between ARM's createdAt and the broker's enqueue time; at most half the
    # handover, so a short handover bridges only what was enqueued once the new path existed.
    assert skew_allowance(handover_seconds(30)) == 5.0
    assert skew_allowance(handover_seconds(0)) == 1.0
