"""Provision endpoints, publish through the Publisher, and collect what each endpoint queue received."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusReceivedMessage

from app.endpoints.sample.events import (
    CustomerCreated,
    CustomerDeleted,
    CustomerUpdated,
    OrderAccepted,
    OrderAcceptedV2,
    OrderDeclined,
)
from shared.contracts import ENCLOSED_MESSAGE_TYPES, Event, parse_enclosed_types
from shared.management import ManagementClient
from shared.topology import Provisioner, Publisher, PublishResult, TopologyOptions, desired_state
from shared.topology.names import HierarchyNamespace
from tests.emulator.sdk_helpers import drain, in_parallel

SEED_EVENTS: tuple[Event, ...] = (
    OrderAccepted(order_id="o-1", amount=10.0),
    OrderDeclined(order_id="o-2", reason="stock"),
    OrderAcceptedV2(order_id="o-3", amount=12.0, currency="USD"),
    CustomerCreated(customer_id="c-1", name="Ada"),
    CustomerUpdated(customer_id="c-1", name="Ada L."),
    CustomerDeleted(customer_id="c-1"),
)

OA, OD, OAV2 = "Shipping.OrderAccepted", "Shipping.OrderDeclined", "Shipping.OrderAcceptedV2"
CC, CU, CD = "Tenant.CustomerCreated", "Tenant.CustomerUpdated", "Tenant.CustomerDeleted"


def contract_of(message: ServiceBusReceivedMessage) -> str:
    props = {
        (k.decode() if isinstance(k, bytes) else k): v
        for k, v in (message.application_properties or {}).items()
    }
    header = props[ENCLOSED_MESSAGE_TYPES]
    return parse_enclosed_types(header.decode() if isinstance(header, bytes) else str(header))[0]


def provision(
    management: ManagementClient, options: TopologyOptions, queue: str, events: Sequence[Any]
) -> None:
    provisioner = Provisioner(management)
    provisioner.apply(provisioner.plan(desired_state(options, queue, events)))


def publish_and_collect(
    sb_client: ServiceBusClient,
    publisher_options: TopologyOptions,
    queues: Sequence[str],
    events: Sequence[Event] = SEED_EVENTS,
) -> tuple[dict[str, list[str]], PublishResult]:
    """Publish ``events`` and return, per (unprefixed) queue, the sorted contracts it received.

    Link opening and closing dominate the SDK's cost, so the receivers open while the publish runs and
    the publisher's senders close while the receivers drain."""
    hierarchy = HierarchyNamespace(publisher_options.hierarchy_namespace)
    receivers = [sb_client.get_queue_receiver(hierarchy.apply(q)) for q in queues]
    publisher = Publisher(sb_client, publisher_options, endpoint_name="shipping")
    with ThreadPoolExecutor(max_workers=2) as pool:
        opening = pool.submit(in_parallel, lambda h: h.__enter__(), receivers)
        try:
            result = publisher.publish(list(events))
        finally:
            closing = pool.submit(publisher.close)
            errors = opening.result()
        try:
            assert not errors, errors
            received = {
                q: sorted(contract_of(m) for m in drain(r, None, 0.4))
                for q, r in zip(queues, receivers, strict=True)
            }
        finally:
            in_parallel(lambda h: h.__exit__(None, None, None), receivers)
            closing.result()
    return received, result


def deliver(
    management: ManagementClient,
    sb_client: ServiceBusClient,
    publisher_options: TopologyOptions,
    endpoints: Mapping[str, tuple[TopologyOptions, Sequence[Any]]],
) -> tuple[dict[str, list[str]], PublishResult]:
    for queue, (options, events) in endpoints.items():
        provision(management, options, queue, events)
    return publish_and_collect(sb_client, publisher_options, list(endpoints))
