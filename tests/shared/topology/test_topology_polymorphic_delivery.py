"""The one-delivery check counts each concrete event's paths into the queue, not the subscribed name's
(issue 36, item 1): NServiceBus's polymorphic and multiplexed subscriptions are accepted, a concrete event
that would arrive twice is still refused.

The cases are NServiceBus's (Particular/NServiceBus.Transport.AzureServiceBus 6.5.0, commit 8baf943):
``src/AcceptanceTests/Subscribing/When_multi_subscribing_to_a_polymorphic_event_using_topic_mappings.cs``
(``SubscribeTo<IMyEvent>`` on the topics of ``MyEvent1`` and ``MyEvent2``: both events delivered), the
``ConfigureEndpointAzureServiceBusTransport.cs`` mapping of NServiceBus core's
``When_multiple_versions_of_a_message_is_published`` (``SubscribeTo<V1Event>`` on ``V2Event``'s topic, V2
deriving from V1), and ``When_using_topic_per_event_topology_with_correlation_filter_multiplexing.cs``
(``PublishTo`` both events to one topic, ``SubscribeTo<IMyEvent>`` there). The seeds' ``000_…``
"Interface-based inheritance" maps ``Shipping.IOrderStatusChanged`` to the topics of its implementers.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient

from app.endpoints.sample.events import OrderAccepted, OrderDeclined, sample_registry
from emulator.testing import EmulatorHandle
from shared.contracts import ContractRegistry, Event
from shared.management import ManagementClient
from shared.topology import (
    FallbackTopicOptions,
    PublishEntry,
    SubscribedEvent,
    SubscriptionEntry,
    TopicRoutingMode,
    TopologyOptions,
    desired_state,
)
from shared.topology.cli import run
from shared.topology.delivery_paths import DuplicateDelivery, duplicate_paths
from shared.topology.event_carriers import EnclosedOf, checked_events, registry_enclosed_of
from tests.shared.topology.topology_helpers import OA, OD, publish_and_collect

pytestmark = pytest.mark.timeout(60)

STATUS = "Shipping.IOrderStatusChanged"
SAMPLE = registry_enclosed_of(sample_registry())
CORRELATION = TopicRoutingMode.CorrelationFilter


class V1Event(Event, contract="Versioning.V1Event"):
    """A concrete event ..."""


class V2Event(V1Event, contract="Versioning.V2Event"):
    """... and its next version, deriving from it: a V2Event encloses V1Event too."""


VERSIONS = registry_enclosed_of(ContractRegistry(V1Event, V2Event))


def _on(*topics: str, mode: TopicRoutingMode | None = None) -> tuple[SubscriptionEntry, ...]:
    return tuple(SubscriptionEntry(topic=t, routing_mode=mode) for t in topics)


def _duplicates(
    options: TopologyOptions, events: Sequence[Any], enclosed_of: EnclosedOf | None
) -> list[DuplicateDelivery]:
    """What the check finds for a fresh queue ``crm`` subscribing to ``events``."""
    desired = desired_state(options, "crm", events)
    checked = checked_events(options, [SubscribedEvent.parse(e) for e in events], enclosed_of)
    return duplicate_paths(options, "crm", checked, [], desired)


def test_an_interface_mapped_to_the_topics_of_its_implementers_is_one_path_for_each() -> None:
    options = TopologyOptions(subscribed_event_to_topics_map={STATUS: _on(OA, OD)})

    assert _duplicates(options, [STATUS], SAMPLE) == []
    # The same mapping given in the request, and beside the sample app's fallback topic.
    fallback = FallbackTopicOptions(topic_name="bundle", routing_mode=CORRELATION)
    explicit = [{"type": STATUS, "topic": OA}, {"type": STATUS, "topic": OD}]
    assert _duplicates(TopologyOptions(fallback_topic=fallback), explicit, SAMPLE) == []


def test_the_publish_map_tells_the_implementers_topics_when_the_registry_does_not_know_them() -> None:
    published = {OA: PublishEntry(topic="accepted"), OD: PublishEntry(topic="declined")}
    options = TopologyOptions(
        published_event_to_topics_map=published,
        subscribed_event_to_topics_map={STATUS: _on("accepted", "declined")},
    )

    assert _duplicates(options, [STATUS], None) == []


def test_an_interface_mapped_to_topics_nothing_known_is_published_to_stands_for_itself() -> None:
    """No registry entry and no publish map: nothing says the two topics carry different events."""
    options = TopologyOptions(subscribed_event_to_topics_map={"Shop.IUnknown": _on("left", "right")})

    [duplicate] = _duplicates(options, ["Shop.IUnknown"], SAMPLE)

    assert duplicate.message == (
        "crm would receive Shop.IUnknown 2 times, through left/crm (added) and right/crm (added)"
    )


def test_a_concrete_event_mapped_to_its_own_topic_and_its_next_versions_is_one_path_for_each() -> None:
    """NServiceBus's versioning mapping: the V2 topic carries V2Events (which enclose V1Event), never a
    V1Event, so V1Event arrives through its own topic only."""
    v1, v2 = V1Event.contract_name, V2Event.contract_name
    options = TopologyOptions(subscribed_event_to_topics_map={v1: _on(v1, v2)})

    assert _duplicates(options, [v1], VERSIONS) == []


def test_a_concrete_event_mapped_to_two_topics_it_travels_on_is_refused_naming_both() -> None:
    options = TopologyOptions(subscribed_event_to_topics_map={OA: _on("orders", "orders-eu")})

    [duplicate] = _duplicates(options, [OA], SAMPLE)

    assert duplicate.message == (
        f"crm would receive {OA} 2 times, through orders/crm (added) and orders-eu/crm (added)"
    )


def test_an_interface_on_one_multiplexed_topic_is_one_path_for_each_event_published_there() -> None:
    published = {OA: PublishEntry(topic="status", routing_mode=CORRELATION)}
    published[OD] = PublishEntry(topic="status", routing_mode=CORRELATION)
    options = TopologyOptions(
        published_event_to_topics_map=published,
        subscribed_event_to_topics_map={STATUS: _on("status", mode=CORRELATION)},
    )

    assert _duplicates(options, [STATUS], SAMPLE) == []
    assert _duplicates(options, [STATUS], None) == []


def test_an_interface_filtered_on_two_multiplexed_topics_takes_each_event_on_its_own_topic_only() -> None:
    """The interface's correlation rule on each topic would take either event, but each event is
    published to one of the topics only."""
    published = {OA: PublishEntry(topic="accepted", routing_mode=CORRELATION)}
    published[OD] = PublishEntry(topic="declined", routing_mode=CORRELATION)
    options = TopologyOptions(
        published_event_to_topics_map=published,
        subscribed_event_to_topics_map={STATUS: _on("accepted", "declined", mode=CORRELATION)},
    )

    assert _duplicates(options, [STATUS], SAMPLE) == []
    assert _duplicates(options, [STATUS], None) == []


def test_an_interface_and_its_implementer_on_topics_that_both_carry_the_implementer_is_refused() -> None:
    published = {OA: PublishEntry(topic="status"), OD: PublishEntry(topic="status")}
    options = TopologyOptions(
        published_event_to_topics_map=published,
        subscribed_event_to_topics_map={STATUS: _on("status")},
    )

    for enclosed_of in (SAMPLE, None):
        [duplicate] = _duplicates(options, [STATUS, OA], enclosed_of)
        assert duplicate.message == (
            f"crm would receive {OA} 2 times, through status/crm (added) and {OA}/crm (added)"
        )


# ------------------------------------------------------------------- python -m shared.topology apply


@pytest.fixture(autouse=True)
def _outside_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI reads ./local.settings.json (and ./.data): the checkout's are a developer's, not the test's."""
    monkeypatch.chdir(tmp_path)


