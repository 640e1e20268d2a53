"""Concurrent PUTs for one endpoint (issue 17, point 11): changes are serialised by Service Bus session
locks, so the namespace always ends in exactly one request's desired state, and every request either
succeeded or says it lost the race (409 with Retry-After).

The racing PUTs are for an endpoint this app does not host (another app's, provisioned from here): their
random event lists would leave out events a hosted endpoint's handlers handle, which a PUT may not do
(409 ``SubscriptionHandled``, tests/functions/test_handled_subscriptions.py)."""

from __future__ import annotations

import json
import random
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from app.endpoints.sample import sample_catalog
from app.endpoints.sample.events import sample_registry
from app.services import provisioning_from_settings
from devhost.testing import running_host
from emulator.server import EmulatorThread
from functions.convert import http_response
from shared.api import ApiRequest, guarded
from shared.api.provisioning.lock import endpoint_key
from tests.functions.busbar_app import APP, HOST_JSON, app_settings, create_queues_and_router

EVENTS = [
    "Shipping.OrderAccepted",
    "Shipping.OrderDeclined",
    "Shipping.OrderAcceptedV2",
    "Tenant.CustomerCreated",
    "Tenant.CustomerUpdated",
    "Tenant.CustomerDeleted",
    "Billing.InvoiceIssued",
]

PARTNER = f"partner-{uuid.uuid4().hex[:8]}"
"""The endpoint the PUTs race for: not hosted here, a fresh name."""

State = frozenset[tuple[str, str, frozenset[str]]]


def state_of(subscriptions: list[dict[str, Any]]) -> State:
    """Subscriptions and their rule names, case-insensitively (as Service Bus compares them)."""
    return frozenset(
        (s["topic"].lower(), s["name"].lower(), frozenset(r["name"].lower() for r in s["rules"]))
        for s in subscriptions
    )


@pytest.fixture(scope="module")
def host_settings(private_emulator: EmulatorThread) -> dict[str, str]:
    return app_settings(private_emulator)


@pytest.fixture(scope="module")
def client(host_settings: dict[str, str]) -> Iterator[httpx.Client]:
    with (
        running_host(
            APP, settings=host_settings, host_json=HOST_JSON, startup_hook=create_queues_and_router
        ) as host,
        httpx.Client(base_url=host.base_url, headers={"x-functions-key": host.host_key}, timeout=120) as http,
    ):
        yield http


@pytest.mark.parametrize("concurrency", [2, 4, 10])
def test_concurrent_puts_for_one_endpoint_end_in_exactly_one_requests_desired_state(
    client: httpx.Client, concurrency: int
) -> None:
    rng = random.Random(concurrency)
    for _ in range(3):
        event_sets = [rng.sample(EVENTS, rng.randint(0, 4)) for _ in range(concurrency)]
        start = threading.Barrier(concurrency)

        def put(events: list[str], start: threading.Barrier = start) -> httpx.Response:
            start.wait()
            return client.put(f"/api/endpoints/{PARTNER}/subscriptions", json={"events": events})

        with ThreadPoolExecutor(concurrency) as pool:
            responses = list(pool.map(put, event_sets))
        final = state_of(client.get(f"/api/endpoints/{PARTNER}/subscriptions").json()["subscriptions"])

        applied = [r for r in responses if r.status_code in (200, 201)]
        refused = [r for r in responses if r.status_code not in (200, 201)]
        for response in refused:
            assert response.status_code == 409, response.text
            assert response.json()["error"]["code"] == "ProvisioningInProgress"
            assert int(response.headers["Retry-After"]) > 0
        assert applied, [r.text for r in responses]
        desired_states = [state_of(r.json()["desired"]["subscriptions"]) for r in applied]
        assert final in desired_states, (final, desired_states)


def test_a_request_that_waits_too_long_for_the_lock_is_409_with_a_retry_hint(
    client: httpx.Client, host_settings: dict[str, str]
) -> None:
    settings = {**host_settings, "BUSBAR_PROVISIONING_LOCK_WAIT_SECONDS": "1"}
    service = provisioning_from_settings(settings, sample_catalog(), sample_registry())
    request = ApiRequest("PUT", {"endpoint": "crm"}, body=b'{"events": ["Tenant.CustomerCreated"]}')
    assert service.locks is not None
    # Another instance (here: this test) holds crm's lock for longer than the request may wait.
    with service.locks.hold([endpoint_key(host_settings["BUSBAR_CRM_QUEUE"])]):
        response = http_response(guarded(lambda: service.put_subscriptions(request)))

    assert response.status_code == 409, response.get_body()
    error = json.loads(response.get_body())["error"]
    assert error["code"] == "ProvisioningInProgress"
    assert error["retryAfterSeconds"] > 0
    assert response.headers["Retry-After"] == str(error["retryAfterSeconds"])
