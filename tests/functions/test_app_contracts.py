"""The HTTP API knows every contract a hosted endpoint declares and the contracts declared published-only
(issue 37, item 1), not only the sample's registry: ``POST /api/events/{eventType}`` and the ``PUT`` are
served by the services ``app.services`` composes with :func:`app.services.app_contracts`, here for a catalog
holding a ``loyalty`` endpoint whose contract the sample registry does not have, against the emulator."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient

from app.endpoints.sample import sample_catalog
from app.endpoints.sample.events import sample_registry
from app.services import app_contracts, provisioning_from_settings, publishing_from_settings
from shared.api import ApiRequest, ApiResponse, guarded
from shared.contracts import ContractError
from shared.handlers import (
    ContractRegistry,
    Endpoint,
    EndpointCatalog,
    Event,
    HandlerContext,
    HandlerRegistry,
)
from shared.handlers.endpoints import queue_setting_name
from shared.topology import Publisher

LOYALTY_QUEUE = queue_setting_name("loyalty")  # BUSBAR_LOYALTY_QUEUE: the loyalty endpoint's queue


class PointsEarned(Event, contract="Loyalty.PointsEarned", ordering_key="customer_id"):
    """A customer earned loyalty points (only the loyalty endpoint's registry declares it)."""

    customer_id: str
    points: int = 0


class VoucherSent(Event, contract="Loyalty.VoucherSent", ordering_key="customer_id"):
    """A voucher went out: published for other systems, handled by no hosted endpoint."""

    customer_id: str


_loyalty = HandlerRegistry()


@_loyalty.handles(PointsEarned)
def credit_points(event: PointsEarned, context: HandlerContext) -> None:
    """The loyalty endpoint's handler (never run here: the test reads its queue)."""


def loyalty_catalog() -> EndpointCatalog:
    """The sample's endpoints and a loyalty endpoint with a registry of its own."""
    loyalty = Endpoint("loyalty", ContractRegistry(PointsEarned), _loyalty)
    return EndpointCatalog(*sample_catalog(), loyalty)


def put(
    env: dict[str, str], catalog: EndpointCatalog, contracts: ContractRegistry, endpoint: str, event: str
) -> ApiResponse:
    service = provisioning_from_settings(env, catalog, contracts)
    body = json.dumps({"events": [event]}).encode()
    return guarded(lambda: service.put_subscriptions(ApiRequest("PUT", {"endpoint": endpoint}, body=body)))


def publish(
    env: dict[str, str], contracts: ContractRegistry, event: str, payload: dict[str, Any]
) -> ApiResponse:
    service = publishing_from_settings(env, contracts)
    request = ApiRequest(
        "POST",
        {"eventType": event},
        body=json.dumps(payload).encode(),
        headers={"content-type": "application/json"},
    )
    with (
        ServiceBusClient.from_connection_string(env["ServiceBusConnection"], retry_total=0) as client,
        Publisher(client, service.options, endpoint_name="contracts-tests") as publisher,
    ):
        return guarded(lambda: service.publish_event(request, publisher))


@pytest.fixture
def env(settings: dict[str, str]) -> dict[str, str]:
    """The module's settings with a fresh loyalty queue."""
    return {**settings, LOYALTY_QUEUE: f"loyalty-{uuid.uuid4().hex[:8]}"}


def test_a_contract_only_a_hosted_endpoints_registry_declares_is_provisioned_and_published(
    env: dict[str, str],
) -> None:
    catalog = loyalty_catalog()
    contracts = app_contracts(catalog, ContractRegistry())
    customer = f"c-{uuid.uuid4().hex[:8]}"

    provisioned = put(env, catalog, contracts, "loyalty", "Loyalty.PointsEarned")
    published = publish(env, contracts, "Loyalty.PointsEarned", {"customer_id": customer, "points": 7})

    assert "Loyalty.PointsEarned" not in sample_registry()
    assert provisioned.status == 201, provisioned.body
    assert published.status == 202, published.body
    assert published.body["dropped"] == []
    with (
        ServiceBusClient.from_connection_string(env["ServiceBusConnection"]) as client,
        client.get_queue_receiver(env[LOYALTY_QUEUE], max_wait_time=10) as receiver,
    ):
        [message] = receiver.receive_messages(max_wait_time=10)
        receiver.complete_message(message)
    assert json.loads(str(message)) == {"customer_id": customer, "points": 7}


def test_a_contract_declared_published_only_is_published_and_provisioned_for_another_subscriber(
    env: dict[str, str],
) -> None:
    contracts = app_contracts(sample_catalog(), ContractRegistry(VoucherSent))
    partner = f"partner-{uuid.uuid4().hex[:8]}"

    provisioned = put(env, sample_catalog(), contracts, partner, "Loyalty.VoucherSent")
    published = publish(env, contracts, "Loyalty.VoucherSent", {"customer_id": "c-1"})

    assert provisioned.status == 201, provisioned.body
    assert published.status == 202, published.body


def test_a_contract_neither_an_endpoint_nor_the_published_only_declaration_has_is_still_404(
    env: dict[str, str],
) -> None:
    catalog = loyalty_catalog()
    contracts = app_contracts(catalog, ContractRegistry())

    provisioned = put(env, catalog, contracts, "loyalty", "Loyalty.VoucherSent")
    published = publish(env, contracts, "Loyalty.VoucherSent", {"customer_id": "c-1"})

    for response in (provisioned, published):
        assert response.status == 404, response.body
        error = response.body["error"]
        assert error["message"] == "unknown event type(s): Loyalty.VoucherSent"
        assert error["details"][0] == "Loyalty.VoucherSent is not a known contract"


def test_one_contract_name_bound_to_two_classes_by_two_endpoints_is_an_error_naming_both() -> None:
    class OtherPointsEarned(Event, contract="Loyalty.PointsEarned"):
        """Another class claiming the loyalty endpoint's contract name."""

    other = HandlerRegistry()
    other.register(OtherPointsEarned, lambda event, context: None)
    catalog = EndpointCatalog(
        Endpoint("loyalty", ContractRegistry(PointsEarned), _loyalty),
        Endpoint("rewards", ContractRegistry(OtherPointsEarned), other),
    )

    with pytest.raises(ContractError, match=r"PointsEarned and .*OtherPointsEarned"):
        catalog.contracts()