def _apply(
    emulator: EmulatorHandle,
    tmp_path: Path,
    ns: str,
    options: dict[str, Any],
    *events: str,
    command: str = "apply",
    contracts: str | None = None,
) -> tuple[int, dict[str, Any]]:
    """``python -m shared.topology apply`` (or ``command``) for queue ``crm``; the exit status and its
    last document."""
    path = tmp_path / "topology.json"
    path.write_text(json.dumps(options))
    env = {
        "BUSBAR_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000",
        "BUSBAR_RESOURCE_GROUP": "busbar-tests",
        "BUSBAR_NAMESPACE": "sbemulatorns",
        "BUSBAR_MANAGEMENT_ENDPOINT": f"http://127.0.0.1:{emulator.management_port}",
        "BUSBAR_MANAGEMENT_TOKEN": emulator.emulator.management_token or "",
    }
    argv = [command, "--options", str(path), "--hierarchy", ns, "--endpoint", "crm", "--events", *events]
    argv += ["--contracts", contracts] if contracts else []
    out = io.StringIO()
    code = run(argv, out, env)
    decoder, text = json.JSONDecoder(), out.getvalue().strip()
    documents, position = [], 0
    while position < len(text):
        document, position = decoder.raw_decode(text, position)
        documents.append(document)
        position = len(text) - len(text[position:].lstrip())
    return code, documents[-1]


