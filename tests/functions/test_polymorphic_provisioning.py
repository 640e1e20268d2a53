"""The provisioning API's PUT gives the one-delivery answer the CLI gives (issue 36, item 1): an endpoint
subscribing to an interface mapped to the topics of its implementers (``SubscribedEventToTopicsMap``, the
seeds' "Interface-based inheritance", NServiceBus's
``When_multi_subscribing_to_a_polymorphic_event_using_topic_mappings``) is provisioned and receives each
published event once; a concrete event mapped to two topics it travels on is 409 ``DuplicateDelivery``.
The PUT runs through the HTTP route's service (as ``tests/functions/test_ordered_provisioning.py`` does),
the topics under a fresh hierarchy namespace of the test's own."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from app.endpoints.sample.events import OrderAccepted, OrderDeclined, sample_registry
from app.services import provisioning_from_settings
from shared.api import ApiRequest, ApiResponse, guarded
from shared.handlers import Endpoint, EndpointCatalog, HandlerRegistry
from shared.management import ManagementClient
from shared.topology import TopologyOptions, parse_topology_options
from tests.functions.busbar_app import management_for, sdk_client_for
from tests.shared.topology.topology_helpers import OA, OD, publish_and_collect

pytestmark = pytest.mark.timeout(90)

STATUS = "Shipping.IOrderStatusChanged"


@pytest.fixture
def management(settings: dict[str, str]) -> Iterator[ManagementClient]:
    with management_for(settings) as client:
        yield client


def _put(settings: dict[str, str], ns: str, options: dict[str, Any], events: list[Any]) -> ApiResponse:
    """The PUT of the test's own endpoint ``status``, its input queue ``<ns>/status``, with ``options`` as
    the app's TopologyOptions (no fallback topic: an unmapped event goes to the topic named after it)."""
    mapped = {
        **{
            k: v
            for k, v in settings.items()
            if k not in ("BUSBAR_FALLBACK_TOPIC", "BUSBAR_FALLBACK_ROUTING_MODE")
        },
        "BUSBAR_HIERARCHY_NAMESPACE": ns,
        "AzureServiceBus__TopologyOptions": json.dumps(options),
    }
    endpoint = Endpoint("status", sample_registry(), HandlerRegistry())
    service = provisioning_from_settings(mapped, EndpointCatalog(endpoint), sample_registry())
    request = ApiRequest("PUT", {"endpoint": "status"}, body=json.dumps({"events": events}).encode())
    return guarded(lambda: service.put_subscriptions(request))


def _forwarding_to(management: ManagementClient, ns: str) -> list[str]:
    return sorted(
        f"{topic.name}/{sub.name}"
        for topic in management.topics.list_by_namespace(*management.scope)
        if topic.name.startswith(f"{ns}/")
        for sub in management.subscriptions.list_by_topic(*management.scope, topic.name)
        if (sub.forward_to or "").lower() == f"{ns}/status"
    )


def test_put_of_an_interface_mapped_to_its_implementers_topics_delivers_each_published_event_once(
    settings: dict[str, str], management: ManagementClient
) -> None:
    ns = f"t{uuid.uuid4().hex[:10]}"

    response = _put(settings, ns, {"SubscribedEventToTopicsMap": {STATUS: [OA, OD]}}, [STATUS])

    assert response.status == 201, response.body
    assert _forwarding_to(management, ns) == [f"{ns}/{OA}/status", f"{ns}/{OD}/status"]
    events = [OrderAccepted(order_id="o-1", amount=1.0), OrderDeclined(order_id="o-2", reason="stock")]
    with sdk_client_for(settings) as client:
        received, _ = publish_and_collect(client, TopologyOptions(hierarchy_namespace=ns), ["status"], events)
    assert received == {"status": [OA, OD]}


def test_put_of_an_interface_filtered_on_two_multiplexed_topics_delivers_each_event_from_its_topic_once(
    settings: dict[str, str], management: ManagementClient
) -> None:
    """Each topic multiplexes with correlation filters (NServiceBus's
    ``When_using_topic_per_event_topology_with_correlation_filter_multiplexing``, over two topics): the
    interface's rule on each would take either event, but each event is published to one of them."""
    ns = f"t{uuid.uuid4().hex[:10]}"
    correlation = {"RoutingMode": "CorrelationFilter"}
    options: dict[str, Any] = {
        "PublishedEventToTopicsMap": {OA: {"Topic": "accepted", **correlation}},
        "SubscribedEventToTopicsMap": {
            STATUS: [{"Topic": "accepted", **correlation}, {"Topic": "declined", **correlation}]
        },
    }
    options["PublishedEventToTopicsMap"][OD] = {"Topic": "declined", **correlation}

    response = _put(settings, ns, options, [STATUS])

    assert response.status == 201, response.body
    assert _forwarding_to(management, ns) == [f"{ns}/accepted/status", f"{ns}/declined/status"]
    events = [OrderAccepted(order_id="o-1", amount=1.0), OrderDeclined(order_id="o-2", reason="stock")]
    publisher = parse_topology_options(json.dumps(options)).model_copy(update={"hierarchy_namespace": ns})
    with sdk_client_for(settings) as client:
        received, _ = publish_and_collect(client, publisher, ["status"], events)
    assert received == {"status": [OA, OD]}


def test_put_of_a_concrete_event_mapped_to_two_topics_it_travels_on_is_409_and_provisions_nothing(
    settings: dict[str, str], management: ManagementClient
) -> None:
    ns = f"t{uuid.uuid4().hex[:10]}"

    response = _put(settings, ns, {"SubscribedEventToTopicsMap": {OA: ["orders", "orders-eu"]}}, [OA])

    assert response.status == 409, response.body
    error = response.body["error"]
    assert error["code"] == "DuplicateDelivery"
    assert error["duplicates"] == [
        {
            "event": OA,
            "queue": f"{ns}/status",
            "existing": [],
            "added": [f"{ns}/orders/status", f"{ns}/orders-eu/status"],
        }
    ]
    assert _forwarding_to(management, ns) == []
