"""The maximum message size a publish is checked against, read from the namespace (issue 36, item 4): a
Premium entity's own ``MaxMessageSizeInKilobytes``, Standard's 256 KB, each kept for a while, and what
happens when it cannot be read. Against the emulator's ARM API with the unmodified azure-mgmt-servicebus."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from azure.mgmt.servicebus.models import SBTopic
from azure.servicebus import ServiceBusClient

from app import runtime
from app.endpoints.sample.events import CustomerCreated, sample_registry
from app.services import publishing_from_settings
from emulator.testing import EmulatorHandle, start_emulator
from emulator.tier import Sku
from shared.api import ApiRequest, PayloadTooLarge
from shared.api.message_size import MessageSizeLimits, arm_topic_max_message_size
from shared.management import EMULATOR_NAMESPACE, ManagementClient, ManagementSettings
from shared.topology import Publisher
from shared.topology.messages import message_body


@pytest.fixture(scope="module")
def premium() -> Iterator[EmulatorHandle]:
    handle = start_emulator(sku=Sku.PREMIUM)
    try:
        yield handle
    finally:
        runtime.reset()
        handle.stop()


def management_env(handle: EmulatorHandle, token: str | None = None) -> dict[str, str]:
    return {
        "BUSBAR_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000",
        "BUSBAR_RESOURCE_GROUP": "busbar-tests",
        "BUSBAR_NAMESPACE": EMULATOR_NAMESPACE,
        "BUSBAR_MANAGEMENT_ENDPOINT": handle.management_url,
        "BUSBAR_MANAGEMENT_TOKEN": token or handle.management_token,
    }


def management_of(handle: EmulatorHandle, token: str | None = None) -> ManagementClient:
    return ManagementClient(ManagementSettings.from_env(management_env(handle, token)), retry_total=0)


def new_topic(handle: EmulatorHandle, **properties: Any) -> str:
    name = f"size-{uuid.uuid4().hex[:10]}"
    with management_of(handle) as management:
        management.topics.create_or_update(*management.scope, name, SBTopic(**properties))
    return name


def test_a_premium_topics_own_maximum_message_size_is_read_from_the_namespace(
    premium: EmulatorHandle,
) -> None:
    large = new_topic(premium, max_message_size_in_kilobytes=4096)
    default = new_topic(premium)

    with management_of(premium) as management:
        limits = MessageSizeLimits(arm_topic_max_message_size(management))
        assert limits.max_message_bytes(large) == 4096 * 1024
        assert limits.max_message_bytes(default) == 1024 * 1024


def test_a_standard_topic_takes_256_kb(emulator: EmulatorHandle) -> None:
    topic = new_topic(emulator)

    with management_of(emulator) as management:
        assert (
            MessageSizeLimits(arm_topic_max_message_size(management)).max_message_bytes(topic) == 256 * 1024
        )


def test_a_topics_size_is_read_once_and_read_again_after_its_max_age(premium: EmulatorHandle) -> None:
    topic = new_topic(premium, max_message_size_in_kilobytes=2048)
    reads: list[str] = []
    now = [0.0]
    with management_of(premium) as management:
        arm = arm_topic_max_message_size(management)

        def counted(name: str) -> int | None:
            reads.append(name)
            return arm(name)

        limits = MessageSizeLimits(counted, max_age_seconds=300, clock=lambda: now[0])
        first = limits.max_message_bytes(topic)
        now[0] = 299.0
        cached = limits.max_message_bytes(topic.upper())  # entity names are case-insensitive
        now[0] = 300.0
        again = limits.max_message_bytes(topic)

    assert first == cached == again == 2048 * 1024
    assert reads == [topic, topic]


def test_a_size_the_management_plane_refuses_to_read_is_unknown_and_logged(
    premium: EmulatorHandle, caplog: pytest.LogCaptureFixture
) -> None:
    topic = new_topic(premium)

    with (
        caplog.at_level(logging.WARNING, logger="shared.api.message_size"),
        management_of(premium, token="not-the-token") as refused,
    ):
        limit = MessageSizeLimits(arm_topic_max_message_size(refused)).max_message_bytes(topic)

    assert limit is None
    [warning] = [r for r in caplog.records if r.name == "shared.api.message_size"]
    assert warning.getMessage().startswith(f"the maximum message size of topic {topic} could not be read")


def test_a_missing_topic_has_no_known_size(premium: EmulatorHandle) -> None:
    with management_of(premium) as management:
        assert MessageSizeLimits(arm_topic_max_message_size(management)).max_message_bytes("no-such") is None


# ---------------------------------------------------------------------------- the publishing service


def publish_request(customer_id: str, body_bytes: int) -> ApiRequest:
    empty = len(message_body(CustomerCreated(customer_id=customer_id, name="")).encode())
    event = CustomerCreated(customer_id=customer_id, name="x" * (body_bytes - empty))
    return ApiRequest(
        method="POST",
        route_params={"eventType": "Tenant.CustomerCreated"},
        body=message_body(event).encode(),
        headers={"content-type": "application/json"},
    )


def test_on_premium_a_publish_is_checked_against_its_topics_configured_size(premium: EmulatorHandle) -> None:
    """A 2 MB event is refused by a topic of 1024 KB (Premium's default) and taken by one of 4096 KB: the
    limit is the entity's, not a tier-wide constant, nor the SDK's batch limit (1 MB on Premium)."""
    small, large = new_topic(premium), new_topic(premium, max_message_size_in_kilobytes=4096)
    two_megabytes = 2 * 1024 * 1024
    results: dict[str, Any] = {}
    for topic in (small, large):
        env = {
            **management_env(premium),
            "ServiceBusConnection": premium.connection_string,
            "BUSBAR_FALLBACK_TOPIC": topic,
            "BUSBAR_FALLBACK_ROUTING_MODE": "CorrelationFilter",
        }
        service = publishing_from_settings(env, sample_registry())
        with (
            ServiceBusClient.from_connection_string(premium.connection_string, retry_total=0) as client,
            Publisher(client, service.options, endpoint_name="size-tests") as publisher,
        ):
            try:
                results[topic] = service.publish_event(publish_request("c-2mb", two_megabytes), publisher)
            except PayloadTooLarge as error:
                results[topic] = error

    refused, accepted = results[small], results[large]
    assert isinstance(refused, PayloadTooLarge), refused
    assert refused.extra["maxMessageSizeInBytes"] == 1024 * 1024
    assert f"topic {small} takes messages of at most {1024 * 1024} bytes" in refused.message
    assert accepted.status == 202 and accepted.body["topic"] == large and accepted.body["sent"], accepted


def test_without_a_known_size_service_bus_refusing_the_message_is_still_413(emulator: EmulatorHandle) -> None:
    """An app without the management settings (publishing needs none) knows no limit: the broker's refusal
    (MessageSizeExceededError, nothing enqueued) is answered with the same status."""
    topic = new_topic(emulator)
    env = {
        "ServiceBusConnection": emulator.connection_string,
        "BUSBAR_FALLBACK_TOPIC": topic,
        "BUSBAR_FALLBACK_ROUTING_MODE": "CorrelationFilter",
    }
    service = publishing_from_settings(env, sample_registry())
    assert service.max_message_bytes is None

    with (
        ServiceBusClient.from_connection_string(emulator.connection_string, retry_total=0) as client,
        Publisher(client, service.options, endpoint_name="size-tests") as publisher,
        pytest.raises(PayloadTooLarge) as refused,
    ):
        service.publish_event(publish_request("c-300kb", 300 * 1024), publisher)

    assert refused.value.message == f"the event is too large for topic {topic}: Service Bus refused it"
    assert "MessageSizeExceededError" in refused.value.details[0]
    assert f"({256 * 1024} bytes)" in refused.value.details[0]