def _forwarding_to(management: ManagementClient, queue: str, ns: str) -> list[str]:
    return sorted(
        f"{topic.name}/{sub.name}"
        for topic in management.topics.list_by_namespace(*management.scope)
        if topic.name.startswith(f"{ns}/")
        for sub in management.subscriptions.list_by_topic(*management.scope, topic.name)
        if (sub.forward_to or "").lower() == queue.lower()
    )


def test_applying_an_interface_mapped_to_its_implementers_topics_delivers_each_published_event_once(
    emulator: EmulatorHandle,
    management: ManagementClient,
    sb_client: ServiceBusClient,
    tmp_path: Path,
    ns: str,
) -> None:
    options = {"SubscribedEventToTopicsMap": {STATUS: [OA, OD]}}

    code, applied = _apply(emulator, tmp_path, ns, options, STATUS)

    assert code == 0, applied
    assert _forwarding_to(management, f"{ns}/crm", ns) == [f"{ns}/{OA}/crm", f"{ns}/{OD}/crm"]
    # Each publisher sends its event to the topic named after it (NServiceBus's default destination).
    publisher = TopologyOptions(hierarchy_namespace=ns)
    events = [OrderAccepted(order_id="o-1", amount=1.0), OrderDeclined(order_id="o-2", reason="stock")]
    received, _ = publish_and_collect(sb_client, publisher, ["crm"], events)
    assert received == {"crm": [OA, OD]}


def test_applying_a_concrete_event_mapped_to_two_topics_it_travels_on_exits_2_and_creates_nothing(
    emulator: EmulatorHandle, management: ManagementClient, tmp_path: Path, ns: str
) -> None:
    options = {"SubscribedEventToTopicsMap": {OA: ["orders", "orders-eu"]}}

    code, refusal = _apply(emulator, tmp_path, ns, options, OA)

    assert code == 2
    assert refusal["error"] == "duplicate-delivery"
    [message] = refusal["errors"]
    assert message.startswith(
        f"{ns}/crm would receive {OA} 2 times, through {ns}/orders/crm (added) and {ns}/orders-eu/crm (added)"
    )
    assert _forwarding_to(management, f"{ns}/crm", ns) == []


LOYALTY = "tests.shared.topology.loyalty_contracts:REGISTRY"


def test_the_registry_contracts_names_tells_which_events_an_interface_stands_for(
    emulator: EmulatorHandle, tmp_path: Path, ns: str
) -> None:
    """The default registry (the sample app's) does not know the loyalty contracts: the interface stands
    for itself, on two topics. The app's own registry knows its implementers, one on each topic."""
    earned, expired = "Loyalty.PointsEarned", "Loyalty.PointsExpired"
    options = {"SubscribedEventToTopicsMap": {"Loyalty.IPointsEvent": [earned, expired]}}

    code, refusal = _apply(emulator, tmp_path, ns, options, "Loyalty.IPointsEvent", command="plan")
    assert (code, refusal["error"]) == (2, "duplicate-delivery")
    assert refusal["duplicates"][0]["event"] == "Loyalty.IPointsEvent"

    code, planned = _apply(
        emulator, tmp_path, ns, options, "Loyalty.IPointsEvent", command="plan", contracts=LOYALTY
    )
    assert code == 0, planned
    created = [i["path"] for i in planned["plan"]["items"] if i["kind"] == "subscription"]
    assert created == [f"{ns}/{earned}/Subscriptions/crm", f"{ns}/{expired}/Subscriptions/crm"]


def test_a_plan_naming_contracts_that_cannot_be_loaded_exits_2_naming_the_argument(
    emulator: EmulatorHandle, tmp_path: Path, ns: str
) -> None:
    code, document = _apply(
        emulator, tmp_path, ns, {}, OA, command="plan", contracts="tests.nowhere:REGISTRY"
    )

    assert (code, document["error"]) == (2, "invalid")
    assert "--contracts tests.nowhere:REGISTRY: cannot load it" in str(document["errors"])
